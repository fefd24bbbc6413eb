/* SPDX-License-Identifier: MIT */
/* Workers, daemon side: fork+exec rtd-worker pinned and SCHED_FIFO, send it jobs, turn its messages into callbacks. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shared/log.h"
#include "shared/macro.h"
#include "worker.h"

struct Worker {
        Worker *next_detached;
        unsigned cpu;
        pid_t pid;
        int fd;
        bool ready;
        bool detached;          /* worker_free() called: waiting only to reap the process */
        sd_event_source *io, *child;
        const WorkerCallbacks *cb;
        void *userdata;
};

unsigned worker_cpu(const Worker *w) {
        return w->cpu;
}

pid_t worker_pid(const Worker *w) {
        return w->pid;
}

bool worker_is_ready(const Worker *w) {
        return w && w->ready;
}

int worker_find_binary(char **ret) {
        char self[PATH_MAX], *slash, *p = NULL;
        const char *const candidates[] = { "%s/rtd-worker", "%s/../libexec/rtd/rtd-worker" };
        const char *env = getenv("RTD_WORKER");
        ssize_t n;

        if (env && *env)
                p = strdup(env);
        else {
                /* Next to rtd (the build tree), then <prefix>/libexec/rtd relative to <prefix>/sbin/rtd. */
                n = readlink("/proc/self/exe", self, sizeof self - 1);
                if (n <= 0 || !(slash = strrchr((self[n] = 0, self), '/')))
                        return -ENOENT;
                *slash = 0;
                for (size_t i = 0; i < ELEMENTSOF(candidates) && !p; i++) {
                        if (asprintf(&p, candidates[i], self) < 0)
                                return -ENOMEM;
                        if (access(p, X_OK) < 0) {
                                free(p);
                                p = NULL;
                        }
                }
                if (!p)
                        return -ENOENT;
        }
        if (!p)
                return -ENOMEM;
        if (access(p, X_OK) < 0) {
                int r = -errno;
                free(p);
                return r;
        }
        *ret = p;
        return 0;
}

/* Workers let go but not yet reaped (worker_free on a running worker). */
static Worker *detached;

static void worker_destroy(Worker *w) {
        for (Worker **p = &detached; *p; p = &(*p)->next_detached)
                if (*p == w) {
                        *p = w->next_detached;
                        break;
                }
        sd_event_source_disable_unref(w->io);
        sd_event_source_disable_unref(w->child);
        safe_close(w->fd);
        free(w);
}

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        Worker *w = userdata;
        int status = si->si_code == CLD_EXITED ? W_EXITCODE(si->si_status, 0) : si->si_status & 0x7f;

        if (w->detached) {
                worker_destroy(w);
                return 0;
        }
        w->ready = false;
        w->io = sd_event_source_disable_unref(w->io);
        w->child = sd_event_source_disable_unref(w->child);
        /* The callback owns what happens next (usually worker_free + respawn); w may be gone after it. */
        w->cb->died(w, status, w->userdata);
        return 0;
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Worker *w = userdata;
        union {
                WorkerMsg hdr;
                WorkerStarted started;
                WorkerExec exec;
                WorkerExited exited;
                char raw[256];
        } m;

        for (;;) {
                ssize_t n = recv(fd, &m, sizeof m, MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return 0;
                if (n <= 0) {
                        /* EOF: the worker is exiting; on_child reports it once it is reaped. */
                        w->io = sd_event_source_disable_unref(w->io);
                        return 0;
                }
                if ((size_t) n < sizeof m.hdr)
                        continue;
                switch (m.hdr.type) {
                case WMSG_READY:
                        w->ready = true;
                        if (w->cb->ready)
                                w->cb->ready(w, w->userdata);
                        break;
                case WMSG_STARTED:
                        if ((size_t) n >= sizeof m.started)
                                w->cb->started(w, m.hdr.job_id, m.started.pid, m.started.boottime_usec,
                                               w->userdata);
                        break;
                case WMSG_EXEC:
                        if ((size_t) n >= sizeof m.exec)
                                w->cb->exec(w, m.hdr.job_id, m.exec.pid, m.exec.monotonic_usec, w->userdata);
                        break;
                case WMSG_EXEC_FAILED:
                        if ((size_t) n >= sizeof m.exec) {
                                m.exec.stage[sizeof m.exec.stage - 1] = 0;
                                w->cb->exec_failed(w, m.hdr.job_id, m.exec.stage, m.exec.error, w->userdata);
                        }
                        break;
                case WMSG_BUSY:
                        w->cb->exec_failed(w, m.hdr.job_id, "worker busy", EBUSY, w->userdata);
                        break;
                case WMSG_START_TIMED_OUT:
                        if ((size_t) n >= sizeof m.exec && w->cb->start_timed_out) {
                                m.exec.stage[sizeof m.exec.stage - 1] = 0;
                                w->cb->start_timed_out(w, m.hdr.job_id, m.exec.stage, w->userdata);
                        }
                        break;
                case WMSG_DROPPED:
                        w->cb->dropped(w, m.hdr.job_id, w->userdata);
                        break;
                case WMSG_EXITED:
                        if ((size_t) n >= sizeof m.exited)
                                w->cb->exited(w, &m.exited, w->userdata);
                        break;
                default:
                        break;
                }
        }
}

