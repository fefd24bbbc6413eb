/* SPDX-License-Identifier: MIT */
/* config.c from strings: defaults, every key, every error names file:line, the value and what is allowed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/config.h"

/* Parse text; return the messages written to err (caller frees) and the result in *ret_r. */
static char *parse(RtdConfig *c, const char *text, int *ret_r, unsigned *ret_warnings) {
        char *buf = NULL;
        size_t size = 0;
        FILE *err = open_memstream(&buf, &size);
        unsigned w = 0;

        assert_non_null(err);
        *ret_r = config_parse_text(c, "test.conf", text, err, &w);
        fclose(err);
        if (ret_warnings)
                *ret_warnings = w;
        return buf;
}

static void test_defaults(void **state) {
        RtdConfig *c = config_new();

        assert_non_null(c);
        assert_string_equal(c->socket_path, "/run/rtd/rtd.sock");
        assert_int_equal(c->socket_mode, 0660);
        assert_string_equal(c->socket_group, "rtd");
        assert_string_equal(c->metrics_listen, "127.0.0.1:9477");
        assert_int_equal(c->reserve_mode, RESERVE_AUTO);
        assert_int_equal(c->smt, SMT_EXCLUSIVE);
        assert_int_equal(c->backend, BACKEND_AUTO);
        assert_true(c->rt_runtime_usec == TUNE_KEEP);
        assert_int_equal(c->queue_policy, QUEUE_FCFS);
        assert_int_equal(c->check_interval_sec, 10);
        config_free(c);
}

static void test_state_directory_from_env(void **state) {
        RtdConfig *c;

        setenv("STATE_DIRECTORY", "/var/lib/rtd-x:/var/lib/other", 1);
        setenv("RUNTIME_DIRECTORY", "/run/rtd-x", 1);
        c = config_new();
        assert_string_equal(c->state_directory, "/var/lib/rtd-x");
        assert_string_equal(c->runtime_directory, "/run/rtd-x");
        config_free(c);
        unsetenv("STATE_DIRECTORY");
        unsetenv("RUNTIME_DIRECTORY");
        c = config_new();
        assert_string_equal(c->state_directory, "/var/lib/rtd");
        assert_string_equal(c->runtime_directory, "/run/rtd");
        config_free(c);
}

static void test_every_key(void **state) {
        RtdConfig *c = config_new();
        int r;
        char *msg = parse(c,
                          "# comment\n; other comment\n\n"
                          "[Daemon]\nSocket=/tmp/x.sock\nSocketMode=0600\nSocketGroup=wheel\n"
                          "MetricsListen=[::1]:9100\nStateDirectory=/tmp/s\nRuntimeDirectory=/tmp/r\nLogLevel=debug\n"
                          "MaxRequestBodyBytes=4096\nMaxConnections=8\n"
                          "[Reserve]\nCPUs=2-3,5\nSMT=shared\nBackend=affinity\nIRQs=keep\nCheckIntervalSec=0\n"
                          "[Tuning]\nRTRuntimeUSec=-1\nFairServerRuntimeUSec=1000\nTimerMigration=0\n"
                          "StatIntervalSec=10\n"
                          "[Jobs]\nPolicy=priority\nWorkerPriority=90\nDefaultPriority=10\nKillGraceSec=1\n"
                          "MaxQueued=5\nKeepFinished=0\nAgingSec=3\n"
                          "[Access]\nAdminGroup=adm\nSubmitGroup=none\nMaxPriority=20\nMaxCoresPerUser=2\n"
                          "MaxQueuedPerUser=7\nMaxTimeoutSec=60\nLeaseGroup=slurm\n",
                          &r, NULL);

        assert_int_equal(r, 0);
        assert_true(!msg || !*msg);
        assert_string_equal(c->socket_path, "/tmp/x.sock");
        assert_int_equal(c->socket_mode, 0600);
        assert_string_equal(c->socket_group, "wheel");
        assert_string_equal(c->metrics_listen, "[::1]:9100");
        assert_int_equal(c->log_level, 7);
        assert_int_equal(c->max_body_bytes, 4096);
        assert_int_equal(c->reserve_mode, RESERVE_LIST);
        assert_int_equal(cpuset_count(&c->reserve_cpus), 3);
        assert_true(cpuset_isset(&c->reserve_cpus, 5));
        assert_int_equal(c->smt, SMT_SHARED);
        assert_int_equal(c->backend, BACKEND_AFFINITY);
        assert_int_equal(c->irqs, IRQ_KEEP);
        assert_int_equal(c->check_interval_sec, 0);
        assert_true(c->rt_runtime_usec == -1);
        assert_true(c->fair_server_runtime_usec == 1000);
        assert_true(c->timer_migration == 0);
        assert_true(c->stat_interval_sec == 10);
        assert_int_equal(c->queue_policy, QUEUE_PRIORITY);
        assert_int_equal(c->worker_priority, 90);
        assert_int_equal(c->keep_finished, 0);
        assert_string_equal(c->admin_group, "adm");
        assert_null(c->submit_group);
        assert_int_equal(c->max_timeout_sec, 60);
        assert_string_equal(c->lease_group, "slurm");
        free(msg);
        config_free(c);
}

