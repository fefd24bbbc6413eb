/* SPDX-License-Identifier: MIT */
/* Reading jobs: counts for status, one job, lists from the store, output files, the status JSON. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "core/config.h"
#include "core/manager.h"
#include "jobs-internal.h"
#include "metrics/prometheus.h"
#include "store/store.h"

/* ---- queries ---- */

void job_manager_counts(JobManager *jm, JobCounts *ret) {
        *ret = (JobCounts){ .queue_depth = jm->queue_len, .worker_restarts = jm->worker_restarts,
                            .tasks_put_back = jm->tasks_put_back };
        for (int s = JOB_SUCCEEDED; s < _JOB_STATE_MAX; s++)
                ret->by_state[s] = jm->finished[s];
        for (unsigned b = 0; b < JOB_BUCKETS; b++)
                for (Job *j = jm->buckets[b]; j; j = j->hnext)
                        ret->by_state[j->state]++;
        CPUSET_FOREACH(cpu, &jm->reserved)
                if (worker_is_ready(jm->slots[cpu].worker))
                        ret->workers++;
}

/* The jobs' families in /metrics (handed to metrics by the Manager: metrics includes nothing of jobs/). */
void job_manager_render_prometheus(JobManager *jm, FILE *f) {
        char lb[64];

        JobCounts jc = {};
        job_manager_counts(jm, &jc);
        prom_family(f, "rtd_jobs", "gauge", "Jobs known to rtd, by state.");
        for (int st = 0; st < _JOB_STATE_MAX; st++) {
                (void) snprintf(lb, sizeof lb, "state=\"%s\"", job_state_to_string(st));
                prom_uint(f, "rtd_jobs", lb, jc.by_state[st]);
        }
        prom_family(f, "rtd_job_queue_depth", "gauge", "Jobs waiting for a CPU.");
        prom_uint(f, "rtd_job_queue_depth", NULL, jc.queue_depth);
        prom_family(f, "rtd_workers", "gauge", "Worker processes (one per reserved CPU).");
        prom_uint(f, "rtd_workers", NULL, jc.workers);
        prom_family(f, "rtd_worker_restarts_total", "counter", "Workers restarted after dying.");
        prom_uint(f, "rtd_worker_restarts_total", NULL, jc.worker_restarts);
        prom_family(f, "rtd_job_tasks_put_back_total", "counter",
                    "Job tasks found outside their CPUs and put back (where no cpuset holds jobs).");
        prom_uint(f, "rtd_job_tasks_put_back_total", NULL, jc.tasks_put_back);
}

/* "jobs" in /v1/metrics (handed to metrics by the Manager, as above). */
json_t *job_manager_metrics_json(JobManager *jm) {
        JobCounts jc = {};
        json_t *st = json_object();

        job_manager_counts(jm, &jc);
        for (int i = 0; i < _JOB_STATE_MAX; i++)
                (void) json_object_set_new(st, job_state_to_string(i), json_integer(jc.by_state[i]));
        return json_pack("{s:o, s:i, s:i}", "by_state", st,
                         "queue_depth", (int) jc.queue_depth,
                         "workers", (int) jc.workers);
}

int job_manager_get(JobManager *jm, uint64_t id, bool private, json_t **ret, uid_t *ret_uid) {
        Job *j = job_lookup(jm, id);
        json_t *data;
        uid_t uid;
        int r;

        if (j) {
                *ret = job_to_json(jm, j, private, false);
                if (ret_uid)
                        *ret_uid = j->uid;
                return *ret ? 0 : -ENOMEM;
        }
        data = job_store_pending_get(jm, id, &uid);     /* its newest state, not stored yet */
        if (!data) {
                r = store_get(jm->store, id, &data, NULL, &uid);
                if (r < 0)
                        return r;
        }
        job_json_for_api(data, private);
        *ret = data;
        if (ret_uid)
                *ret_uid = uid;
        return 0;
}

struct list_ctx {
        JobManager *jm;
        json_t *array;
        const JobListFilter *f;
        uint64_t last;
};