/* In the forked child: arrange fds 3-4, pin, go real-time, exec the worker binary. Only async-signal-safe calls. */
static _Noreturn void spawn_child(int sock, unsigned cpu, const WorkerConfig *cfg) {
        struct sched_param sp = { .sched_priority = (int) cfg->priority };
        char cpu_arg[16], *argv[] = { (char *) "rtd-worker", (char *) "--cpu", cpu_arg, NULL };
        cpu_set_t mask;
        sigset_t none;
        int s, o;

        /* Join the reserved cgroup first: outside it the reserved CPUs are not in our cpuset (an isolated
         * partition takes them from every other cgroup) and sched_setaffinity below would fail. */
        if (cfg->spawn_cgroup_fd >= 0) {
                int p = openat(cfg->spawn_cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
                if (p < 0 || write(p, "0", 1) != 1)
                        _exit(124);
                close(p);
        }
        /* Move sources above the targets first so dup2 cannot clobber one with another. */
        s = fcntl(sock, F_DUPFD_CLOEXEC, 10);
        o = fcntl(cfg->output_dir_fd, F_DUPFD_CLOEXEC, 10);
        if (s < 0 || o < 0 || dup2(s, WORKER_FD_SOCKET) < 0 || dup2(o, WORKER_FD_OUTPUT_DIR) < 0)
                _exit(120);
        (void) syscall(SYS_close_range, 5U, ~0U, 0U);

        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int sig = 1; sig < NSIG; sig++)
                (void) signal(sig, SIG_DFL);
        (void) setsid();        /* a terminal's ^C for rtd must not reach workers or jobs */

        CPU_ZERO(&mask);
        CPU_SET(cpu, &mask);
        if (sched_setaffinity(0, sizeof mask, &mask) < 0)
                _exit(121);
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
                _exit(122);
        snprintf(cpu_arg, sizeof cpu_arg, "%u", cpu);
        execv(cfg->path, argv);
        _exit(123);
}

int worker_spawn(sd_event *e, unsigned cpu, const WorkerConfig *cfg, const WorkerCallbacks *cb, void *userdata,
                 Worker **ret) {
        int sv[2], r, bufsize = 1024 * 1024;
        Worker *w;
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        /* START carries argv+env (≤128 KiB) and groups in one packet. */
        if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &bufsize, sizeof bufsize) < 0)
                (void) setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof bufsize);
        (void) setsockopt(sv[1], SOL_SOCKET, SO_RCVBUFFORCE, &bufsize, sizeof bufsize);

        pid = fork();
        if (pid < 0) {
                r = -errno;
                close(sv[0]);
                close(sv[1]);
                return r;
        }
        if (pid == 0)
                spawn_child(sv[1], cpu, cfg);
        close(sv[1]);

        w = calloc(1, sizeof *w);
        if (!w) {
                close(sv[0]);
                (void) kill(pid, SIGKILL);
                return -ENOMEM;
        }
        *w = (Worker){ .cpu = cpu, .pid = pid, .fd = sv[0], .cb = cb, .userdata = userdata };
        r = sd_event_add_io(e, &w->io, w->fd, EPOLLIN, on_io, w);
        if (r >= 0)
                r = sd_event_add_child(e, &w->child, pid, WEXITED, on_child, w);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                worker_destroy(w);
                return r;
        }
        /* Worker messages end a job's dispatch: handle them before new HTTP requests. */
        (void) sd_event_source_set_priority(w->io, SD_EVENT_PRIORITY_IMPORTANT);
        *ret = w;
        return 0;
}

Worker *worker_free(Worker *w) {
        if (!w)
                return NULL;
        w->io = sd_event_source_disable_unref(w->io);
        w->fd = safe_close(w->fd);
        if (!w->child) {
                worker_destroy(w);
                return NULL;
        }
        /* Still running: it exits on EOF (after its job, if any). Reap it then; the loop owns it until then. */
        w->detached = true;
        w->next_detached = detached;
        detached = w;
        return NULL;
}

void worker_forget_detached(void) {
        while (detached)
                worker_destroy(detached);
}

