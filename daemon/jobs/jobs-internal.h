/* SPDX-License-Identifier: MIT */
/* Job manager internals shared by jobs.c (lifecycle, dispatch), jobs-workers.c (workers, CPUs),
 * jobs-json.c (views) and jobs-recover.c. */
#pragma once

#include <stdarg.h>
#include <systemd/sd-event.h>

#include "job-cgroup.h"
#include "job-cpuset.h"
#include "job-limits.h"
#include "job-scope.h"
#include "jobs.h"
#include "shared/macro.h"
#include "worker/worker.h"

typedef struct Store Store;
typedef struct StoreJob StoreJob;
typedef struct PendingWrite PendingWrite;
typedef struct JobArray JobArray;
typedef struct CgroupLater CgroupLater;

#define JOB_BUCKETS 16384
#define SPARE_TARGET 64

typedef struct Job {
        struct JobManager *jm;
        uint64_t id;
        uint64_t seq;                   /* queue order, kept across restarts */
        JobState state;
        JobSpec spec;
        uid_t uid;
        gid_t gid;
        gid_t *groups;
        size_t n_groups;
        char *user;
        unsigned priority;              /* effective RT priority (0 for "other") */

        uint64_t submit_usec, start_usec, end_usec;     /* CLOCK_REALTIME */
        uint64_t accepted_mono;         /* CLOCK_MONOTONIC when the 201 was decided */
        CpuSet cpus;
        unsigned worker_cpu;            /* the worker that forked it */
        pid_t pid;
        uint64_t boottime_usec;         /* CLOCK_BOOTTIME at fork, to recognise the pid after a restart */
        char boot_id[40];               /* the kernel's boot_id when it was handed out ("" before) */
        char *cgroup;                   /* cgroup name under the job cgroup dir, or NULL */
        uint64_t cgroup_id;             /* its id once made, else 0 */
        uint64_t tasks_put_back;        /* found outside its CPUs by the job drift check (no cpuset) */
        uint64_t spares;                /* handed spare-<n-1> (stdout) and spare-<n> (stderr) that its
                                         * child has not renamed yet, or 0 */

        int exit_code;                  /* -1: none */
        int signal;
        char *reason;
        uint64_t dispatch_usec;
        bool have_dispatch;
        WorkerExited rusage;
        bool have_rusage;
        json_t *metrics;
        bool adopted;                   /* running since before this rtd started */
        bool admin;                     /* submitted by an admin: the per-user limits do not apply */
        bool holds_cores;               /* counted in its user's UserCount.cores */
        JobLimitHits hits;              /* what its cgroup limits did, once it ended */
        unsigned output_capped;         /* 1: stdout, 2: stderr reached max_output_bytes */

        bool cancel_requested, timed_out, exec_failed;
        bool drop_requested;            /* waiting in a worker (job_is_ahead): asked for it back */
        uint64_t handed_mono;           /* CLOCK_MONOTONIC when it became its worker's running job */
        sd_event_source *ahead_src;     /* ahead: take it back if the job in front runs on too long */
        sd_event_source *timeout_src, *kill_src;
        int pidfd;                      /* adopted jobs: watched for exit */
        sd_event_source *pidfd_src, *retry_src;
        unsigned retries;
        JobArray *array;                /* the live array it is a task of (jobs-array.c), or NULL */
        uint64_t array_id;              /* 0: not a task of an array */
        unsigned array_index;

        struct Job *prev, *next;        /* queue */
        struct Job *hnext;              /* id table */
} Job;

typedef struct WorkerSlot {
        struct JobManager *jm;
        unsigned cpu;
        Worker *worker;
        Job *job;                       /* the job holding this CPU */
        Job *next;                      /* the job waiting in this CPU's worker to start after it, or NULL */
        unsigned restarts;
        uint64_t restart_window;
        sd_event_source *respawn_src;
} WorkerSlot;

typedef struct UserCount {
        uid_t uid;
        unsigned queued;
        unsigned cores;                 /* CPUs its running, starting and handed-ahead jobs hold */
        struct UserCount *next;
} UserCount;

struct JobSubscription {
        JobEventFn fn;
        void *userdata;
        struct JobSubscription *next;
};

struct JobManager {
        Manager *manager;
        Store *store;
        int output_fd;                  /* output/<store instance id>/ */
        char boot_id[40];               /* this boot's /proc/sys/kernel/random/boot_id */
        JobCgroups cgroups;
        JobScope scope;                 /* rtd-jobs.scope under systemd: job cgroups' and workers' home */
        JobLimits limits;
        PendingWrite *pending_writes;   /* store writes that failed, tried again every second */
        unsigned n_pending_writes;
        uint64_t store_failures;
        int store_last_error;
        sd_event_source *store_retry_src;
        int own_cgroup_fd;              /* job cgroups' home without a reserved cgroup (rtd's own), or -1 */
        char *own_cgroup_path;
        int reserved_cgroup_fd;         /* the cgroup backend's reserved cgroup: workers and jobs live there */
        bool cgroups_dirty;
        JobCpusets cpusets;             /* what holds jobs on their CPUs */
        uint64_t tasks_put_back;        /* job tasks the drift check found outside their CPUs, total */
        sd_event_source *drift_src;     /* the job drift check, where no cpuset holds jobs */
        char *worker_path;
        WorkerCallbacks worker_cb;

