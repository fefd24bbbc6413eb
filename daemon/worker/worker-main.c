/* SPDX-License-Identifier: MIT */
/*
 * rtd-worker: one per reserved CPU, started pinned and SCHED_FIFO by rtd. It forks each job so the child
 * is born on its CPU with its policy, and reports start and exit; the next job may wait in it to start
 * the moment the running one ends. It does no logging and no allocation after start-up (but an area for
 * the next child while an earlier one hangs): all it does is wait for the daemon, its child, or the child's
 * start deadline. The job's child (its spawn, and everything it does up to execve) is worker-child.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "worker-internal.h"



/*
 * Messages arrive in `in`. rtd may hand over the next job while one runs: that START waits in `pending`
 * and starts the moment the running job is reaped, without a round trip to rtd. The two inboxes swap.
 */
static Inbox inboxes[2];
static Inbox *in = &inboxes[0], *pending;

int worker_sock = WORKER_FD_SOCKET;
int worker_devnull = -1;
cpu_set_t worker_mask;           /* the worker's own CPU: a job on exactly it inherits the mask */

static void inbox_close_fds(Inbox *m) {
        for (unsigned i = 0; i < m->n_fds; i++)
                close(m->fds[i]);
        m->n_fds = 0;
}

/* The START's descriptors by purpose, or false when as many did not come as its flags say. */
static bool inbox_job_fds(const Inbox *m, JobFds *ret) {
        uint32_t flags = m->b.start.flags;
        unsigned i = 0;

        *ret = (JobFds){ -1, -1, -1, -1, .kill = -1 };
        if (m->b.start.n_join > WORKER_START_MAX_JOIN ||
            m->n_fds != !!(flags & WORKER_START_CGROUP) + !!(flags & WORKER_START_CPUSET) +
                                2u * !!(flags & WORKER_START_OUTPUT) + m->b.start.n_join +
                                !!(flags & WORKER_START_KILL))
                return false;
        if (flags & WORKER_START_CGROUP)
                ret->cgroup = m->fds[i++];
        if (flags & WORKER_START_CPUSET)
                ret->cpuset = m->fds[i++];
        if (flags & WORKER_START_OUTPUT) {
                ret->out = m->fds[i++];
                ret->err = m->fds[i++];
        }
        while (ret->n_join < m->b.start.n_join)
                ret->join[ret->n_join++] = m->fds[i++];
        if (flags & WORKER_START_KILL)
                ret->kill = m->fds[i++];
        return true;
}

