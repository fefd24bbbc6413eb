/* SPDX-License-Identifier: MIT */
/*
 * Placement and queue order without processes: the dispatcher's choice of CPUs on the captured topology of
 * a 2-socket SMT Xeon (SMT exclusive and shared, LLC/NUMA locality, explicit lists) and the aging rule.
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/manager.h"
#include "host/topology.h"
#include "jobs/job-cgroup.h"
#include "jobs/jobs-internal.h"
#include "shared/macro.h"

#ifndef RTD_FIXTURES_DIR
#define RTD_FIXTURES_DIR "tests/fixtures"
#endif

typedef struct T {
        Manager m;
        JobManager jm;
        Job busy;
} T;

static int setup(void **state) {
        _cleanup_free_ char *path = NULL;
        int fd;
        T *t = calloc(1, sizeof *t);

        assert_true(asprintf(&path, "%s/xeon-2s16t/sys", getenv("RTD_FIXTURES") ?: RTD_FIXTURES_DIR) > 0);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(topology_load(fd, &t->m.topology), 0);
        close(fd);
        t->m.config = config_new();
        t->jm.manager = &t->m;
        t->jm.slots = calloc(CPUSET_MAX, sizeof(WorkerSlot));
        t->jm.assume_workers_ready = true;
        /* The default reservation: everything but core 0 (CPUs 0 and 8). */
        topology_default_reserved(t->m.topology, &t->jm.reserved);
        *state = t;
        return 0;
}

static int teardown(void **state) {
        T *t = *state;
        topology_free(t->m.topology);
        config_free(t->m.config);
        free(t->jm.slots);
        free(t);
        return 0;
}

static char *place(T *t, const char *spec_json) {
        JobSpec s;
        CpuSet cpus;
        char *out = NULL;

        assert_int_equal(job_spec_parse_text(spec_json, strlen(spec_json), &s, NULL, NULL), 0);
        if (job_place(&t->jm, &s, &cpus) < 0)
                out = strdup("none");
        else
                assert_int_equal(cpuset_format(&cpus, &out), 0);
        job_spec_done(&s);
        return out;
}

static void hold(T *t, unsigned cpu) {
        t->jm.slots[cpu].job = &t->busy;
}

#define assert_place(t, spec, want)                    \
        do {                                           \
                _cleanup_free_ char *_got = place(t, spec); \
                assert_string_equal(_got, want);       \
        } while (0)

static void test_default_reservation(void **state) {
        T *t = *state;
        _cleanup_free_ char *s = NULL;
        assert_int_equal(cpuset_format(&t->jm.reserved, &s), 0);
        assert_string_equal(s, "1-7,9-15");
}

static void test_one_core_smallest_llc_whole_core(void **state) {
        T *t = *state;
        /* LLC 0 has 6 reserved CPUs, LLC 1 has 8: the smaller domain that fits, a CPU of a free core. */
        assert_place(t, "{\"argv\":[\"x\"]}", "1");
}

static void test_smt_exclusive(void **state) {
        T *t = *state;
        hold(t, 1);
        /* CPU 9 is CPU 1's sibling: never given to another job under SMT=exclusive. */
        assert_place(t, "{\"argv\":[\"x\"]}", "2");
        assert_place(t, "{\"argv\":[\"x\"],\"cpus\":\"9\"}", "none");
        assert_place(t, "{\"argv\":[\"x\"],\"cpus\":\"10\"}", "10");
        /* 4 CPUs: LLC 0 has 2,3,10,11 left, but those are only 2 physical cores; LLC 1 has 4 whole free
         * cores, and whole cores come first. */
        assert_place(t, "{\"argv\":[\"x\"],\"cores\":4}", "4-7");
        /* 7 CPUs fit only in LLC 1 (socket 1). */
        assert_place(t, "{\"argv\":[\"x\"],\"cores\":7}", "4-7,12-14");
        /* 12 free CPUs but 13 wanted: wait. */
        assert_place(t, "{\"argv\":[\"x\"],\"cores\":12}", "2-7,10-15");
        assert_place(t, "{\"argv\":[\"x\"],\"cores\":13}", "none");
}

