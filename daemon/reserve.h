/* SPDX-License-Identifier: MIT */
/* The reservation: which CPUs are reserved, keeping other work off them, and putting everything back. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "shared/cpuset.h"

typedef struct Manager Manager;
typedef struct Reservation Reservation;

/* Creates the reservation state; if a restore journal from a dead run exists, restores it first. */
int reservation_new(Manager *m, Reservation **ret);
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
json_t *reservation_to_json(Reservation *r);    /* for /v1/status and /v1/reservation */
/* Frees without restoring (used after the journal has been restored, or on a crash path). */
Reservation *reservation_free(Reservation *r);

/* `rtd --restore`: replay the journal in runtime_dir against the live system, remove it. */
int reservation_restore_only(int proc_fd, int sys_fd, int runtime_fd);
