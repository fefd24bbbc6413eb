/* SPDX-License-Identifier: MIT */
/* Under systemd, workers and jobs live in a scope unit of their own, so that they outlive rtd.service. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#define JOB_SCOPE_UNIT "rtd-jobs.scope"
/* The comm of the process that keeps the scope from being empty (it only sleeps); see job-scope.c. */
#define JOB_SCOPE_ANCHOR_COMM "rtd-anchor"
#define JOB_SCOPE_WORKERS "rtd-workers"         /* its leaf cgroup for workers (and the anchor) */

typedef struct JobScope {
        int dir_fd;             /* the scope's cgroup: the job cgroups' home; -EBADF when not in use */
        int workers_fd;         /* its leaf JOB_SCOPE_WORKERS, which workers join before they pin */
        char *path;             /* /sys/fs/cgroup/... of the scope */
        pid_t anchor;           /* keeps the scope alive, also between two rtds (job-scope.c) */
        bool adopted;           /* the scope outlived an earlier rtd */
} JobScope;

/*
 * Start (or adopt) JOB_SCOPE_UNIT in rtd's slice with Delegate=yes when rtd runs as a systemd service with a
 * cgroup v2 hierarchy. 0 with ret filled in, or -errno with *ret_why saying why the scope is not used.
 */
int job_scope_setup(int proc_fd, JobScope *ret, char **ret_why);
void job_scope_done(JobScope *s);

/*
 * In rtd's SIGTERM path: whether systemd is stopping rtd to start it again (the unit's pending job is a
 * restart), so that jobs and the reservation are left for the next rtd.
 */
bool job_scope_restart_pending(void);

/*
 * For `rtd --restore` run as ExecStopPost= ($SERVICE_RESULT set): true when systemd starts rtd again
 * after this stop (a restart job, or a failure with Restart=), so the journal and the jobs are kept for
 * the next rtd; *ret_why says why. A unit that fails for good has OnFailure=rtd-restore.service.
 */
bool job_scope_keep_at_stop_post(char **ret_why);

/* The pure rule behind it: the unit's pending job type (NULL: none), $SERVICE_RESULT and its Restart=. */
bool job_scope_keep_decision(const char *job_type, const char *result, const char *restart);

/* Stop JOB_SCOPE_UNIT (every process left in it is killed by systemd): for `rtd --restore`. */
int job_scope_stop_unit(void);
