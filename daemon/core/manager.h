/* SPDX-License-Identifier: MIT */
/* The Manager: the one event loop and the state of every module, wired in start-up and shutdown order. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "shared/cpuset.h"

typedef struct Http Http;
typedef struct Topology Topology;
typedef struct Reservation Reservation;    /* reserve.c (+ irq.c, tune.c, restore.c) */
typedef struct JobManager JobManager;      /* jobs.c (+ worker.c, store.c) */
typedef struct Metrics Metrics;            /* metrics.c (+ bpf-metrics.c or its procfs fallback) */
typedef struct Leases Leases;              /* lease.c (+ lease-quiet.c) */

typedef struct Manager {
        sd_event *event;
        RtdConfig *config;
        char *config_path;              /* NULL: the default path */

        int proc_fd;                    /* /proc, or <root>/proc with --root */
        int sys_fd;                     /* /sys, or <root>/sys */
        int runtime_fd;                 /* RuntimeDirectory= (restore journal) */
        int state_fd;                   /* StateDirectory= (job store, job output) */

        Topology *topology;
        Reservation *reservation;
        JobManager *jobs;
        Metrics *metrics;
        Leases *leases;

        Http *control;                  /* unix socket */
        Http *metrics_http;             /* TCP listener, read-only; NULL when MetricsListen=no */

        uint64_t start_usec;            /* CLOCK_MONOTONIC */
        uint64_t start_realtime_usec;
        bool reloading;
        bool socket_activated;
        bool keep_on_exit;              /* SIGTERM of a systemd restart: leave knobs and jobs to the next rtd */
        int control_listen_fd;          /* borrowed (the Http's gate owns them), for a re-exec; -EBADF if none */
        int metrics_listen_fd;
        bool handing_over;              /* re-exec: manager_free() leaves knobs, journal and socket file */
} Manager;

/* Takes ownership of config (reload replaces it). */
int manager_new(RtdConfig *config, const char *config_path, const char *root, Manager **ret);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

int manager_start(Manager *m);          /* everything up to READY=1 */
int manager_run(Manager *m);            /* the loop; returns the exit code */
void manager_update_status(Manager *m); /* STATUS= line for systemd */

/* The reserved and housekeeping CPUs as of now (owned by the reservation; empty when none). */
void manager_reserved_cpus(Manager *m, CpuSet *ret);
void manager_housekeeping_cpus(Manager *m, CpuSet *ret);

uint64_t now_usec(int clock);

/* Hands metrics the functions that render the jobs' and the reservation's figures (metrics_set_exporters). */
void manager_hand_metrics_exporters(Manager *m);

/* Called by the reservation after the reserved set changed: pins rtd, tells jobs and metrics. */
void manager_reservation_changed(Manager *m);
/* Called by lease.c after a lease began or ended: pins rtd off leased CPUs, tells metrics. */
void manager_leases_changed(Manager *m);
/* The CPUs c asks to reserve on this machine (auto/none/list), validated; logs why on -EINVAL. */
int manager_configured_cpus(Manager *m, const RtdConfig *c, CpuSet *ret);