static void test_none_and_no(void **state) {
        RtdConfig *c = config_new();
        int r;
        char *msg = parse(c, "[Daemon]\nMetricsListen=no\n[Reserve]\nCPUs=none\n", &r, NULL);

        assert_int_equal(r, 0);
        assert_null(c->metrics_listen);
        assert_int_equal(c->reserve_mode, RESERVE_NONE);
        assert_null(c->lease_group);    /* default: root and admins only */
        free(msg);
        config_free(c);
}

static void test_unknown_is_warning(void **state) {
        RtdConfig *c = config_new();
        unsigned w;
        int r;
        char *msg = parse(c, "[Daemon]\nLogLevel=info\nFrobnicate=yes\n[Nope]\nX=1\n", &r, &w);

        assert_int_equal(r, 0);
        assert_int_equal(w, 2);
        assert_non_null(strstr(msg, "test.conf:3: warning: unknown key 'Frobnicate' in [Daemon]"));
        assert_non_null(strstr(msg, "test.conf:4: warning: unknown section [Nope]"));
        free(msg);
        config_free(c);
}

/* Each invalid line is an error naming file:line, the bad value and what is allowed. */
static void test_invalid_values(void **state) {
        static const struct {
                const char *text, *expect;
        } cases[] = {
                { "[Daemon]\nSocket=relative.sock\n", "test.conf:2: invalid value 'relative.sock' for Socket= in [Daemon]: expected an absolute path" },
                { "[Daemon]\nSocketMode=999\n", "test.conf:2: invalid value '999' for SocketMode= in [Daemon]: expected an octal file mode" },
                { "[Daemon]\nMetricsListen=localhost\n", "invalid value 'localhost' for MetricsListen= in [Daemon]: expected HOST:PORT" },
                { "[Daemon]\nMetricsListen=127.0.0.1:99999\n", "'127.0.0.1:99999' for MetricsListen=" },
                { "[Daemon]\nLogLevel=loud\n", "test.conf:2: invalid value 'loud' for LogLevel= in [Daemon]: expected debug, info" },
                { "[Daemon]\nMaxConnections=0\n", "'0' for MaxConnections= in [Daemon]: expected a number from 1 to 65536" },
                { "[Reserve]\nCPUs=3-1\n", "test.conf:2: invalid value '3-1' for CPUs= in [Reserve]: expected auto, none, or a CPU list" },
                { "[Reserve]\nCPUs=1,x\n", "'1,x' for CPUs=" },
                { "[Reserve]\nSMT=maybe\n", "'maybe' for SMT= in [Reserve]: expected exclusive or shared" },
                { "[Reserve]\nBackend=magic\n", "expected auto, systemd, cgroup or affinity" },
                { "[Reserve]\nIRQs=all\n", "expected housekeeping or keep" },
                { "[Reserve]\nCheckIntervalSec=-5\n", "'-5' for CheckIntervalSec=" },
                { "[Tuning]\nRTRuntimeUSec=-2\n", "'-2' for RTRuntimeUSec= in [Tuning]: expected keep, -1 (no throttling) or microseconds" },
                { "[Tuning]\nTimerMigration=2\n", "expected keep, 0 or 1" },
                { "[Metrics]\nIntruderTableSize=4\n", "test.conf:2: invalid value '4' for IntruderTableSize= in [Metrics]: expected a number of entries from 8 to 65536" },
                { "[Metrics]\nIntruderTableSize=70000\n", "'70000' for IntruderTableSize=" },
                { "[Jobs]\nPolicy=lifo\n", "'lifo' for Policy= in [Jobs]: expected fcfs or priority" },
                { "[Jobs]\nWorkerPriority=100\n", "'100' for WorkerPriority= in [Jobs]: expected a priority from 1 to 99" },
                { "[Access]\nMaxPriority=0\n", "'0' for MaxPriority=" },
                { "[Jobs]\nMaxArraySize=0\n", "test.conf:2: invalid value '0' for MaxArraySize= in [Jobs]: expected a number of tasks from 1 to 1000000" },
                { "[Jobs]\nMaxArraySize=1000001\n", "'1000001' for MaxArraySize=" },
                { "[Access]\nAdminGroup=a b\n", "'a b' for AdminGroup= in [Access]: expected a group name" },
                { "[Access]\nLeaseGroup=a:b\n", "'a:b' for LeaseGroup= in [Access]: expected a group name" },
                { "Socket=/x\n", "test.conf:1: key 'Socket' outside of a [Section]" },
                { "[Daemon\n", "test.conf:1: malformed section header '[Daemon': expected [Section]" },
                { "[Daemon]\njust words\n", "test.conf:2: expected Key=Value, got 'just words'" },
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                RtdConfig *c = config_new();
                int r;
                char *msg = parse(c, cases[i].text, &r, NULL);

                if (!msg || !strstr(msg, cases[i].expect))
                        fail_msg("case %zu: expected '%s' in '%s'", i, cases[i].expect, msg ? msg : "(nothing)");
                assert_int_equal(r, -EINVAL);
                free(msg);
                config_free(c);
        }
}

