/* SPDX-License-Identifier: MIT */
/*
 * The CPU topology from sysfs (devices/system/{cpu,node}), read through a dirfd of /sys so tests can use a
 * fixture tree: online/offline CPUs, packages, cores, SMT siblings, NUMA nodes, last-level-cache domains.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shared/fileio.h"
#include "shared/log.h"
#include "shared/parse-util.h"
#include "topology.h"

/* MAX_NUMNODES is at most 1 << NODES_SHIFT = 1024 on x86-64 and arm64; larger ids are not real nodes. */
#define TOPOLOGY_NODES_MAX 1024

static int read_cpulist_at(int dir_fd, const char *path, CpuSet *ret) {
        _cleanup_free_ char *s = NULL;
        int r;

        r = read_one_line_at(dir_fd, path, &s);
        if (r < 0)
                return r;
        r = cpuset_parse(s, ret, NULL);
        return r == -ENOMEM ? r : r < 0 ? -EBADMSG : 0;
}

static int read_int_at(int dir_fd, const char *path, int *ret) {
        _cleanup_free_ char *s = NULL;
        int r;

        r = read_one_line_at(dir_fd, path, &s);
        if (r < 0)
                return r;
        r = safe_atoi(s, ret);
        return r < 0 ? -EBADMSG : 0;
}

/* "node12" → 12; anything else (other entries of the directory) → -EINVAL. */
static int parse_node_name(const char *name, unsigned *ret) {
        const char *p = startswith(name, "node");

        return p ? safe_atou(p, ret) : -EINVAL;
}

/*
 * Node cpulists are the primary source. On x86 they drop offline CPUs, but the cpuN/nodeM link stays, so
 * the per-CPU pass fills in what is missing from the links.
 */
static int load_nodes(Topology *t, int sys_fd) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;

        d = opendir_at(sys_fd, "devices/system/node");
        if (!d)
                return errno == ENOENT ? 0 : -errno;   /* CONFIG_NUMA=n: no node directory at all */
        while ((errno = 0, de = readdir(d))) {
                char path[64];
                unsigned node;
                CpuSet cpus;
                int r;

                if (parse_node_name(de->d_name, &node) < 0 || node >= TOPOLOGY_NODES_MAX)
                        continue;
                snprintf(path, sizeof path, "node%u/cpulist", node);
                r = read_cpulist_at(dirfd(d), path, &cpus);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        log_debug_errno(r, "Cannot read node%u/cpulist, ignoring: %m", node);
                        continue;
                }
                CPUSET_FOREACH(cpu, &cpus)
                        if ((size_t) cpu < t->n_cpus)
                                t->cpus[cpu].node = (int) node;
        }
        return errno > 0 ? -errno : 0;
}

static int node_from_links(int cpu_fd) {
        _cleanup_closedir_ DIR *d = opendir_at(cpu_fd, ".");
        struct dirent *de;

        if (!d)
                return -1;
        while ((de = readdir(d))) {
                unsigned node;

                if (parse_node_name(de->d_name, &node) >= 0 && node < TOPOLOGY_NODES_MAX)
                        return (int) node;
        }
        return -1;
}

/*
 * The last-level cache is the data or unified cache with the highest level (instruction caches never are).
 * Its shared_cpu_list names the CPUs that share it; offline CPUs have no cache directory.
 */
