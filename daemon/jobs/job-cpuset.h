/* SPDX-License-Identifier: MIT */
/* Job cpusets: the kernel, not the starting affinity, holds each job on its CPUs (cgroup v2 or v1 cpuset). */
#pragma once

#include <stdbool.h>

#include "shared/cpuset.h"

typedef enum CpuEnforcement {
        CPU_ENFORCE_AFFINITY,   /* no cpuset: the starting affinity, and the job drift check puts tasks back */
        CPU_ENFORCE_V2,         /* cpuset.cpus of the job's cgroup v2 */
        CPU_ENFORCE_V1,         /* a job cpuset in the cgroup v1 cpuset hierarchy (hybrid hosts) */
} CpuEnforcement;

typedef struct JobCpusets {
        CpuEnforcement mode;
        int v1_fd;              /* V1: the v1 cpuset directory job cpusets are made in (rtd's own), else -EBADF */
        char *v1_path;
        char *v1_mems;          /* V1: the memory nodes every job cpuset gets (its parent's) */
        char *reason;           /* AFFINITY: why no cpuset holds jobs */
} JobCpusets;

const char *cpu_enforcement_to_string(CpuEnforcement m);

/*
 * Decide how jobs are held on their CPUs: the cpuset controller enabled for the job cgroups in v2_dir_fd
 * (-EBADF: no job cgroups; rtd and its children move into its leaf `self` first if they live there), else
 * the v1 cpuset hierarchy found through proc_fd, else affinity only.
 */
void job_cpusets_setup(int proc_fd, int v2_dir_fd, const char *v2_path, const char *self, const char *probe_name,
                       JobCpusets *ret);
void job_cpusets_done(JobCpusets *c);

/*
 * Give the job cgroup v2_dir_fd/name (made already; ignored unless V2) its CPUs, or make the job's v1 cpuset
 * with them: returns its directory fd (close-on-exec, V1), 0 (V2), or -errno. Nothing to do for AFFINITY.
 */
int job_cpuset_make(const JobCpusets *c, int v2_dir_fd, const char *name, const CpuSet *cpus);
/* Remove the job's v1 cpuset (ENOENT is fine; EBUSY: tasks are still dying in it). */
int job_cpuset_remove(const JobCpusets *c, const char *name);

/*
 * Send sig to every process listed in dir_fd/name/cgroup.procs, again and again until it is empty or
 * `passes` passes are done: what v1 has instead of cgroup.kill. 0: empty; -EBUSY: tasks remain (in an
 * uninterruptible sleep, say); -ENOENT: no such cgroup.
 */
int cgroup_kill_procs(int dir_fd, const char *name, int sig, unsigned passes);

/* Pure helpers, exposed for tests: the v1 cpuset mount (mount point and root) and our path in it. */
int job_cpusets_parse_v1_mount(const char *mountinfo, char **ret_mount, char **ret_root);
int job_cpusets_parse_v1_self(const char *self_cgroup, char **ret_path);
/* Whether a cgroup.controllers / cgroup.subtree_control line names the controller. */
bool cgroup_list_has(const char *list, const char *controller);
