/* SPDX-License-Identifier: MIT */
/* Jobs: model, states, queue policies, dispatcher onto workers, core allocation. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <sys/types.h>

#include "job-spec.h"
#include "shared/cpuset.h"

typedef struct Manager Manager;
typedef struct JobManager JobManager;

typedef enum JobState {
        JOB_QUEUED,
        JOB_STARTING,
        JOB_RUNNING,
        JOB_SUCCEEDED,
        JOB_FAILED,
        JOB_CANCELLED,
        JOB_TIMED_OUT,
        JOB_LOST,
        _JOB_STATE_MAX,
        _JOB_STATE_INVALID = -22,
} JobState;

const char *job_state_to_string(JobState s);
JobState job_state_from_string(const char *s);

/* Opens the store, recovers queued and lost jobs. */
int job_manager_new(Manager *m, JobManager **ret);
/* The reserved CPUs changed: start workers on new ones, stop idle workers on removed ones. */
int job_manager_set_cpus(JobManager *j, const CpuSet *reserved);
/* On SIGTERM: true when systemd restarts rtd (jobs and reservation stay for the next rtd); otherwise the jobs
 * in rtd-jobs.scope are cancelled (jobs-scope.c). */
bool job_manager_exit_keeps(JobManager *jm);
/* Whether any of cpus runs a job now; and cancel those jobs (forced release). */
bool job_manager_cpus_busy(JobManager *j, const CpuSet *cpus);
int job_manager_cancel_on_cpus(JobManager *j, const CpuSet *cpus, const char *reason);

typedef struct JobCounts {
        unsigned by_state[_JOB_STATE_MAX];
        unsigned queue_depth;
        unsigned workers;
        uint64_t worker_restarts;
        uint64_t tasks_put_back;        /* job tasks found outside their CPUs and put back (no cpuset) */
} JobCounts;
void job_manager_counts(JobManager *j, JobCounts *ret);
void job_manager_render_prometheus(JobManager *jm, FILE *f);   /* rtd_jobs, rtd_workers, ... */
json_t *job_manager_metrics_json(JobManager *jm);                /* "jobs" in /v1/metrics */
json_t *job_manager_to_json(JobManager *j);     /* for /v1/status */
JobManager *job_manager_free(JobManager *j);    /* on shutdown: see jobs.c for what happens to running jobs */

/* Who asks: identity from SO_PEERCRED/SO_PEERGROUPS, and whether the caller is an admin. */
typedef struct JobCaller {
        uid_t uid;
        gid_t gid;
        const gid_t *groups;
        size_t n_groups;
        const char *user;
        bool admin;
} JobCaller;

/*
 * Validate spec against the reservation, the caller's limits and the queue; store and queue the job.
 * Takes the spec's contents on success. Errors: -EINVAL (400), -EPERM (403: above a non-admin limit),
 * -EUSERS (429: per-user queue limit), -ENOSPC (429: queue full), -ENXIO (409: no CPUs reserved), -EDQUOT
 * (507: the store is out of space), -EIO (503: the store failed), each
 * with *ret_field and *ret_error; other negative errno = internal error.
 */
int job_manager_submit(JobManager *j, JobSpec *spec, const JobCaller *c, uint64_t *ret_id, char **ret_field,
                       char **ret_error);
/* The job as JSON. private=false leaves out argv, env and cwd (someone else's job). -ENOENT if unknown. */
int job_manager_get(JobManager *j, uint64_t id, bool private, json_t **ret, uid_t *ret_uid);
typedef struct JobListFilter {
        const char *state;
        int64_t uid;            /* -1: everyone */
        uint64_t before_id;     /* cursor: list jobs with a smaller id; 0 = from the newest */
        unsigned limit;
        uid_t viewer;
        bool viewer_admin;
        uint64_t array_id;      /* not 0: that array's tasks only */
} JobListFilter;
int job_manager_list(JobManager *j, const JobListFilter *f, json_t **ret_jobs, uint64_t *ret_next_cursor);
/* Cancel: -ENOENT, -EPERM (not the owner), -EALREADY (already finished; *ret_state says how). */
int job_manager_cancel(JobManager *j, uint64_t id, const JobCaller *c, JobState *ret_state);
/* Open a job's captured output ("stdout"/"stderr") for reading; -ENOENT before the job started writing. */
int job_manager_open_output(JobManager *j, uint64_t id, const char *stream, int *ret_fd);
bool job_state_is_final(JobState s);

/* Job state changes as they happen: {"type":"job","id":..,"state":..,"uid":..,"user":..,...}. */
typedef void (*JobEventFn)(json_t *event, void *userdata);
typedef struct JobSubscription JobSubscription;
int job_manager_subscribe(JobManager *j, JobEventFn fn, void *userdata, JobSubscription **ret);
JobSubscription *job_manager_unsubscribe(JobManager *j, JobSubscription *s);
