/* SPDX-License-Identifier: MIT */
/* Metrics without the kernel: the Prometheus text writers, the log2 histogram slots, and the procfs
 * collector plus the Prometheus/JSON rendering on the tests/fixtures/metrics-procfs tree. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/manager.h"
#include "metrics/collector.h"
#include "metrics/metrics-internal.h"
#include "metrics/metrics.h"
#include "metrics/prometheus.h"
#include "shared/macro.h"

#ifndef RTD_FIXTURES_DIR
#define RTD_FIXTURES_DIR "tests/fixtures"
#endif

static const char *fixtures(void) {
        return getenv("RTD_FIXTURES") ?: RTD_FIXTURES_DIR;
}

static int open_fixture_proc(void) {
        char path[4096];
        int fd;

        (void) snprintf(path, sizeof path, "%s/metrics-procfs/proc", fixtures());
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        return fd;
}

static void test_format_double(void **state) {
        char buf[32];

        assert_string_equal(prom_format_double(1e-6, buf), "1e-06");
        assert_string_equal(prom_format_double(0.5, buf), "0.5");
        assert_string_equal(prom_format_double(metrics_hist_le(10), buf), "0.001024");
        assert_string_equal(prom_format_double(0.1 + 0.2, buf), "0.30000000000000004");  /* round-trips */
        assert_string_equal(prom_format_double(1.0 / 0.0, buf), "+Inf");
}

static void test_label_escape(void **state) {
        char buf[64];

        assert_string_equal(prom_label_escape("a\"b\\c\nd", buf, sizeof buf), "a\\\"b\\\\c\\nd");
        assert_string_equal(prom_label_escape("0123456789", buf, 8), "01234");     /* truncated, terminated */
}

static void test_histogram(void **state) {
        const uint64_t slots[] = { 2, 0, 3, 1 };        /* last slot: overflow, only in +Inf */
        const double le[] = { 1e-6, 2e-6, 4e-6, 8e-6 };
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        prom_histogram(f, "x_seconds", "cpu=\"1\"", slots, le, 4, 0.25);
        prom_histogram(f, "y_seconds", NULL, slots, le, 1, 0);
        fclose(f);
        assert_string_equal(buf,
                            "x_seconds_bucket{cpu=\"1\",le=\"1e-06\"} 2\n"
                            "x_seconds_bucket{cpu=\"1\",le=\"2e-06\"} 2\n"
                            "x_seconds_bucket{cpu=\"1\",le=\"4e-06\"} 5\n"
                            "x_seconds_bucket{cpu=\"1\",le=\"+Inf\"} 6\n"
                            "x_seconds_sum{cpu=\"1\"} 0.25\n"
                            "x_seconds_count{cpu=\"1\"} 6\n"
                            "y_seconds_bucket{le=\"+Inf\"} 2\n"
                            "y_seconds_sum 0\n"
                            "y_seconds_count 2\n");
        free(buf);
}

static void test_hist_slots(void **state) {
        uint64_t slots[METRICS_HIST_SLOTS] = {};

        /* ceil(log2(us)): slot k holds (2^(k-1), 2^k] µs, so `le` is an inclusive bound. */
        assert_int_equal(metrics_hist_slot(0), 0);
        assert_int_equal(metrics_hist_slot(1), 0);
        assert_int_equal(metrics_hist_slot(2), 1);
        assert_int_equal(metrics_hist_slot(3), 2);
        assert_int_equal(metrics_hist_slot(4), 2);
        assert_int_equal(metrics_hist_slot(5), 3);
        assert_int_equal(metrics_hist_slot(UINT64_C(1) << 26), 26);
        assert_int_equal(metrics_hist_slot((UINT64_C(1) << 26) + 1), METRICS_HIST_SLOTS - 1);
        assert_int_equal(metrics_hist_slot(UINT64_MAX), METRICS_HIST_SLOTS - 1);

        assert_true(metrics_hist_quantile(slots, 0.99) < 0);   /* empty */
        slots[3] = 98;
        slots[10] = 2;
        assert_true(metrics_hist_quantile(slots, 0.5) == metrics_hist_le(3));
        assert_true(metrics_hist_quantile(slots, 0.99) == metrics_hist_le(10));
}

static void test_procfs_collector(void **state) {
        _cleanup_close_ int fd = open_fixture_proc();
        Collector *c = NULL;
        Sample s = {};
        JobCounters j;
        size_t k;

        assert_int_equal(procfs_collector_new(fd, &c), 0);
        assert_string_equal(c->ops->name, "procfs");
        assert_int_equal(c->ops->read(c, &s), 0);

        assert_int_equal(s.cpus[0].switches_total, 77408);
        assert_int_equal(s.cpus[0].runq_sum_ns, 7012379210);
        assert_int_equal(s.cpus[0].softirq_count[1], 19681);     /* TIMER */
        assert_int_equal(s.cpus[0].hardirq_count, 44 + 0 + 1200 + 7);   /* numbered lines only */
        assert_int_equal(s.n_irqs, 4);
        for (k = 0; k < s.n_irqs && s.irqs[k].irq != 24; k++)
                ;
        assert_true(k < s.n_irqs);
        assert_string_equal(s.irqs[k].name, "virtio0-input.0");
        assert_int_equal(s.irqs[k].count[0], 1200);
        if (s.n_cpus > 1) {
                assert_int_equal(s.cpus[1].switches_total, 64020);
                assert_int_equal(s.cpus[1].softirq_count[4], 266712);   /* BLOCK */
                assert_int_equal(s.irqs[k].count[1], 30);
        }
        sample_done(&s);

        /* Per-job figures from /proc/PID/{status,schedstat}; unknown jobs are -ENOENT. */
        assert_int_equal(c->ops->track_task(c, 4242, 9, 0), 0);
        assert_int_equal(c->ops->job_read(c, 9, false, &j), 0);
        assert_int_equal(j.switches_voluntary, 501);
        assert_int_equal(j.switches_involuntary, 3);
        assert_int_equal(j.on_cpu_ns, 6559116);
        assert_int_equal(j.runq_count, 504);
        assert_int_equal(c->ops->job_read(c, 9, true, &j), 0);
        assert_int_equal(c->ops->job_read(c, 9, true, &j), -ENOENT);
        c->ops->free(c);
}

