/* SPDX-License-Identifier: MIT */
/*
 * Topology from the sysfs fixtures in tests/fixtures/<name>/sys (RTD_FIXTURES, or the path compiled in):
 * counts, siblings, NUMA nodes, LLC domains, the default reservation, offline CPUs and holes, CPU lists.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/topology.h"
#include "shared/fileio.h"
#include "shared/macro.h"

#ifndef RTD_FIXTURES_DIR
#define RTD_FIXTURES_DIR "tests/fixtures"
#endif

static const char *fixtures_dir(void) {
        return getenv("RTD_FIXTURES") ?: RTD_FIXTURES_DIR;
}

static Topology *load_fixture(const char *name) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        Topology *t = NULL;

        assert_true(asprintf(&path, "%s/%s/sys", fixtures_dir(), name) > 0);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                fail_msg("fixture %s: %s (set RTD_FIXTURES to tests/fixtures)", path, strerror(errno));
        assert_int_equal(topology_load(fd, &t), 0);
        assert_non_null(t);
        return t;
}

static void assert_set(const CpuSet *set, const char *expected) {
        _cleanup_free_ char *s = NULL;

        assert_int_equal(cpuset_format(set, &s), 0);
        assert_string_equal(s, expected);
}

static CpuSet set_of(const char *s) {
        CpuSet set;

        assert_int_equal(cpuset_parse(s, &set, NULL), 0);
        return set;
}

static void assert_siblings(const Topology *t, unsigned cpu, const char *expected) {
        const TopologyCpu *c = topology_cpu(t, cpu);

        assert_non_null(c);
        assert_set(&c->siblings, expected);
}

static void assert_default_reserved(const Topology *t, const char *expected) {
        CpuSet r;

        topology_default_reserved(t, &r);
        assert_set(&r, expected);
}

/* Parses s against t's online CPUs, expects failure with exactly this message, and *ret untouched. */
static void assert_parse_error(const Topology *t, const char *s, const char *message) {
        _cleanup_free_ char *error = NULL;
        CpuSet set = set_of("4000");

        assert_int_equal(topology_parse_online_cpus(t, s, &set, &error), -EINVAL);
        assert_non_null(error);
        assert_string_equal(error, message);
        assert_set(&set, "4000");
}

static void assert_parse_ok(const Topology *t, const char *s, const char *expected) {
        _cleanup_free_ char *error = NULL;
        CpuSet set;

        assert_int_equal(topology_parse_online_cpus(t, s, &set, &error), 0);
        assert_null(error);
        assert_set(&set, expected);
}

/* Captured from the 2-vCPU development VM: one package, two cores, no SMT, cpu0 without an online file. */
static void test_vm_2cpu(void **state) {
        _cleanup_(topology_freep) Topology *t = load_fixture("vm-2cpu");

        assert_set(&t->possible, "0-1");
        assert_set(&t->online, "0-1");
        assert_int_equal(t->nr_cpu_ids, 2);
        assert_int_equal(t->n_cpus, 2);
        assert_int_equal(t->n_packages, 1);
        assert_int_equal(t->n_cores, 2);
        assert_int_equal(t->threads_per_core, 1);
        assert_false(t->smt);
        assert_int_equal(t->n_nodes, 1);
        assert_set(&t->nodes[0], "0-1");
        assert_int_equal(t->n_llcs, 1);
        assert_set(&t->llcs[0], "0-1");
        assert_siblings(t, 0, "0");
        assert_siblings(t, 1, "1");
        assert_int_equal(topology_cpu(t, 1)->core, 1);
        assert_int_equal(topology_cpu(t, 1)->llc, 0);
        assert_null(topology_cpu(t, 2));
        assert_default_reserved(t, "1");

        assert_parse_ok(t, "1", "1");
        assert_parse_ok(t, "0-1", "0-1");
        assert_parse_ok(t, "", "");
        assert_parse_error(t, "9", "9: CPU 9 does not exist on this machine (online: 0-1)");
        assert_parse_error(t, "1-3", "1-3: CPUs 2-3 do not exist on this machine (online: 0-1)");
}

