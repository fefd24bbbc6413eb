/* SPDX-License-Identifier: MIT */
/* Metrics: picks the collector (BPF, else procfs and why), reads it on a timer into a snapshot that HTTP
 * is served from, tracks rtd's own tasks, keeps per-job figures and the dispatch latency histogram. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/manager.h"
#include "metrics-internal.h"
#include "shared/log.h"
#include "shared/macro.h"

unsigned metrics_hist_slot(uint64_t usec) {
        unsigned k = 0;

        if (usec <= 1)
                return 0;
        k = 64 - __builtin_clzll(usec - 1);     /* ceil(log2(usec)) */
        return k < METRICS_HIST_SLOTS - 1 ? k : METRICS_HIST_SLOTS - 1;
}

double metrics_hist_le(unsigned k) {
        return ldexp(1.0, (int) k) / 1e6;
}

double metrics_hist_quantile(const uint64_t *slots, double q) {
        uint64_t total = 0, cum = 0;

        for (unsigned k = 0; k < METRICS_HIST_SLOTS; k++)
                total += slots[k];
        if (total == 0)
                return -1;
        for (unsigned k = 0; k < METRICS_HIST_SLOTS; k++) {
                cum += slots[k];
                if ((double) cum >= q * (double) total)
                        return metrics_hist_le(MIN(k, METRICS_HIST_SLOTS - 2));
        }
        return metrics_hist_le(METRICS_HIST_SLOTS - 2);
}

