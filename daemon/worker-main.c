/* SPDX-License-Identifier: MIT */
/*
 * rtd-worker: one per reserved CPU, started pinned and SCHED_FIFO by rtd. It forks each job so the child
 * is born on its CPU with its policy, and reports start and exit; the next job may wait in it to start
 * the moment the running one ends. It does no logging and no allocation after start-up (but an area for
 * the next child while an earlier one hangs): all it does is wait for the daemon, its child, or the child's
 * start deadline.
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

#include "worker-proto.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

typedef union StartBuf {
        WorkerStart start;
        char raw[sizeof(WorkerStart) + 65536 * sizeof(gid_t) + 256 * 1024];
} StartBuf;

/* A message from rtd with the file descriptors that came with it (see WORKER_START_CGROUP). */
typedef struct Inbox {
        StartBuf b;
        size_t size;
        int fds[WORKER_START_MAX_FDS];
        unsigned n_fds;
} Inbox;

/* What a START's descriptors are for; -1 where none came. */
typedef struct JobFds {
        int cgroup, cpuset, out, err;
        int join[WORKER_START_MAX_JOIN];        /* cgroup v1 directories to join */
        unsigned n_join;
} JobFds;

/*
 * Messages arrive in `in`. rtd may hand over the next job while one runs: that START waits in `pending`
 * and starts the moment the running job is reaped, without a round trip to rtd. The two inboxes swap.
 */
static Inbox inboxes[2];
static Inbox *in = &inboxes[0], *pending;

static int sock = WORKER_FD_SOCKET;
static cpu_set_t worker_mask;           /* the worker's own CPU: a job on exactly it inherits the mask */

static void inbox_close_fds(Inbox *m) {
        for (unsigned i = 0; i < m->n_fds; i++)
                close(m->fds[i]);
        m->n_fds = 0;
}

/* The START's descriptors by purpose, or false when as many did not come as its flags say. */
static bool inbox_job_fds(const Inbox *m, JobFds *ret) {
        uint32_t flags = m->b.start.flags;
        unsigned i = 0;

        *ret = (JobFds){ -1, -1, -1, -1 };
        if (m->b.start.n_join > WORKER_START_MAX_JOIN ||
            m->n_fds != !!(flags & WORKER_START_CGROUP) + !!(flags & WORKER_START_CPUSET) +
                                2u * !!(flags & WORKER_START_OUTPUT) + m->b.start.n_join)
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
        return true;
}

