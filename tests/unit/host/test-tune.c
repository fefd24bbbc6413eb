/* SPDX-License-Identifier: MIT */
/* Tuning knobs and the cgroup v2 backend on fixture trees: configured values, keep, unavailable knobs and
 * why, workqueue masks, the fair server per reserved CPU, cpusets and the isolated partition, and restore. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/config.h"
#include "host/backend.h"
#include "host/residual.h"
#include "host/tune.h"
#include "knob-fixture.h"

static CpuSet set_of(const char *s) {
        CpuSet set;
        assert_int_equal(cpuset_parse(s, &set, NULL), 0);
        return set;
}

static const TuneKnob *knob(const TuneState *st, const char *name) {
        for (size_t i = 0; i < st->n_knobs; i++)
                if (streq(st->knobs[i].name, name))
                        return &st->knobs[i];
        fail_msg("no knob %s", name);
        return NULL;
}

static void test_tune_apply_restore(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        _cleanup_(config_freep) RtdConfig *c = config_new();
        CpuSet hk = set_of("0"), reserved = set_of("2-3");
        TuneState st = {};
        ReplayReport rep;

        f->k.write = fx_kernel_write;
        c->rt_runtime_usec = -1;
        c->fair_server_runtime_usec = 0;
        c->timer_migration = 0;
        /* StatIntervalSec= stays "keep". */
        assert_int_equal(tune_apply(&f->k, c, &hk, &reserved, 4, &st), 0);

        assert_string_equal(fx_read(f->proc_fd, "sys/kernel/sched_rt_runtime_us"), "-1");
        assert_string_equal(fx_read(f->proc_fd, "sys/kernel/timer_migration"), "0");
        assert_string_equal(fx_read(f->proc_fd, "sys/vm/stat_interval"), "1");
        /* The fair server only on reserved CPUs: housekeeping keeps its starvation protection. */
        assert_string_equal(fx_read(f->sys_fd, "kernel/debug/sched/fair_server/cpu0/runtime"), "50000000");
        assert_string_equal(fx_read(f->sys_fd, "kernel/debug/sched/fair_server/cpu1/runtime"), "50000000");
        assert_string_equal(fx_read(f->sys_fd, "kernel/debug/sched/fair_server/cpu2/runtime"), "0");
        assert_string_equal(fx_read(f->sys_fd, "kernel/debug/sched/fair_server/cpu3/runtime"), "0");
        assert_string_equal(fx_read(f->sys_fd, "devices/virtual/workqueue/cpumask"), "00000001");
        assert_string_equal(fx_read(f->sys_fd, "devices/virtual/workqueue/writeback/cpumask"), "00000001");

        const TuneKnob *t = knob(&st, "kernel.sched_rt_runtime_us");
        assert_int_equal(t->outcome, KNOB_SET);
        assert_string_equal(t->original, "950000");
        t = knob(&st, "vm.stat_interval");
        assert_int_equal(t->outcome, KNOB_LEFT_ALONE);
        assert_string_equal(t->why, "StatIntervalSec=keep");
        t = knob(&st, "fair_server.cpu2.runtime_ns");
        assert_string_equal(t->original, "50000000");

        json_t *j = tune_state_to_json(&st, f->proc_fd, f->sys_fd);
        json_t *first = NULL, *e;
        size_t i;
        /* After the fair server's (written first: tune_apply() says why). */
        json_array_foreach(j, i, e)
                if (!first && streq(json_string_value(json_object_get(e, "name")), "kernel.sched_rt_runtime_us"))
                        first = e;
        assert_non_null(first);
        assert_true(i > 0 && streq(json_string_value(json_object_get(json_array_get(j, 0), "name")),
                                   "fair_server.cpu2.runtime_ns"));
        assert_string_equal(json_string_value(json_object_get(first, "original")), "950000");
        assert_string_equal(json_string_value(json_object_get(first, "current")), "-1");
        assert_string_equal(json_string_value(json_object_get(first, "path")), "/proc/sys/kernel/sched_rt_runtime_us");
        json_decref(j);

        assert_int_equal(journal_replay(f->journal, f->proc_fd, f->sys_fd, &rep), 0);
        assert_string_equal(fx_read(f->proc_fd, "sys/kernel/sched_rt_runtime_us"), "950000");
        assert_string_equal(fx_read(f->proc_fd, "sys/kernel/timer_migration"), "1");
        assert_string_equal(fx_read(f->sys_fd, "kernel/debug/sched/fair_server/cpu3/runtime"), "50000000");
        assert_string_equal(fx_read(f->sys_fd, "devices/virtual/workqueue/cpumask"), "f");
        assert_string_equal(fx_read(f->sys_fd, "devices/virtual/workqueue/writeback/cpumask"), "f");
        replay_report_done(&rep);
        tune_state_done(&st);
        knob_fixture_free(f);
}

