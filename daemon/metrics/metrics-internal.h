/* SPDX-License-Identifier: MIT */
/* State shared by metrics.c (collector, timer, snapshots, jobs) and metrics-export.c (JSON, Prometheus). */
#pragma once

#include <systemd/sd-event.h>

#include "collector.h"
#include "guard.h"
#include "metrics.h"

#define METRICS_INTERVAL_USEC (1000 * 1000ULL)  /* how often counters are read into the snapshot */

struct Metrics {
        Manager *manager;
        Collector *collector;
        Guard *guard;                   /* starvation guard (guard.c), fed by the collector */
        char *reason;                   /* why BPF is not used (NULL when it is) */
        sd_event_source *timer;

        CpuSet reserved;
        CpuSet leased;                  /* metrics-lease.c: watched by the collector beside reserved */
        Sample cur;                     /* latest reading; HTTP is served from cur and prev only */
        Sample prev;                    /* the reading before: cur - prev is "the last interval" */
        uint64_t collections;
        uint64_t collection_errors;

        uint64_t dispatch_hist[METRICS_HIST_SLOTS];
        uint64_t dispatch_sum_usec;
        uint64_t dispatch_count;

        MetricsExporters exporters;     /* other modules' figures, handed in by the Manager */
};

/* ceil(log2(usec)) slot, as the BPF programs compute it. */
unsigned metrics_hist_slot(uint64_t usec);
/* Upper bound of slot k in seconds (2^k µs). */
double metrics_hist_le(unsigned k);
/* Quantile q (0..1) of a slot histogram as the upper bound of the slot holding it; -1 when empty. */
double metrics_hist_quantile(const uint64_t *slots, double q);

json_t *metrics_job_counters_json(const Metrics *x, const JobCounters *c);