static uint64_t now_us(clockid_t clk) {
        struct timespec ts;
        clock_gettime(clk, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

static int send_msg(const void *m, size_t size) {
        ssize_t n;
        do
                n = send(sock, m, size, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n == (ssize_t) size ? 0 : -errno;
}

/*
 * Spawning the job. fork() copies the worker's page tables and then makes it take copy-on-write faults
 * (~120 us here); a child that shares the worker's memory (CLONE_VM) costs ~25 us, as posix_spawn()'s does.
 * Unlike posix_spawn()'s, the worker does not wait for it (no CLONE_VFORK): the child's chdir(), PATH
 * lookup and execve() run as the user and may never return (a stale NFS or FUSE mount the user controls),
 * and the worker must go on answering rtd, and give up on the child after the job's start timeout.
 *
 * So the child and the worker run at the same time in the same memory: the child uses only its own area
 * (its stack, with its copy of the START above it), and makes raw system calls, because glibc's wrappers
 * would write errno, which lives in the worker's thread. It writes a byte to a close-on-exec pipe before
 * each step that may block; the pipe's end (exec or exit, both after the child left the shared memory)
 * tells the worker that the area is free again. clone3 (for CLONE_INTO_CGROUP) has no libc wrapper:
 * rtd_clone3() is the x86-64 trampoline, glibc's __clone3 in small. Elsewhere, when every area is held by a
 * child that hangs, or if the kernel refuses, the job is forked as before.
 */

/* Not under AddressSanitizer: its shadow stack bookkeeping does not survive a child on a foreign stack. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define HAVE_RTD_CLONE3 1
/* A system call without errno: the result, or -errno. */
static inline long rsys6(long n, long a, long b, long c, long d, long e, long f) {
        register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
        long ret;
        __asm__ volatile("syscall"
                         : "=a"(ret)
                         : "0"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                         : "rcx", "r11", "memory");
        return ret;
}
#else
/* Only forked children run here (own memory): errno is theirs. */
static long rsys6(long n, long a, long b, long c, long d, long e, long f) {
        long r = syscall(n, a, b, c, d, e, f);
        return r < 0 ? -errno : r;
}
#endif
#define RSYS_PICK(n, a, b, c, d, e, f, ...) \
        rsys6((long) (n), (long) (a), (long) (b), (long) (c), (long) (d), (long) (e), (long) (f))
#define rsys(...) RSYS_PICK(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0)

/* The steps a child may hang in, as it writes them to its pipe and as rtd is told. */
#define STEP_SETUP 's'
#define STEP_CHDIR 'c'
#define STEP_PATH 'p'
#define STEP_EXEC 'e'

static const char *step_name(char step) {
        switch (step) {
        case STEP_CHDIR:
                return "chdir";
        case STEP_PATH:
                return "PATH lookup";
        case STEP_EXEC:
                return "exec";
        default:
                return "setup";
        }
}

typedef struct ChildArgs {
        const WorkerStart *st;
        const gid_t *groups;
        char *strings;
        JobFds fds;
        int step_fd;            /* the pipe's write end, close-on-exec */
        bool born_in_cgroup;
} ChildArgs;

static void child_step(const ChildArgs *a, char step) {
        (void) rsys(SYS_write, a->step_fd, &step, 1);
}

static int child_send(const void *m, size_t size) {
        long n;
        do
                n = rsys(SYS_sendto, sock, m, size, MSG_NOSIGNAL, NULL, 0);
        while (n == -EINTR);
        return n < 0 ? (int) n : 0;
}

/* In the job child: report why setup failed, then die with the conventional "could not exec" code. */
static _Noreturn void child_fail(uint64_t id, const char *stage, int err) {
        WorkerExec m = { .hdr = { .type = WMSG_EXEC_FAILED, .job_id = id }, .pid = (int32_t) rsys(SYS_getpid),
                         .error = err };
        size_t l = strnlen(stage, sizeof m.stage - 1);

        memcpy(m.stage, stage, l);
        m.stage[l] = 0;
        (void) child_send(&m, sizeof m);
        for (;;)
                (void) rsys(SYS_exit_group, 127);
}

static int write_str_at(int dir, const char *path, const char *s) {
        long fd = rsys(SYS_openat, dir, path, O_WRONLY | O_CLOEXEC), n;
        if (fd < 0)
                return (int) fd;
        n = rsys(SYS_write, fd, s, strlen(s));
        (void) rsys(SYS_close, fd);
        return n < 0 ? (int) n : 0;
}

static int child_dup(long fd, int target) {
        return fd == target ? 0 : (int) rsys(SYS_dup3, fd, target, 0);
}

/*
 * The job's <id>.<suffix> output file: the one rtd passed, under its final name (renaming the spare rtd
 * made is also what tells a restarted rtd that the job got this far), else one made here.
 */
static long open_output(const WorkerStart *st, const char *suffix, const char *spare, int passed) {
        char name[64];
        long fd, r;

        snprintf(name, sizeof name, "%" PRIu64 ".%s", st->hdr.job_id, suffix);
        /* No spare name: rtd gave the file its final name already (stderr, see take_output_spares()). */
        if (passed >= 0 && (!*spare ||
                            rsys(SYS_renameat2, WORKER_FD_OUTPUT_DIR, spare, WORKER_FD_OUTPUT_DIR, name, 0) == 0))
                return passed;
        fd = rsys(SYS_openat, WORKER_FD_OUTPUT_DIR, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                  0600);
        if (fd < 0)
                return fd;
        r = rsys(SYS_fchown, fd, st->uid, st->gid);
        if (r < 0) {
                (void) rsys(SYS_close, fd);
                return r;
        }
        return fd;
}

/* Find argv[0] in the job's PATH, checked with the job's credentials (we run as the user by now). */
static const char *resolve(const char *cmd, char *const *env, char *out, size_t size) {
        const char *path = "/usr/local/bin:/usr/bin:/bin";
        size_t cl = strlen(cmd);

        if (strchr(cmd, '/'))
                return cmd;
        for (char *const *e = env; *e; e++)
                if (strncmp(*e, "PATH=", 5) == 0)
                        path = *e + 5;
        for (const char *p = path; *p;) {
                size_t l = strcspn(p, ":");
                if (l > 0 && l + 1 + cl < size) {
                        memcpy(out, p, l);
                        out[l] = '/';
                        memcpy(out + l + 1, cmd, cl + 1);
                        if (rsys(SYS_faccessat, AT_FDCWD, out, X_OK) == 0)
                                return out;
                }
                p += l;
                if (*p == ':')
                        p++;
        }
        return cmd;     /* execve reports ENOENT */
}

/* The job's child: it may share the worker's memory (see above), and never returns. */
static _Noreturn void child_run(const ChildArgs *a) {
        const WorkerStart *st = a->st;
        char *cwd = a->strings, *argv[st->n_argv + 1], *env[st->n_env + 1], *p = a->strings, exe[4096];
        uint64_t id = st->hdr.job_id;
        cpu_set_t mask;
        struct sched_param sp = { .sched_priority = st->policy == SCHED_OTHER ? 0 : st->priority };
        uint64_t none = 0;
        long fd;

        p += strlen(p) + 1;
        for (uint32_t i = 0; i < st->n_argv; i++, p += strlen(p) + 1)
                argv[i] = p;
        argv[st->n_argv] = NULL;
        for (uint32_t i = 0; i < st->n_env; i++, p += strlen(p) + 1)
                env[i] = p;
        env[st->n_env] = NULL;

        (void) rsys(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);

        /* Not born into the job's cgroup (no clone3): join it first, before anything else could fork. */
        if (a->fds.cgroup >= 0 && !a->born_in_cgroup) {
                int r = write_str_at(a->fds.cgroup, "cgroup.procs", "0");
                if (r < 0)
                        child_fail(id, "cgroup", -r);
        }
        /*
         * The job's v1 cpuset (hybrid hosts: clone3 can place the child in one hierarchy only). Joined here,
         * before the child runs anything of the user's: from now on the kernel keeps it and all it forks on
         * the job's CPUs, whatever affinity they ask for.
         */
        if (a->fds.cpuset >= 0) {
                int r = write_str_at(a->fds.cpuset, "cgroup.procs", "0");
                if (r < 0)
                        child_fail(id, "cpuset", -r);
        }

        /* Its cgroups in the v1 hierarchies (pids, memory) too, before anything could fork (job-limits.c). */
        for (unsigned i = 0; i < a->fds.n_join; i++) {
                int r = write_str_at(a->fds.join[i], "cgroup.procs", "0");
                if (r < 0)
                        child_fail(id, "cgroup v1", -r);
        }
        /* A login's rlimits instead of rtd's (set while still root: hard limits may go up as well as down). */
        if (st->flags & WORKER_START_RLIMITS)
                for (int i = 0; i < WORKER_RLIMITS; i++) {
                        WorkerRlimit want = st->rlimits[i], old;
                        fd = rsys(SYS_prlimit64, 0, i, &want, NULL);
                        /* Without CAP_SYS_RESOURCE (a confined rtd) a hard limit cannot go up: keep ours. */
                        if (fd == -EPERM && rsys(SYS_prlimit64, 0, i, NULL, &old) == 0 && want.max > old.max) {
                                want.max = old.max;
                                want.cur = want.cur < old.max ? want.cur : old.max;
                                fd = rsys(SYS_prlimit64, 0, i, &want, NULL);
                        }
                        if (fd < 0)
                                child_fail(id, "setrlimit", (int) -fd);
                }
        /* Past RLIMIT_FSIZE (the output cap) a write fails with EFBIG instead of killing the job. */
        struct { void *handler; unsigned long flags; void *restorer; uint64_t mask; } ign = { SIG_IGN, 0, NULL, 0 };
        (void) rsys(SYS_rt_sigaction, SIGXFSZ, &ign, NULL, sizeof ign.mask);

        cpuset_to_cpu_set(&st->cpus, &mask);
        if (!CPU_EQUAL(&mask, &worker_mask) && (fd = rsys(SYS_sched_setaffinity, 0, sizeof mask, &mask)) < 0)
                child_fail(id, "sched_setaffinity", (int) -fd);
        if ((fd = rsys(SYS_sched_setscheduler, 0, st->policy, &sp)) < 0)
                child_fail(id, "sched_setscheduler", (int) -fd);
        if ((fd = rsys(SYS_setsid)) < 0)
                child_fail(id, "setsid", (int) -fd);

        fd = rsys(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || (fd = child_dup(fd, STDIN_FILENO)) < 0)
                child_fail(id, "stdin", (int) -fd);
        fd = open_output(st, "stdout", st->spare_stdout, a->fds.out);
        if (fd < 0 || (fd = child_dup(fd, STDOUT_FILENO)) < 0)
                child_fail(id, "stdout", (int) -fd);
        fd = open_output(st, "stderr", st->spare_stderr, a->fds.err);
        if (fd < 0 || (fd = child_dup(fd, STDERR_FILENO)) < 0)
                child_fail(id, "stderr", (int) -fd);

        /* Raw calls also because glibc's wrappers would broadcast to the threads of a multi-threaded process. */
        if ((fd = rsys(SYS_setgroups, (size_t) st->n_groups, a->groups)) < 0)
                child_fail(id, "setgroups", (int) -fd);
        if ((fd = rsys(SYS_setresgid, st->gid, st->gid, st->gid)) < 0)
                child_fail(id, "setgid", (int) -fd);
        if ((fd = rsys(SYS_setresuid, st->uid, st->uid, st->uid)) < 0)
                child_fail(id, "setuid", (int) -fd);
        if ((fd = rsys(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) < 0)
                child_fail(id, "no_new_privs", (int) -fd);
        /* From here on the user's file systems are walked: any step may hang (see above). */
        child_step(a, STEP_CHDIR);
        if ((fd = rsys(SYS_chdir, *cwd ? cwd : "/")) < 0)
                child_fail(id, "chdir", (int) -fd);
        (void) rsys(SYS_umask, 0022);

        /* Nothing of the worker's leaks into the job: every fd above stderr closes on exec. */
        if (rsys(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                for (int i = 3; i < 1024; i++)
                        (void) rsys(SYS_fcntl, i, F_SETFD, FD_CLOEXEC);

        child_step(a, STEP_PATH);
        const char *path = resolve(argv[0], env, exe, sizeof exe);
        WorkerExec m = { .hdr = { .type = WMSG_EXEC, .job_id = id }, .pid = (int32_t) rsys(SYS_getpid) };
        struct timespec ts;
        (void) rsys(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
        m.monotonic_usec = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
        child_step(a, STEP_EXEC);
        (void) child_send(&m, sizeof m);
        fd = rsys(SYS_execve, path, argv, env);
        child_fail(id, "execve", (int) -fd);
}

typedef struct CloneArgs {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size,
                cgroup;
} CloneArgs;

/*
 * A child's area: its stack, and at the top its ChildArgs and a copy of the START it runs, so the worker
 * may take the next message at once. Held from the spawn until the job is reaped, or until the start
 * deadline finds that the child left the shared memory (its pipe closed); a child given up on holds it until
 * it is reaped: a child that hangs in a FUSE request dies only when the request ends, however it was killed.
 */
#define AREA_SIZE (6UL << 20)   /* argv and env pointer arrays live on the stack: up to 256 KiB of strings */
#define AREAS 4

typedef struct Area {
        char *base;             /* above its guard page, or NULL: not mapped yet */
        pid_t owner;            /* the child using it, or 0 */
} Area;

static Area areas[AREAS];

#ifdef HAVE_RTD_CLONE3
long rtd_clone3(CloneArgs *args, size_t size, int (*fn)(void *), void *arg);
__asm__(".text\n"
        ".globl rtd_clone3\n"
        ".hidden rtd_clone3\n"
        ".type rtd_clone3, @function\n"
        "rtd_clone3:\n"
        "        endbr64\n"
        "        mov %rcx, %r8\n"              /* arg: r8 survives the syscall, rcx does not */
        "        mov $435, %eax\n"             /* SYS_clone3 */
        "        syscall\n"
        "        test %rax, %rax\n"
        "        jz 1f\n"
        "        ret\n"                        /* parent: pid, or -errno */
        "1:      xor %ebp, %ebp\n"             /* child, on its own stack: fn(arg), then exit */
        "        and $-16, %rsp\n"
        "        mov %r8, %rdi\n"
        "        call *%rdx\n"
        "        mov %rax, %rdi\n"
        "        mov $60, %eax\n"              /* SYS_exit */
        "        syscall\n"
        "        hlt\n"
        ".size rtd_clone3, .-rtd_clone3\n");

static int child_entry(void *p) {
        child_run(p);
}

/* A free area, mapped on first use (only the first one at start-up: more are needed only after hangs). */
static Area *area_get(void) {
        for (unsigned i = 0; i < AREAS; i++) {
                Area *a = &areas[i];
                if (a->owner)
                        continue;
                if (!a->base) {
                        char *m = mmap(NULL, AREA_SIZE + 4096, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
                        if (m == MAP_FAILED)
                                return NULL;
                        (void) mprotect(m, 4096, PROT_NONE);
                        a->base = m + 4096;
                }
                return a;
        }
        return NULL;
}
#endif

static void area_release(pid_t pid) {
        for (unsigned i = 0; pid > 0 && i < AREAS; i++)
                if (areas[i].owner == pid)
                        areas[i].owner = 0;
}

static pid_t job_pid;
static uint64_t job_id;
static int job_cgroup = -EBADF;         /* the running job's cgroup directory */
static int job_cpuset = -EBADF;         /* the running job's v1 cpuset directory */
static int job_steps = -EBADF;          /* the starting child's pipe (read end), until it execs or dies */
static uint64_t job_deadline;           /* CLOCK_MONOTONIC usec by which it must have exec'd; 0: none */
static int orphan;

/*
 * The job's pid, born in its cgroup when it has one and the kernel can (else the child joins it), or -1
 * (errno set). m: the START; a: filled in here, the caller's copy for a forked child.
 */
static pid_t spawn_job(const Inbox *m, ChildArgs *a) {
        int cg = a->fds.cgroup;
        CloneArgs ca = { .exit_signal = SIGCHLD };
        long r;

        if (cg >= 0) {
                ca.flags |= 0x200000000ULL;     /* CLONE_INTO_CGROUP */
                ca.cgroup = (uint64_t) cg;
        }
        a->born_in_cgroup = cg >= 0;
#ifdef HAVE_RTD_CLONE3
        Area *area = area_get();
        if (area) {
                /* The top of the area: ChildArgs, then the START; the stack grows down below them. */
                char *top = area->base + AREA_SIZE - ((m->size + 63) & ~(size_t) 63) - 128;
                ChildArgs *ca_copy = (ChildArgs *) (void *) top;
                char *msg = top + 128;
                CloneArgs va = ca;

                _Static_assert(sizeof(ChildArgs) <= 128, "ChildArgs must fit its slot");
                memcpy(msg, m->b.raw, m->size);
                *ca_copy = *a;
                ca_copy->st = (const WorkerStart *) (void *) msg;
                ca_copy->groups = (const gid_t *) (void *) (msg + sizeof(WorkerStart));
                ca_copy->strings = msg + (a->strings - m->b.raw);
                va.flags |= CLONE_VM;
                va.stack = (uint64_t) (uintptr_t) area->base;
                va.stack_size = (uint64_t) (top - area->base) & ~(uint64_t) 15;
                r = rtd_clone3(&va, sizeof va, child_entry, ca_copy);
                if (r > 0) {
                        area->owner = (pid_t) r;
                        return (pid_t) r;
                }
        }
#endif
        if (cg >= 0) {
                r = syscall(SYS_clone3, &ca, sizeof ca);
                if (r == 0)
                        child_run(a);
                if (r > 0)
                        return (pid_t) r;
        }
        a->born_in_cgroup = false;
        r = fork();
        if (r == 0)
                child_run(a);
        return (pid_t) r;
}

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
        m->n_fds = 0;
        job_cgroup = ca.fds.cgroup;
        job_cpuset = ca.fds.cpuset;
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
         * The job is its main process: whatever it left behind goes with it, freeing the CPU. Done after the
         * report so rtd picks the next job meanwhile; its START is read only after this.
         */
        if (job_cgroup >= 0) {
                (void) write_str_at(job_cgroup, "cgroup.kill", "1");
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
                if (orphan || send_msg(&e, sizeof e) < 0)
                        write_exit_file(&e);
                job_done(pid);
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
        ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);

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

int main(int argc, char **argv) {
        WorkerMsg ready = { .type = WMSG_READY };
        struct pollfd p[2];
        sigset_t chld;

        (void) argc;
        (void) argv;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, NULL);
        p[0] = (struct pollfd){ .fd = sock, .events = POLLIN };
        p[1] = (struct pollfd){ .fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK), .events = POLLIN };
        if (p[1].fd < 0)
                return 1;

        /*
         * Page faults on the RT path would be latency; a failure here only costs that, so carry on.
         * MCL_ONFAULT locks what the worker actually touches (a few hundred KiB) instead of all of libc:
         * where jobs are forked (see spawn_job()), fork copies the page tables of whatever is mapped in.
         */
        if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0)
                (void) mlockall(MCL_CURRENT | MCL_FUTURE);
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
                        reap();
                }
                if (job_deadline && now_us(CLOCK_MONOTONIC) >= job_deadline) {
                        struct pollfd end = { .fd = job_steps, .events = 0 };
                        if (poll(&end, 1, 0) == 1 && (end.revents & (POLLHUP | POLLERR)))
                                steps_done();           /* it exec'd (or died) in time */
                        else
                                start_timed_out();
                }
                if (!orphan && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
                        ssize_t r = receive(in);
                        if (r < 0 && (errno == EAGAIN || errno == EINTR))
                                continue;
                        if (r <= 0) {
                                /* The daemon died or let us go: finish the running job first, if any. The one
                                 * waiting behind it never starts; say so now, before the next rtd looks. */
                                orphan = 1;
                                p[0].fd = -1;
                                if (pending) {
                                        write_unstarted_file(pending->b.start.hdr.job_id);
                                        inbox_close_fds(pending);
                                }
                                pending = NULL;
                                if (job_pid <= 0)
                                        return 0;
                                continue;
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
        }
}
