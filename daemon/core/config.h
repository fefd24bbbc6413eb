/* SPDX-License-Identifier: MIT */
/* rtd.conf: INI sections and keys, defaults, parsing from text (no I/O) and from files with drop-ins. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "shared/cpuset.h"
#include "shared/macro.h"

typedef enum ReserveMode {
        RESERVE_AUTO,   /* every online CPU but the first core and its SMT siblings */
        RESERVE_NONE,
        RESERVE_LIST,
        _RESERVE_MODE_MAX,
} ReserveMode;

typedef enum SmtMode { SMT_EXCLUSIVE, SMT_SHARED, _SMT_MODE_MAX, _SMT_MODE_INVALID = -22 } SmtMode;

typedef enum BackendKind {
        BACKEND_AUTO,
        BACKEND_SYSTEMD,
        BACKEND_CGROUP,
        BACKEND_AFFINITY,
        _BACKEND_KIND_MAX,
        _BACKEND_KIND_INVALID = -22,
} BackendKind;

typedef enum IrqMode { IRQ_HOUSEKEEPING, IRQ_KEEP, _IRQ_MODE_MAX, _IRQ_MODE_INVALID = -22 } IrqMode;
typedef enum QueuePolicy { QUEUE_FCFS, QUEUE_PRIORITY, _QUEUE_POLICY_MAX, _QUEUE_POLICY_INVALID = -22 } QueuePolicy;

#define TUNE_KEEP INT64_MIN     /* a [Tuning] knob left alone */
#define CONFIG_INFINITY UINT64_MAX      /* a [Jobs] Max*= limit set to "infinity" */

/* Which starving tasks the starvation guard boosts: none, kernel threads only, or any task. */
typedef enum StarvationGuard {
        STARVATION_GUARD_NO,
        STARVATION_GUARD_KERNEL,
        STARVATION_GUARD_ALL,
} StarvationGuard;

typedef struct RtdConfig {
        /* [Daemon] */
        char *socket_path;
        unsigned socket_mode;
        char *socket_group;
        char *metrics_listen;           /* "127.0.0.1:9477", "[::1]:9477" or NULL for "no" */
        char *state_directory;
        char *runtime_directory;
        int log_level;
        unsigned max_body_bytes;        /* largest request body accepted (413 beyond) */
        unsigned max_connections;       /* concurrent HTTP connections on the control socket */
        unsigned max_connections_per_user; /* per uid on the control socket; root and admins exempt */
        unsigned reserved_admin_connections; /* of max_connections, only root and admins may take these */
        unsigned max_streams_per_user;  /* open event/output streams per uid; root and admins exempt */
        unsigned max_header_bytes;      /* request line + headers (431 beyond) */
        unsigned max_uri_bytes;         /* request target (414 beyond) */
        unsigned header_timeout_sec;    /* a connection must send its whole request head within this */
        unsigned metrics_max_connections; /* the TCP metrics listener's own cap */
        unsigned metrics_timeout_sec;   /* idle timeout on the TCP metrics listener */

        /* [Reserve] */
        ReserveMode reserve_mode;
        CpuSet reserve_cpus;            /* when reserve_mode == RESERVE_LIST; checked against topology later */
        SmtMode smt;
        BackendKind backend;
        IrqMode irqs;
        unsigned check_interval_sec;    /* drift check; 0 = off */

        /* [Tuning], TUNE_KEEP = leave alone */
        int64_t rt_runtime_usec;        /* -1 or N */
        int64_t fair_server_runtime_usec;
        int64_t timer_migration;        /* 0 or 1 */
        int64_t stat_interval_sec;
        /* starvation guard (daemon/metrics/guard.c) */
        StarvationGuard starvation_guard;
        uint64_t starvation_threshold_usec;     /* runnable this long on a reserved CPU without running */
        unsigned starvation_boost_runtime_usec; /* SCHED_DEADLINE runtime per period while boosted */
        unsigned starvation_boost_period_usec;
        uint64_t starvation_boost_duration_usec;

        /* [Metrics] */
        bool program_stats;             /* hold kernel BPF run-time statistics on (costs every BPF program) */
        unsigned intruder_table_size;   /* intruders named per reserved CPU (the rest is "other") */

        /* [Jobs] */
        QueuePolicy queue_policy;
        unsigned worker_priority;       /* 1..99 */
        unsigned default_priority;      /* 1..99 */
        unsigned kill_grace_sec;
        unsigned max_queued;            /* all users */
        unsigned keep_finished;         /* finished jobs kept in the store */
        unsigned max_array_size;        /* tasks in one job array (POST /v1/arrays) */
        unsigned aging_sec;             /* priority policy: +1 queue priority per this many seconds waited */
        unsigned start_timeout_sec;     /* a job's child must exec within this, else the job fails */
        uint64_t max_output_bytes;      /* per output file (RLIMIT_FSIZE); CONFIG_INFINITY = none */
        uint64_t max_tasks;             /* pids.max of a job's cgroup; CONFIG_INFINITY = none */
        uint64_t max_memory;            /* memory.max of a job's cgroup; CONFIG_INFINITY = none */
        unsigned default_timeout_sec;   /* a job that asks for no timeout gets this; 0 = none */
        bool realtime_without_cpuset;   /* run real-time jobs where no cpuset holds them on their CPUs */

        /* [Access] */
        char *admin_group;              /* NULL: only root is admin */
        char *submit_group;
        unsigned max_priority;          /* cap for non-admins */
        unsigned max_cores_per_user;
        unsigned max_queued_per_user;
        unsigned max_timeout_sec;       /* 0 = no cap */
        unsigned max_queue_priority;    /* cap of non-admins' queue_priority */
        char *lease_group;              /* may lease CPUs (POST /v1/leases); NULL: root and admins only */

        /* "file:line" where WorkerPriority=, DefaultPriority= and MaxPriority= were last set, or NULL. */
        char *origin_worker_priority, *origin_default_priority, *origin_max_priority;
} RtdConfig;

#define RTD_DEFAULT_CONFIG "/etc/rtd/rtd.conf"
#define RTD_DEFAULT_METRICS_PORT 9477

RtdConfig *config_new(void);    /* defaults, with $STATE_DIRECTORY/$RUNTIME_DIRECTORY applied */
RtdConfig *config_free(RtdConfig *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(RtdConfig *, config_free);

/*
 * Parse INI text into c. filename is used in messages only. Unknown sections/keys are warnings
 * (counted in *ret_warnings); invalid values are errors that name file:line, the value and what is
 * allowed. Messages go to err (one per line). Returns 0 or -EINVAL (at least one error).
 */
int config_parse_text(RtdConfig *c, const char *filename, const char *text, FILE *err, unsigned *ret_warnings);
/* Load path, then path's ".d" directory drop-ins (rtd.conf.d/NAME.conf) in lexical order. */
int config_load(RtdConfig *c, const char *path, FILE *err);
/* Whole-config checks that need several keys at once. */
int config_validate(const RtdConfig *c, FILE *err);
/* The effective config, in rtd.conf syntax. */
int config_dump(const RtdConfig *c, FILE *out);
size_t config_key_count(void);          /* keys rtd knows, over all sections */

const char *smt_mode_to_string(SmtMode m);
const char *backend_kind_to_string(BackendKind b);
const char *irq_mode_to_string(IrqMode m);
const char *queue_policy_to_string(QueuePolicy p);
