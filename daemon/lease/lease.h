/* SPDX-License-Identifier: MIT */
/* Leases: CPUs quieted for a process tree rtd did not start (a Slurm step), bound to its root's pidfd. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "shared/cpuset.h"
#include "shared/macro.h"

typedef struct Manager Manager;
typedef struct Leases Leases;
typedef struct Lease Lease;

#define LEASE_OWNER_MAX 64
#define LEASES_MAX 64                   /* active at once: bounds the metric series */
#define LEASE_JOB_ID_BASE (UINT64_C(1) << 62)   /* metrics' job id of lease N: BASE + N */
#define LEASES_DIR "leases"             /* under RuntimeDirectory=: leases.json and their restore journal */

typedef struct LeaseRequest {
        CpuSet cpus;
        const char *owner;
        pid_t pid;
        unsigned priority;              /* 0: no real-time policy */
        const char *policy;             /* "fifo", "rr", or NULL */
        uid_t uid;                      /* the caller */
        const char *user;
        bool admin;                     /* root or AdminGroup=: may lease for any process */
} LeaseRequest;

/* Loads the leases a previous run left: a live root is re-adopted as it stands, a dead one released. */
int leases_new(Manager *m, Leases **ret);
/* Frees without releasing: active leases (and their journal) stay for the next run to adopt. */
Leases *leases_free(Leases *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(Leases *, leases_free);

/* Validates, quiets the CPUs, persists. On refusal: -errno, *ret_status the HTTP status, *ret_error why. */
int lease_create(Leases *l, const LeaseRequest *req, Lease **ret, int *ret_status, char **ret_error);
/* Ends a lease and gives its CPUs back as found. Idempotent. */
int lease_release(Leases *l, Lease *x, const char *reason);
Lease *lease_find(Leases *l, uint64_t id);
/* Every other task has been walked off the lease's CPUs since it began (lease-quiet.c: its first walk came
 * round; on a crowded node that takes several passes, one per loop turn). */
bool lease_quieted(const Lease *x);
/* fn(x, userdata) once, when x is quieted or has ended, whichever comes first (at once if it is already);
 * one waiter per lease; fn NULL cancels. The API answers a POST so (api-leases.c). */
typedef void (*LeaseQuietFn)(Lease *x, void *userdata);
void lease_on_quieted(Lease *x, LeaseQuietFn fn, void *userdata);
bool lease_is_active(const Lease *x);
uid_t lease_uid(const Lease *x);
void leases_cpus(Leases *l, CpuSet *ret);       /* union of the active leases' CPUs */
/* The active lease using one of cpus, or NULL (reservation_validate() refuses such CPUs). */
Lease *leases_overlap(Leases *l, const CpuSet *cpus);
/* The active leases' root pids (trees a walk over /proc leaves alone); returns how many. */
size_t leases_pids(Leases *l, pid_t *ret, size_t max);
uint64_t lease_id(const Lease *x);
const char *lease_owner(const Lease *x);
unsigned leases_active(Leases *l);

json_t *lease_to_json(Leases *l, const Lease *x);
json_t *leases_to_json(Leases *l);              /* {"leases": [...]}: active, then recently ended */
/* rtd_lease_* series, one set per active lease. */
void leases_render_prometheus(Leases *l, FILE *f);

/* `rtd --restore`: replay the leases' restore journal, forget the leases. */
int leases_restore_only(int proc_fd, int sys_fd, int runtime_fd);
