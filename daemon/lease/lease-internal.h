/* SPDX-License-Identifier: MIT */
/* State shared by lease.c (lifecycle, store, JSON) and lease-quiet.c (knobs, drift, metrics). */
#pragma once

#include <systemd/sd-event.h>

#include "host/irq.h"
#include "host/restore.h"
#include "lease.h"
#include "metrics/metrics.h"

#define LEASES_ENDED_KEPT 32            /* ended leases still shown (and DELETE answered 200) */

struct Lease {
        Leases *leases;
        uint64_t id;
        CpuSet cpus;
        char owner[LEASE_OWNER_MAX + 1];
        pid_t pid;
        uint64_t starttime;             /* /proc/PID/stat field 22: the pid's identity across restarts */
        uid_t uid;
        char *user;
        unsigned priority;
        char *policy;                   /* NULL without priority */
        uint64_t created;               /* CLOCK_REALTIME seconds */
        uint64_t ended;
        bool active;
        bool adopted;                   /* taken over from a previous run */
        char *end_reason;
        int pidfd;
        sd_event_source *exit_source;
        MetricsCpuFigures *base;        /* per leased CPU (in CPU order) at lease start */
        json_t *final_metrics;          /* figures when it ended */
        json_t *tree_metrics;           /* the tree's own figures (the job counters) when it ended */
        /* Every task was walked once since the lease began (lease-quiet.c): until then rtd's loop keeps walking
         * on each turn, and a caller waits for this before its tasks start (GET: "quieted"). */
        bool quieted;
        pid_t walk_start;               /* where the walk stood when the lease began */
        LeaseQuietFn quiet_fn;          /* lease_on_quieted() */
        void *quiet_userdata;
};

struct Leases {
        Manager *manager;
        int proc_fd, sys_fd;
        int dir_fd;                     /* RuntimeDirectory=/leases */
        Journal *journal;               /* one journal for all leases: originals before the first lease */
        uint64_t next_id;
        Lease **active;
        size_t n_active;
        Lease *ended[LEASES_ENDED_KEPT];
        size_t n_ended;
        IrqState irq;
        unsigned tasks_moved, tasks_refused;
        uint64_t tasks_drifted, drift_checks;
        pid_t walk_resume;
        uint64_t walk_budget_usec;      /* per pass; RTD_LEASE_WALK_BUDGET_USEC= shrinks it for tests */
        uint64_t walks_cut_short;
        bool walk_drift;                /* the pass being continued was a drift check */
        sd_event_source *walk_more;     /* a cut-short walk goes on at the next loop turn */
        sd_event_source *drift_timer;
        json_t *last_restore;
        json_t *start;                  /* how this run began: leases adopted, released, knob writes */
};

/* lease-quiet.c */
/* Quiet every active lease's CPUs: other tasks, movable IRQs, workqueues off them (drift: a periodic
 * check); with no active lease left, the journal is replayed instead and every knob goes back. */
int leases_quiet(Leases *l, bool drift);
/* A new or adopted lease: quieted once the walk has come round to where it stands now. */
void lease_walk_begin(Leases *l, Lease *x);
/* Tells x's waiter (lease_on_quieted), if any, once. */
void lease_quiet_notify(Lease *x);
uint64_t leases_walk_budget(void);
void leases_drift_timer_arm(Leases *l);
/* Mark the lease's tree (root and its descendants now) for the collector; lease_track_forget() unmarks. */
void lease_track(Leases *l, Lease *x);
json_t *lease_metrics_json(Leases *l, const Lease *x);
void lease_metrics_baseline(Leases *l, Lease *x);
/* /proc/PID/stat starttime, -ESRCH when gone. */
int lease_pid_starttime(int proc_fd, pid_t pid, uint64_t *ret);
