/* SPDX-License-Identifier: MIT */
/* What this host offers (probe.c): shared by the three backends, which never call each other. */
#pragma once

#include <stdbool.h>

#include "core/config.h"

/* Whether proc_fd is a real procfs (not a fixture tree): tasks are only touched on a real one. */
bool proc_is_procfs(int proc_fd);
bool systemd_running(void);

/* The top-level units the systemd backend shrinks to the housekeeping CPUs, and whether unit is one. */
#define SYSTEMD_N_SHRUNK_UNITS 4
extern const char *const systemd_shrunk_units[SYSTEMD_N_SHRUNK_UNITS];
bool systemd_unit_is_shrunk(const char *unit);

/* cgroup v2 mounted at /sys/fs/cgroup with the cpuset controller available. */
bool cgroup_v2_cpuset_available(int sys_fd, char **ret_reason);
/* rtd's own cgroup v2 path ("/rtd.slice/rtd.service"), and the top-level cgroup of a path. */
int own_cgroup(int proc_fd, char **ret);
char *cgroup_top(const char *path);

/* Which backend can run here, and why (for status). wanted may be BACKEND_AUTO. On -EOPNOTSUPP,
 * *ret_reason says why the wanted backend cannot run. */
int backend_detect(int proc_fd, int sys_fd, BackendKind wanted, BackendKind *ret, char **ret_reason);