/* Intel laptop: SMT siblings are 0,2 and 1,3, so the first core is CPUs 0 and 2. */
static void test_laptop_2c4t(void **state) {
        _cleanup_(topology_freep) Topology *t = load_fixture("laptop-2c4t");
        CpuSet r;

        assert_set(&t->online, "0-3");
        assert_int_equal(t->n_packages, 1);
        assert_int_equal(t->n_cores, 2);
        assert_int_equal(t->threads_per_core, 2);
        assert_true(t->smt);
        assert_int_equal(t->n_nodes, 1);
        /* L1 and L2 are per core; the LLC is the shared L3. */
        assert_int_equal(t->n_llcs, 1);
        assert_set(&t->llcs[0], "0-3");
        assert_siblings(t, 0, "0,2");
        assert_siblings(t, 3, "1,3");
        assert_default_reserved(t, "1,3");

        r = set_of("1");
        topology_with_siblings(t, &r, &r);
        assert_set(&r, "1,3");
        r = set_of("0-1");
        topology_with_siblings(t, &r, &r);
        assert_set(&r, "0-3");
}

/* 2 sockets x 4 cores x 2 threads, core_id 0-3 on both sockets, siblings N and N+8, a node and L3 each. */
static void test_xeon_2s16t(void **state) {
        _cleanup_(topology_freep) Topology *t = load_fixture("xeon-2s16t");
        const TopologyCpu *c;

        assert_set(&t->online, "0-15");
        assert_int_equal(t->n_packages, 2);
        assert_int_equal(t->n_cores, 8);        /* not 4: core_id repeats across packages */
        assert_int_equal(t->threads_per_core, 2);
        assert_int_equal(t->n_nodes, 2);
        assert_int_equal(t->n_node_slots, 2);
        assert_set(&t->nodes[0], "0-3,8-11");
        assert_set(&t->nodes[1], "4-7,12-15");
        assert_int_equal(t->n_llcs, 2);
        assert_set(&t->llcs[0], "0-3,8-11");
        assert_set(&t->llcs[1], "4-7,12-15");
        assert_siblings(t, 5, "5,13");
        assert_siblings(t, 13, "5,13");

        c = topology_cpu(t, 12);
        assert_non_null(c);
        assert_int_equal(c->package, 1);
        assert_int_equal(c->core, 0);
        assert_int_equal(c->node, 1);
        assert_int_equal(c->llc, 1);
        assert_true(c->online);
        assert_true(c->present);

        assert_default_reserved(t, "1-7,9-15");
        assert_parse_ok(t, "1-3,8", "1-3,8");
        assert_parse_error(t, "1-16", "1-16: CPU 16 does not exist on this machine (online: 0-15)");
}

/*
 * 128 CPUs in 2 sockets with 16 L3 domains (CCX of 4 cores / 8 threads), 2 nodes, CPU 77 offline (no
 * topology/ or cache/), and possible 0-129 with 128-129 not present.
 */
static void test_epyc_128(void **state) {
        _cleanup_(topology_freep) Topology *t = load_fixture("epyc-128");
        const TopologyCpu *c;
        CpuSet r;

        assert_set(&t->possible, "0-129");
        assert_set(&t->present, "0-127");
        assert_set(&t->online, "0-76,78-127");
        assert_int_equal(t->nr_cpu_ids, 130);
        assert_int_equal(t->n_packages, 2);
        assert_int_equal(t->n_cores, 64);       /* core 13 still has its online thread 13 */
        assert_int_equal(t->threads_per_core, 2);
        assert_true(t->smt);
        assert_int_equal(t->n_nodes, 2);
        /* The node's cpulist drops the offline CPU; its cpu77/node0 link still places it. */
        assert_set(&t->nodes[0], "0-31,64-95");
        assert_set(&t->nodes[1], "32-63,96-127");
        assert_int_equal(t->n_llcs, 16);
        assert_set(&t->llcs[0], "0-3,64-67");
        assert_set(&t->llcs[15], "60-63,124-127");
        assert_siblings(t, 0, "0,64");
        assert_siblings(t, 100, "36,100");
        assert_siblings(t, 13, "13");

        c = topology_cpu(t, 13);
        assert_set(&t->llcs[c->llc], "12-15,76,78-79");
        assert_int_equal(c->package, 0);
        assert_int_equal(c->core, 13);

        c = topology_cpu(t, 77);
        assert_non_null(c);
        assert_true(c->present);
        assert_false(c->online);
        assert_int_equal(c->package, -1);
        assert_int_equal(c->core, -1);
        assert_int_equal(c->llc, -1);
        assert_int_equal(c->node, 0);

        c = topology_cpu(t, 128);
        assert_non_null(c);                     /* possible ... */
        assert_false(c->present);               /* ... but a hole */
        assert_false(c->online);
        assert_int_equal(c->node, -1);
        assert_null(topology_cpu(t, 130));

        topology_default_reserved(t, &r);
        assert_set(&r, "1-63,65-76,78-127");
        assert_int_equal(cpuset_count(&r), 125);

        r = set_of("13,36");
        topology_with_siblings(t, &r, &r);
        assert_set(&r, "13,36,100");            /* 77 is offline: not added */

        assert_parse_ok(t, "1-76,78-127", "1-76,78-127");
        assert_parse_error(t, "70-80", "70-80: CPU 77 is not online (online: 0-76,78-127)");
        assert_parse_error(t, "1,77,128", "77: CPU 77 is not online (online: 0-76,78-127)");
        assert_parse_error(t, "1,128-129",
                           "128-129: CPUs 128-129 do not exist on this machine (online: 0-76,78-127)");
        assert_parse_error(t, "76-128", "76-128: CPUs 77,128 are not online (online: 0-76,78-127)");
}

