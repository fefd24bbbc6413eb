/* SPDX-License-Identifier: MIT */
/* Per-job cgroups on a writable cgroup v2 hierarchy: discovery, the RT-group-scheduling trap, tree signals. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct JobCgroups {
        int dir_fd;             /* where job cgroups are made (rtd's own cgroup), -EBADF when unusable */
        char *path;
        char *reason;           /* why not usable, or NULL */
        bool rt_group_trap;     /* SCHED_FIFO is refused inside a child cgroup (CONFIG_RT_GROUP_SCHED) */
} JobCgroups;

/* Find the cgroup2 mount and our cgroup through proc_fd, check we can make children, probe the RT trap. */
void job_cgroups_setup(int proc_fd, const char *probe_name, JobCgroups *ret);
void job_cgroups_done(JobCgroups *c);

/* Signal every process in dir_fd/name: SIGKILL through cgroup.kill, others through cgroup.procs. */
int job_cgroup_signal(int dir_fd, const char *name, int sig);
/* Make dir_fd/name (or take it if it exists); its directory fd (close-on-exec) and cgroup id, or -errno. */
int job_cgroup_make(int dir_fd, const char *name, uint64_t *ret_id);
int job_cgroup_remove(int dir_fd, const char *name);

/* Pure helpers, exposed for tests. */
int job_cgroups_parse_mountinfo(const char *text, char **ret_mount, char **ret_root);
int job_cgroups_parse_self(const char *text, char **ret_path);
