/* SPDX-License-Identifier: MIT */
/* Job cpusets (issue 11): finding the v1 cpuset hierarchy and rtd's place in it, controller lists. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "jobs/job-cpuset.h"
#include "shared/macro.h"

static void test_v1_mount(void **state) {
        _cleanup_free_ char *mnt = NULL, *root = NULL;
        /* This host: cpuset alone among v1 controllers, and the unified hierarchy that must not match. */
        const char *hybrid =
                "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
                "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
                "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
                "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
                "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_int_equal(job_cpusets_parse_v1_mount(hybrid, &mnt, &root), 0);
        assert_string_equal(mnt, "/sys/fs/cgroup/cpuset");
        assert_string_equal(root, "/");
        free(mnt);
        free(root);
        mnt = root = NULL;
        /* Co-mounted with cpu, inside a container (root not "/"), optional fields before the separator. */
        assert_int_equal(job_cpusets_parse_v1_mount(
                "40 31 0:35 /docker/abc /sys/fs/cgroup/cpu,cpuset rw shared:5 - cgroup cgroup rw,cpu,cpuset\n",
                &mnt, &root), 0);
        assert_string_equal(mnt, "/sys/fs/cgroup/cpu,cpuset");
        assert_string_equal(root, "/docker/abc");
        free(mnt);
        free(root);
        mnt = root = NULL;
        /* "cpuset" only as part of another word, a cgroup2 mount, or a path: none of them. */
        assert_int_equal(job_cpusets_parse_v1_mount("1 0 0:1 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpusetx\n"
                                                    "2 0 0:2 / /cpuset rw - cgroup2 cgroup2 rw\n"
                                                    "3 0 0:3 / /x rw - tmpfs cpuset rw,cpuset\n",
                                                    &mnt, &root), -ENOENT);
        assert_int_equal(job_cpusets_parse_v1_mount("", &mnt, &root), -ENOENT);
}

static void test_v1_self(void **state) {
        _cleanup_free_ char *path = NULL;

        assert_int_equal(job_cpusets_parse_v1_self("9:name=systemd:/\n4:memory:/x\n3:cpuset:/\n0::/\n", &path), 0);
        assert_string_equal(path, "/");
        free(path);
        path = NULL;
        assert_int_equal(job_cpusets_parse_v1_self("2:cpu,cpuset:/rtd.slice/rtd.service\n", &path), 0);
        assert_string_equal(path, "/rtd.slice/rtd.service");
        free(path);
        path = NULL;
        /* Pure v2 has no cpuset line; "cpusetx" is not cpuset. */
        assert_int_equal(job_cpusets_parse_v1_self("0::/system.slice/rtd.service\n", &path), -ENOENT);
        assert_int_equal(job_cpusets_parse_v1_self("5:cpusetx:/a\n", &path), -ENOENT);
}

static void test_controller_lists(void **state) {
        assert_true(cgroup_list_has("cpuset cpu io memory pids\n", "cpuset"));
        assert_true(cgroup_list_has("cpu io memory pids cpuset\n", "cpuset"));
        assert_false(cgroup_list_has("cpu io memory pids\n", "cpuset"));
        assert_false(cgroup_list_has("cpusetx\n", "cpuset"));
        assert_false(cgroup_list_has("", "cpuset"));
}

static void test_names(void **state) {
        assert_string_equal(cpu_enforcement_to_string(CPU_ENFORCE_V2), "cpuset (cgroup v2)");
        assert_string_equal(cpu_enforcement_to_string(CPU_ENFORCE_V1), "cpuset (cgroup v1)");
        assert_string_equal(cpu_enforcement_to_string(CPU_ENFORCE_AFFINITY), "affinity only (drift check)");
        assert_null(cpu_enforcement_to_string((CpuEnforcement) 7));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_v1_mount),
                cmocka_unit_test(test_v1_self),
                cmocka_unit_test(test_controller_lists),
                cmocka_unit_test(test_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