static int read_llc(int cpu_fd, CpuSet *ret) {
        int best_level = -1;

        for (unsigned k = 0;; k++) {
                _cleanup_close_ int fd = -EBADF;
                _cleanup_free_ char *type = NULL;
                char path[32];
                int level;
                CpuSet shared;

                snprintf(path, sizeof path, "cache/index%u", k);
                fd = openat(cpu_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        break;          /* indices are contiguous from 0 */
                if (read_int_at(fd, "level", &level) < 0 || read_one_line_at(fd, "type", &type) < 0)
                        continue;
                if (!streq(type, "Unified") && !streq(type, "Data"))
                        continue;
                if (level <= best_level || read_cpulist_at(fd, "shared_cpu_list", &shared) < 0)
                        continue;
                best_level = level;
                *ret = shared;
        }
        return best_level < 0 ? -ENOENT : 0;
}

/* Finds or appends the LLC domain equal to set; returns its index. */
static int llc_index(Topology *t, const CpuSet *set) {
        int first = cpuset_first(set);
        CpuSet *n;

        /* Fast path: the domain's first CPU was loaded earlier and already registered it. */
        if (first >= 0 && (size_t) first < t->n_cpus && t->cpus[first].llc >= 0 &&
            cpuset_equal(&t->llcs[t->cpus[first].llc], set))
                return t->cpus[first].llc;
        for (size_t i = 0; i < t->n_llcs; i++)
                if (cpuset_equal(&t->llcs[i], set))
                        return (int) i;
        n = reallocarray(t->llcs, t->n_llcs + 1, sizeof *t->llcs);
        if (!n)
                return -ENOMEM;
        t->llcs = n;
        t->llcs[t->n_llcs] = *set;
        return (int) t->n_llcs++;
}

static int load_cpu(Topology *t, int cpu_dir_fd, unsigned cpu) {
        TopologyCpu *c = &t->cpus[cpu];
        _cleanup_close_ int fd = -EBADF;
        char name[32];
        CpuSet llc;
        int r;

        snprintf(name, sizeof name, "cpu%u", cpu);
        fd = openat(cpu_dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;    /* possible but not present: a hole */
        c->present = true;

        /* x86 removes topology/ and cache/ of offline CPUs; other architectures keep them. */
        if (read_int_at(fd, "topology/physical_package_id", &c->package) < 0)
                c->package = -1;
        if (read_int_at(fd, "topology/core_id", &c->core) < 0)
                c->core = -1;
        if (read_cpulist_at(fd, "topology/thread_siblings_list", &c->siblings) < 0 ||
            !cpuset_isset(&c->siblings, cpu)) {
                cpuset_zero(&c->siblings);
                cpuset_set(&c->siblings, cpu);
        }
        if (c->node < 0)
                c->node = node_from_links(fd);

        if (c->online && read_llc(fd, &llc) >= 0) {
                r = llc_index(t, &llc);
                if (r < 0)
                        return r;
                c->llc = r;
        }
        return 0;
}

static int count_distinct_packages(const Topology *t, unsigned *ret) {
        _cleanup_free_ int *seen = NULL;
        unsigned n = 0;

        seen = calloc(t->n_cpus ?: 1, sizeof *seen);
        if (!seen)
                return -ENOMEM;
        CPUSET_FOREACH(cpu, &t->online) {
                int p = t->cpus[cpu].package;
                bool dup = false;

                if (p < 0)
                        continue;
                for (unsigned i = 0; i < n && !dup; i++)
                        dup = seen[i] == p;
                if (!dup)
                        seen[n++] = p;
        }
        *ret = n;
        return 0;
}

static int compute_summary(Topology *t) {
        int max_node = -1, r;

        /* A core is counted at its first online thread; core_id is only unique within a package. */
        CPUSET_FOREACH(cpu, &t->online) {
                CpuSet threads;
                unsigned n;

                cpuset_and(&threads, &t->cpus[cpu].siblings, &t->online);
                n = cpuset_count(&threads);
                if (cpuset_first(&threads) == cpu)
                        t->n_cores++;
                t->threads_per_core = MAX(t->threads_per_core, n);
        }
        t->smt = t->threads_per_core > 1;

        r = count_distinct_packages(t, &t->n_packages);
        if (r < 0)
                return r;

        for (size_t i = 0; i < t->n_cpus; i++)
                max_node = MAX(max_node, t->cpus[i].node);
        if (max_node >= 0) {
                t->n_node_slots = (size_t) max_node + 1;
                t->nodes = calloc(t->n_node_slots, sizeof *t->nodes);
                if (!t->nodes)
                        return -ENOMEM;
                for (size_t i = 0; i < t->n_cpus; i++)
                        if (t->cpus[i].node >= 0)
                                cpuset_set(&t->nodes[t->cpus[i].node], (unsigned) i);
                for (size_t n = 0; n < t->n_node_slots; n++)
                        if (cpuset_intersects(&t->nodes[n], &t->online))
                                t->n_nodes++;
        }
        return 0;
}

int topology_load(int sys_fd, Topology **ret) {
        _cleanup_(topology_freep) Topology *t = NULL;
        _cleanup_close_ int cpu_fd = -EBADF;
        int r;

        cpu_fd = openat(sys_fd, "devices/system/cpu", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cpu_fd < 0)
                return log_debug_errno(-errno, "Cannot open devices/system/cpu: %m");

        t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        r = read_cpulist_at(cpu_fd, "possible", &t->possible);
        if (r < 0)
                return log_debug_errno(r, "Cannot read devices/system/cpu/possible: %m");
        if (cpuset_is_empty(&t->possible))
                return log_debug_errno(SYNTHETIC_ERRNO(EBADMSG), "devices/system/cpu/possible is empty");
        r = read_cpulist_at(cpu_fd, "present", &t->present);
        if (r == -ENOENT)
                t->present = t->possible;
        else if (r < 0)
                return log_debug_errno(r, "Cannot read devices/system/cpu/present: %m");
        r = read_cpulist_at(cpu_fd, "online", &t->online);
        if (r == -ENOENT)
                t->online = t->present;
        else if (r < 0)
                return log_debug_errno(r, "Cannot read devices/system/cpu/online: %m");
        /* Never trust a CPU the kernel does not call possible. */
        cpuset_and(&t->present, &t->present, &t->possible);
        cpuset_and(&t->online, &t->online, &t->present);
        if (cpuset_is_empty(&t->online))
                return log_debug_errno(SYNTHETIC_ERRNO(EBADMSG),
                                       "No online CPUs in devices/system/cpu/online");

        t->nr_cpu_ids = (unsigned) cpuset_last(&t->possible) + 1;
        t->n_cpus = t->nr_cpu_ids;
        t->cpus = calloc(t->n_cpus, sizeof *t->cpus);
        if (!t->cpus)
                return -ENOMEM;
        for (unsigned i = 0; i < t->n_cpus; i++) {
                t->cpus[i] = (TopologyCpu) {
                        .cpu = i,
                        .online = cpuset_isset(&t->online, i),
                        .package = -1,
                        .core = -1,
                        .node = -1,
                        .llc = -1,
                };
                cpuset_set(&t->cpus[i].siblings, i);   /* until thread_siblings_list says otherwise */
        }

        r = load_nodes(t, sys_fd);
        if (r < 0)
                return log_debug_errno(r, "Cannot read devices/system/node: %m");
        CPUSET_FOREACH(cpu, &t->possible) {
                r = load_cpu(t, cpu_fd, (unsigned) cpu);
                if (r < 0)
                        return log_debug_errno(r, "Cannot read devices/system/cpu/cpu%d: %m", cpu);
        }
        r = compute_summary(t);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(t);
        return 0;
}

Topology *topology_free(Topology *t) {
        if (!t)
                return NULL;
        free(t->cpus);
        free(t->nodes);
        free(t->llcs);
        free(t);
        return NULL;
}

const TopologyCpu *topology_cpu(const Topology *t, unsigned cpu) {
        if (cpu >= t->n_cpus || !cpuset_isset(&t->possible, cpu))
                return NULL;
        return &t->cpus[cpu];
}

void topology_default_reserved(const Topology *t, CpuSet *ret) {
        int first = cpuset_first(&t->online);
        CpuSet housekeeping = {};

        /* The first online core (all its threads) keeps the system running; everything else is reserved. */
        if (first >= 0)
                cpuset_or(&housekeeping, &housekeeping, &t->cpus[first].siblings);
        cpuset_andnot(ret, &t->online, &housekeeping);
}

void topology_with_siblings(const Topology *t, const CpuSet *set, CpuSet *ret) {
        CpuSet siblings = {}, r;

        CPUSET_FOREACH(cpu, set)
                if ((size_t) cpu < t->n_cpus)
                        cpuset_or(&siblings, &siblings, &t->cpus[cpu].siblings);
        /* Architectures that keep offline threads in thread_siblings_list must not add them. */
        cpuset_and(&siblings, &siblings, &t->online);
        cpuset_or(&r, set, &siblings);
        *ret = r;
}

static int set_error(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int set_error(char **ret_error, const char *fmt, ...) {
        va_list ap;
        char *s;

        if (!ret_error)
                return -EINVAL;
        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        if (!s)
                return -ENOMEM;
        *ret_error = s;
        return -EINVAL;
}

/* cpuset_parse() says which part is bad; this says why. */
static int explain_syntax_error(const Topology *t, const char *input, const char *bad, int r,
                                char **ret_error) {
        unsigned lo, hi;
        int n = -1;
        CpuSet tmp;

        if (r == -ERANGE) {
                _cleanup_free_ char *possible = NULL;

                if (cpuset_format(&t->possible, &possible) < 0)
                        return -ENOMEM;
                return set_error(ret_error, "%s: CPU number too large (possible CPUs: %s)", bad, possible);
        }
        if (!*bad)
                return set_error(ret_error, "\"%s\": empty entry between commas", input);
        if (streq(bad, ","))
                return set_error(ret_error, "\"%s\": trailing comma", input);
        if (sscanf(bad, "%u-%u%n", &lo, &hi, &n) == 2 && n == (int) strlen(bad) && hi < lo)
                return set_error(ret_error, "%s: reversed range (write %u-%u)", bad, hi, lo);
        if (cpuset_parse(bad, &tmp, NULL) == 0)
                return set_error(ret_error, "%s: overlaps an earlier entry (list each CPU once)", bad);
        return set_error(ret_error, "%s: not a CPU number or range (expected a list like 0-3,8)", bad);
}

/* Names the first comma-separated part of s that holds CPUs that are not online. */
static int explain_not_online(const Topology *t, const char *s, char **ret_error) {
        _cleanup_free_ char *copy = NULL, *online = NULL, *missing = NULL;
        char *p, *part, *save = NULL;
        size_t len;

        copy = strdup(s);
        if (!copy || cpuset_format(&t->online, &online) < 0)
                return -ENOMEM;
        p = copy + strspn(copy, " \t\n");
        len = strlen(p);
        while (len > 0 && strchr(" \t\n", p[len - 1]))
                p[--len] = 0;

        for (part = strtok_r(p, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
                CpuSet set, bad, absent;
                unsigned n;

                if (cpuset_parse(part, &set, NULL) < 0)
                        continue;
                cpuset_andnot(&bad, &set, &t->online);
                n = cpuset_count(&bad);
                if (n == 0)
                        continue;
                if (cpuset_format(&bad, &missing) < 0)
                        return -ENOMEM;
                cpuset_andnot(&absent, &bad, &t->present);
                if (cpuset_equal(&absent, &bad))
                        return set_error(ret_error, "%s: CPU%s %s %s not exist on this machine (online: %s)",
                                         part, n > 1 ? "s" : "", missing, n > 1 ? "do" : "does", online);
                return set_error(ret_error, "%s: CPU%s %s %s not online (online: %s)",
                                 part, n > 1 ? "s" : "", missing, n > 1 ? "are" : "is", online);
        }
        return set_error(ret_error, "%s: CPUs not online (online: %s)", s, online);
}

int topology_parse_online_cpus(const Topology *t, const char *s, CpuSet *ret, char **ret_error) {
        _cleanup_free_ char *bad = NULL;
        CpuSet set;
        int r;

        r = cpuset_parse(s, &set, &bad);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return explain_syntax_error(t, s, strempty(bad), r, ret_error);
        if (!cpuset_is_subset(&set, &t->online))
                return explain_not_online(t, s, ret_error);
        *ret = set;
        return 0;
}

static json_t *cpuset_to_json(const CpuSet *s) {
        _cleanup_free_ char *str = NULL;

        if (cpuset_format(s, &str) < 0)
                return NULL;
        return json_string(str);
}

static json_t *int_or_null(int v) {
        return v < 0 ? json_null() : json_integer(v);
}

static json_t *cpu_to_json(const TopologyCpu *c) {
        return json_pack("{s:i, s:b, s:b, s:o, s:o, s:o, s:o, s:o}",
                         "cpu", (int) c->cpu,
                         "present", c->present,
                         "online", c->online,
                         "package", int_or_null(c->package),
                         "core", int_or_null(c->core),
                         "node", int_or_null(c->node),
                         "llc", int_or_null(c->llc),
                         "siblings", c->online ? cpuset_to_json(&c->siblings) : json_null());
}

/*
 * {"possible", "present", "online", "offline": CPU lists, "nr_cpu_ids", "packages", "cores",
 *  "threads_per_core", "smt", "numa_nodes", "nodes": [{"node", "cpus"}], "llc_domains": [{"llc", "cpus"}],
 *  "cpus": [{"cpu", "present", "online", "package", "core", "node", "llc", "siblings"}]}
 * Counts are over online CPUs; unknown values are null.
 */
json_t *topology_to_json(const Topology *t) {
        _cleanup_(json_decrefp) json_t *nodes = json_array(), *llcs = json_array(), *cpus = json_array();
        CpuSet offline;

        if (!nodes || !llcs || !cpus)
                return NULL;
        for (size_t n = 0; n < t->n_node_slots; n++)
                if (!cpuset_is_empty(&t->nodes[n]) &&
                    json_array_append_new(nodes, json_pack("{s:i, s:o}", "node", (int) n,
                                                           "cpus", cpuset_to_json(&t->nodes[n]))) < 0)
                        return NULL;
        for (size_t i = 0; i < t->n_llcs; i++)
                if (json_array_append_new(llcs, json_pack("{s:i, s:o}", "llc", (int) i,
                                                          "cpus", cpuset_to_json(&t->llcs[i]))) < 0)
                        return NULL;
        CPUSET_FOREACH(cpu, &t->possible)
                if (json_array_append_new(cpus, cpu_to_json(&t->cpus[cpu])) < 0)
                        return NULL;

        cpuset_andnot(&offline, &t->possible, &t->online);
        return json_pack("{s:o, s:o, s:o, s:o, s:i, s:i, s:i, s:i, s:b, s:i, s:O, s:O, s:O}",
                         "possible", cpuset_to_json(&t->possible),
                         "present", cpuset_to_json(&t->present),
                         "online", cpuset_to_json(&t->online),
                         "offline", cpuset_to_json(&offline),
                         "nr_cpu_ids", (int) t->nr_cpu_ids,
                         "packages", (int) t->n_packages,
                         "cores", (int) t->n_cores,
                         "threads_per_core", (int) t->threads_per_core,
                         "smt", t->smt,
                         "numa_nodes", (int) t->n_nodes,
                         "nodes", nodes,
                         "llc_domains", llcs,
                         "cpus", cpus);
}