/* kernel.sched_rt_runtime_us is read once, at the reservation: on 6.12 each read rebuilds the scheduler's
 * root domains (tune.h). Status and the residual list report the value rtd knows; other knobs are read live. */
static void test_status_does_not_read_rt_runtime_again(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        _cleanup_(config_freep) RtdConfig *c = config_new();
        CpuSet hk = set_of("0"), reserved = set_of("2-3");
        TuneState st = {};
        char path[PATH_MAX];

        f->k.write = fx_kernel_write;
        c->rt_runtime_usec = -1;
        assert_int_equal(tune_apply(&f->k, c, &hk, &reserved, 4, &st), 0);
        assert_string_equal(tune_known_value(&st, "kernel.sched_rt_runtime_us"), "-1");
        assert_string_equal(tune_known_value(&st, "kernel.timer_migration"), "1");     /* keep: as read */
        assert_null(tune_known_value(&st, "no.such.knob"));

        /* Any read of the sysctl now fails (a directory in its place), and timer_migration changes under rtd. */
        snprintf(path, sizeof path, "%s/proc/sys/kernel/sched_rt_runtime_us", f->dir);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(mkdir(path, 0755), 0);
        fx_write(f->proc_fd, "sys/kernel/timer_migration", "0");

        json_t *j = tune_state_to_json(&st, f->proc_fd, f->sys_fd), *e;
        size_t i;
        bool rt_seen = false, tm_seen = false;
        json_array_foreach(j, i, e) {
                const char *name = json_string_value(json_object_get(e, "name"));
                const char *cur = json_string_value(json_object_get(e, "current"));
                if (streq(name, "kernel.sched_rt_runtime_us"))
                        rt_seen = cur && streq(cur, "-1");
                if (streq(name, "kernel.timer_migration"))
                        tm_seen = cur && streq(cur, "0");
        }
        assert_true(rt_seen);
        assert_true(tm_seen);
        json_decref(j);

        json_t *res = residual_sources(f->proc_fd, f->sys_fd, &reserved, &st);
        rt_seen = false;
        json_array_foreach(res, i, e)
                if (streq(json_string_value(json_object_get(e, "source")), "RT throttling")) {
                        assert_string_equal(json_string_value(json_object_get(e, "evidence")),
                                            "kernel.sched_rt_runtime_us=-1");
                        assert_false(json_is_true(json_object_get(e, "reaches")));
                        rt_seen = true;
                }
        assert_true(rt_seen);
        json_decref(res);

        tune_state_done(&st);
        knob_fixture_free(f);
}

static void test_tune_reapply_after_reload(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        _cleanup_(config_freep) RtdConfig *c = config_new();
        CpuSet hk = set_of("0-1"), reserved = set_of("2-3"), smaller = set_of("3");
        TuneState st = {};

        f->k.write = fx_kernel_write;
        c->rt_runtime_usec = -1;
        c->fair_server_runtime_usec = 0;
        assert_int_equal(tune_apply(&f->k, c, &hk, &reserved, 4, &st), 0);
        assert_string_equal(fx_read(f->proc_fd, "sys/kernel/sched_rt_runtime_us"), "-1");
        /* A reload with RTRuntimeUSec=keep puts the original back; CPU 2 leaving gets its fair server back. */
        c->rt_runtime_usec = TUNE_KEEP;
        assert_int_equal(tune_apply(&f->k, c, &hk, &smaller, 4, &st), 0);
        assert_string_equal(fx_read(f->proc_fd, "sys/kernel/sched_rt_runtime_us"), "950000");
        assert_null(journal_find(f->journal, JOURNAL_KNOB, KNOB_PROC, "sys/kernel/sched_rt_runtime_us"));
        assert_string_equal(fx_read(f->sys_fd, "kernel/debug/sched/fair_server/cpu2/runtime"), "50000000");
        assert_string_equal(fx_read(f->sys_fd, "kernel/debug/sched/fair_server/cpu3/runtime"), "0");
        tune_state_done(&st);
        knob_fixture_free(f);
}

