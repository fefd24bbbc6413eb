/* SPDX-License-Identifier: MIT */
/* rtd: argument parsing, config load, the manager's life, exit codes. No policy lives here. */
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <fcntl.h>

#include <systemd/sd-daemon.h>

#include "api/reexec.h"
#include "core/config.h"
#include "core/manager.h"
#include "http/listen.h"
#include "host/undo.h"
#include "jobs/job-scope.h"
#include "reserve/reserve.h"
#include "shared/log.h"

static void help(void) {
        printf("Usage: rtd [OPTIONS]\n"
               "\n"
               "Reserve CPU cores at run time, keep them quiet, run jobs on them under SCHED_FIFO,\n"
               "and serve state and scheduling metrics over HTTP (see rtd(8), rtd.conf(5), rtctl(1)).\n"
               "\n"
               "  -c, --config=PATH     configuration file (default %s/rtd/rtd.conf,\n"
               "                        then PATH.d/*.conf in lexical order)\n"
               "      --check-config    validate the configuration, print the effective one, exit 0 or 1;\n"
               "                        changes nothing\n"
               "      --check-upgrade   what a running rtd asks of a binary before it re-executes it:\n"
               "                        validate the configuration and that the job store's schema is\n"
               "                        one this binary can open; changes nothing, exit 0 or 1\n"
               "      --restore         put back every knob recorded in the restore journal of a stopped\n"
               "                        or crashed rtd, then exit (for ExecStopPost=)\n"
               "      --root=DIR        read proc/ and sys/ under DIR instead of / (tests)\n"
               "      --log-level=LEVEL override LogLevel= (debug, info, notice, warning, err)\n"
               "  -h, --help            show this help\n"
               "      --version         show the version\n"
               "\n"
               "Signals: SIGTERM/SIGINT stop cleanly (every knob restored), SIGHUP reloads the configuration\n"
               "(an invalid one is rejected and the running one kept), SIGUSR2 re-executes rtd in place (as\n"
               "`rtctl reexec` does): running jobs and the reservation stay.\n",
               RTD_SYSCONFDIR);
}

enum { ARG_CHECK = 0x100, ARG_CHECK_UPGRADE, ARG_RESTORE, ARG_ROOT, ARG_VERSION, ARG_LOG_LEVEL };

typedef struct Args {
        const char *config;
        const char *root;
        const char *log_level;
        bool check;
        bool check_upgrade;
        bool restore;
} Args;