static void test_later_value_wins_and_error_keeps_going(void **state) {
        RtdConfig *c = config_new();
        int r;
        char *msg = parse(c, "[Jobs]\nKillGraceSec=1\nKillGraceSec=x\nKillGraceSec=3\nPolicy=bad\n", &r, NULL);

        /* Both errors are reported, not just the first. */
        assert_int_equal(r, -EINVAL);
        assert_non_null(strstr(msg, "test.conf:3:"));
        assert_non_null(strstr(msg, "test.conf:5:"));
        assert_int_equal(c->kill_grace_sec, 3);
        free(msg);
        config_free(c);
}

static void test_dump_round_trip(void **state) {
        RtdConfig *c = config_new(), *d = config_new();
        char *buf = NULL, *buf2 = NULL, *msg;
        size_t size = 0, size2 = 0;
        FILE *f;
        int r;

        msg = parse(c, "[Reserve]\nCPUs=1-2\n[Tuning]\nRTRuntimeUSec=-1\n[Access]\nAdminGroup=wheel\n", &r, NULL);
        assert_int_equal(r, 0);
        free(msg);
        f = open_memstream(&buf, &size);
        assert_int_equal(config_dump(c, f), 0);
        fclose(f);
        msg = parse(d, buf, &r, NULL);
        assert_int_equal(r, 0);
        free(msg);
        f = open_memstream(&buf2, &size2);
        config_dump(d, f);
        fclose(f);
        assert_string_equal(buf, buf2);
        assert_non_null(strstr(buf, "CPUs=1-2\n"));
        assert_non_null(strstr(buf, "RTRuntimeUSec=-1\n"));
        free(buf);
        free(buf2);
        config_free(c);
        config_free(d);
}

/* config_validate's messages for c, and its result in *ret_r. */
static char *validate(const RtdConfig *c, int *ret_r) {
        char *buf = NULL;
        size_t size = 0;
        FILE *err = open_memstream(&buf, &size);

        assert_non_null(err);
        *ret_r = config_validate(c, err);
        fclose(err);
        return buf;
}

/* Jobs must stay below their worker's priority: refused at the line that set the key. */
static void test_priority_below_worker(void **state) {
        RtdConfig *c = config_new();
        char *msg;
        int r;

        free(parse(c, "[Jobs]\nWorkerPriority=60\n\n[Access]\nMaxPriority=70\n", &r, NULL));
        assert_int_equal(r, 0);
        msg = validate(c, &r);
        assert_int_equal(r, -EINVAL);
        assert_non_null(strstr(msg, "test.conf:5: [Access] MaxPriority=70 must be below [Jobs] WorkerPriority=60"));
        assert_null(strstr(msg, "DefaultPriority"));            /* 50 is below 60 */
        free(msg);

        /* Equal is refused too; a default that clashes is named at WorkerPriority='s line. */
        free(parse(c, "[Access]\nMaxPriority=59\n[Jobs]\nWorkerPriority=50\n", &r, NULL));
        msg = validate(c, &r);
        assert_int_equal(r, -EINVAL);
        assert_non_null(strstr(msg, "test.conf:4: [Jobs] DefaultPriority=50 must be below [Jobs] WorkerPriority=50"));
        assert_non_null(strstr(msg, "test.conf:2: [Access] MaxPriority=59 must be below"));
        free(msg);

        free(parse(c, "[Jobs]\nWorkerPriority=99\nDefaultPriority=98\n[Access]\nMaxPriority=98\n", &r, NULL));
        msg = validate(c, &r);
        assert_int_equal(r, 0);
        assert_true(!msg || !*msg);
        free(msg);
        config_free(c);
}

