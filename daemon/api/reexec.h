/* SPDX-License-Identifier: MIT */
/*
 * Re-exec in place: rtd replaces its own image by the binary it was started from (an upgraded one after a
 * package upgrade), same pid, so systemd's MainPID and the service cgroup with every job in it stay. The
 * listening sockets cross execve(); the new image adopts the restore journal and the running jobs.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "http/listen.h"

typedef struct Manager Manager;

/* In main(), first: remembers the binary and argv, and takes what a previous image handed over. */
void reexec_init(int argc, char **argv);
/* SIGUSR2 (systemctl kill -s USR2 rtd) asks for a re-exec, like POST /v1/daemon/reexec. */
int reexec_attach(Manager *m);
/* Called once the new image is ready: logs how long the re-exec took. */
void reexec_ready(Manager *m);
/* Sockets that crossed execve() were bound by rtd itself or by systemd: fixes l->activated. */
void reexec_fix_listeners(Listeners *l);

/*
 * Check the binary in a child (`rtd --check-upgrade`); on success schedule the re-exec (the loop ends
 * shortly after, once the answer is sent) and return 0. Otherwise -errno with *ret_reason saying why,
 * and nothing changes.
 */
int reexec_request(Manager *m, char **ret_reason);
bool reexec_pending(void);
/* After manager_free(): execve(). Returns only on failure (the caller starts over in this image). */
int reexec_exec(void);

/* {"binary", "count", "failures", "last_failure", "last_exec_msec"} for /v1/status. */
json_t *reexec_to_json(void);

/* `rtd --check-upgrade`: exits like a check; prints what it checked. */
int reexec_check_upgrade(const char *runtime_dir, const char *state_dir);
