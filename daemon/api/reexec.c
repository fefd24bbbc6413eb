/* SPDX-License-Identifier: MIT */
/*
 * Re-exec in place (rtctl reexec, POST /v1/daemon/reexec, SIGUSR2, the .deb's postinst).
 *
 * Why execve() of our own pid rather than a second daemon handing over to the first (nginx): under systemd the
 * pid is the service (MainPID, watchdog, the cgroup that holds every worker and job), so a new pid would need
 * systemd's cooperation; a new image in the same pid needs none. What crosses execve(): the listening sockets
 * (as if systemd passed them: LISTEN_FDS, LISTEN_PID is still ours), so a connection made meanwhile waits in
 * the backlog instead of being refused. What the new image takes from disk as after any stop: the restore
 * journal (adopted with zero knob writes when it describes the same reservation), running jobs (their workers
 * outlive rtd and are re-adopted) and queued jobs (the store keeps their order). Open HTTP connections are
 * closed; rtctl wait and logs -f reconnect and resume.
 *
 * Nothing is torn down before the new binary passed `rtd --check-upgrade` in a child (runs at all, parses
 * the configuration, can open the job store's schema). Should execve() still fail, this image starts over
 * from the same state, as the new one would have.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "core/manager.h"
#include "http/http.h"
#include "jobs/job-scope.h"
#include "reexec.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "store/store.h"

#define CHECK_TIMEOUT_USEC (5 * 1000000ULL)     /* well within WatchdogSec=10s: the loop waits for the check */
#define HANDOVER_DELAY_USEC (200 * 1000ULL)     /* lets answers under way (the 202) leave before the hand-over */
#define FD_HIGH 64                              /* parking place while fds 3 and 4 are filled */

static struct {
        char *binary;           /* the path this image was started from, never "... (deleted)" */
        char **argv;
        unsigned count;         /* re-execs of this pid (RTD_REEXEC_COUNT) */
        unsigned failures;      /* requests refused, or execve() failures, in this pid */
        char *last_failure;
        uint64_t exec_usec;     /* CLOCK_MONOTONIC when the last execve() was made (spans execve) */
        uint64_t ready_msec;    /* how long the last re-exec took until the new image was ready */
        bool own_control;       /* the control socket we pass on was bound by rtd, not systemd */
        bool pending;
        char *children;         /* the previous image's workers, now ours to reap ("pid pid ...") */
        int fds[2];             /* control, metrics: kept across execve(), -EBADF if none */
} st = { .fds = { -EBADF, -EBADF } };

static void env_take(const char *name, char **ret) {
        const char *v = getenv(name);

        *ret = v ? strdup(v) : NULL;
        (void) unsetenv(name);  /* workers and jobs must not see them */
}

void reexec_init(int argc, char **argv) {
        _cleanup_free_ char *count = NULL, *usec = NULL, *own = NULL;
        char buf[PATH_MAX];
        ssize_t n;

        st.argv = argv;
        n = readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (n > 0) {
                buf[n] = 0;
                /* Replaced under us (a package upgrade): the new file is at the same path. */
                char *d = strstr(buf, " (deleted)");
                if (d && d[strlen(" (deleted)")] == 0)
                        *d = 0;
                st.binary = strdup(buf);
        }
        env_take("RTD_REEXEC_COUNT", &count);
        env_take("RTD_REEXEC_USEC", &usec);
        env_take("RTD_REEXEC_OWN_CONTROL", &own);
        env_take("RTD_REEXEC_CHILDREN", &st.children);
        if (count)
                st.count = (unsigned) strtoul(count, NULL, 10);
        if (usec)
                st.exec_usec = strtoull(usec, NULL, 10);
        st.own_control = own && streq(own, "1");
}

void reexec_fix_listeners(Listeners *l) {
        /* execve() failed and this image starts over: the sockets it kept are parked. */
        if (l->control < 0 && st.fds[0] >= 0)
                l->control = TAKE_FD(st.fds[0]);
        if (l->metrics < 0 && st.fds[1] >= 0)
                l->metrics = TAKE_FD(st.fds[1]);
        st.fds[0] = safe_close(st.fds[0]);
        st.fds[1] = safe_close(st.fds[1]);
        if (l->control >= 0 && st.own_control)
                l->activated = false;   /* ours: we unlink it on stop, as the first image would have */
        else if (l->control >= 0 && !l->activated)
                l->activated = true;
}