static int list_cb(const StoreJob *sj, void *userdata) {
        struct list_ctx *c = userdata;
        Job *live = job_lookup(c->jm, sj->id);
        bool private = c->f->viewer_admin || sj->uid == c->f->viewer;
        json_t *o = live ? job_to_json(c->jm, live, private, false) : json_incref(sj->data);

        if (!o)
                return -ENOMEM;
        if (!live)
                job_json_for_api(o, private);
        c->last = sj->id;
        return json_array_append_new(c->array, o) < 0 ? -ENOMEM : 0;
}

int job_manager_list(JobManager *jm, const JobListFilter *f, json_t **ret_jobs, uint64_t *ret_next) {
        struct list_ctx c = { .jm = jm, .array = json_array(), .f = f };
        StoreFilter sf = { .state = f->state, .uid = f->uid, .before_id = f->before_id, .limit = f->limit,
                         .array_id = f->array_id };
        int r;

        if (!c.array)
                return -ENOMEM;
        r = store_list(jm->store, &sf, list_cb, &c);
        if (r < 0) {
                json_decref(c.array);
                return r;
        }
        *ret_jobs = c.array;
        *ret_next = (unsigned) r == (f->limit ?: 100) ? c.last : 0;
        return 0;
}

int job_manager_open_output(JobManager *jm, uint64_t id, const char *stream, int *ret_fd) {
        char name[64];
        int fd;

        snprintf(name, sizeof name, "%" PRIu64 ".%s", id, stream);
        fd = openat(jm->output_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

json_t *job_manager_to_json(JobManager *jm) {
        JobCounts c;
        json_t *workers = json_array(), *o;

        job_manager_counts(jm, &c);
        CPUSET_FOREACH(cpu, &jm->reserved) {
                WorkerSlot *s = &jm->slots[cpu];
                json_array_append_new(workers, json_pack("{s:i,s:i,s:s,s:I}", "cpu", cpu, "pid",
                                                         s->worker ? (int) worker_pid(s->worker) : 0, "state",
                                                         !s->worker                    ? "down"
                                                         : !worker_is_ready(s->worker) ? "starting"
                                                         : s->job                      ? "busy"
                                                                                       : "idle",
                                                         "job", (json_int_t) (s->job ? s->job->id : 0)));
        }
        o = json_pack("{s:s,s:i,s:o,s:I,s:b,s:s?,s:b,s:s?}", "policy",
                      queue_policy_to_string(jm->manager->config->queue_policy), "queue_depth", c.queue_depth,
                      "workers", workers, "worker_restarts", (json_int_t) c.worker_restarts, "cgroups",
                      jm->cgroups.dir_fd >= 0, "cgroup_path", jm->cgroups.dir_fd >= 0 ? jm->cgroups.path : NULL,
                      "rt_group_sched_trap", jm->cgroups.rt_group_trap, "cgroups_note", jm->cgroups.reason);
        if (o) {
                json_object_set_new(o, "cpu_enforcement", json_string(cpu_enforcement_to_string(jm->cpusets.mode)));
                if (jm->cpusets.reason)
                        json_object_set_new(o, "cpu_enforcement_note", json_string(jm->cpusets.reason));
                if (jm->cpusets.mode == CPU_ENFORCE_V1)
                        json_object_set_new(o, "cpuset_path", json_string(jm->cpusets.v1_path));
                json_object_set_new(o, "tasks_put_back", json_integer((json_int_t) jm->tasks_put_back));
                /* Where workers and jobs live under systemd, and whether it outlived an earlier rtd. */
                if (jm->scope.dir_fd >= 0)
                        json_object_set_new(o, "scope", json_pack("{s:s,s:b}", "unit", JOB_SCOPE_UNIT, "adopted",
                                                                  jm->scope.adopted));
                json_t *states = json_object();
                for (int s = 0; s < _JOB_STATE_MAX; s++)
                        json_object_set_new(states, job_state_to_string(s), json_integer(c.by_state[s]));
                json_object_set_new(o, "jobs", states);
                json_t *st = store_to_json(jm->store);
                if (st)
                        json_object_update_new(st, job_store_status_json(jm));
                json_object_set_new(o, "store", st);
                json_object_set_new(o, "limits", job_limits_to_json(&jm->limits, jm->manager->config));
        }
        return o;
}
