/* SPDX-License-Identifier: MIT */
/* Backends that keep other tasks off the reserved CPUs (design.md §4): systemd slices, cgroup v2 cpusets,
 * and per-task affinity, which also steers movable kthreads under the other two. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/config.h"
#include "probe.h"
#include "restore.h"
#include "shared/cpuset.h"

/* ---- backend-affinity.c ---- */

typedef enum TaskScope {
        TASKS_ALL,              /* affinity backend: every task and thread */
        TASKS_UNCONFINED,       /* cgroup backends: kthreads and tasks in the root cgroup only */
} TaskScope;

typedef struct TaskStats {
        unsigned seen;
        unsigned moved;         /* affinity set by this pass */
        unsigned refused;       /* per-CPU kthreads (PF_NO_SETAFFINITY) and tasks the kernel refused */
        unsigned own;           /* rtd's workers and jobs, left alone */
        unsigned drifted;       /* found on reserved CPUs again by a drift check */
        unsigned inherited;     /* born during the reservation with the housekeeping mask: recorded */
        bool cut_short;         /* the walk reached KnobCtx.deadline_usec: the next one resumes there */
} TaskStats;

/* Parse /proc/PID/stat text: ppid, flags, starttime, comm. Pure (unit-tested). */
int task_parse_stat(const char *text, pid_t *ret_ppid, unsigned *ret_flags, uint64_t *ret_starttime,
                    char **ret_comm);
/*
 * Give every task in scope (old ∩ housekeeping) or housekeeping. drift=true: a periodic check; tasks found
 * on reserved CPUs are counted as drifted. own_pid's descendants (rtd's workers and jobs) are left alone, and so
 * are the trees of k->exempt (leases).
 */
int tasks_apply(KnobCtx *k, const CpuSet *housekeeping, TaskScope scope, bool drift, pid_t own_pid,
                TaskStats *ret);
/* Journal replay of one task: 0 restored, 1 skipped (gone, or its mask changed since), <0 error. */
int task_restore_affinity(int proc_fd, pid_t pid, uint64_t starttime, const char *original,
                          const char *applied);
/* Hands the journal the undo of JOURNAL_TASK entries (host_register_undos()). */
void task_register_undo(void);

/* ---- backend-cgroup.c (cgroup v2 direct) and backend-systemd.c ---- */

typedef struct CgroupState {
        char *reserved_cgroup;  /* path below /sys/fs/cgroup holding the reserved CPUs ("rtd.slice") */
        char *partition;        /* cpuset.cpus.partition as read back, NULL when not offered */
        char *partition_note;   /* why it is not "isolated" */
        json_t *shrunk;         /* array of {"cgroup" or "unit", "cpus"} */
} CgroupState;
void cgroup_state_done(CgroupState *s);


int cgroup_backend_apply(KnobCtx *k, const CpuSet *housekeeping, const CpuSet *reserved, CgroupState *st);
/* The leaf of the reserved cgroup that workers live in (jobs get cgroups beside it). */
#define RESERVED_WORKERS_CGROUP "workers"
/* Move a process (a worker) into the reserved cgroup. */
int cgroup_backend_place(int sys_fd, const char *reserved_cgroup, pid_t pid);
/* Shared by both cgroup backends: the reserved cgroup's cpuset, exclusive CPUs and isolated partition. */
int cgroup_setup_reserved(KnobCtx *k, const char *cgroup, const CpuSet *reserved, CgroupState *st);

int systemd_backend_apply(KnobCtx *k, const CpuSet *housekeeping, const CpuSet *reserved, CgroupState *st);
/* Journal replay helpers. */
int systemd_unit_restore(const char *unit, const char *original_cpus);
int systemd_unit_stop(const char *unit);
/* Hands the journal the undo of JOURNAL_UNIT and JOURNAL_UNIT_STOP entries (host_register_undos()). */
void systemd_register_undo(void);
