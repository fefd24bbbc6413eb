/* SPDX-License-Identifier: MIT */
/* The machine's CPU topology from sysfs, read through a root dirfd so tests can point it at a fixture. */
#pragma once

#include <jansson.h>

#include "shared/cpuset.h"
#include "shared/macro.h"

typedef struct TopologyCpu {
        unsigned cpu;
        bool present;           /* has a cpuN directory (possible CPUs may be absent: holes) */
        bool online;
        int package;            /* physical_package_id, -1 unknown */
        int core;               /* core_id (unique only within a package) */
        int node;               /* NUMA node, -1 unknown */
        int llc;                /* index of the last-level-cache domain in Topology.llcs, -1 unknown */
        CpuSet siblings;        /* SMT siblings including itself (thread_siblings_list) */
} TopologyCpu;

typedef struct Topology {
        CpuSet possible;
        CpuSet present;
        CpuSet online;
        unsigned nr_cpu_ids;            /* highest possible CPU + 1 (mask width the kernel wants) */
        TopologyCpu *cpus;              /* indexed by CPU number, n_cpus = nr_cpu_ids */
        size_t n_cpus;
        unsigned n_packages, n_cores, n_nodes;  /* counted over online CPUs */
        CpuSet *nodes;                  /* CPUs per NUMA node, indexed by node id, n_node_slots long */
        size_t n_node_slots;
        CpuSet *llcs;                   /* CPUs per last-level-cache domain */
        size_t n_llcs;
        bool smt;                       /* any online core has more than one thread */
        unsigned threads_per_core;      /* most online threads seen on one core */
} Topology;

/* sys_fd is a dirfd of /sys (or a fixture's sys/). */
int topology_load(int sys_fd, Topology **ret);
Topology *topology_free(Topology *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(Topology *, topology_free);

const TopologyCpu *topology_cpu(const Topology *t, unsigned cpu);      /* NULL if not possible */
/* The default reservation: every online CPU except the first online core and its SMT siblings. */
void topology_default_reserved(const Topology *t, CpuSet *ret);
/* The set plus all SMT siblings of its CPUs. */
void topology_with_siblings(const Topology *t, const CpuSet *set, CpuSet *ret);
/*
 * Parse a CPU list and check every CPU is online. On error returns -EINVAL, leaves *ret alone, and
 * *ret_error (if non-NULL; caller frees) says which part is wrong and why: "77: CPU 77 is not online
 * (online: 0-76,78-127)", "3-1: reversed range (write 1-3)", "9: CPU 9 does not exist on this machine
 * (online: 0-1)". The empty string is the empty set.
 */
int topology_parse_online_cpus(const Topology *t, const char *s, CpuSet *ret, char **ret_error);

/* The GET /v1/topology body; see the comment above its definition for the keys. NULL on ENOMEM. */
json_t *topology_to_json(const Topology *t);