int worker_send_job(Worker *w, const WorkerJob *j) {
        WorkerStart st = {
                .hdr = { .type = WMSG_START, .job_id = j->id },
                .flags = (j->cgroup_fd >= 0 ? WORKER_START_CGROUP : 0) |
                         (j->cpuset_fd >= 0 ? WORKER_START_CPUSET : 0) |
                         (j->stdout_fd >= 0 && j->stderr_fd >= 0 ? WORKER_START_OUTPUT : 0) |
                         (j->rlimits ? WORKER_START_RLIMITS : 0) |
                         (j->procs_files ? WORKER_START_PROCS : 0) |
                         (j->kill_fd >= 0 ? WORKER_START_KILL : 0),
                .policy = j->policy,
                .priority = j->priority,
                .uid = j->uid,
                .gid = j->gid,
                .n_groups = (uint32_t) j->n_groups,
                .start_timeout_ms = j->start_timeout_ms,
                .n_join = j->n_join,
                .cpus = *j->cpus,
        };
        struct iovec iov[64 + 2];
        size_t n_iov = 0, total;
        _cleanup_free_ struct iovec *big = NULL;
        struct iovec *v = iov;
        size_t n_strings = 1;
        ssize_t n;

        if (!w->ready || w->fd < 0)
                return -ENOTCONN;
        if (j->n_join > WORKER_START_MAX_JOIN)
                return -E2BIG;
        if (j->rlimits)
                memcpy(st.rlimits, j->rlimits, sizeof st.rlimits);
        for (char *const *p = j->argv; *p; p++)
                n_strings++, st.n_argv++;
        for (char *const *p = j->env; p && *p; p++)
                n_strings++, st.n_env++;
        if (st.flags & WORKER_START_OUTPUT) {
                snprintf(st.spare_stdout, sizeof st.spare_stdout, "%s", j->spare_stdout);
                snprintf(st.spare_stderr, sizeof st.spare_stderr, "%s", j->spare_stderr);
        }
        if (n_strings + 2 > ELEMENTSOF(iov)) {
                big = calloc(n_strings + 2, sizeof(struct iovec));
                if (!big)
                        return -ENOMEM;
                v = big;
        }
        v[n_iov++] = (struct iovec){ &st, sizeof st };
        v[n_iov++] = (struct iovec){ (void *) j->groups, j->n_groups * sizeof(gid_t) };
        total = 0;
        v[n_iov++] = (struct iovec){ (void *) strempty(j->cwd), strlen(strempty(j->cwd)) + 1 };
        for (char *const *p = j->argv; *p; p++)
                v[n_iov++] = (struct iovec){ *p, strlen(*p) + 1 };
        for (char *const *p = j->env; p && *p; p++)
                v[n_iov++] = (struct iovec){ *p, strlen(*p) + 1 };
        for (size_t i = 2; i < n_iov; i++)
                total += v[i].iov_len;
        st.strings_size = (uint32_t) total;

        /* sendmsg takes at most IOV_MAX vectors: flatten large specs into one buffer. */
        _cleanup_free_ char *flat = NULL;
        if (n_iov > 1024) {
                size_t size = sizeof st + j->n_groups * sizeof(gid_t) + total, off = 0;
                flat = malloc(size);
                if (!flat)
                        return -ENOMEM;
                for (size_t i = 0; i < n_iov; i++) {
                        memcpy(flat + off, v[i].iov_base, v[i].iov_len);
                        off += v[i].iov_len;
                }
                v[0] = (struct iovec){ flat, size };
                n_iov = 1;
        }
        /* The descriptors go along in the order worker-proto.h gives. */
        int fds[WORKER_START_MAX_FDS], n_fds = 0;
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof fds)];
        } control = {};
        if (st.flags & WORKER_START_CGROUP)
                fds[n_fds++] = j->cgroup_fd;
        if (st.flags & WORKER_START_CPUSET)
                fds[n_fds++] = j->cpuset_fd;
        if (st.flags & WORKER_START_OUTPUT) {
                fds[n_fds++] = j->stdout_fd;
                fds[n_fds++] = j->stderr_fd;
        }
        for (unsigned i = 0; i < j->n_join; i++)
                fds[n_fds++] = j->join_fds[i];
        if (st.flags & WORKER_START_KILL)
                fds[n_fds++] = j->kill_fd;
        struct msghdr mh = { .msg_iov = v, .msg_iovlen = n_iov };
        if (n_fds > 0) {
                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                *c = (struct cmsghdr){ .cmsg_len = CMSG_LEN(n_fds * sizeof(int)), .cmsg_level = SOL_SOCKET,
                                       .cmsg_type = SCM_RIGHTS };
                memcpy(CMSG_DATA(c), fds, n_fds * sizeof(int));
        }
        do
                n = sendmsg(w->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : 0;
}

int worker_drop_job(Worker *w, uint64_t job_id) {
        WorkerMsg m = { .type = WMSG_DROP, .job_id = job_id };
        ssize_t n;

        if (!w->ready || w->fd < 0)
                return -ENOTCONN;
        do
                n = send(w->fd, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        (void) kill(w->pid, WORKER_WAKE_SIGNAL);        /* it reads its socket now, also while a job runs */
        return 0;
}
