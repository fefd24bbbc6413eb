/* SPDX-License-Identifier: MIT */
/* Jobs: model, states, queue policies, dispatcher onto workers, core allocation. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

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
/* Whether any of cpus runs a job now; and cancel those jobs (forced release). */
bool job_manager_cpus_busy(JobManager *j, const CpuSet *cpus);
int job_manager_cancel_on_cpus(JobManager *j, const CpuSet *cpus, const char *reason);

typedef struct JobCounts {
        unsigned by_state[_JOB_STATE_MAX];
        unsigned queue_depth;
        unsigned workers;
        uint64_t worker_restarts;
} JobCounts;
void job_manager_counts(JobManager *j, JobCounts *ret);
json_t *job_manager_to_json(JobManager *j);     /* for /v1/status */
JobManager *job_manager_free(JobManager *j);    /* on shutdown: see jobs.c for what happens to running jobs */