static void test_fair_server_unavailable(void **state) {
        KnobFixture *f = knob_fixture_new("irq-wide");     /* debugfs with sched/ but no fair_server */
        KnobFixture *g = knob_fixture_new("irq-cgroup");   /* no debugfs at all */
        _cleanup_(config_freep) RtdConfig *c = config_new();
        CpuSet hk = set_of("0"), reserved = set_of("1");
        TuneState st = {};
        char *why;

        struct utsname u;

        assert_int_equal(tune_fair_server_probe(f->sys_fd, "6.18.4", &why), -EOPNOTSUPP);
        assert_non_null(strstr(why, "no fair deadline server"));
        free(why);
        /* No debugfs: the release says whether there is a fair server to turn off. */
        assert_int_equal(tune_fair_server_probe(g->sys_fd, "6.12.0-1-amd64", &why), -ENOENT);
        assert_non_null(strstr(why, "debugfs is not mounted"));
        free(why);
        assert_int_equal(tune_fair_server_probe(g->sys_fd, "6.1.0-50-amd64", &why), -EOPNOTSUPP);
        assert_non_null(strstr(why, "no fair deadline server"));
        free(why);

        /* Asked for where it cannot be done: a failure that says why, never a silent "unavailable" (on a
         * kernel without a fair server, as uname says here, there is nothing to turn off). */
        c->fair_server_runtime_usec = 0;
        c->rt_runtime_usec = -1;
        assert_int_equal(tune_apply(&g->k, c, &hk, &reserved, 2, &st), 0);
        const TuneKnob *t = knob(&st, "fair_server.runtime");
        assert_int_equal(uname(&u), 0);
        if (tune_fair_server_probe(g->sys_fd, u.release, &why) == -ENOENT) {
                assert_int_equal(t->outcome, KNOB_FAILED);
                assert_non_null(strstr(t->why, "FairServerRuntimeUSec=0 not applied: debugfs is not mounted"));
        } else
                assert_int_equal(t->outcome, KNOB_UNAVAILABLE);
        free(why);
        t = knob(&st, "kernel.sched_rt_runtime_us");
        assert_int_equal(t->outcome, KNOB_UNAVAILABLE);  /* the fixture has no /proc/sys */
        tune_state_done(&st);
        knob_fixture_free(f);
        knob_fixture_free(g);
}

/* debugfs unmounted after rtd turned the fair server off: the value is still in force, so no path may drop
 * the journal entry as "gone" (as an IRQ that went away with its device is): the stop's replay fails and
 * says so, and a replay once debugfs is back puts the original back. */
static void test_fair_server_restore_waits_for_debugfs(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        _cleanup_(config_freep) RtdConfig *c = config_new();
        CpuSet hk = set_of("0-1"), reserved = set_of("2-3"), smaller = set_of("3");
        ReplayReport rep;
        TuneState st = {};

        c->fair_server_runtime_usec = 0;
        assert_int_equal(tune_apply(&f->k, c, &hk, &reserved, 4, &st), 0);
        assert_string_equal(fx_read(f->sys_fd, "kernel/debug/sched/fair_server/cpu2/runtime"), "0");
        assert_int_equal(renameat(f->sys_fd, "kernel/debug", f->sys_fd, "kernel/debug-unmounted"), 0);
        /* CPU 2 leaves while debugfs is away: its entry stays. */
        assert_int_equal(tune_apply(&f->k, c, &hk, &smaller, 4, &st), 0);
        assert_non_null(journal_find(f->journal, JOURNAL_KNOB, KNOB_SYS, "kernel/debug/sched/fair_server/cpu2/runtime"));
        assert_int_equal(journal_replay(f->journal, f->proc_fd, f->sys_fd, &rep), -EIO);
        assert_int_equal(rep.failed, 2);
        assert_int_equal(rep.skipped, 0);
        assert_non_null(strstr(json_string_value(json_object_get(json_array_get(rep.problems, 0), "error")),
                               "debugfs is no longer mounted"));
        replay_report_done(&rep);
        assert_int_equal(renameat(f->sys_fd, "kernel/debug-unmounted", f->sys_fd, "kernel/debug"), 0);
        assert_int_equal(journal_replay(f->journal, f->proc_fd, f->sys_fd, &rep), 0);
        assert_string_equal(fx_read(f->sys_fd, "kernel/debug/sched/fair_server/cpu2/runtime"), "50000000");
        assert_string_equal(fx_read(f->sys_fd, "kernel/debug/sched/fair_server/cpu3/runtime"), "50000000");
        replay_report_done(&rep);
        tune_state_done(&st);
        knob_fixture_free(f);
}