void reexec_ready(Manager *m) {
        if (st.exec_usec == 0)
                return;
        st.ready_msec = (now_usec(CLOCK_MONOTONIC) - st.exec_usec) / 1000;
        st.exec_usec = 0;
        log_notice("Re-executed %s (re-exec %u of this process), ready after %" PRIu64 " ms", strempty(st.binary),
                   st.count, st.ready_msec);
}

static void note_failure(const char *reason) {
        st.failures++;
        free(st.last_failure);
        st.last_failure = strdup(reason);
        log_error("Not re-executing: %s. The running rtd carries on unchanged.", reason);
}

/* A child's output as one line for the reason: its lines joined with ';', bounded. */
static const char *one_line(char *out) {
        size_t n = strlen(out);

        while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
                out[--n] = 0;
        for (char *p = out; (p = strchr(p, '\n')); )
                *p = ';';
        if (n > 1000)
                strcpy(out + 997, "...");
        return out;
}

/* Run `BINARY <argv...> --check-upgrade`, at most CHECK_TIMEOUT_USEC. 0, or -errno and *ret_reason. */
static int check_binary(char **ret_reason) {
        _cleanup_close_ int rd = -EBADF;
        int p[2], status = 0, argc = 0;
        char out[4096] = "";
        size_t len = 0;
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + CHECK_TIMEOUT_USEC;
        pid_t pid;

        if (!st.binary)
                return asprintf(ret_reason, "cannot tell which binary rtd was started from") < 0 ? -ENOMEM
                                                                                               : -ENOENT;
        if (access(st.binary, X_OK) < 0) {
                int e = errno;
                return asprintf(ret_reason, "the binary %s cannot be executed: %s", st.binary, strerror(e)) < 0
                               ? -ENOMEM
                               : -e;
        }
        while (st.argv[argc])
                argc++;
        char **args = calloc(argc + 2, sizeof(char *));
        if (!args)
                return -ENOMEM;
        memcpy(args, st.argv, argc * sizeof(char *));
        args[0] = st.binary;
        args[argc] = (char *) "--check-upgrade";

        if (pipe2(p, O_CLOEXEC) < 0) {
                free(args);
                return -errno;
        }
        pid = fork();
        if (pid < 0) {
                int e = errno;
                free(args);
                close(p[0]);
                close(p[1]);
                return -e;
        }
        if (pid == 0) {
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                (void) dup2(p[1], STDOUT_FILENO);
                (void) dup2(p[1], STDERR_FILENO);
                execv(st.binary, args);
                dprintf(STDERR_FILENO, "cannot execute %s: %m\n", st.binary);
                _exit(127);
        }
        free(args);
        close(p[1]);
        rd = p[0];
        for (;;) {
                uint64_t now = now_usec(CLOCK_MONOTONIC);
                struct pollfd pfd = { .fd = rd, .events = POLLIN };
                if (now >= deadline)
                        break;
                int q = poll(&pfd, 1, (int) ((deadline - now) / 1000) + 1);
                if (q < 0 && errno == EINTR)
                        continue;
                if (q <= 0)
                        break;
                ssize_t k = read(rd, out + len, len < sizeof out - 1 ? sizeof out - 1 - len : 0);
                if (k <= 0 && !(k < 0 && errno == EINTR))
                        break;  /* EOF: the child is done (or the buffer is full) */
                if (k > 0)
                        len += (size_t) k;
                out[len] = 0;
        }
        if (waitpid(pid, &status, WNOHANG) == 0) {
                /* Still running past the deadline or with its output closed: a hung binary fails. */
                usleep(100000);
                if (waitpid(pid, &status, WNOHANG) == 0) {
                        (void) kill(pid, SIGKILL);
                        (void) waitpid(pid, &status, 0);
                        return asprintf(ret_reason, "%s --check-upgrade did not finish within %llu s", st.binary,
                                        (unsigned long long) (CHECK_TIMEOUT_USEC / 1000000)) < 0
                                       ? -ENOMEM
                                       : -ETIMEDOUT;
                }
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        if (asprintf(ret_reason, "%s --check-upgrade failed (%s %d): %s", st.binary,
                     WIFEXITED(status) ? "exit status" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                     *one_line(out) ? out : "no output") < 0)
                return -ENOMEM;
        return -ENOEXEC;
}

/* Duplicates of the listening sockets, parked above the range systemd's protocol uses: the gate closes the
 * originals with the Http. Taken before anything is decided, so that a failure here refuses the re-exec. */
static int keep_listeners(Manager *m) {
        const int from[2] = { m->control_listen_fd, m->metrics_listen_fd };

        for (int i = 0; i < 2; i++)
                if (from[i] >= 0 && (st.fds[i] = fcntl(from[i], F_DUPFD_CLOEXEC, FD_HIGH)) < 0) {
                        int e = errno;
                        st.fds[0] = safe_close(st.fds[0]);
                        return -e;
                }
        st.own_control = m->control_listen_fd >= 0 && !m->socket_activated;
        return 0;
}

static int on_handover(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        return sd_event_exit(m->event, 0);
}

int reexec_request(Manager *m, char **ret_reason) {
        int r;

        *ret_reason = NULL;
        if (st.pending)
                return asprintf(ret_reason, "a re-exec is already under way") < 0 ? -ENOMEM : -EBUSY;
        /* The loop waits for the check (at most CHECK_TIMEOUT_USEC): start it with a fresh watchdog period. */
        (void) sd_notify(false, "WATCHDOG=1");
        r = check_binary(ret_reason);
        if (r < 0) {
                if (*ret_reason)
                        note_failure(*ret_reason);
                return r;
        }
        r = keep_listeners(m);
        if (r < 0)
                return asprintf(ret_reason, "cannot keep the listening sockets: %s", strerror(-r)) < 0 ? -ENOMEM
                                                                                                    : r;
        r = sd_event_add_time_relative(m->event, NULL, CLOCK_MONOTONIC, HANDOVER_DELAY_USEC, 0, on_handover, m);
        if (r < 0) {
                st.fds[0] = safe_close(st.fds[0]);
                st.fds[1] = safe_close(st.fds[1]);
                return r;
        }
        st.pending = true;
        /* From now on a new connection waits in the backlog for the new image instead of being accepted here
         * and closed unanswered at the hand-over; those open now (this one's 202 among them) are answered. */
        http_stop_accepting(m->control);
        http_stop_accepting(m->metrics_http);
        log_notice("Re-executing %s: it passed --check-upgrade; running jobs and the reservation stay",
                   st.binary);
        (void) sd_notifyf(false, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=Re-executing %s",
                          (unsigned long long) now_usec(CLOCK_MONOTONIC), st.binary);
        return 0;
}

bool reexec_pending(void) {
        return st.pending;
}

static int on_sigusr2(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        _cleanup_free_ char *reason = NULL;

        (void) reexec_request(userdata, &reason);  /* logged either way */
        return 0;
}

static int on_inherited_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        sd_event_source_unref(s);       /* reaped by sd-event: no zombie left */
        return 0;
}

