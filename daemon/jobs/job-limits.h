/* SPDX-License-Identifier: MIT */
/* A job's resource limits: what a caller may ask for, the rlimits its child gets, pids/memory in its cgroups. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

#include "core/config.h"
#include "job-spec.h"
#include "worker/worker-proto.h"


/*
 * Where pids.max and memory.max of jobs are enforced: in the job's own cgroup v2 directory when its parent
 * has the controller, else in a cgroup of the v1 hierarchy (hybrid hosts), else not at all (*_note says why).
 */
typedef struct JobLimits {
        int v1_pids_fd, v1_memory_fd;   /* rtd's own cgroups in the v1 pids and memory hierarchies, or -EBADF */
        char *v1_pids_path, *v1_memory_path;
        bool v1_memsw;                  /* memory.memsw.limit_in_bytes exists: swap counts too */
        char *v2_note;                  /* why a v2 controller could not be enabled, or NULL */
        bool v2_pids, v2_memory;        /* the last job's cgroup v2 directory had them */
        uint64_t threads_max;           /* kernel/threads-max, for the login-like NPROC and SIGPENDING */
        char **leftovers;               /* v1 job cgroups that were not empty yet when their job ended */
        size_t n_leftovers;
} JobLimits;

void job_limits_setup(int proc_fd, int sys_fd, const char *instance, JobLimits *ret);
void job_limits_done(JobLimits *l);
json_t *job_limits_to_json(const JobLimits *l, const RtdConfig *cfg);

/*
 * Apply the configured defaults to spec and check what it asks for against them: non-admins may only go
 * below a limit. -EPERM with *ret_field and *ret_error naming the field, the limit, the key and the fix; spec is
 * unchanged then. Pure: no I/O.
 */
int job_limits_resolve(const RtdConfig *cfg, JobSpec *spec, bool admin, char **ret_field, char **ret_error);

/* The rlimits of a job: those of a fresh login (the kernel's defaults), FSIZE = the output cap, RTPRIO. */
void job_limits_rlimits(const JobLimits *l, const JobSpec *spec, unsigned rt_priority,
                        WorkerRlimit ret[WORKER_RLIMITS]);

/*
 * Set pids.max and memory.max for job `name`: in its cgroup v2 directory cgroup_fd (or -EBADF) when that
 * has the controllers, else in v1 cgroups made here, whose directories the child must join (ret_join, up to
 * 2, close-on-exec; the caller closes them). Returns the number of fds in ret_join or -errno.
 */
int job_limits_apply(JobLimits *l, int cgroup_parent_fd, int cgroup_fd, const char *name, const JobSpec *spec,
                     int ret_join[static 2]);

typedef struct JobLimitHits {
        uint64_t oom_kills;             /* the OOM killer killed a task of the job */
        uint64_t pids_max;              /* forks refused at pids.max */
} JobLimitHits;
/* The job ended: read what its limits did (in v2_parent_fd/name if v2_parent_fd >= 0, else its v1 cgroups). */
void job_limits_finish(JobLimits *l, int v2_parent_fd, const char *name, JobLimitHits *ret);
/* Then remove its v1 cgroups (later, if tasks still linger). */
void job_limits_remove(JobLimits *l, const char *name);

/* Remove the v1 cgroups of ended jobs whose last tasks were still dying. */
void job_limits_retry_leftovers(JobLimits *l);

/* Whether a job's output file of this size reached its cap (a write beyond it failed with EFBIG). */
/* The supplementary groups a job may still run with; see job_limits_check_groups(). */
int job_limits_check_groups(const RtdConfig *cfg, uid_t uid, gid_t gid, gid_t *groups, size_t *n_groups,
                            char **ret_reason);
/* Pure helper, exposed for tests. */
int job_limits_parse_v1_self(const char *text, const char *controller, char **ret_path);

static inline bool job_limits_output_capped(uint64_t size, uint64_t cap) {
        return cap > 0 && size >= cap;
}