static void test_parse_syntax_errors(void **state) {
        _cleanup_(topology_freep) Topology *t = load_fixture("xeon-2s16t");

        assert_parse_error(t, "3-1", "3-1: reversed range (write 1-3)");
        assert_parse_error(t, "1,abc", "abc: not a CPU number or range (expected a list like 0-3,8)");
        assert_parse_error(t, "1-", "1-: not a CPU number or range (expected a list like 0-3,8)");
        assert_parse_error(t, "1,2,1", "1: overlaps an earlier entry (list each CPU once)");
        assert_parse_error(t, "0-3,2-5", "2-5: overlaps an earlier entry (list each CPU once)");
        assert_parse_error(t, "1,", "\"1,\": trailing comma");
        assert_parse_error(t, "1,,2", "\"1,,2\": empty entry between commas");
        assert_parse_error(t, "5000", "5000: CPU number too large (possible CPUs: 0-15)");
        /* Without ret_error the result is the same, just unexplained. */
        CpuSet set;
        assert_int_equal(topology_parse_online_cpus(t, "3-1", &set, NULL), -EINVAL);
        assert_int_equal(topology_parse_online_cpus(t, "99", &set, NULL), -EINVAL);
}

static void test_json(void **state) {
        _cleanup_(topology_freep) Topology *t = load_fixture("epyc-128");
        json_t *j = topology_to_json(t), *cpus, *c;

        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "online")), "0-76,78-127");
        assert_string_equal(json_string_value(json_object_get(j, "offline")), "77,128-129");
        assert_string_equal(json_string_value(json_object_get(j, "present")), "0-127");
        assert_int_equal(json_integer_value(json_object_get(j, "packages")), 2);
        assert_int_equal(json_integer_value(json_object_get(j, "cores")), 64);
        assert_int_equal(json_integer_value(json_object_get(j, "threads_per_core")), 2);
        assert_int_equal(json_integer_value(json_object_get(j, "numa_nodes")), 2);
        assert_true(json_is_true(json_object_get(j, "smt")));
        assert_int_equal(json_array_size(json_object_get(j, "nodes")), 2);
        c = json_array_get(json_object_get(j, "nodes"), 1);
        assert_int_equal(json_integer_value(json_object_get(c, "node")), 1);
        assert_string_equal(json_string_value(json_object_get(c, "cpus")), "32-63,96-127");
        assert_int_equal(json_array_size(json_object_get(j, "llc_domains")), 16);

        cpus = json_object_get(j, "cpus");
        assert_int_equal(json_array_size(cpus), 130);
        c = json_array_get(cpus, 13);
        assert_int_equal(json_integer_value(json_object_get(c, "cpu")), 13);
        assert_string_equal(json_string_value(json_object_get(c, "siblings")), "13");
        assert_int_equal(json_integer_value(json_object_get(c, "node")), 0);
        c = json_array_get(cpus, 77);
        assert_true(json_is_false(json_object_get(c, "online")));
        assert_true(json_is_true(json_object_get(c, "present")));
        assert_true(json_is_null(json_object_get(c, "package")));
        assert_true(json_is_null(json_object_get(c, "siblings")));
        c = json_array_get(cpus, 129);
        assert_true(json_is_false(json_object_get(c, "present")));
        json_decref(j);
}

/* A scratch sysfs tree in a temporary directory, for the shapes no fixture has. */
static char *scratch_tree(const char *const *files) {
        char tmpl[] = "/tmp/test-topology-XXXXXX";
        char *root = strdup(mkdtemp(tmpl));

        assert_non_null(root);
        for (const char *const *f = files; *f; f += 2) {
                _cleanup_free_ char *path = NULL, *dir = NULL;
                _cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

                assert_true(fd >= 0);
                assert_true(asprintf(&path, "sys/%s", f[0]) > 0);
                dir = strndup(path, strrchr(path, '/') - path);
                assert_int_equal(mkdir_p_at(fd, dir, 0755), 0);
                assert_int_equal(write_file_atomic_at(fd, path, f[1], strlen(f[1]), 0644), 0);
        }
        return root;
}