static uint64_t now_us(clockid_t clk) {
        struct timespec ts;
        clock_gettime(clk, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

static void write_exit_file(const WorkerExited *e);

/*
 * The report of a job that ended while the next one waited here, held back until the next one's first
 * message (its STARTED, or why it could not start) and sent with it in one system call: each message
 * wakes rtd, and waking it from the reserved CPU costs that CPU a few microseconds a time.
 */
static WorkerExited held_exit;
static bool exit_held;

static int send_msg(const void *m, size_t size) {
        struct iovec iov[2] = { { &held_exit, sizeof held_exit }, { (void *) m, size } };
        struct mmsghdr v[2] = { { .msg_hdr = { .msg_iov = &iov[0], .msg_iovlen = 1 } },
                                { .msg_hdr = { .msg_iov = &iov[1], .msg_iovlen = 1 } } };
        bool held = exit_held;
        int n;

        exit_held = false;
        do
                n = sendmmsg(worker_sock, held ? v : v + 1, held ? 2 : 1, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (held && n < 1)
                write_exit_file(&held_exit);    /* rtd is gone: the next rtd learns the result from the file */
        return n == (held ? 2 : 1) ? 0 : n < 0 ? -errno : -EPIPE;
}

static pid_t job_pid;
static uint64_t job_id;
static int job_cgroup = -EBADF;         /* the running job's cgroup directory */
static int job_cpuset = -EBADF;         /* the running job's v1 cpuset directory */
static int job_kill = -EBADF;           /* the running job's cgroup.kill file, if rtd passed it */
static int job_steps = -EBADF;          /* the starting child's pipe (read end), until it execs or dies */
static uint64_t job_deadline;           /* CLOCK_MONOTONIC usec by which it must have exec'd; 0: none */
static int orphan;

static void send_exec_failed(uint64_t id, const char *stage, int err) {
        WorkerExec f = { .hdr = { .type = WMSG_EXEC_FAILED, .job_id = id }, .error = err };
        snprintf(f.stage, sizeof f.stage, "%s", stage);
        (void) send_msg(&f, sizeof f);
}

/* Run the job in m now; its descriptors are used up either way (the cgroup's is kept while it runs). */
static void start_job(Inbox *m) {
        const WorkerStart *st = &m->b.start;
        size_t need = sizeof *st + (size_t) st->n_groups * sizeof(gid_t) + st->strings_size;
        char *strings = (char *) m->b.raw + sizeof *st + (size_t) st->n_groups * sizeof(gid_t);
        WorkerStarted started = { .hdr = { .type = WMSG_STARTED, .job_id = st->hdr.job_id } };
        ChildArgs ca = { .st = st, .groups = (const gid_t *) (m->b.raw + sizeof *st), .strings = strings };
        pid_t pid;

        if (m->size < sizeof *st || m->size != need || st->strings_size == 0 ||
            strings[st->strings_size - 1] != 0 || !inbox_job_fds(m, &ca.fds)) {
                inbox_close_fds(m);
                send_exec_failed(st->hdr.job_id, "protocol", EBADMSG);
                return;
        }
        if (job_pid > 0) {
                WorkerMsg busy = { .type = WMSG_BUSY, .job_id = st->hdr.job_id };
                inbox_close_fds(m);
                (void) send_msg(&busy, sizeof busy);
                return;
        }

        /*
         * The child is born in its cgroup (clone3 + CLONE_INTO_CGROUP): moving a task between cgroups takes
         * the cgroup threadgroup lock for writing, which costs an RCU grace period (~0.5 ms here).
         */
        int steps[2];
        if (pipe2(steps, O_CLOEXEC | O_NONBLOCK) < 0) {
                int err = errno;
                inbox_close_fds(m);
                send_exec_failed(st->hdr.job_id, "fork", err);
                return;
        }
        ca.step_fd = steps[1];
        pid = spawn_job(m, &ca);
        close(steps[1]);
        if (pid < 0) {
                int err = errno;
                close(steps[0]);
                inbox_close_fds(m);
                send_exec_failed(st->hdr.job_id, "fork", err);
                return;
        }
        /* The child has its own descriptor table (no CLONE_FILES): keep only the cgroup's. */
        if (ca.fds.out >= 0)
                close(ca.fds.out);
        if (ca.fds.err >= 0)
                close(ca.fds.err);
        for (unsigned i = 0; i < ca.fds.n_join; i++)
                close(ca.fds.join[i]);
        /* A cgroup.procs file (WORKER_START_PROCS) is of no use for listing: the v2 cgroup.kill suffices. */
        if ((st->flags & WORKER_START_PROCS) && ca.fds.cpuset >= 0) {
                close(ca.fds.cpuset);
                ca.fds.cpuset = -EBADF;
        }
        m->n_fds = 0;
        job_cgroup = ca.fds.cgroup;
        job_cpuset = ca.fds.cpuset;
        job_kill = ca.fds.kill;
        job_pid = pid;
        job_id = st->hdr.job_id;
        job_steps = steps[0];
        job_deadline = st->start_timeout_ms ? now_us(CLOCK_MONOTONIC) + (uint64_t) st->start_timeout_ms * 1000 : 0;
        started.pid = pid;
        started.boottime_usec = now_us(CLOCK_BOOTTIME);
        (void) send_msg(&started, sizeof started);
}

/* The starting child left the shared memory (exec'd or died): its area is free, no deadline holds. */
static void steps_done(void) {
        if (job_steps >= 0)
                close(job_steps);
        job_steps = -EBADF;
        job_deadline = 0;
        area_release(job_pid);
}

/* START: run it now, or keep it for when the running job ends (one at most waits). */
static void on_start(void) {
        if (job_pid <= 0 || pending) {
                start_job(in);          /* refused as busy if a job runs and another waits already */
                return;
        }
        pending = in;
        in = in == &inboxes[0] ? &inboxes[1] : &inboxes[0];
}

static void on_drop(uint64_t id) {
        if (!pending || pending->b.start.hdr.job_id != id)
                return;         /* started already: STARTED is on its way */
        inbox_close_fds(pending);
        pending = NULL;
        WorkerMsg m = { .type = WMSG_DROPPED, .job_id = id };
        (void) send_msg(&m, sizeof m);
}

/* A note for the next rtd in the output directory, durable before the worker goes on. */
static void write_note(const char *name, const char *text, size_t len) {
        int fd = openat(WORKER_FD_OUTPUT_DIR, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);

        if (fd < 0)
                return;
        (void) !write(fd, text, len);
        (void) fsync(fd);
        close(fd);
}

/* rtd is gone: tell the next rtd the waiting job never ran, so it queues it again. */
static void write_unstarted_file(uint64_t id) {
        char name[64];

        snprintf(name, sizeof name, WORKER_UNSTARTED_FILE_FMT, id);
        write_note(name, "", 0);
}

/* rtd is gone: leave the result where the next rtd will look for it. */
static void write_exit_file(const WorkerExited *e) {
        char name[64], text[512];
        int n;

        snprintf(name, sizeof name, WORKER_EXIT_FILE_FMT, e->hdr.job_id);
        n = snprintf(text, sizeof text,
                     "status=%d\nutime_usec=%" PRIu64 "\nstime_usec=%" PRIu64 "\nnvcsw=%" PRIu64 "\nnivcsw=%" PRIu64
                     "\nmaxrss_kb=%" PRIu64 "\nrealtime_usec=%" PRIu64 "\n",
                     e->status, e->utime_usec, e->stime_usec, e->nvcsw, e->nivcsw, e->maxrss_kb, e->realtime_usec);
        write_note(name, text, (size_t) n);
}

/* SIGKILL every process listed in the cgroup directory's cgroup.procs, in one pass. */
static void kill_procs(int dir) {
        static char buf[65536];
        int fd = openat(dir, "cgroup.procs", O_RDONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return;
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        buf[n > 0 ? n : 0] = 0;
        for (char *p = buf, *end; *p; p = end) {
                long pid = strtol(p, &end, 10);
                if (end == p)
                        break;
                if (pid > 0)
                        (void) kill((pid_t) pid, SIGKILL);
        }
}

/* The running job is over for the worker: free its CPU of whatever it left, start the one waiting. */
static void job_done(pid_t pid) {
        /*
         * The job is its main process: whatever it left behind goes with it, freeing the CPU. The report
         * goes before this, or with the next job's STARTED when one waits here (send_msg()).
         */
        if (job_kill >= 0) {
                (void) !write(job_kill, "1", 1);
                close(job_kill);
                job_kill = -EBADF;
        } else if (job_cgroup >= 0)
                (void) write_str_at(job_cgroup, "cgroup.kill", "1");
        if (job_cgroup >= 0) {
                close(job_cgroup);
                job_cgroup = -EBADF;
        }
        if (job_cpuset >= 0) {
                kill_procs(job_cpuset);         /* once: rtd goes on until it is empty (v1 has no cgroup.kill) */
                close(job_cpuset);
                job_cpuset = -EBADF;
        }
        (void) kill(-pid, SIGKILL);
        job_pid = 0;
        job_id = 0;
        if (orphan)
                _exit(0);
        if (pending) {
                Inbox *next = pending;
                pending = NULL;
                start_job(next);
        }
}

static void reap(void) {
        for (;;) {
                struct rusage ru = {};
                int status;
                pid_t pid = wait4(-1, &status, WNOHANG, &ru);
                if (pid <= 0)
                        return;
                if (pid != job_pid) {
                        area_release(pid);      /* a child given up on (start_timed_out) is gone at last */
                        continue;
                }
                if (job_steps >= 0)
                        steps_done();

                WorkerExited e = {
                        .hdr = { .type = WMSG_EXITED, .job_id = job_id },
                        .pid = pid,
                        .status = status,
                        .utime_usec = (uint64_t) ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
                        .stime_usec = (uint64_t) ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec,
                        .nvcsw = ru.ru_nvcsw,
                        .nivcsw = ru.ru_nivcsw,
                        .maxrss_kb = ru.ru_maxrss,
                        .minflt = ru.ru_minflt,
                        .majflt = ru.ru_majflt,
                        .realtime_usec = now_us(CLOCK_REALTIME),
                };
                if (!orphan && pending) {
                        held_exit = e;          /* sent with the next job's first message (job_done()) */
                        exit_held = true;
                } else if (orphan || send_msg(&e, sizeof e) < 0)
                        write_exit_file(&e);
                job_done(pid);
                if (exit_held) {                /* the next job sent nothing (it always does): alone, then */
                        exit_held = false;
                        if (send_msg(&held_exit, sizeof held_exit) < 0)
                                write_exit_file(&held_exit);
                }
        }
}

/*
 * The child did not exec in time: it hangs in a step that walks the user's file systems. Kill it, tell rtd
 * which step, and go on without waiting for it: a task in a FUSE request that is never answered dies only
 * when the request ends (the file system's server answers, dies, or its connection is aborted). Its area
 * stays its own until it is reaped.
 */
static void start_timed_out(void) {
        WorkerExec m = { .hdr = { .type = WMSG_START_TIMED_OUT, .job_id = job_id }, .pid = job_pid,
                         .error = ETIMEDOUT };
        char buf[64], step = STEP_SETUP;
        ssize_t n;
        pid_t pid = job_pid;

        while ((n = read(job_steps, buf, sizeof buf)) > 0)
                step = buf[n - 1];
        snprintf(m.stage, sizeof m.stage, "%s", step_name(step));
        (void) kill(pid, SIGKILL);
        close(job_steps);
        job_steps = -EBADF;
        job_deadline = 0;
        if (orphan || send_msg(&m, sizeof m) < 0) {
                WorkerExited e = { .hdr = { .type = WMSG_EXITED, .job_id = job_id }, .pid = pid, .status = SIGKILL,
                                   .realtime_usec = now_us(CLOCK_REALTIME) };
                write_exit_file(&e);
        }
        job_done(pid);
}

/* One message from rtd into m, with its descriptors (close-on-exec: they reach a job only as its stdio). */
static ssize_t receive(Inbox *m) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * WORKER_START_MAX_FDS)];
        } control;
        struct iovec iov = { m->b.raw, sizeof m->b.raw };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof control };
        ssize_t n = recvmsg(worker_sock, &mh, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);

        m->n_fds = 0;
        if (n < 0)
                return n;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k && m->n_fds < WORKER_START_MAX_FDS; i++)
                        memcpy(&m->fds[m->n_fds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
        m->size = (size_t) n;
        return n;
}

/*
 * Every message rtd has sent, taken now. Returns true when the worker is done: rtd is gone (or let it go)
 * and no job runs. On EOF the job waiting behind the running one never starts: say so now, before the
 * next rtd looks.
 */
static bool drain_socket(void) {
        while (!orphan) {
                ssize_t r = receive(in);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0 && errno == EAGAIN)
                        return false;
                if (r <= 0) {
                        /* The daemon died or let us go: finish the running job first, if any. */
                        orphan = 1;
                        if (pending) {
                                write_unstarted_file(pending->b.start.hdr.job_id);
                                inbox_close_fds(pending);
                        }
                        pending = NULL;
                        return job_pid <= 0;
                }
                bool whole = (size_t) r <= sizeof in->b.raw && (size_t) r >= sizeof(WorkerMsg);
                if (whole && in->b.start.hdr.type == WMSG_START)
                        on_start();
                else {
                        inbox_close_fds(in);    /* only a START carries descriptors */
                        if (whole && in->b.start.hdr.type == WMSG_DROP)
                                on_drop(in->b.start.hdr.job_id);
                }
        }
        return job_pid <= 0;
}