static void test_starvation_guard_keys(void **state) {
        RtdConfig *c = config_new();
        char *msg;
        int r;

        assert_int_equal(c->starvation_guard, STARVATION_GUARD_KERNEL);
        assert_true(c->starvation_threshold_usec == 1000000);
        free(parse(c, "[Tuning]\nStarvationGuard=all\n", &r, NULL));
        assert_int_equal(r, 0);
        assert_int_equal(c->starvation_guard, STARVATION_GUARD_ALL);
        msg = parse(c, "[Tuning]\nStarvationGuard=yes\n", &r, NULL);
        assert_int_equal(r, -EINVAL);
        assert_non_null(strstr(msg, "kernel, all or no"));
        free(msg);
        free(parse(c, "[Tuning]\nStarvationGuard=no\nStarvationThresholdSec=0.25\nStarvationBoostRuntimeUSec=50\n"
                      "StarvationBoostPeriodUSec=2000\nStarvationBoostDurationSec=3\n", &r, NULL));
        assert_int_equal(r, 0);
        assert_int_equal(c->starvation_guard, STARVATION_GUARD_NO);
        assert_true(c->starvation_threshold_usec == 250000);
        assert_int_equal(c->starvation_boost_runtime_usec, 50);
        assert_int_equal(c->starvation_boost_period_usec, 2000);
        assert_true(c->starvation_boost_duration_usec == 3000000);
        free(parse(c, "[Tuning]\nStarvationThresholdSec=.5\n", &r, NULL));
        assert_int_equal(r, 0);
        assert_true(c->starvation_threshold_usec == 500000);

        /* Each bad value names the line, the key and what is allowed, and leaves the old value. */
        const char *bad[] = { "0.001", "1.", "abc", "1.2345678", "-1", "0", "1e3", "3601" };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                char text[64];
                snprintf(text, sizeof text, "[Tuning]\nStarvationThresholdSec=%s\n", bad[i]);
                msg = parse(c, text, &r, NULL);
                assert_int_equal(r, -EINVAL);
                assert_non_null(strstr(msg, "test.conf:2:"));
                assert_non_null(strstr(msg, "StarvationThresholdSec="));
                assert_non_null(strstr(msg, "seconds from 0.01 to 3600"));
                assert_true(c->starvation_threshold_usec == 500000);
                free(msg);
        }
        free(parse(c, "[Tuning]\nStarvationBoostPeriodUSec=50\n", &r, NULL));
        assert_int_equal(r, -EINVAL);           /* below the kernel's 100 µs minimum period */

        free(parse(c, "[Tuning]\nStarvationBoostRuntimeUSec=3000\n", &r, NULL));
        assert_int_equal(r, 0);
        msg = validate(c, &r);
        assert_int_equal(r, -EINVAL);
        assert_non_null(strstr(msg, "StarvationBoostRuntimeUSec=3000 exceeds StarvationBoostPeriodUSec=2000"));
        free(msg);
        config_free(c);
}

static void test_shipped_config_is_defaults(void **state) {
        const char *src = getenv("RTD_SOURCE_DIR");
        RtdConfig *c = config_new(), *d = config_new();
        char path[4096], *b1 = NULL, *b2 = NULL;
        size_t s1 = 0, s2 = 0;
        FILE *f;

        if (!src)
                skip();
        snprintf(path, sizeof path, "%s/config/rtd.conf", src);
        /* Uncomment every "#Key=" line: the shipped file must list every key at its default. */
        FILE *in = fopen(path, "re");
        assert_non_null(in);
        char *text = NULL;
        size_t tsize = 0;
        FILE *out = open_memstream(&text, &tsize);
        char line[1024];
        unsigned keys = 0;
        while (fgets(line, sizeof line, in)) {
                if (line[0] == '#' && line[1] != ' ' && line[1] != '\n' && strchr(line, '=')) {
                        fputs(line + 1, out);
                        keys++;
                } else
                        fputs(line, out);
        }
        fclose(in);
        fclose(out);
        unsigned w = 0;
        char *errors = NULL;
        size_t errors_size = 0;
        f = open_memstream(&errors, &errors_size);
        assert_int_equal(config_parse_text(c, path, text, f, &w), 0);
        fclose(f);
        free(errors);
        assert_int_equal(w, 0);         /* no unknown keys */
        assert_int_equal(keys, config_key_count());     /* every key of the table */
        f = open_memstream(&b1, &s1);
        config_dump(c, f);
        fclose(f);
        f = open_memstream(&b2, &s2);
        config_dump(d, f);
        fclose(f);
        assert_string_equal(b1, b2);
        free(text);
        free(b1);
        free(b2);
        config_free(c);
        config_free(d);
}