static void test_smt_shared_prefers_whole_cores(void **state) {
        T *t = *state;
        t->m.config->smt = SMT_SHARED;
        hold(t, 1);
        hold(t, 2);
        hold(t, 3);
        /* LLC 0 has 9,10,11 left, each beside a busy CPU: a whole free core in LLC 1 comes first. */
        assert_place(t, "{\"argv\":[\"x\"],\"cpus\":\"9\"}", "9");
        assert_place(t, "{\"argv\":[\"x\"]}", "4");
        /* Within LLC 1 (all free) a 2-CPU job takes CPUs of whole free cores. */
        hold(t, 9);
        hold(t, 10);
        hold(t, 11);
        assert_place(t, "{\"argv\":[\"x\"],\"cores\":2}", "4-5");
}

static void test_aging(void **state) {
        Job j = { .spec = { .queue_priority = 2 } };
        uint64_t now = 1000000000ULL * 1000;

        j.submit_usec = now - 5500000;          /* waited 5.5 s */
        assert_int_equal(job_effective_queue_priority(&j, now, 1), 7);
        assert_int_equal(job_effective_queue_priority(&j, now, 2), 4);
        assert_int_equal(job_effective_queue_priority(&j, now, 0), 2);
        j.submit_usec = now + 1000;             /* clock stepped back: no negative aging */
        assert_int_equal(job_effective_queue_priority(&j, now, 1), 2);
}

/* [Access] MaxCoresPerUser= counts a user's held cores: their queued jobs are passed over, others keep order. */
static void test_user_core_limit_skips(void **state) {
        T *t = *state;
        UserCount busy = { .uid = 1000, .cores = 1 };
        Job a1 = { .jm = &t->jm, .uid = 1000, .spec = { .cores = 1 } }, b1 = { .jm = &t->jm, .uid = 1001,
                   .spec = { .cores = 1 } }, a2 = { .jm = &t->jm, .uid = 1000, .spec = { .cores = 1 } };

        t->m.config->max_cores_per_user = 1;
        t->jm.users = &busy;
        a1.next = &b1;
        b1.prev = &a1;
        b1.next = &a2;
        a2.prev = &b1;
        t->jm.queue_head = &a1;
        t->jm.queue_tail = &a2;
        assert_ptr_equal(job_queue_pick(&t->jm), &b1);          /* fcfs: user 1000 is at its limit */
        t->m.config->queue_policy = QUEUE_PRIORITY;
        a2.spec.queue_priority = 10;
        assert_ptr_equal(job_queue_pick(&t->jm), &b1);
        b1.uid = 1000;
        assert_null(job_queue_pick(&t->jm));                    /* nobody has room */
        a1.admin = true;                                        /* admins are not limited */
        assert_ptr_equal(job_queue_pick(&t->jm), &a1);
        busy.cores = 0;
        assert_ptr_equal(job_queue_pick(&t->jm), &a2);          /* room again: highest priority */
        t->m.config->queue_policy = QUEUE_FCFS;
        assert_ptr_equal(job_queue_pick(&t->jm), &a1);
        t->m.config->max_cores_per_user = 0;
        t->jm.users = NULL;
        t->jm.queue_head = t->jm.queue_tail = NULL;
}

static void test_cgroup_discovery_parsing(void **state) {
        _cleanup_free_ char *mnt = NULL, *root = NULL, *path = NULL;
        /* A hybrid host: v1 controllers plus the unified hierarchy at /sys/fs/cgroup/unified. */
        const char *mountinfo =
                "25 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
                "26 25 0:23 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
                "27 25 0:24 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw\n";
        assert_int_equal(job_cgroups_parse_mountinfo(mountinfo, &mnt, &root), 0);
        assert_string_equal(mnt, "/sys/fs/cgroup/unified");
        assert_string_equal(root, "/");
        assert_int_equal(job_cgroups_parse_mountinfo("26 25 0:23 / /x rw - cgroup cgroup rw\n", &path, &root),
                         -ENOENT);
        assert_int_equal(job_cgroups_parse_self("9:name=systemd:/\n1:cpu:/\n0::/system.slice/rtd.service\n",
                                                &path), 0);
        assert_string_equal(path, "/system.slice/rtd.service");
        free(path);
        path = NULL;
        assert_int_equal(job_cgroups_parse_self("1:cpu:/\n", &path), -ENOENT);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_default_reservation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_one_core_smallest_llc_whole_core, setup, teardown),
                cmocka_unit_test_setup_teardown(test_smt_exclusive, setup, teardown),
                cmocka_unit_test_setup_teardown(test_smt_shared_prefers_whole_cores, setup, teardown),
                cmocka_unit_test_setup_teardown(test_aging, setup, teardown),
                cmocka_unit_test_setup_teardown(test_user_core_limit_skips, setup, teardown),
                cmocka_unit_test(test_cgroup_discovery_parsing),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