int main(int argc, char **argv) {
        WorkerMsg ready = { .type = WMSG_READY };
        struct pollfd p[2];
        sigset_t sigs;

        (void) argc;
        (void) argv;
        sigemptyset(&sigs);
        sigaddset(&sigs, SIGCHLD);
        sigaddset(&sigs, WORKER_WAKE_SIGNAL);   /* rtd: look at the socket now */
        sigprocmask(SIG_BLOCK, &sigs, NULL);
        p[0] = (struct pollfd){ .fd = worker_sock, .events = POLLIN };
        p[1] = (struct pollfd){ .fd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK), .events = POLLIN };
        if (p[1].fd < 0)
                return 1;

        /*
         * Page faults on the RT path would be latency; a failure here only costs that, so carry on.
         * MCL_ONFAULT locks what the worker actually touches (a few hundred KiB) instead of all of libc:
         * where jobs are forked (see spawn_job()), fork copies the page tables of whatever is mapped in.
         */
        if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0)
                (void) mlockall(MCL_CURRENT | MCL_FUTURE);
        /* Not on fds 0-2 (the child dups it onto 0, and a close-on-exec fd 0 would leave the job no stdin). */
        worker_devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (worker_devnull >= 0 && worker_devnull < 3) {
                int low = worker_devnull;
                worker_devnull = fcntl(low, F_DUPFD_CLOEXEC, 3);
                close(low);
        }
        if (sched_getaffinity(0, sizeof worker_mask, &worker_mask) < 0)
                CPU_ZERO(&worker_mask);
        /* A job's orphans (double forks, daemons) become the worker's children, not init's: they stay rtd's
         * descendants, so the reservation's drift check never takes them for strays to move to housekeeping. */
        (void) prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#ifdef HAVE_RTD_CLONE3
        (void) area_get();      /* the first child's area, mapped now; without it jobs are forked */
