/* SPDX-License-Identifier: MIT */
/* Tuning knobs: RT throttling, the fair deadline server, timer migration, vmstat interval, workqueue masks. */
#pragma once

#include <jansson.h>

#include "core/config.h"
#include "restore.h"
#include "shared/cpuset.h"

typedef enum KnobOutcome {
        KNOB_SET,               /* rtd wrote the configured value (or it already had it) */
        KNOB_LEFT_ALONE,        /* configured "keep" */
        KNOB_UNAVAILABLE,       /* the kernel does not offer it here */
        KNOB_FAILED,
        _KNOB_OUTCOME_MAX,
} KnobOutcome;

typedef struct TuneKnob {
        char *name;             /* "kernel.sched_rt_runtime_us", "fair_server.cpu3.runtime" */
        KnobRoot root;
        char *path;
        char *original;         /* before rtd; NULL when never read */
        char *configured;       /* what the config asks for; NULL for keep */
        KnobOutcome outcome;
        char *why;              /* for LEFT_ALONE/UNAVAILABLE/FAILED */
        char *known;            /* the value as rtd last wrote or read it; NULL when a write failed */
} TuneKnob;

typedef struct TuneState {
        TuneKnob *knobs;
        size_t n_knobs;
} TuneState;
void tune_state_done(TuneState *s);

/* Apply [Tuning] and the workqueue masks for this reservation. Never fails for one knob: see outcomes. */
int tune_apply(KnobCtx *k, const RtdConfig *c, const CpuSet *housekeeping, const CpuSet *reserved,
               unsigned nr_cpu_ids, TuneState *st);
/* Only the workqueue masks: (original ∩ hk) or hk (leases quiet their CPUs without the global sysctls). */
void tune_apply_workqueues(KnobCtx *k, const CpuSet *housekeeping, unsigned nr_cpu_ids);
/* Knobs with original → current (read now, or as rtd knows it where a read disturbs: tune_known_value())
 * and why knobs were left alone. */
json_t *tune_state_to_json(const TuneState *st, int proc_fd, int sys_fd);
/* Whether the fair server's runtime can be read and written here: 0; -EOPNOTSUPP for a kernel without one
 * (release, uname's, before 6.12: nothing to turn off); -ENOENT when debugfs is not mounted at
 * /sys/kernel/debug; -EPERM under kernel lockdown; another -errno. *ret_why says it in words (NULL on 0). */
int tune_fair_server_probe(int sys_fd, const char *release, char **ret_why);

/*
 * The value of the named knob as rtd last wrote or read it at the reservation, NULL when the state has no
 * such knob or does not know it. Status reports this instead of reading again where a read disturbs the
 * machine: on 6.12 every read of kernel.sched_rt_runtime_us rebuilds the scheduler's root domains.
 */
const char *tune_known_value(const TuneState *st, const char *name);