/* Issue 11, points 4 and 6: the job limits' keys, their sizes and what is refused. */
static void test_job_limits(void **state) {
        RtdConfig *c = config_new();
        char *msg, *buf = NULL;
        size_t size = 0;
        FILE *err;
        int r;

        assert_true(c->max_output_bytes == UINT64_C(1) << 30);
        assert_true(c->max_tasks == 4096);
        assert_true(c->max_memory == CONFIG_INFINITY);
        assert_int_equal(c->default_timeout_sec, 0);
        assert_int_equal(c->max_queue_priority, 0);
        msg = parse(c, "[Jobs]\nMaxOutputBytes=64K\nMaxTasks=infinity\nMaxMemory=2G\nDefaultTimeoutSec=30\n"
                       "[Access]\nMaxQueuePriority=5\n", &r, NULL);
        assert_int_equal(r, 0);
        assert_true(!msg || !*msg);
        free(msg);
        assert_true(c->max_output_bytes == 65536);
        assert_true(c->max_tasks == CONFIG_INFINITY);
        assert_true(c->max_memory == UINT64_C(2) << 30);
        assert_int_equal(c->default_timeout_sec, 30);
        assert_int_equal(c->max_queue_priority, 5);

        static const struct {
                const char *text, *key;
        } bad[] = {
                { "[Jobs]\nMaxOutputBytes=0\n", "MaxOutputBytes=" },
                { "[Jobs]\nMaxOutputBytes=100\n", "MaxOutputBytes=" },
                { "[Jobs]\nMaxOutputBytes=12X\n", "MaxOutputBytes=" },
                { "[Jobs]\nMaxOutputBytes=-1\n", "MaxOutputBytes=" },
                { "[Jobs]\nMaxOutputBytes=99999999999999T\n", "MaxOutputBytes=" },
                { "[Jobs]\nMaxTasks=0\n", "MaxTasks=" },
                { "[Jobs]\nMaxMemory=1K\n", "MaxMemory=" },
                { "[Jobs]\nMaxMemory=\n", "MaxMemory=" },
                { "[Jobs]\nDefaultTimeoutSec=-5\n", "DefaultTimeoutSec=" },
                { "[Access]\nMaxQueuePriority=1001\n", "MaxQueuePriority=" },
                { "[Access]\nMaxQueuePriority=-1\n", "MaxQueuePriority=" },
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                RtdConfig *d = config_new();
                msg = parse(d, bad[i].text, &r, NULL);
                assert_int_equal(r, -EINVAL);
                assert_non_null(strstr(msg, "test.conf:2:"));
                assert_non_null(strstr(msg, bad[i].key));
                assert_non_null(strstr(msg, "expected"));
                free(msg);
                /* Nothing changed on a refusal: the default stays. */
                assert_true(d->max_output_bytes == UINT64_C(1) << 30);
                assert_true(d->max_tasks == 4096);
                config_free(d);
        }

        /* A default timeout above the non-admins' cap is refused, naming both keys and the fix. */
        msg = parse(c, "[Access]\nMaxTimeoutSec=10\n", &r, NULL);
        free(msg);
        assert_int_equal(r, 0);
        err = open_memstream(&buf, &size);
        assert_int_equal(config_validate(c, err), -EINVAL);
        fclose(err);
        assert_non_null(strstr(buf, "DefaultTimeoutSec=30"));
        assert_non_null(strstr(buf, "MaxTimeoutSec=10"));
        assert_non_null(strstr(buf, "lower DefaultTimeoutSec="));
        free(buf);
        config_free(c);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_state_directory_from_env),
                cmocka_unit_test(test_every_key),
                cmocka_unit_test(test_none_and_no),
                cmocka_unit_test(test_unknown_is_warning),
                cmocka_unit_test(test_invalid_values),
                cmocka_unit_test(test_later_value_wins_and_error_keeps_going),
                cmocka_unit_test(test_dump_round_trip),
                cmocka_unit_test(test_shipped_config_is_defaults),
                cmocka_unit_test(test_priority_below_worker),
                cmocka_unit_test(test_starvation_guard_keys),
                cmocka_unit_test(test_job_limits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