#endif
        if (send_msg(&ready, sizeof ready) < 0)
                return 1;

        for (;;) {
                int timeout = -1;

                /*
                 * The starting child's pipe is not watched: waking at its end (the exec) would preempt the job
                 * on its CPU only to free the child's area, which the reap or the deadline does as well. At the
                 * deadline, its end tells an exec in time from a hang.
                 */
                if (job_deadline) {
                        uint64_t now = now_us(CLOCK_MONOTONIC);
                        timeout = now >= job_deadline ? 0 : (int) ((job_deadline - now + 999) / 1000);
                }
                /*
                 * Nor is the socket's data while a job runs: rtd hands the next job over while this one runs,
                 * and the worker, above the job's priority, would preempt it for each (a wake-up the kernel
                 * filters by the events asked for, on rtd's CPU). That START is taken when the job ends
                 * (SIGCHLD), before the reap; a DROP, which wants an answer now, comes with
                 * WORKER_WAKE_SIGNAL. rtd's end (POLLHUP, always reported) is seen at once, as before.
                 */
                p[0].fd = orphan ? -1 : worker_sock;
                p[0].events = job_pid > 0 ? 0 : POLLIN;
                int n = poll(p, 2, timeout);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return 1;
                }
                if (p[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(p[1].fd, &si, sizeof si) == sizeof si)
                                ;
                        if (drain_socket())
                                return 0;
                        reap();
                }
                if (job_deadline && now_us(CLOCK_MONOTONIC) >= job_deadline) {
                        struct pollfd end = { .fd = job_steps, .events = 0 };
                        if (drain_socket())     /* a START waiting to follow this job, first */
                                return 0;
                        if (poll(&end, 1, 0) == 1 && (end.revents & (POLLHUP | POLLERR)))
                                steps_done();           /* it exec'd (or died) in time */
                        else
                                start_timed_out();
                }
                if (p[0].fd >= 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR)) && drain_socket())
                        return 0;
        }
}
