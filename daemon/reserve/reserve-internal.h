/* SPDX-License-Identifier: MIT */
/* The Reservation's state, shared by reserve.c (start, apply, drift, release, plan) and reserve-json.c (what it
 * is: JSON, /metrics figures, boot hints). Nothing outside reserve/ includes this. */
#pragma once

#include "core/manager.h"
#include "host/backend.h"
#include "host/irq.h"
#include "host/restore.h"
#include "host/tune.h"
#include "lease/lease.h"
#include "shared/cpuset.h"

struct Reservation {
        Manager *manager;
        int proc_fd, sys_fd, runtime_fd;
        Journal *journal;

        bool active;
        CpuSet reserved, housekeeping;
        BackendKind backend;
        char *backend_reason;
        CgroupState cgroup;
        TaskStats tasks;
        IrqState irq;
        TuneState tune;
        bool irqs_kept;                 /* IRQs=keep */
        pid_t lease_pids[LEASES_MAX];   /* leased trees: left alone like rtd's own (knob_ctx) */

        sd_event_source *drift_timer;
        uint64_t drift_checks;
        uint64_t tasks_drifted;
        uint64_t last_check_realtime;
        pid_t walk_resume;              /* where the last walk over /proc was cut short (KnobCtx) */
        uint64_t walks_cut_short;

        json_t *last_restore;           /* what the last restore (start-up, release) did */
        char *journal_problem;
        Journal *left_behind;           /* a dead run's journal, until reservation_start() decides on it */
        json_t *start;                  /* how this run's reservation began: adopted, restored first, new */
};

static inline const RtdConfig *config_of(Reservation *r) {
        return r->manager->config;
}

/* reserve-json.c, for reservation_plan() too: a CPU set as a JSON string ("2-3"), and the boot parameters
 * that would make the reserved CPUs quieter still. */
json_t *reserve_cpus_json(const CpuSet *s);
json_t *reserve_boot_hints(Reservation *r, const CpuSet *reserved);
