/* SPDX-License-Identifier: MIT */
/* The daemon <-> worker protocol: fixed-layout messages on a SOCK_SEQPACKET socketpair (one message per packet). */
#pragma once

#include <signal.h>
#include <stdint.h>

#include "shared/cpuset.h"

/* The worker is started with the socket on fd 3 and the job-output directory on fd 4. */
#define WORKER_FD_SOCKET 3
#define WORKER_FD_OUTPUT_DIR 4

typedef enum WorkerMsgType {
        WMSG_READY = 1,         /* worker → daemon: up, pinned, locked; nothing running */
        WMSG_START,             /* daemon → worker: run this job (WorkerStart + strings) */
        WMSG_STARTED,           /* worker → daemon: forked; pid */
        WMSG_EXEC,              /* job child → daemon: about to execve (timestamp), sent on the worker's socket */
        WMSG_EXEC_FAILED,       /* job child → daemon: setup or execve failed: stage + errno */
        WMSG_EXITED,            /* worker → daemon: the job's main process was reaped (status + rusage) */
        WMSG_BUSY,              /* worker → daemon: refused START: a job runs and another one waits already */
        WMSG_DROP,              /* daemon → worker: forget the job waiting behind the running one, if not started */
        WMSG_DROPPED,           /* worker → daemon: forgot it (else it has started, and STARTED follows) */
        WMSG_START_TIMED_OUT,   /* worker → daemon: the child did not exec within the start timeout (WorkerExec:
                                 * the step it hung in); it was killed and the worker has moved on */
} WorkerMsgType;

/*
 * While a job runs the worker does not watch its socket (a message would preempt the job): it reads what
 * came when the job ends. rtd sends this signal after a message that wants an answer sooner (DROP).
 */
#define WORKER_WAKE_SIGNAL SIGUSR1

typedef struct WorkerMsg {
        uint32_t type;
        uint32_t pad;
        uint64_t job_id;
} WorkerMsg;

/*
 * A START may carry file descriptors (SCM_RIGHTS), in this order: the job's cgroup directory, made by rtd
 * (WORKER_START_CGROUP), its cgroup v1 cpuset directory, which the child joins before it runs anything of
 * the user's (WORKER_START_CPUSET, hybrid hosts), then its stdout and stderr files (WORKER_START_OUTPUT): files rtd made ahead of
 * time as spare_stdout/spare_stderr in the output dir, already the user's, which the child renames to
 * <id>.stdout/.stderr (an empty spare name: the file has its final name already). rtd does that work on its
 * own CPU, so the reserved one only forks and execs.
 */
#define WORKER_START_CGROUP 0x1
#define WORKER_START_OUTPUT 0x2
#define WORKER_START_RLIMITS 0x4       /* rlimits[] is set: the child applies them all before exec */
#define WORKER_START_CPUSET 0x8        /* then the job's v1 cpuset directory (hybrid hosts) */
/* Then n_join cgroup directories the child joins before anything else (cgroup v1 hierarchies: pids, memory). */
/*
 * The cpuset and n_join descriptors are not those directories but their cgroup.procs files, opened for
 * writing by rtd: the child joins without a path lookup on the reserved CPU. Only with a v2 cgroup, whose
 * cgroup.kill ends whatever the job leaves (every process of the job is in both), so the worker needs no v1
 * directory to list them.
 */
#define WORKER_START_PROCS 0x10
/* Then, last, the job cgroup's cgroup.kill file, opened for writing by rtd: the worker ends whatever the job
 * left with it when the job's main process has ended, without a path lookup on the reserved CPU. */
#define WORKER_START_KILL 0x20
#define WORKER_START_MAX_JOIN 4
#define WORKER_START_MAX_FDS (5 + WORKER_START_MAX_JOIN)

typedef struct WorkerRlimit {
        uint64_t cur, max;
} WorkerRlimit;
#define WORKER_RLIMITS 16               /* RLIMIT_CPU .. RLIMIT_RTTIME */

typedef struct WorkerStart {
        WorkerMsg hdr;
        uint32_t flags;
        int32_t policy;                 /* SCHED_FIFO, SCHED_RR or SCHED_OTHER */
        int32_t priority;
        uint32_t uid, gid;
        uint32_t n_groups;
        uint32_t n_argv, n_env;
        uint32_t strings_size;
        uint32_t start_timeout_ms;      /* the child must exec within this, else it is killed; 0: no limit */
        uint32_t n_join;                /* cgroup directories passed after the output files, to join */
        uint32_t pad2;
        WorkerRlimit rlimits[WORKER_RLIMITS];   /* WORKER_START_RLIMITS */
        CpuSet cpus;
        char spare_stdout[32];          /* WORKER_START_OUTPUT: the names of the files passed */
        char spare_stderr[32];
        /* then: gid_t groups[n_groups]; then cwd\0 argv\0… env\0… (strings_size bytes) */
} WorkerStart;

typedef struct WorkerStarted {
        WorkerMsg hdr;
        int32_t pid;
        uint32_t pad;
        uint64_t boottime_usec;         /* CLOCK_BOOTTIME at fork: identifies the pid after a daemon restart */
} WorkerStarted;

typedef struct WorkerExec {
        WorkerMsg hdr;
        int32_t pid;
        int32_t error;                  /* WMSG_EXEC_FAILED: errno */
        uint64_t monotonic_usec;        /* just before execve */
        char stage[32];                 /* WMSG_EXEC_FAILED: "setuid", "chdir", "execve"…;
                                         * WMSG_START_TIMED_OUT: "chdir", "PATH lookup", "exec" or "setup" */
} WorkerExec;

typedef struct WorkerExited {
        WorkerMsg hdr;
        int32_t pid;
        int32_t status;                 /* wait status */
        uint64_t utime_usec, stime_usec;
        uint64_t nvcsw, nivcsw;
        uint64_t maxrss_kb;
        uint64_t minflt, majflt;
        uint64_t realtime_usec;         /* when reaped */
} WorkerExited;

/* Written by an orphaned worker (rtd died) as <output dir>/<id>.exit so the next rtd learns the result. */
#define WORKER_EXIT_FILE_FMT "%" PRIu64 ".exit"
/* Written by an orphaned worker for the job that waited behind its last one: it never started. */
#define WORKER_UNSTARTED_FILE_FMT "%" PRIu64 ".unstarted"