int reexec_attach(Manager *m) {
        _cleanup_free_ char *children = TAKE_PTR(st.children);
        char *save = NULL;

        /* Workers of the previous image are still our children (same pid): they finish their jobs and exit,
         * and someone must reap them. Watch each; its job is re-adopted through its pidfd as after a stop.
         * Not the previous image's anchor of the jobs' scope: job-scope.c ends and reaps it once ours is in
         * place, and a child source whose pid someone else reaped fails the whole event loop (ECHILD). */
        for (char *p = children ? strtok_r(children, " ", &save) : NULL; p; p = strtok_r(NULL, " ", &save)) {
                _cleanup_free_ char *comm = NULL;
                pid_t pid = (pid_t) strtol(p, NULL, 10);
                char path[64];

                snprintf(path, sizeof path, "/proc/%d/comm", (int) pid);
                if (pid <= 0 || read_one_line_at(AT_FDCWD, path, &comm) < 0 || streq(comm, JOB_SCOPE_ANCHOR_COMM))
                        continue;
                if (sd_event_add_child(m->event, NULL, pid, WEXITED, on_inherited_child, NULL) < 0)
                        log_debug("Inherited child %d is gone already", (int) pid);
        }
        return sd_event_add_signal(m->event, NULL, SIGUSR2, on_sigusr2, m);
}

/* Our children now (the workers that outlive this image), space separated, for the next image to reap. */
static void pass_children(void) {
        _cleanup_free_ char *list = NULL;
        char path[64];
        int r;

        snprintf(path, sizeof path, "/proc/self/task/%d/children", (int) gettid());
        r = read_one_line_at(AT_FDCWD, path, &list);
        if (r >= 0 && list && *list)
                (void) setenv("RTD_REEXEC_CHILDREN", list, 1);
}