        CpuSet reserved;
        WorkerSlot *slots;              /* CPUSET_MAX entries, indexed by CPU */
        CpuSet ahead_cpus;              /* CPUs whose worker holds a job waiting to start (slot->next) */
        Job **buckets;
        Job *queue_head, *queue_tail;
        unsigned queue_len;
        UserCount *users;
        JobSubscription *subs;

        uint64_t next_id, next_seq;
        uint64_t submitted, worker_restarts;
        unsigned finished[_JOB_STATE_MAX];
        unsigned finished_since_prune;
        bool dispatch_pending;
        bool assume_workers_ready;      /* unit tests: place without worker processes */
        uint64_t spare_first, spare_next;       /* pre-made output files spare-<n>, n in [first, next) */
        int spare_fds[SPARE_TARGET];            /* spare-<n> open for writing, at n % SPARE_TARGET */
        sd_event_source *spare_src;
        sd_event_source *dispatch_src, *sweep_src;
        JobArray *arrays;               /* arrays with tasks that have not ended (jobs-array.c) */
        uint64_t next_array_id;
        sd_event_source *array_progress_src;
        CgroupLater *later_head, *later_tail;   /* finished jobs' cgroups to remove (jobs-cgroup-later.c) */
        sd_event_source *later_src;
};

/* Handed to a busy worker, it waits there behind that CPU's running job. */
static inline bool job_is_ahead(const JobManager *jm, const Job *j) {
        return j->state == JOB_STARTING && jm->slots[j->worker_cpu].next == j;
}

/* The job waiting in a CPU's worker behind its running one, or NULL; ahead_cpus follows. */
static inline void slot_set_next(JobManager *jm, unsigned cpu, Job *j) {
        jm->slots[cpu].next = j;
        if (j)
                cpuset_set(&jm->ahead_cpus, cpu);
        else
                cpuset_clear(&jm->ahead_cpus, cpu);
}

Job *job_lookup(JobManager *jm, uint64_t id);
void job_register(JobManager *jm, Job *j);
Job *job_free_unregistered(Job *j);
void job_finish(JobManager *jm, Job *j, JobState state, const char *reason_fmt, ...) _printf_(4, 5);
int job_place(JobManager *jm, const JobSpec *spec, CpuSet *ret);
Job *job_queue_pick(JobManager *jm);     /* NULL: no queued job's user has room ([Access] MaxCoresPerUser=) */
bool job_user_has_room(JobManager *jm, const Job *j);
int64_t job_effective_queue_priority(const Job *j, uint64_t now_realtime, unsigned aging_sec);
void job_manager_dispatch(JobManager *jm);
void job_manager_schedule(JobManager *jm);
void job_manager_prune(JobManager *jm);
int job_remove_output(const StoreJob *sj, void *userdata);
void job_set_terminate(JobManager *jm, Job *j);
void job_rearm_timeout(JobManager *jm, Job *j, uint64_t started_mono);
void job_apply_exit(Job *j, const WorkerExited *e);
JobState job_final_state(const Job *j);
JobState job_state_after_exit(Job *j, const WorkerExited *e);         /* sets the reason when it failed */
/* jobs.c, for jobs-workers.c */
void job_signal(JobManager *jm, Job *j, int sig);
void job_terminate(JobManager *jm, Job *j);
int job_persist(JobManager *jm, Job *j, bool insert);
/* The same, on disk before it returns: a job handed to a worker must never run again after a power cut. */
int job_persist_durable(JobManager *jm, Job *j, bool insert);
void job_publish(JobManager *jm, Job *j);
void job_release_cpus(JobManager *jm, Job *j);
char *job_log_fields(const Job *j);
void job_unstart(Job *j);
void job_requeue(JobManager *jm, Job *j);
int job_start(JobManager *jm, Job *j, const CpuSet *cpus, bool fresh, bool ahead);

/* jobs.c, for jobs-array.c: a submission's checks for n jobs at once, and a new job from a checked spec
 * (takes the spec's contents; not registered, stored or queued yet). */
int job_submit_check(JobManager *jm, JobSpec *spec, const JobCaller *c, unsigned n, unsigned *ret_prio,
                     char **rf, char **re);
Job *job_new(JobManager *jm, JobSpec *spec, const JobCaller *c, unsigned prio);

