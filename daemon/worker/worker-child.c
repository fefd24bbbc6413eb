/* SPDX-License-Identifier: MIT */
/* rtd-worker's job child: spawned on the worker's CPU into the job's cgroup, it drops to the user and execs
 * the job (worker-main.c is the worker's loop). Part of the rtd-worker binary only. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "worker-internal.h"

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

const char *step_name(char step) {
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

static void child_step(const ChildArgs *a, char step) {
        (void) rsys(SYS_write, a->step_fd, &step, 1);
}

static int child_send(const void *m, size_t size) {
        long n;
        do
                n = rsys(SYS_sendto, worker_sock, m, size, MSG_NOSIGNAL, NULL, 0);
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

int write_str_at(int dir, const char *path, const char *s) {
        long fd = rsys(SYS_openat, dir, path, O_WRONLY | O_CLOEXEC), n;
        if (fd < 0)
                return (int) fd;
        n = rsys(SYS_write, fd, s, strlen(s));
        (void) rsys(SYS_close, fd);
        return n < 0 ? (int) n : 0;
}

/* Join the cgroup v1 directory fd, or write to its cgroup.procs file passed as fd (WORKER_START_PROCS). */
static int child_join(const ChildArgs *a, int fd) {
        long n;

        if (!(a->st->flags & WORKER_START_PROCS))
                return write_str_at(fd, "cgroup.procs", "0");
        n = rsys(SYS_write, fd, "0", 1);
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
                int r = child_join(a, a->fds.cpuset);
                if (r < 0)
                        child_fail(id, "cpuset", -r);
        }

        /* Its cgroups in the v1 hierarchies (pids, memory) too, before anything could fork (job-limits.c). */
        for (unsigned i = 0; i < a->fds.n_join; i++) {
                int r = child_join(a, a->fds.join[i]);
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

        /* The worker's /dev/null: no path lookup on the reserved CPU for each job. */
        fd = worker_devnull >= 0 ? worker_devnull : rsys(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
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

void area_release(pid_t pid) {
        for (unsigned i = 0; pid > 0 && i < AREAS; i++)
                if (areas[i].owner == pid)
                        areas[i].owner = 0;
}

/*
 * The job's pid, born in its cgroup when it has one and the kernel can (else the child joins it), or -1
 * (errno set). m: the START; a: filled in here, the caller's copy for a forked child.
 */
pid_t spawn_job(const Inbox *m, ChildArgs *a) {
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
