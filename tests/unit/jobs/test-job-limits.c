/* SPDX-License-Identifier: MIT */
/* job-limits.c without processes: what a caller may ask for, the rlimits a job gets, /proc/self/cgroup (v1). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/config.h"
#include "jobs/job-limits.h"

static RtdConfig *conf(const char *text) {
        RtdConfig *c = config_new();
        assert_non_null(c);
        assert_int_equal(config_parse_text(c, "t.conf", text, stderr, NULL), 0);
        return c;
}

static void test_defaults_applied(void **state) {
        RtdConfig *c = conf("[Jobs]\nMaxOutputBytes=1M\nMaxTasks=100\nMaxMemory=infinity\nDefaultTimeoutSec=60\n");
        JobSpec s = { .cores = 1 };
        char *f = NULL, *e = NULL;

        assert_int_equal(job_limits_resolve(c, &s, false, &f, &e), 0);
        assert_true(s.max_output_bytes == 1024 * 1024);
        assert_true(s.max_tasks == 100);
        assert_true(s.max_memory_bytes == 0);   /* infinity: none */
        assert_true(s.timeout_s == 60);
        config_free(c);
}

static void test_only_downward_for_non_admins(void **state) {
        RtdConfig *c = conf("[Jobs]\nMaxOutputBytes=1M\nMaxTasks=100\nMaxMemory=64M\n[Access]\nMaxQueuePriority=3\n");
        static const struct {
                JobSpec spec;
                const char *field, *key;
        } bad[] = {
                { { .max_output_bytes = 2 << 20 }, "max_output_bytes", "[Jobs] MaxOutputBytes=1048576" },
                { { .max_tasks = 101 }, "max_tasks", "[Jobs] MaxTasks=100" },
                { { .max_memory_bytes = 65 << 20 }, "max_memory_bytes", "[Jobs] MaxMemory=67108864" },
                { { .queue_priority = 4 }, "queue_priority", "[Access] MaxQueuePriority=3" },
        };

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                JobSpec s = bad[i].spec, orig = bad[i].spec;
                char *f = NULL, *e = NULL;
                assert_int_equal(job_limits_resolve(c, &s, false, &f, &e), -EPERM);
                assert_string_equal(f, bad[i].field);
                assert_non_null(strstr(e, bad[i].key));         /* the key and its value */
                assert_non_null(strstr(e, "at most"));          /* the fix */
                assert_memory_equal(&s, &orig, sizeof s);       /* nothing changed */
                free(f);
                free(e);
                /* An admin may go above. */
                assert_int_equal(job_limits_resolve(c, &s, true, &f, &e), 0);
        }

        JobSpec ok = { .max_output_bytes = 8192, .max_tasks = 10, .max_memory_bytes = 32 << 20, .queue_priority = -50 };
        char *f = NULL, *e = NULL;
        assert_int_equal(job_limits_resolve(c, &ok, false, &f, &e), 0);
        assert_true(ok.max_output_bytes == 8192 && ok.max_tasks == 10 && ok.max_memory_bytes == 32 << 20);
        config_free(c);
}

static void test_rlimits_login_like(void **state) {
        JobLimits l = { .threads_max = 10000, .v1_pids_fd = -1, .v1_memory_fd = -1 };
        JobSpec s = { .max_output_bytes = 65536 };
        WorkerRlimit rl[WORKER_RLIMITS];

        job_limits_rlimits(&l, &s, 42, rl);
        assert_true(rl[RLIMIT_NOFILE].cur == 1024 && rl[RLIMIT_NOFILE].max == 4096);
        assert_true(rl[RLIMIT_FSIZE].cur == 65536 && rl[RLIMIT_FSIZE].max == 65536);
        assert_true(rl[RLIMIT_RTPRIO].cur == 42 && rl[RLIMIT_RTPRIO].max == 42);
        assert_true(rl[RLIMIT_RTTIME].cur == RLIM64_INFINITY);
        assert_true(rl[RLIMIT_CORE].cur == 0);
        assert_true(rl[RLIMIT_STACK].cur == 8 << 20);
        assert_true(rl[RLIMIT_NPROC].cur == 5000);
        assert_true(rl[RLIMIT_NICE].max == 0);
        s.max_output_bytes = 0;
        job_limits_rlimits(&l, &s, 0, rl);
        assert_true(rl[RLIMIT_FSIZE].cur == RLIM64_INFINITY);
        assert_true(rl[RLIMIT_RTPRIO].max == 0);
}

static void test_v1_self(void **state) {
        const char *text = "9:name=systemd:/\n8:pids:/a/b\n4:memory:/process_api/x\n2:cpu,cpuacct:/c\n0::/\n";
        char *p = NULL;

        assert_int_equal(job_limits_parse_v1_self(text, "pids", &p), 0);
        assert_string_equal(p, "/a/b");
        free(p);
        assert_int_equal(job_limits_parse_v1_self(text, "memory", &p), 0);
        assert_string_equal(p, "/process_api/x");
        free(p);
        assert_int_equal(job_limits_parse_v1_self(text, "cpuacct", &p), 0);
        assert_string_equal(p, "/c");
        free(p);
        assert_int_equal(job_limits_parse_v1_self(text, "cpu", &p), 0);
        free(p);
        assert_int_equal(job_limits_parse_v1_self(text, "mem", &p), -ENOENT);
        assert_int_equal(job_limits_parse_v1_self("0::/x\n", "pids", &p), -ENOENT);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults_applied),
                cmocka_unit_test(test_only_downward_for_non_admins),
                cmocka_unit_test(test_rlimits_login_like),
                cmocka_unit_test(test_v1_self),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