int reexec_exec(void) {
        char names[32] = "", buf[32];
        int n = 0, r, saved[2] = { -EBADF, -EBADF };

        /* Fill fds 3, 4 as systemd would (dup2 clears FD_CLOEXEC); LISTEN_PID stays true across execve().
         * Whatever held 3 and 4 (a library's fd, close-on-exec) is parked, for the case execve() fails. */
        for (int i = 0; i < 2; i++) {
                if (st.fds[i] < 0)
                        continue;
                if (fcntl(SD_LISTEN_FDS_START + n, F_GETFD) >= 0)
                        saved[n] = fcntl(SD_LISTEN_FDS_START + n, F_DUPFD_CLOEXEC, FD_HIGH);
                if (dup2(st.fds[i], SD_LISTEN_FDS_START + n) < 0) {
                        r = log_error_errno(errno, "Failed to pass on a listening socket: %m");
                        goto undo;
                }
                strcat(names, n ? ":" : "");
                strcat(names, i == 0 ? "control" : "metrics");
                n++;
        }
        snprintf(buf, sizeof buf, "%d", (int) getpid());
        (void) setenv("LISTEN_PID", buf, 1);
        snprintf(buf, sizeof buf, "%d", n);
        (void) setenv("LISTEN_FDS", buf, 1);
        (void) setenv("LISTEN_FDNAMES", names, 1);
        (void) setenv("RTD_REEXEC_OWN_CONTROL", st.own_control ? "1" : "0", 1);
        snprintf(buf, sizeof buf, "%u", st.count + 1);
        (void) setenv("RTD_REEXEC_COUNT", buf, 1);
        snprintf(buf, sizeof buf, "%" PRIu64, now_usec(CLOCK_MONOTONIC));
        (void) setenv("RTD_REEXEC_USEC", buf, 1);
        pass_children();
        (void) sd_notify(false, "WATCHDOG=1");

        execv(st.binary, st.argv);
        r = -errno;
        {
                /* A block of its own: the goto above must not jump over a cleanup variable (clang refuses). */
                _cleanup_free_ char *reason = NULL;
                if (asprintf(&reason, "execve(%s) failed: %s", st.binary, strerror(-r)) >= 0)
                        note_failure(reason);
        }
undo:
        /* Still us: fds 3, 4 back as they were; the sockets stay parked for reexec_fix_listeners(). */
        for (int i = 0; i < 2; i++) {
                if (saved[i] >= 0) {
                        (void) dup2(saved[i], SD_LISTEN_FDS_START + i);
                        (void) fcntl(SD_LISTEN_FDS_START + i, F_SETFD, FD_CLOEXEC);
                        safe_close(saved[i]);
                } else if (i < n)
                        (void) close(SD_LISTEN_FDS_START + i);
        }
        for (const char *const *e = (const char *const[]){ "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES",
                                                           "RTD_REEXEC_OWN_CONTROL", "RTD_REEXEC_COUNT",
                                                           "RTD_REEXEC_USEC", "RTD_REEXEC_CHILDREN", NULL };
             *e; e++)
                (void) unsetenv(*e);
        st.pending = false;
        st.exec_usec = 0;
        return r;
}

json_t *reexec_to_json(void) {
        return json_pack("{s:s?, s:I, s:I, s:s?, s:I}", "binary", st.binary, "count", (json_int_t) st.count,
                         "failures", (json_int_t) st.failures, "last_failure", st.last_failure,
                         "last_exec_msec", (json_int_t) st.ready_msec);
}

int reexec_check_upgrade(const char *runtime_dir, const char *state_dir) {
        _cleanup_close_ int fd = -EBADF;
        int v = 0, r;

        fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
                r = store_peek_schema(fd, "jobs.db", &v);
                if (r < 0)
                        return log_error_errno(r, "Cannot read the job store %s/jobs.db: %m", state_dir);
                if (v > STORE_SCHEMA_VERSION)
                        return log_error_errno(SYNTHETIC_ERRNO(EPROTONOSUPPORT),
                                               "The job store %s/jobs.db has schema %d, newer than this rtd's "
                                               "%d: this binary is older than the store",
                                               state_dir, v, STORE_SCHEMA_VERSION);
        } else if (errno != ENOENT)
                return log_error_errno(errno, "Cannot open %s: %m", state_dir);
        printf("rtd %s: configuration valid, job store schema %d (this binary: %d), runtime directory %s\n",
               RTD_VERSION, v, STORE_SCHEMA_VERSION, runtime_dir);
        return 0;
}
