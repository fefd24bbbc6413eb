/* SPDX-License-Identifier: MIT */
/* Scheduling metrics: collector (BPF, or the procfs fallback) snapshots, per-job figures, Prometheus text. */
#pragma once

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "shared/cpuset.h"

typedef struct Manager Manager;
typedef struct Metrics Metrics;

int metrics_new(Manager *m, Metrics **ret);     /* never fails for lack of BPF: falls back and says why */
Metrics *metrics_free(Metrics *x);
/* [Metrics] ProgramStats=: kernel BPF run-time statistics on or off (reload can flip it). */
void metrics_set_program_stats(Metrics *x, bool on);
void metrics_set_reserved(Metrics *x, const CpuSet *reserved);
/* Mark pid (and every task it forks later) as rtd's own: job_id 0 = a worker, else that job. */
int metrics_track_task(Metrics *x, pid_t pid, uint64_t job_id, uint64_t cgroup_id);
/* Before a worker is handed job_id: the process it forks next is that job from its first instruction, so
 * interrupts before metrics_track_task() lands are the job's too. */
int metrics_worker_job(Metrics *x, pid_t worker, uint64_t job_id);
/* A job ended: its scheduling figures as a JSON object stored with the job; forgets the job. */
json_t *metrics_job_finish(Metrics *x, uint64_t job_id);
/* Daemon-side dispatch latency (accepted → exec) of one job, for the histogram. */
void metrics_observe_dispatch(Metrics *x, uint64_t usec);
json_t *metrics_to_json(Metrics *x);    /* collector state (BPF or fallback and why) for /v1/status */

/* Added by the metrics module (used by api-metrics.c, jobs and tests): */
#include <stdbool.h>
#include <stddef.h>
bool metrics_bpf_enabled(Metrics *x);
/* A running job's figures so far (same shape as metrics_job_finish(), nothing forgotten). */
json_t *metrics_job_current(Metrics *x, uint64_t job_id);
/* Read the collector now instead of waiting for the timer (tests, and before a final job read). */
void metrics_refresh(Metrics *x);
/* Served from the last snapshot; never touch BPF maps. */
int metrics_render_prometheus(Metrics *x, char **ret, size_t *ret_size);
/* Figures other modules own (jobs, the reservation), written in their place in /metrics and /v1/metrics by
 * functions the Manager hands in, so that metrics includes neither jobs/ nor reserve/. NULL: left out. */
typedef struct MetricsExporters {
        void (*jobs_prometheus)(Manager *m, FILE *f);
        void (*reservation_prometheus)(Manager *m, FILE *f);
        json_t *(*jobs_json)(Manager *m);               /* "jobs" in /v1/metrics */
        json_t *(*reservation_json)(Manager *m);        /* "reservation" */
} MetricsExporters;
void metrics_set_exporters(Metrics *x, const MetricsExporters *e);
json_t *metrics_render_json(Metrics *x);

/* Leases (metrics-lease.c): their CPUs join the collector's watched set (intrusions counted there, the
 * leased tree marked like a job with metrics_track_task()); figures of one CPU from the last snapshot. */
void metrics_set_leased(Metrics *x, const CpuSet *leased);
typedef struct MetricsCpuFigures {
        uint64_t intrusion_ns;          /* CPU time of tasks neither rtd's nor marked */
        uint64_t intrusions;
        uint64_t switches;
        uint64_t hardirqs;              /* numbered IRQs + architecture vectors */
} MetricsCpuFigures;
int metrics_cpu_figures(Metrics *x, unsigned cpu, MetricsCpuFigures *ret);