/* jobs-array.c */
int job_arrays_recover(JobManager *jm);
void job_arrays_free(JobManager *jm);
bool job_array_has_room(const JobArray *a);
void job_array_task_active(JobManager *jm, Job *j, bool active);
void job_array_task_ended(JobManager *jm, Job *j, JobState state);

/* jobs-ahead.c: the next job waiting in a busy worker */
void job_hand_ahead(JobManager *jm);
bool job_take_back_ahead(JobManager *jm);       /* true: a job is on its way back, dispatch waits for it */
void job_take_back(JobManager *jm, Job *j);
void job_ahead_arm_limit(JobManager *jm, Job *j, const Job *front);

/* jobs-workers.c: what workers' messages do to jobs, and reservation changes */
extern const WorkerCallbacks job_worker_callbacks;

/* jobs-json.c */
json_t *job_to_json(JobManager *jm, const Job *j, bool private, bool for_store);
json_t *job_event_json(JobManager *jm, const Job *j);
/* A stored job as the API shows it: store-only fields dropped; private=false also drops argv, env, cwd. */
void job_json_for_api(json_t *o, bool private);
int job_from_json(JobManager *jm, uint64_t id, const char *state, uid_t uid, uint64_t seq, json_t *data,
                  Job **ret);
char *job_format_time(uint64_t realtime_usec);
uint64_t job_parse_time(const char *s);

/* jobs-limits.c */
int job_limits_prepare(JobManager *jm, Job *j, int cgroup_fd, int join[static 2], WorkerRlimit rl[WORKER_RLIMITS]);
void job_limits_note_end(JobManager *jm, Job *j, JobState state);
json_t *job_limits_hits_json(const Job *j);

/* jobs-store.c */
int job_store_write(JobManager *jm, const StoreJob *sj, bool insert, bool durable);
json_t *job_store_pending_get(JobManager *jm, uint64_t id, uid_t *ret_uid);
json_t *job_store_status_json(JobManager *jm);
void job_store_done(JobManager *jm);

/* jobs-contain.c: cpusets, whole-job signals, the job drift check */
void job_containment_setup(JobManager *jm);
bool job_needs_refusal(const JobManager *jm, const JobSpec *spec);     /* real-time without a cpuset */
/* The job's cgroup (fd, or -EBADF without one) and v1 cpuset (fd, or -EBADF), with its CPUs; -errno. */
int job_cgroups_make(JobManager *jm, Job *j, int *ret_cgroup_fd, int *ret_cpuset_fd);
/* Every task of the named job cgroup, in v2 and its v1 cpuset: SIGKILL until empty (as far as can be). */
void job_cgroups_signal(JobManager *jm, const char *name, int sig);
int job_cgroups_remove(JobManager *jm, const char *name);
/* jobs-cgroup-later.c: a finished job's cgroups go 50 ms later (cgroups: its v2 cgroup and v1 cpuset too, not
 * only its v1 limit cgroups); all that wait, now (shutdown). */
void job_cgroups_remove_later(JobManager *jm, const char *name, bool cgroups);
void job_cgroups_remove_pending(JobManager *jm);
void job_drift_arm(JobManager *jm);

/* jobs-recover.c */
int job_manager_recover(JobManager *jm);
/* Output files of an rtd before output/<instance>/ that belong to this store's jobs move in there. */
void job_output_adopt_legacy(JobManager *jm, int legacy_fd);
/* Output files of ids the store has no job for (a power cut took the record) go before a new job gets the id. */
void job_output_forget_unknown(JobManager *jm);
void job_sweep_cgroups(JobManager *jm);
/* Whether j's child provably never reached its exec (this boot's traces: its cgroup, else its stdout file). */
bool job_never_exec_d(JobManager *jm, const Job *j);

/* jobs-scope.c: rtd-jobs.scope as the home of job cgroups and workers; stop or restart */
void job_scope_adopt_home(JobManager *jm);
int job_scope_workers_cgroup(JobManager *jm);   /* fd of the scope's workers leaf, or -EBADF */
pid_t job_cgroup_leader(JobManager *jm, const Job *j, uint64_t *ret_start_usec);

/* jobs.c: the job table, the queue and per-user counts (used by dispatch and submit) */
void job_table_add(JobManager *jm, Job *j);
void job_table_remove(JobManager *jm, Job *j);
void job_queue_append(JobManager *jm, Job *j);
void job_queue_insert_in_order(JobManager *jm, Job *j);
void job_queue_remove(JobManager *jm, Job *j);
UserCount *job_user_count(JobManager *jm, uid_t uid, bool create);
void job_hold_cores(JobManager *jm, Job *j, bool hold);
Job *job_free(Job *j);
void job_arm_timeout(JobManager *jm, Job *j, uint64_t started_mono);

/* jobs-dispatch.c: output spares, job_start, the dispatcher (job_submit_check and submit: jobs-submit.c) */
int job_spares_start(JobManager *jm);
void job_spares_close(JobManager *jm);
int job_dispatch_start(JobManager *jm);