static void collect(Metrics *x) {
        Sample s = {};
        int r;

        r = x->collector->ops->read(x->collector, &s);
        if (r < 0) {
                /* Logged once: a broken read repeats every second. */
                if (x->collection_errors++ == 0)
                        log_warning_errno(r, "Reading %s metrics failed, keeping the last snapshot: %m",
                                          x->collector->ops->name);
                sample_done(&s);
                return;
        }
        sample_done(&x->prev);
        x->prev = x->cur;
        x->cur = s;
        x->collections++;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Metrics *x = userdata;

        collect(x);
        (void) sd_event_source_set_time_relative(s, METRICS_INTERVAL_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

int metrics_new(Manager *m, Metrics **ret) {
        _cleanup_free_ Metrics *x = calloc(1, sizeof *x);
        int r;

        if (!x)
                return -ENOMEM;
        x->manager = m;

        r = bpf_collector_new(m->proc_fd, m->config ? m->config->intruder_table_size : 1024, &x->collector,
                              &x->reason);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                log_warning("BPF metrics unavailable, using the procfs collector: %s",
                            x->reason ?: strerror(-r));
                if (!x->reason)
                        x->reason = strdup(strerror(-r));
                r = procfs_collector_new(m->proc_fd, &x->collector);
                if (r < 0)
                        return r;
        } else
                log_info("BPF metrics attached (%s)", x->collector->ops->attach_mode(x->collector));

        r = guard_new(m, x->collector, &x->guard);
        if (r < 0) {
                x->collector->ops->free(x->collector);
                free(x->reason);
                return r;
        }
        collect(x);     /* the first scrape has data */
        if (m->event) {
                r = sd_event_add_time_relative(m->event, &x->timer, CLOCK_MONOTONIC, METRICS_INTERVAL_USEC,
                                               100 * 1000, on_timer, x);
                if (r < 0) {
                        guard_free(x->guard);
                        x->collector->ops->free(x->collector);
                        free(x->reason);
                        return r;
                }
                (void) sd_event_source_set_description(x->timer, "metrics-timer");
        }
        *ret = TAKE_PTR(x);
        return 0;
}

Metrics *metrics_free(Metrics *x) {
        if (!x)
                return NULL;
        sd_event_source_disable_unref(x->timer);
        guard_free(x->guard);           /* gives boosted tasks their policy back, needs the collector */
        if (x->collector)
                x->collector->ops->free(x->collector);
        sample_done(&x->cur);
        sample_done(&x->prev);
        free(x->reason);
        free(x);
        return NULL;
}

void metrics_set_program_stats(Metrics *x, bool on) {
        if (x && x->collector->ops->set_program_stats)
                x->collector->ops->set_program_stats(x->collector, on);
}

void metrics_set_reserved(Metrics *x, const CpuSet *reserved) {
        if (!x)
                return;
        x->reserved = *reserved;
        /* Leased CPUs are watched too (metrics-lease.c); the guard stays on rtd's own CPUs. */
        CpuSet watched;
        cpuset_or(&watched, reserved, &x->leased);
        x->collector->ops->set_reserved(x->collector, &watched);
        guard_set_reserved(x->guard, reserved);
}

int metrics_track_task(Metrics *x, pid_t pid, uint64_t job_id, uint64_t cgroup_id) {
        if (!x)
                return 0;
        return x->collector->ops->track_task(x->collector, pid, job_id, cgroup_id);
}

int metrics_worker_job(Metrics *x, pid_t worker, uint64_t job_id) {
        if (!x || !x->collector->ops->worker_job || worker <= 0)
                return 0;
        return x->collector->ops->worker_job(x->collector, worker, job_id);
}

void metrics_refresh(Metrics *x) {
        if (x)
                collect(x);
}

json_t *metrics_job_counters_json(const Metrics *x, const JobCounters *c) {
        unsigned caps = x->collector->ops->caps;
        json_t *j = json_pack("{s:s, s:I, s:I, s:f, s:f, s:I, s:I}",
                              "collector", x->collector->ops->name,
                              "voluntary_switches", (json_int_t) c->switches_voluntary,
                              "involuntary_switches", (json_int_t) c->switches_involuntary,
                              "on_cpu_seconds", c->on_cpu_ns / 1e9,
                              "runqueue_wait_seconds", c->runq_sum_ns / 1e9,
                              "runqueue_waits", (json_int_t) c->runq_count,
                              "tasks", (json_int_t) c->tasks);
        if (!j)
                return NULL;
        if (caps & CAP_MIGRATIONS)
                (void) json_object_set_new(j, "migrations", json_integer(c->migrations));
        if (caps & CAP_SWITCH_KIND)
                (void) json_object_set_new(j, "preemptions", json_integer(c->preemptions));
        if (caps & CAP_IRQ_TIME) {
                (void) json_object_set_new(j, "runqueue_max_seconds", json_real(c->runq_max_ns / 1e9));
                (void) json_object_set_new(j, "hardirqs", json_integer(c->hardirq_count));
                (void) json_object_set_new(j, "hardirq_seconds", json_real(c->hardirq_ns / 1e9));
                (void) json_object_set_new(j, "softirqs", json_integer(c->softirq_count));
                (void) json_object_set_new(j, "softirq_seconds", json_real(c->softirq_ns / 1e9));
                json_t *v = json_object();
                static const char *const names[METRICS_NR_VECTORS] = METRICS_VECTOR_NAMES;
                for (unsigned k = 0; v && k < METRICS_NR_VECTORS; k++)
                        (void) json_object_set_new(v, names[k], json_pack("{s:I, s:f}", "count", (json_int_t) c->vec_count[k],
                                                                          "seconds", c->vec_ns[k] / 1e9));
                (void) json_object_set_new(j, "vectors", v);
        }
        return j;
}

static json_t *job_json(Metrics *x, uint64_t job_id, bool forget) {
        JobCounters c = {};
        int r;

        if (!x)
                return json_object();
        r = x->collector->ops->job_read(x->collector, job_id, forget, &c);
        if (r < 0)
                return json_pack("{s:s, s:s}", "collector", x->collector->ops->name,
                                 "error", "no scheduling figures were recorded for this job");
        return metrics_job_counters_json(x, &c);
}

json_t *metrics_job_finish(Metrics *x, uint64_t job_id) {
        return job_json(x, job_id, true);
}

json_t *metrics_job_current(Metrics *x, uint64_t job_id) {
        return job_json(x, job_id, false);
}

void metrics_observe_dispatch(Metrics *x, uint64_t usec) {
        if (!x)
                return;
        x->dispatch_hist[metrics_hist_slot(usec)]++;
        x->dispatch_sum_usec += usec;
        x->dispatch_count++;
}

bool metrics_bpf_enabled(Metrics *x) {
        return x && streq(x->collector->ops->name, "bpf");
}

json_t *metrics_to_json(Metrics *x) {
        if (!x)
                return json_pack("{s:b}", "bpf_enabled", 0);
        const char *mode = x->collector->ops->attach_mode(x->collector);
        return json_pack("{s:b, s:s, s:s?, s:s?, s:s?, s:I, s:I}",
                         "bpf_enabled", metrics_bpf_enabled(x),
                         "collector", x->collector->ops->name,
                         "attach", mode,
                         "reason", x->reason,
                         "fallbacks", bpf_collector_fallbacks(x->collector),
                         "collections", (json_int_t) x->collections,
                         "collection_errors", (json_int_t) x->collection_errors);
}

void metrics_set_exporters(Metrics *x, const MetricsExporters *e) {
        x->exporters = *e;
}