/* The whole module on the fixture with BPF switched off: what a scrape shows without BPF. */
/* The rows the BPF collector reads from procfs as the kernel's own counts: vectors, TLB, numbered IRQs. */
static void test_procfs_kernel_rows(void **state) {
        _cleanup_close_ int fd = open_fixture_proc();
        CpuCounters cpus[2] = {};
        Sample s = { .n_cpus = 2, .cpus = cpus };

        assert_int_equal(procfs_read_vectors(fd, &s), 0);
        assert_int_equal(cpus[0].vec_kernel[0], 123456);        /* LOC */
        assert_int_equal(cpus[1].vec_kernel[0], 654321);
        assert_int_equal(cpus[1].vec_kernel[1], 5);             /* RES */
        assert_int_equal(cpus[1].vec_kernel[7], 0);             /* ERR: a row of one count, not per CPU */
        assert_int_equal(cpus[0].tlb_shootdowns, 3);
        assert_int_equal(cpus[1].tlb_shootdowns, 11);

        assert_int_equal(procfs_read_kernel_irqs(fd, &s), 0);
        assert_int_equal(cpus[0].hardirq_kernel, 44 + 0 + 1200 + 7);   /* numbered rows only */
        assert_int_equal(cpus[1].hardirq_kernel, 0 + 1 + 30 + 266712);
        assert_int_equal(cpus[1].softirq_kernel[4], 266712);    /* BLOCK */
        assert_int_equal(cpus[0].softirq_kernel[9], 68161);     /* RCU */
}

static void test_render_fallback(void **state) {
        Manager m = { .proc_fd = open_fixture_proc(), .sys_fd = -EBADF };
        Metrics *x = NULL;
        CpuSet reserved = {};
        char *text = NULL;
        size_t size;
        json_t *j, *st;

        assert_int_equal(setenv("RTD_BPF", "0", 1), 0);
        assert_int_equal(metrics_new(&m, &x), 0);
        assert_false(metrics_bpf_enabled(x));
        cpuset_set(&reserved, 0);
        metrics_set_reserved(x, &reserved);
        metrics_observe_dispatch(x, 300);
        metrics_observe_dispatch(x, 3);

        assert_int_equal(metrics_render_prometheus(x, &text, &size), 0);
        assert_int_equal(strlen(text), size);
        assert_non_null(strstr(text, "\nrtd_bpf_enabled 0\n") ?: strstr(text, "rtd_bpf_enabled 0\n"));
        assert_non_null(strstr(text, "rtd_cpu_context_switches_total{cpu=\"0\",kind=\"all\"} 77408\n"));
        assert_non_null(strstr(text, "rtd_cpu_softirqs_total{cpu=\"0\",vector=\"TIMER\"} 19681\n"));
        assert_non_null(strstr(text, "rtd_cpu_hardirqs_total{cpu=\"0\",irq=\"24\",name=\"virtio0-input.0\"} 1200\n"));
        assert_non_null(strstr(text, "rtd_runqueue_latency_seconds_bucket{cpuset=\"reserved\",le=\"+Inf\"} 77408\n"));
        assert_non_null(strstr(text, "rtd_job_dispatch_latency_seconds_bucket{le=\"4e-06\"} 1\n"));
        assert_non_null(strstr(text, "rtd_job_dispatch_latency_seconds_count 2\n"));
        assert_null(strstr(text, "rtd_bpf_run_seconds_total"));        /* no cost figures without BPF */
        assert_null(strstr(text, "rtd_cpu_intrusion"));                /* no intrusion accounting either */
        assert_null(strstr(text, "pid="));
        /* The starvation guard's counters per reserved CPU (it needs BPF to boost anything). */
        assert_non_null(strstr(text, "rtd_starvation_boosts_total{cpu=\"0\"} 0\n"));
        assert_non_null(strstr(text, "rtd_starvation_boost_failures_total{cpu=\"0\"} 0\n"));
        free(text);

        j = metrics_render_json(x);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "reserved_cpus")), "0");
        st = json_object_get(j, "collector");
        assert_false(json_is_true(json_object_get(st, "bpf_enabled")));
        const char *reason = json_string_value(json_object_get(st, "reason"));
        assert_true(strstr(reason, "RTD_BPF=0") || strstr(reason, "built without BPF"));
        json_decref(j);

        metrics_free(x);
        close(m.proc_fd);
        (void) unsetenv("RTD_BPF");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_format_double),
                cmocka_unit_test(test_label_escape),
                cmocka_unit_test(test_histogram),
                cmocka_unit_test(test_hist_slots),
                cmocka_unit_test(test_procfs_collector),
                cmocka_unit_test(test_procfs_kernel_rows),
                cmocka_unit_test(test_render_fallback),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
