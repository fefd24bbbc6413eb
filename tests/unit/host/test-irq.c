/* SPDX-License-Identifier: MIT */
/* IRQ steering on fixture /proc trees (tests/fixtures/irq-*): mask math (also > 256 CPUs, written as
 * comma-separated 32-bit words), refusal classification, unmovable IRQs with names, retries, drift, restore. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "host/irq.h"
#include "knob-fixture.h"

static CpuSet set_of(const char *s) {
        CpuSet set;
        assert_int_equal(cpuset_parse(s, &set, NULL), 0);
        return set;
}

static void assert_set(const CpuSet *set, const char *expected) {
        _cleanup_free_ char *s = NULL;
        assert_int_equal(cpuset_format(set, &s), 0);
        assert_string_equal(s, expected);
}

/* Refusals to inject: path → errors returned by the next writes, then success. */
static struct {
        const char *path;
        int errors[4];
        unsigned n, used;
} inject[8];
static unsigned n_inject, writes;

static void inject_reset(void) {
        memset(inject, 0, sizeof inject);
        n_inject = writes = 0;
}

static void inject_add(const char *path, int e1, int e2, int e3) {
        inject[n_inject].path = path;
        int e[] = { e1, e2, e3 };
        for (int i = 0; i < 3 && e[i]; i++)
                inject[n_inject].errors[inject[n_inject].n++] = e[i];
        n_inject++;
}

static int hook_write(int dir_fd, const char *path, const char *value) {
        writes++;
        for (unsigned i = 0; i < n_inject; i++)
                if (streq(inject[i].path, path) && inject[i].used < inject[i].n)
                        return inject[i].errors[inject[i].used++];
        return fx_kernel_write(dir_fd, path, value);
}

static void test_target_mask(void **state) {
        CpuSet hk = set_of("0-1"), out;

        irq_target_mask((CpuSet[]){ set_of("0-3") }, &hk, &out);
        assert_set(&out, "0-1");
        irq_target_mask((CpuSet[]){ set_of("1-3") }, &hk, &out);
        assert_set(&out, "1");
        /* Only on reserved CPUs: falls back to all housekeeping CPUs, never an empty mask. */
        irq_target_mask((CpuSet[]){ set_of("2-3") }, &hk, &out);
        assert_set(&out, "0-1");
        irq_target_mask((CpuSet[]){ set_of("") }, &hk, &out);
        assert_set(&out, "0-1");
}

static void test_wide_masks(void **state) {
        _cleanup_free_ char *s = NULL;
        CpuSet hk = set_of("0-3,256-259"), all = set_of("0-287"), out, back;

        /* 288 CPUs: nine 32-bit words, most significant first. */
        irq_target_mask(&all, &hk, &out);
        assert_int_equal(cpuset_format_mask(&out, 288, &s), 0);
        assert_string_equal(s, "0000000f,00000000,00000000,00000000,00000000,00000000,00000000,00000000,0000000f");
        assert_int_equal(cpuset_parse_mask(s, &back), 0);
        assert_true(cpuset_equal(&back, &out));
}

static void test_classify(void **state) {
        assert_int_equal(irq_classify_error(0), IRQ_ERROR_NONE);
        assert_int_equal(irq_classify_error(-EIO), IRQ_ERROR_UNMOVABLE);
        assert_int_equal(irq_classify_error(-EPERM), IRQ_ERROR_UNMOVABLE);
        assert_int_equal(irq_classify_error(-ENOSPC), IRQ_ERROR_UNMOVABLE);
        assert_int_equal(irq_classify_error(-EAGAIN), IRQ_ERROR_TRANSIENT);
        assert_int_equal(irq_classify_error(-EBUSY), IRQ_ERROR_TRANSIENT);
        assert_int_equal(irq_classify_error(-ENOMEM), IRQ_ERROR_TRANSIENT);
        assert_int_equal(irq_classify_error(-EINVAL), IRQ_ERROR_TRANSIENT);
        assert_int_equal(irq_classify_error(-ENODEV), IRQ_ERROR_FAILED);

        const char *reason, *remedy;
        irq_explain_refusal(-EIO, "IR-PCI-MSI", "nvme0q3", &reason, &remedy);
        assert_non_null(strstr(reason, "kernel-managed"));
        assert_non_null(strstr(remedy, "isolcpus=managed_irq"));
        irq_explain_refusal(-EIO, "GICv3", "arch_timer", &reason, &remedy);
        assert_non_null(strstr(reason, "per-CPU"));
        irq_explain_refusal(-ENOSPC, "PCI-MSI", "eth0", &reason, &remedy);
        assert_non_null(strstr(reason, "vectors"));
        irq_explain_refusal(-EPERM, "IO-APIC", "acpi", &reason, &remedy);
        assert_non_null(strstr(reason, "does not allow"));
}