static void remove_tree(char *root) {
        _cleanup_free_ char *cmd = NULL;

        assert_true(asprintf(&cmd, "rm -rf '%s'", root) > 0);
        assert_int_equal(system(cmd), 0);
        free(root);
}

static int load_tree(const char *root, Topology **ret) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;

        assert_true(asprintf(&path, "%s/sys", root) > 0);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        return topology_load(fd, ret);
}

/* No node directory (CONFIG_NUMA=n), no per-CPU topology: everything unknown but the CPU lists. */
static void test_minimal_tree(void **state) {
        static const char *const files[] = {
                "devices/system/cpu/possible", "0-3\n",
                "devices/system/cpu/online", "0-1,3\n",
                NULL,
        };
        char *root = scratch_tree(files);
        _cleanup_(topology_freep) Topology *t = NULL;
        CpuSet r;

        assert_int_equal(load_tree(root, &t), 0);
        assert_set(&t->present, "0-3");         /* no present file: assume possible */
        assert_set(&t->online, "0-1,3");
        assert_int_equal(t->n_packages, 0);
        assert_int_equal(t->n_cores, 3);        /* each CPU is its own core */
        assert_int_equal(t->n_nodes, 0);
        assert_int_equal(t->n_llcs, 0);
        assert_int_equal(topology_cpu(t, 0)->node, -1);
        topology_default_reserved(t, &r);
        assert_set(&r, "1,3");
        json_t *j = topology_to_json(t);
        assert_non_null(j);
        assert_int_equal(json_array_size(json_object_get(j, "nodes")), 0);
        json_decref(j);
        remove_tree(root);
}

/* Architectures that keep offline threads in thread_siblings_list (x86 drops them): 3 is offline. */
static void test_offline_sibling_listed(void **state) {
        static const char *const files[] = {
                "devices/system/cpu/possible", "0-3\n",
                "devices/system/cpu/present", "0-3\n",
                "devices/system/cpu/online", "0-2\n",
                "devices/system/cpu/cpu0/topology/thread_siblings_list", "0,2\n",
                "devices/system/cpu/cpu1/topology/thread_siblings_list", "1,3\n",
                "devices/system/cpu/cpu2/topology/thread_siblings_list", "0,2\n",
                "devices/system/cpu/cpu3/online", "0\n",
                NULL,
        };
        char *root = scratch_tree(files);
        _cleanup_(topology_freep) Topology *t = NULL;
        CpuSet r;

        assert_int_equal(load_tree(root, &t), 0);
        assert_int_equal(t->n_cores, 2);
        assert_int_equal(t->threads_per_core, 2);
        topology_default_reserved(t, &r);
        assert_set(&r, "1");
        r = set_of("1");
        topology_with_siblings(t, &r, &r);
        assert_set(&r, "1");                    /* not 3: it is offline */
        remove_tree(root);
}

static void test_broken_trees(void **state) {
        static const char *const no_possible[] = { "devices/system/cpu/online", "0\n", NULL };
        static const char *const garbage[] = {
                "devices/system/cpu/possible", "0-3\n",
                "devices/system/cpu/online", "zero\n",
                NULL,
        };
        static const char *const no_online[] = {
                "devices/system/cpu/possible", "0-3\n",
                "devices/system/cpu/online", "\n",
                NULL,
        };
        Topology *t = NULL;
        char *root;

        root = scratch_tree(no_possible);
        assert_int_equal(load_tree(root, &t), -ENOENT);
        assert_null(t);
        remove_tree(root);

        root = scratch_tree(garbage);
        assert_int_equal(load_tree(root, &t), -EBADMSG);
        assert_null(t);
        remove_tree(root);

        root = scratch_tree(no_online);
        assert_int_equal(load_tree(root, &t), -EBADMSG);
        assert_null(t);
        remove_tree(root);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_vm_2cpu),
                cmocka_unit_test(test_laptop_2c4t),
                cmocka_unit_test(test_xeon_2s16t),
                cmocka_unit_test(test_epyc_128),
                cmocka_unit_test(test_parse_syntax_errors),
                cmocka_unit_test(test_json),
                cmocka_unit_test(test_minimal_tree),
                cmocka_unit_test(test_offline_sibling_listed),
                cmocka_unit_test(test_broken_trees),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
