/* SPDX-License-Identifier: MIT */
/* The reservation: which CPUs are reserved, keeping other work off them, and putting everything back. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "shared/cpuset.h"
#include "shared/macro.h"

typedef struct Manager Manager;
typedef struct Reservation Reservation;

/* Creates the reservation state, and loads the restore journal a dead run left behind, if any. */
int reservation_new(Manager *m, Reservation **ret);
/*
 * The reservation rtd starts with (none when cpus is empty). A dead run's journal for the same CPUs and
 * backend is adopted as it stands: only what drifted is written again. Any other is restored first.
 * How it began is in reservation_to_json()'s "start".
 */
int reservation_start(Reservation *r, const CpuSet *cpus);
/* Reserve exactly these CPUs (replacing any previous reservation). Validates first; changes nothing on error. */
int reservation_apply(Reservation *r, const CpuSet *cpus);
/* Give every CPU back and restore every knob; removes the journal. */
int reservation_release(Reservation *r);
void reservation_cpus(Reservation *r, CpuSet *ret_reserved, CpuSet *ret_housekeeping);
/* Drift and unmovable-IRQ figures for metrics. */
typedef struct ReservationStats {
        uint64_t drift_checks;
        uint64_t irqs_drifted;          /* re-applied after someone undid them, total */
        uint64_t tasks_drifted;
        unsigned irqs_moved;
        unsigned irqs_unmovable;
        unsigned tasks_moved;
        unsigned tasks_refused;
} ReservationStats;
void reservation_stats(Reservation *r, ReservationStats *ret);
void reservation_render_prometheus(Reservation *r, FILE *f);     /* rtd_reservation_* */
json_t *reservation_stats_json(Reservation *r);                  /* "reservation" in /v1/metrics */
json_t *reservation_to_json(Reservation *r);    /* for /v1/status and /v1/reservation */
/* Frees without restoring (used after the journal has been restored, or on a crash path). */
Reservation *reservation_free(Reservation *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(Reservation *, reservation_free);

/* `rtd --restore`: replay the journal in runtime_dir against the live system, remove it. */
int reservation_restore_only(int proc_fd, int sys_fd, int runtime_fd);

/* Whether cpus can be reserved here; -EINVAL with *ret_error naming the field and the fix. */
int reservation_validate(Reservation *r, const CpuSet *cpus, char **ret_error);
/* Dry run: every write rtd would make for cpus and what it cannot do (plus boot parameters). */
int reservation_plan(Reservation *r, const CpuSet *cpus, json_t **ret, char **ret_error);
/* One drift check now (the timer calls it every [Reserve] CheckIntervalSec=). */
int reservation_check_drift(Reservation *r);
/* What the last restore did ({"restored","skipped","failed","problems"}), or NULL. Borrowed. */
json_t *reservation_last_restore(Reservation *r);
/*
 * With the cgroup backend the reserved CPUs also have their own cgroup (path below the cgroup2 mount,
 * an isolated partition where offered); reservation_place() moves a process (a worker) there. NULL and a
 * no-op with the other backends: rtd's own cgroup is never shrunk (systemd: rtd.service runs in
 * rtd.slice), so workers and jobs can stay in rtd's delegated cgroup and pin themselves.
 */
const char *reservation_cgroup(Reservation *r);
int reservation_place(Reservation *r, pid_t pid);
