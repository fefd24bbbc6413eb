/* SPDX-License-Identifier: MIT */
/* Placeholder until jobs.c lands. */
#include <errno.h>
#include <stdlib.h>

#include "jobs.h"
#include "manager.h"

struct JobManager {
        Manager *manager;
};

static const char *const state_names[_JOB_STATE_MAX] = {
        "queued", "starting", "running", "succeeded", "failed", "cancelled", "timed_out", "lost",
};
const char *job_state_to_string(JobState s) {
        return s >= 0 && s < _JOB_STATE_MAX ? state_names[s] : NULL;
}
JobState job_state_from_string(const char *s) {
        for (int i = 0; i < _JOB_STATE_MAX; i++)
                if (streq(s, state_names[i]))
                        return (JobState) i;
        return _JOB_STATE_INVALID;
}
int job_manager_new(Manager *m, JobManager **ret) {
        JobManager *j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        j->manager = m;
        *ret = j;
        return 0;
}
int job_manager_set_cpus(JobManager *j, const CpuSet *reserved) {
        (void) j;
        (void) reserved;
        return 0;
}
bool job_manager_cpus_busy(JobManager *j, const CpuSet *cpus) {
        (void) j;
        (void) cpus;
        return false;
}
int job_manager_cancel_on_cpus(JobManager *j, const CpuSet *cpus, const char *reason) {
        (void) j;
        (void) cpus;
        (void) reason;
        return 0;
}
void job_manager_counts(JobManager *j, JobCounts *ret) {
        (void) j;
        *ret = (JobCounts){};
}
json_t *job_manager_to_json(JobManager *j) {
        (void) j;
        return json_object();
}
JobManager *job_manager_free(JobManager *j) {
        free(j);
        return NULL;
}
