/* SPDX-License-Identifier: MIT */
/* Worker processes (daemon side): spawning pinned SCHED_FIFO rtd-worker processes and talking to them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "shared/cpuset.h"
#include "worker-proto.h"

typedef struct Worker Worker;

typedef struct WorkerCallbacks {
        void (*ready)(Worker *w, void *userdata);
        void (*started)(Worker *w, uint64_t job_id, pid_t pid, uint64_t boottime_usec, void *userdata);
        void (*exec)(Worker *w, uint64_t job_id, pid_t pid, uint64_t monotonic_usec, void *userdata);
        void (*exec_failed)(Worker *w, uint64_t job_id, const char *stage, int error, void *userdata);
        void (*exited)(Worker *w, const WorkerExited *e, void *userdata);
        /* The job handed over to wait behind the running one was forgotten unstarted (worker_drop_job). */
        void (*dropped)(Worker *w, uint64_t job_id, void *userdata);
        /* The child did not exec within the job's start timeout, hanging in stage: killed, the worker went on. */
        void (*start_timed_out)(Worker *w, uint64_t job_id, const char *stage, void *userdata);
        /* The worker process died (wait status); it is not restarted by this module. */
        void (*died)(Worker *w, int status, void *userdata);
} WorkerCallbacks;

typedef struct WorkerConfig {
        const char *path;       /* the rtd-worker binary */
        unsigned priority;      /* SCHED_FIFO priority of the worker */
        int output_dir_fd;
        int spawn_cgroup_fd;    /* the worker joins this cgroup before pinning (the cgroup backend's reserved
                                 * cgroup, whose partition owns the reserved CPUs); -1: stay in rtd's */
} WorkerConfig;

/* Fork+exec a worker pinned to cpu at SCHED_FIFO; it reports ready() once it runs there. */
int worker_spawn(sd_event *e, unsigned cpu, const WorkerConfig *cfg, const WorkerCallbacks *cb, void *userdata,
                 Worker **ret);
/* Let the worker go: it exits at once if idle, or after its job (then writing the job's exit file). */
Worker *worker_free(Worker *w);

/* On shutdown: stop watching workers that were let go but still run (they exit on their own). */
void worker_forget_detached(void);

unsigned worker_cpu(const Worker *w);
pid_t worker_pid(const Worker *w);
bool worker_is_ready(const Worker *w);

typedef struct WorkerJob {
        uint64_t id;
        int policy;             /* SCHED_* */
        int priority;
        uid_t uid;
        gid_t gid;
        const gid_t *groups;
        size_t n_groups;
        const CpuSet *cpus;
        int cgroup_fd;                  /* the job's cgroup directory, or -1: none */
        int cpuset_fd;                  /* the job's cgroup v1 cpuset directory, or -1: none */
        int stdout_fd, stderr_fd;       /* pre-made output files, or -1: the child makes them */
        const char *spare_stdout;       /* their names in the output dir */
        const char *spare_stderr;
        const char *cwd;
        unsigned start_timeout_ms;      /* the child must exec within this, else it is killed; 0: no limit */
        const int *join_fds;            /* cgroup v1 directories the child joins first */
        unsigned n_join;
        bool procs_files;               /* cpuset_fd and join_fds are those directories' cgroup.procs files */
        int kill_fd;                    /* the job cgroup's cgroup.kill, open for writing, or -1 */
        const WorkerRlimit *rlimits;    /* WORKER_RLIMITS entries the child sets, or NULL: rtd's own stay */
        char *const *argv;
        char *const *env;
} WorkerJob;

/* Run the job; sent while another job runs, it waits in the worker and starts as soon as that one ends. */
int worker_send_job(Worker *w, const WorkerJob *j);
/* Take back a job sent to wait: the worker answers dropped() if it had not started it yet. */
int worker_drop_job(Worker *w, uint64_t job_id);

/* Locate rtd-worker: $RTD_WORKER, next to the running rtd, or the libexec directory. */
int worker_find_binary(char **ret);
