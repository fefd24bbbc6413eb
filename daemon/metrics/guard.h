/* SPDX-License-Identifier: MIT */
/* Starvation guard: a task left runnable on a reserved CPU longer than [Tuning] StarvationThresholdSec= (a
 * kworker behind a FIFO job that never sleeps) gets a short SCHED_DEADLINE boost, then its policy back. */
#pragma once

#include <jansson.h>
#include <stdio.h>

#include "collector.h"
#include "shared/cpuset.h"

typedef struct Manager Manager;
typedef struct Guard Guard;

/* Follows m->config on every tick (reload included); the collector gives the waiters (BPF only). */
int guard_new(Manager *m, Collector *c, Guard **ret);
Guard *guard_free(Guard *g);    /* gives every boosted task its policy back; NULL-safe */
void guard_set_reserved(Guard *g, const CpuSet *reserved);
json_t *guard_to_json(const Guard *g);
void guard_render_prometheus(const Guard *g, FILE *f);