static int partition_refused(int dir_fd, const char *path, const char *value) {
        /* What the kernel shows when it takes the word but cannot make the partition. */
        if (strstr(path, "cpuset.cpus.partition") && streq(value, "isolated"))
                return fx_kernel_write(dir_fd, path, "isolated invalid (Cpu list in cpuset.cpus not exclusive)");
        return fx_kernel_write(dir_fd, path, value);
}

static void test_cgroup_backend(void **state) {
        KnobFixture *f = knob_fixture_new("irq-cgroup");
        CpuSet hk = set_of("0-1"), reserved = set_of("2-3");
        CgroupState st = {};
        ReplayReport rep;
        char *why = NULL;

        assert_true(cgroup_v2_cpuset_available(f->sys_fd, &why));
        f->k.write = fx_kernel_write;
        assert_int_equal(cgroup_backend_apply(&f->k, &hk, &reserved, &st), 0);
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/cgroup.subtree_control"), "+cpuset");
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/system.slice/cpuset.cpus"), "0-1");
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/user.slice/cpuset.cpus"), "0-1");
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/init.scope/cpuset.cpus"), "0-1");
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/rtd-reserved/cpuset.cpus"), "2-3");
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/rtd-reserved/cpuset.cpus.exclusive"), "2-3");
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/rtd-reserved/cpuset.cpus.partition"), "isolated");
        assert_string_equal(st.partition, "isolated");
        assert_null(st.partition_note);
        assert_string_equal(st.reserved_cgroup, "rtd-reserved");
        assert_int_equal(json_array_size(st.shrunk), 3);

        assert_int_equal(journal_replay(f->journal, f->proc_fd, f->sys_fd, &rep), 0);
        assert_int_equal(rep.failed, 0);
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/system.slice/cpuset.cpus"), "0-3");
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/user.slice/cpuset.cpus"), "");      /* unset again */
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/rtd-reserved/cpuset.cpus.partition"), "member");
        /* The controller is switched off the way cgroupfs wants it, not by writing the old text. */
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/cgroup.subtree_control"), "-cpuset");
        replay_report_done(&rep);
        cgroup_state_done(&st);

        /* A partition the kernel refuses is reported and set back to member. */
        journal_remove(f->journal);
        f->k.write = partition_refused;
        assert_int_equal(cgroup_backend_apply(&f->k, &hk, &reserved, &st), 0);
        assert_non_null(strstr(st.partition_note, "not exclusive"));
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/rtd-reserved/cpuset.cpus.partition"), "member");
        cgroup_state_done(&st);
        knob_fixture_free(f);
}

static void test_backend_detect(void **state) {
        KnobFixture *f = knob_fixture_new("irq-cgroup");
        KnobFixture *g = knob_fixture_new("irq-basic");
        BackendKind b;
        char *reason = NULL;

        /* A fixture /proc is not a real one: tasks are never touched there. */
        assert_false(proc_is_procfs(f->proc_fd));
        assert_int_equal(backend_detect(f->proc_fd, f->sys_fd, BACKEND_AUTO, &b, &reason), 0);
        assert_int_equal(b, BACKEND_AFFINITY);
        free(reason);
        assert_int_equal(backend_detect(g->proc_fd, g->sys_fd, BACKEND_CGROUP, &b, &reason), -EOPNOTSUPP);
        assert_non_null(strstr(reason, "Backend=cgroup"));
        free(reason);
        assert_int_equal(backend_detect(g->proc_fd, g->sys_fd, BACKEND_SYSTEMD, &b, &reason), -EOPNOTSUPP);
        assert_non_null(strstr(reason, "Backend=systemd"));
        free(reason);
        assert_int_equal(backend_detect(f->proc_fd, f->sys_fd, BACKEND_CGROUP, &b, &reason), 0);
        assert_int_equal(b, BACKEND_CGROUP);
        free(reason);
        knob_fixture_free(f);
        knob_fixture_free(g);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_tune_apply_restore),
                cmocka_unit_test(test_status_does_not_read_rt_runtime_again),
                cmocka_unit_test(test_tune_reapply_after_reload),
                cmocka_unit_test(test_fair_server_unavailable),
                cmocka_unit_test(test_fair_server_restore_waits_for_debugfs),
                cmocka_unit_test(test_cgroup_backend),
                cmocka_unit_test(test_backend_detect),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