static void test_parse_interrupts(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        _cleanup_free_ char *text = NULL;
        IrqName *names;
        size_t n;

        assert_int_equal(read_full_file_at(f->proc_fd, "interrupts", &text, NULL), 0);
        assert_int_equal(irq_parse_interrupts(text, &names, &n), 0);
        assert_int_equal(n, 5);         /* NMI, LOC, ERR are not numbered IRQs */
        assert_int_equal(names[0].irq, 24);
        assert_string_equal(names[0].chip, "IO-APIC");
        assert_string_equal(names[0].name, "ACPI:Ged");
        assert_int_equal(names[2].irq, 40);
        assert_string_equal(names[2].chip, "IR-PCI-MSI");
        assert_string_equal(names[2].name, "nvme0q3");
        assert_string_equal(names[4].chip, "GICv3");
        assert_string_equal(names[4].name, "arch_timer");      /* "27 Level" skipped */
        irq_names_free(names, n);
        knob_fixture_free(f);
}

static void test_apply_refusals_restore(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        CpuSet hk = set_of("0-1"), reserved = set_of("2-3");
        IrqState st = {};
        ReplayReport rep;

        inject_reset();
        f->k.write = hook_write;
        /* 40: managed (EIO); 41: busy twice, then fine (retried); 25: ENODEV (failed). */
        inject_add("irq/40/smp_affinity_list", -EIO, 0, 0);
        inject_add("irq/41/smp_affinity_list", -EBUSY, -EAGAIN, 0);
        inject_add("irq/25/smp_affinity_list", -ENODEV, -ENODEV, -ENODEV);
        assert_int_equal(irq_apply(&f->k, &hk, &reserved, 4, false, &st), 0);

        assert_string_equal(fx_read(f->proc_fd, "irq/24/smp_affinity_list"), "0-1");
        assert_string_equal(fx_read(f->proc_fd, "irq/41/smp_affinity_list"), "0-1");
        assert_string_equal(fx_read(f->proc_fd, "irq/42/smp_affinity_list"), "1");    /* already fine */
        assert_string_equal(fx_read(f->proc_fd, "irq/40/smp_affinity_list"), "3");    /* refused */
        assert_string_equal(fx_read(f->proc_fd, "irq/25/smp_affinity_list"), "2-3");  /* failed */
        assert_string_equal(fx_read(f->proc_fd, "irq/default_smp_affinity"), "00000003");
        assert_int_equal(st.total, 5);
        assert_int_equal(st.moved, 2);
        assert_int_equal(st.already, 1);
        assert_int_equal(st.failed, 1);
        assert_int_equal(st.n_unmovable, 1);
        assert_int_equal(st.unmovable[0].irq, 40);
        assert_string_equal(st.unmovable[0].name, "nvme0q3");
        assert_set(&st.unmovable[0].hits, "3");
        assert_non_null(strstr(st.unmovable[0].reason, "managed"));

        /* The journal holds originals of what changed, and nothing for what did not. */
        Journal *j = NULL;
        char *problem = NULL;
        assert_int_equal(journal_load(f->run_fd, &j, &problem), 1);
        assert_null(problem);
        assert_non_null(journal_find(j, JOURNAL_KNOB, KNOB_PROC, "irq/24/smp_affinity_list"));
        assert_string_equal(journal_find(j, JOURNAL_KNOB, KNOB_PROC, "irq/24/smp_affinity_list")->original,
                            "0-3");
        assert_null(journal_find(j, JOURNAL_KNOB, KNOB_PROC, "irq/40/smp_affinity_list"));
        assert_null(journal_find(j, JOURNAL_KNOB, KNOB_PROC, "irq/25/smp_affinity_list"));
        assert_string_equal(journal_find(j, JOURNAL_KNOB, KNOB_PROC, "irq/default_smp_affinity")->original, "f");
        journal_free(j);

        json_t *js = irq_state_to_json(&st);
        json_t *u = json_array_get(json_object_get(js, "unmovable"), 0);
        assert_int_equal(json_integer_value(json_object_get(u, "irq")), 40);
        assert_string_equal(json_string_value(json_object_get(u, "reserved_cpus_hit")), "3");
        assert_non_null(strstr(json_string_value(json_object_get(u, "remedy")), "isolcpus=managed_irq,2-3 "));
        json_decref(js);

        /* Drift: someone puts IRQ 24 back on every CPU; the check re-applies and counts it. Known
         * unmovable IRQs are not retried by a drift check. */
        fx_write(f->proc_fd, "irq/24/smp_affinity_list", "0-3\n");
        unsigned before = writes;
        assert_int_equal(irq_apply(&f->k, &hk, &reserved, 4, true, &st), 0);
        assert_string_equal(fx_read(f->proc_fd, "irq/24/smp_affinity_list"), "0-1");
        assert_int_equal(st.drifted, 1);
        assert_int_equal(st.n_unmovable, 1);
        assert_int_equal(writes - before, 2);   /* IRQ 24, and IRQ 25 tried again (not retried: ENODEV) */

        /* Restore: every original back, the refused ones untouched. */
        assert_int_equal(journal_replay(f->journal, f->proc_fd, f->sys_fd, &rep), 0);
        assert_int_equal(rep.failed, 0);
        assert_string_equal(fx_read(f->proc_fd, "irq/24/smp_affinity_list"), "0-3");
        assert_string_equal(fx_read(f->proc_fd, "irq/41/smp_affinity_list"), "0-3");
        assert_string_equal(fx_read(f->proc_fd, "irq/42/smp_affinity_list"), "1");
        assert_string_equal(fx_read(f->proc_fd, "irq/default_smp_affinity"), "f");
        replay_report_done(&rep);
        irq_state_done(&st);
        knob_fixture_free(f);
}