static int parse_args(int argc, char **argv, Args *a) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "check-config", no_argument, NULL, ARG_CHECK },
                { "check-upgrade", no_argument, NULL, ARG_CHECK_UPGRADE },
                { "restore", no_argument, NULL, ARG_RESTORE },
                { "root", required_argument, NULL, ARG_ROOT },
                { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) >= 0)
                switch (c) {
                case 'c': a->config = optarg; break;
                case ARG_CHECK: a->check = true; break;
                case ARG_CHECK_UPGRADE: a->check_upgrade = true; break;
                case ARG_RESTORE: a->restore = true; break;
                case ARG_ROOT: a->root = optarg; break;
                case ARG_LOG_LEVEL: a->log_level = optarg; break;
                case 'h': help(); return 0;
                case ARG_VERSION: printf("rtd %s\n", RTD_VERSION); return 0;
                default:
                        fprintf(stderr, "Try 'rtd --help'.\n");
                        return -EINVAL;
                }
        if (optind < argc) {
                fprintf(stderr, "rtd: unexpected argument '%s'. Try 'rtd --help'.\n", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

/* The parser's messages ("FILE:LINE: ...", one a line), as one line for the log and for waiting clients. */
static int load_config_messages(RtdConfig *c, const char *path, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        int r;

        if (!f)
                return -ENOMEM;
        r = config_load(c, path, f);
        if (r >= 0)
                r = config_validate(c, f);
        if (fclose(f) != 0 || !buf)
                return r < 0 ? r : -ENOMEM;
        while (size > 0 && buf[size - 1] == '\n')
                buf[--size] = 0;
        /* "; " between messages: room for one more byte per line. */
        char *joined = malloc(2 * size + 1), *o = joined;
        if (!joined)
                return -ENOMEM;
        for (const char *i = buf; *i; i++)
                o = *i == '\n' ? stpcpy(o, "; ") : (*o = *i, o + 1);
        *o = 0;
        *ret = joined;
        return r;
}

static int load_config(const Args *a, RtdConfig **ret) {
        _cleanup_(config_freep) RtdConfig *c = config_new();
        _cleanup_free_ char *messages = NULL;
        int r;

        if (!c)
                return log_error_errno(SYNTHETIC_ERRNO(ENOMEM), "Out of memory");
        r = load_config_messages(c, a->config, &messages);
        if (r < 0)
                return log_error_errno(r, "Invalid configuration, not starting (nothing was changed): %s",
                                       messages && *messages ? messages : "see above");
        if (messages && *messages)
                log_warning("%s", messages);
        if (a->log_level) {
                int l = log_level_from_string(a->log_level);
                if (l < 0)
                        return log_error_errno(SYNTHETIC_ERRNO(EINVAL), "--log-level=%s: expected debug, info, "
                                                                        "notice, warning or err", a->log_level);
                c->log_level = l;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

static int do_restore(const Args *a, const RtdConfig *c) {
        _cleanup_close_ int proc_fd = -EBADF, sys_fd = -EBADF, run_fd = -EBADF;
        _cleanup_free_ char *proc = NULL, *sys = NULL;
        int r;

        if (asprintf(&proc, "%s/proc", strempty(a->root)) < 0 || asprintf(&sys, "%s/sys", strempty(a->root)) < 0)
                return -ENOMEM;
        proc_fd = open(proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        sys_fd = open(sys, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        run_fd = open(c->runtime_directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (proc_fd < 0 || sys_fd < 0)
                return log_error_errno(errno, "Failed to open %s or %s: %m", proc, sys);
        /* As ExecStopPost= between a restart's stop and start: the next rtd adopts journal and jobs as they
         * are (job-scope.c says when). */
        _cleanup_free_ char *why = NULL;
        if (job_scope_keep_at_stop_post(&why)) {
                log_info("%s: knobs and running jobs are kept for the next rtd", strempty(why));
                return 0;
        }
        /* Jobs an rtd left behind end with it (a stop, or a unit that failed for good). */
        r = job_scope_stop_unit();
        if (r < 0)
                log_warning_errno(r, "Failed to stop " JOB_SCOPE_UNIT ", ignoring: %m");
        if (run_fd < 0) {
                log_info("No runtime directory %s: nothing to restore", c->runtime_directory);
                return 0;
        }
        r = reservation_restore_only(proc_fd, sys_fd, run_fd);
        if (r < 0)
                return log_error_errno(r, "Restore incomplete: %m");
        return 0;
}

/*
 * rtd's control plane runs SCHED_RR at priority RTD_SCHED_PRIORITY on the housekeeping CPUs. Those CPUs carry
 * everything rtd moved off the reserved ones: a user's load there (hackbench, a build) must not be able to
 * starve the loop that answers `rtctl status`, stops cleanly on SIGTERM and restores the knobs, nor the
 * checkpoint thread (a starved thread also keeps a killed rtd a zombie). No CFS task, at any nice value or
 * in any autogroup or cgroup, can delay a runnable RT task; a user cannot get RT without CAP_SYS_NICE.
 * Why this does not disturb: priority 2 (the checkpoint thread 1) is below every threaded IRQ handler (50)
 * and every job (rtd's workers run on the reserved CPUs, where rtd never runs: it pins itself to the
 * housekeeping ones). rtd blocks in epoll between short handlers and every walk over /proc is bounded by
 * time, so the CPU time it takes from CFS tasks is what it took before, only sooner; should rtd ever spin,
 * RT throttling (sched_rt_runtime_us) and the kernel's fair deadline server still give CFS tasks on the
 * housekeeping CPUs their share (rtd only removes the fair server's runtime on reserved CPUs).
 * SCHED_RESET_ON_FORK: what rtd forks (workers, which then set their own SCHED_FIFO) starts as SCHED_OTHER.
 * Without CAP_SYS_NICE (tests as a user, a container), nice -15 is the next best thing.
 */
#define RTD_SCHED_PRIORITY 2

static void control_plane_priority(void) {
        struct sched_param sp = { .sched_priority = RTD_SCHED_PRIORITY };

        if (sched_setscheduler(0, SCHED_RR | SCHED_RESET_ON_FORK, &sp) == 0)
                return;
        log_info_errno(errno, "Cannot run the control plane SCHED_RR (%m), using nice -15: a heavy load on the "
                              "housekeeping CPUs may slow rtd down");
        (void) setpriority(PRIO_PROCESS, 0, -15);
}

/*
 * A start that failed for a reason a retry cannot fix (the configuration, what this host offers, a missing
 * permission) exits EX_CONFIG: rtd.service names it in RestartPreventExitStatus=, so systemd does not start
 * rtd again every RestartSec= for ever (the start limit never stops a start that takes over 2 s).
 */
#define EXIT_CANNOT_START 78

static bool start_error_is_permanent(int r) {
        switch (-r) {
        case EINVAL: case EOPNOTSUPP: case ERANGE: case ENOENT: case ENODEV: case ENXIO: case EPERM: case EACCES:
                return true;
        default:
                return false;
        }
}

/* Say why in STATUS= and to every client socket activation queued for us, then pick the exit status. */
static int start_failed(int r) {
        const char *first = log_first_error(), *last = log_last_error();
        char why[1100];

        if (first && last && !streq(first, last))
                snprintf(why, sizeof why, "%s (%s)", first, last);
        else
                snprintf(why, sizeof why, "%s", first ?: last ?: strerror(-r));
        (void) sd_notifyf(false, "STATUS=Failed to start: %s\nERRNO=%i", why, -r);
        listeners_refuse_waiting(why);
        return start_error_is_permanent(r) ? EXIT_CANNOT_START : 1;
}

int main(int argc, char **argv) {
        _cleanup_(config_freep) RtdConfig *config = NULL;
        _cleanup_(manager_freep) Manager *m = NULL;
        Args a = {};
        sigset_t mask;
        int r;

        log_open(false);
        host_register_undos();  /* before any journal is replayed (--restore, a leftover, a lease) */
        reexec_init(argc, argv);
        r = parse_args(argc, argv, &a);
        if (r <= 0)
                return r < 0 ? 2 : 0;

        r = load_config(&a, &config);
        if (r < 0 && a.restore && (config = config_new())) {
                /* A broken configuration is often why rtd keeps failing: the knobs are put back all the same,
                 * from the default RuntimeDirectory=. */
                log_warning("Restoring from %s, the default runtime directory", config->runtime_directory);
                r = 0;
        }
        if (r < 0)
                return a.check || a.check_upgrade ? 1 : start_failed(-EINVAL);
        log_set_max_level(config->log_level);

        if (a.check) {
                config_dump(config, stdout);
                return 0;
        }
        if (a.check_upgrade)
                return reexec_check_upgrade(config->runtime_directory, config->state_directory) < 0 ? 1 : 0;
        /* Before any thread exists: threads inherit it. */
        control_plane_priority();
        if (a.restore)
                return do_restore(&a, config) < 0 ? 1 : 0;

        /* sd-event takes these through signalfd and child sources; they must be blocked first. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGUSR2);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        /* A client that hangs up mid-response must not kill us. */
        signal(SIGPIPE, SIG_IGN);

        for (;;) {
                r = manager_new(TAKE_PTR(config), a.config, a.root, &m);
                if (r < 0) {
                        log_error_errno(r, "Failed to initialize: %m");
                        return 1;
                }
                r = manager_start(m);
                if (r < 0)
                        return start_failed(r); /* manager_free() restores whatever was changed */
                r = manager_run(m);
                if (r < 0) {
                        log_error_errno(r, "Event loop failed: %m");
                        return 1;
                }
                if (!reexec_pending())
                        break;
                m->handing_over = true;
                /* Orderly, but leaving knobs, journal, running jobs and queued jobs to the next image. */
                m = manager_free(m);
                (void) reexec_exec();
                /* execve() failed: start over in this image, from the same state (logged, in status). */
                if (load_config(&a, &config) < 0)
                        return 1;
        }
        return 0;
}
