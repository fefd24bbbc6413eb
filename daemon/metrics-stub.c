/* SPDX-License-Identifier: MIT */
/* Placeholder until metrics.c lands. */
#include <errno.h>
#include <stdlib.h>

#include "manager.h"
#include "metrics.h"

struct Metrics {
        Manager *manager;
};

int metrics_new(Manager *m, Metrics **ret) {
        Metrics *x = calloc(1, sizeof *x);
        if (!x)
                return -ENOMEM;
        x->manager = m;
        *ret = x;
        return 0;
}
Metrics *metrics_free(Metrics *x) {
        free(x);
        return NULL;
}
void metrics_set_reserved(Metrics *x, const CpuSet *reserved) {
        (void) x;
        (void) reserved;
}
int metrics_track_task(Metrics *x, pid_t pid, uint64_t job_id, uint64_t cgroup_id) {
        (void) x;
        (void) pid;
        (void) job_id;
        (void) cgroup_id;
        return 0;
}
json_t *metrics_job_finish(Metrics *x, uint64_t job_id) {
        (void) x;
        (void) job_id;
        return json_object();
}
void metrics_observe_dispatch(Metrics *x, uint64_t usec) {
        (void) x;
        (void) usec;
}
json_t *metrics_to_json(Metrics *x) {
        (void) x;
        return json_pack("{s:b}", "bpf_enabled", 0);
}