static void test_plan_writes_nothing(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        CpuSet hk = set_of("0"), reserved = set_of("1-3");
        IrqState st = {};
        json_t *plan = json_array();

        inject_reset();
        f->k.write = hook_write;
        f->k.plan = plan;
        assert_int_equal(irq_apply(&f->k, &hk, &reserved, 4, false, &st), 0);
        assert_int_equal(writes, 0);
        assert_string_equal(fx_read(f->proc_fd, "irq/24/smp_affinity_list"), "0-3");
        assert_int_equal(f->journal->n_entries, 0);
        /* 24, 25, 40, 41, 42 and default_smp_affinity would change. */
        assert_int_equal(json_array_size(plan), 6);
        json_t *w = json_array_get(plan, 0);
        assert_string_equal(json_string_value(json_object_get(w, "path")), "/proc/irq/24/smp_affinity_list");
        assert_string_equal(json_string_value(json_object_get(w, "from")), "0-3");
        assert_string_equal(json_string_value(json_object_get(w, "to")), "0");
        json_decref(plan);
        irq_state_done(&st);
        knob_fixture_free(f);
}

static void test_wide_fixture(void **state) {
        KnobFixture *f = knob_fixture_new("irq-wide");
        CpuSet hk = set_of("0-3,256-259"), reserved = set_of("4-255,260-287");
        IrqState st = {};
        ReplayReport rep;

        f->k.write = fx_kernel_write;
        assert_int_equal(irq_apply(&f->k, &hk, &reserved, 288, false, &st), 0);
        assert_string_equal(fx_read(f->proc_fd, "irq/100/smp_affinity_list"), "0-3,256-259");
        assert_string_equal(fx_read(f->proc_fd, "irq/101/smp_affinity_list"), "256-259");
        assert_string_equal(fx_read(f->proc_fd, "irq/default_smp_affinity"),
                            "0000000f,00000000,00000000,00000000,00000000,00000000,00000000,00000000,0000000f");
        assert_int_equal(journal_replay(f->journal, f->proc_fd, f->sys_fd, &rep), 0);
        assert_string_equal(fx_read(f->proc_fd, "irq/default_smp_affinity"),
                            "ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff");
        assert_string_equal(fx_read(f->proc_fd, "irq/101/smp_affinity_list"), "256-287");
        replay_report_done(&rep);
        irq_state_done(&st);
        knob_fixture_free(f);
}

static void test_irqbalance(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char buf[128] = {};
        int srv, c;

        assert_int_equal(irqbalance_find(f->proc_fd), 4321);
        /* A stand-in for irqbalance's control socket: the reset command arrives as irqbalance parses it. */
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s/irqbalance.sock", f->dir);
        srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(srv >= 0);
        assert_int_equal(bind(srv, (struct sockaddr *) &sa, sizeof sa), 0);
        assert_int_equal(listen(srv, 1), 0);
        assert_int_equal(irqbalance_reset(getpid(), sa.sun_path), 0);
        c = accept(srv, NULL, NULL);
        assert_true(c >= 0);
        assert_true(read(c, buf, sizeof buf - 1) > 0);
        assert_string_equal(buf, "settings cpus NULL");
        close(c);
        close(srv);
        /* irqbalance gone: nothing to reset. */
        assert_int_equal(irqbalance_reset(999999, sa.sun_path), -ESRCH);
        knob_fixture_free(f);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_target_mask),
                cmocka_unit_test(test_wide_masks),
                cmocka_unit_test(test_classify),
                cmocka_unit_test(test_parse_interrupts),
                cmocka_unit_test(test_apply_refusals_restore),
                cmocka_unit_test(test_plan_writes_nothing),
                cmocka_unit_test(test_wide_fixture),
                cmocka_unit_test(test_irqbalance),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
