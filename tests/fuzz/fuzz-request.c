/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: raw bytes through rtd's real request path. A real libmicrohttpd daemon with rtd's
 * http.c glue, routing and handlers (jobs, output, events, status, topology, reservation) on a unix
 * socket; each input is written by a client connected as an ordinary member of the submit group, and the
 * loop runs until rtd has answered and closed. Metrics sample the fixture's /proc. Job store and output live in a temp dir; topology, /proc
 * and /sys come from a fixture copied there, so nothing on the machine is touched: the caller is not an
 * administrator (no reservation route is allowed) and no CPU is reserved (no job ever runs).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "api/api.h"
#include "core/manager.h"
#include "host/topology.h"
#include "host/undo.h"
#include "http/http.h"
#include "jobs/jobs-internal.h"
#include "jobs/jobs.h"
#include "metrics/metrics.h"
#include "reserve/reserve.h"
#include "shared/log.h"
#include "store/store.h"

#ifndef RTD_FIXTURES_DIR
#define RTD_FIXTURES_DIR "tests/fixtures"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static Manager m;
static char dir[64];
static gid_t user_gid;
static uid_t user_uid;

static int open_dir(const char *sub) {
        char p[256];
        int fd;

        snprintf(p, sizeof p, "%s/%s", dir, sub);
        fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                abort();
        return fd;
}

/* Job 1, finished, the caller's, with 100 kB of output: show, cancel, output and follow have a target. */
static void add_finished_job(void) {
        json_t *data = json_pack("{s:I,s:s,s:s,s:s,s:i,s:{s:[s,s],s:{s:s},s:i},s:i,s:[i],s:I,s:I,s:I,s:i}", "id",
                                 (json_int_t) 1, "name", "fz", "state", "succeeded", "user", "nobody", "uid",
                                 (int) user_uid, "spec", "argv", "/bin/echo", "x", "env", "A", "B", "cores", 1,
                                 "gid", (int) user_gid, "groups", (int) user_gid, "submit_usec", (json_int_t) 1,
                                 "start_usec", (json_int_t) 2, "end_usec", (json_int_t) 3, "exit_code", 0);
        StoreJob sj = { .id = 1, .state = "succeeded", .uid = user_uid, .seq = 1, .data = data };
        char line[128];
        int fd;

        if (!data || store_insert(m.jobs->store, &sj) < 0)
                abort();
        json_decref(data);
        for (const char *const *n = (const char *const[]){ "1.stdout", "1.stderr", NULL }; *n; n++) {
                fd = openat(m.jobs->output_fd, *n, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0)
                        abort();
                for (int i = 0; i < 2000; i++) {
                        int k = snprintf(line, sizeof line, "line %d of job 1's output\n", i);
                        if (write(fd, line, (size_t) k) != k)
                                abort();
                }
                close(fd);
        }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        const char *fixtures = getenv("RTD_FIXTURES") ?: RTD_FIXTURES_DIR;
        struct group *g = getgrnam("nogroup");
        char cmd[1024];
        int fd;

        log_set_max_level(LOG_CRIT);    /* rtd's log lines would drown libFuzzer's */
        user_gid = g ? g->gr_gid : 65534;
        user_uid = 65534;
        snprintf(dir, sizeof dir, "/tmp/rtd-fuzz-XXXXXX");
        if (!mkdtemp(dir))
                abort();
        snprintf(cmd, sizeof cmd, "cp -a '%s/irq-basic/.' '%s/' && mkdir -p '%s/run' '%s/state'", fixtures, dir,
                 dir, dir);
        if (system(cmd) != 0)
                abort();
        /* No supplementary groups: the caller's role comes from the gid it connects with alone. */
        (void) setgroups(0, NULL);

        m.config = config_new();
        free(m.config->submit_group);
        m.config->submit_group = strdup(g ? g->gr_name : "nogroup");
        free(m.config->admin_group);
        m.config->admin_group = NULL;
        if (sd_event_new(&m.event) < 0)
                abort();
        m.proc_fd = open_dir("proc");
        m.sys_fd = open_dir("sys");
        m.runtime_fd = open_dir("run");
        m.state_fd = open_dir("state");
        snprintf(cmd, sizeof cmd, "%s/vm-2cpu/sys", fixtures);
        fd = open(cmd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        host_register_undos();
        if (fd < 0 || topology_load(fd, &m.topology) < 0 || reservation_new(&m, &m.reservation) < 0 ||
            job_manager_new(&m, &m.jobs) < 0 || metrics_new(&m, &m.metrics) < 0)
                abort();
        manager_hand_metrics_exporters(&m);
        close(fd);
        add_finished_job();
        return 0;
}

/* A new listener per input: a stream the input left open (events, follow) cannot pile up across inputs. */
static int listen_socket(struct sockaddr_un *sa, socklen_t *len) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        *sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
        snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "rtd-fuzz-%d", (int) getpid());
        *len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa->sun_path + 1));
        if (fd < 0 || bind(fd, (struct sockaddr *) sa, *len) < 0 || listen(fd, 8) < 0)
                abort();
        return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct sockaddr_un sa;
        socklen_t len;
        Http *h = NULL;
        int lfd, c;
        char buf[65536];

        if (size > 60000)       /* fits the socket buffer: one write, no interleaving needed */
                return 0;
        lfd = listen_socket(&sa, &len);
        if (http_new(&m, lfd, false, api_find_route, &h) < 0)
                abort();
        c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        /* SO_PEERCRED records who connected: an ordinary user in the submit group, not root. */
        if (setegid(user_gid) < 0 || seteuid(user_uid) < 0)
                abort();
        if (c < 0 || connect(c, (struct sockaddr *) &sa, len) < 0)
                abort();
        if (seteuid(0) < 0 || setegid(0) < 0)
                abort();
        if (size > 0 && write(c, data, size) != (ssize_t) size)
                abort();
        (void) shutdown(c, SHUT_WR);
        /*
         * Run rtd's loop until it has answered and closed, or has nothing left to do (a stream stays open).
         * Everything happens in this process: a loop pass that dispatched nothing means rtd is waiting.
         */
        for (int i = 0, idle = 0; i < 256 && idle < 3; i++) {
                ssize_t n;
                idle = sd_event_run(m.event, 0) > 0 ? 0 : idle + 1;
                while ((n = read(c, buf, sizeof buf)) > 0)
                        ;
                if (n == 0)
                        break;
        }
        close(c);
        http_free(h);
        return 0;
}
