/* SPDX-License-Identifier: MIT */
/* The restore journal: round trips of every entry kind, durability before a write, torn and corrupt
 * journals (reported, salvaged), versions, replay order and task stat parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "host/backend.h"
#include "host/tune.h"
#include "knob-fixture.h"

static Journal *sample(int dir_fd) {
        Journal *j = journal_new(dir_fd);
        JournalEntry *e;
        CpuSet s;

        assert_non_null(j);
        assert_int_equal(journal_add(j, JOURNAL_KNOB, KNOB_PROC, "irq/24/smp_affinity_list", "0-3", &e, NULL), 0);
        assert_int_equal(journal_entry_set_applied(j, e, "0"), 0);
        assert_int_equal(journal_add(j, JOURNAL_KNOB, KNOB_SYS, "fs/cgroup/cgroup.subtree_control", "memory", &e,
                                     NULL), 0);
        assert_int_equal(journal_entry_set_undo(j, e, "-cpuset"), 0);
        assert_int_equal(cpuset_parse("0-3", &s, NULL), 0);
        assert_int_equal(journal_add_task(j, 4242, 987654, "my (odd) comm", &s, &e, NULL), 0);
        assert_int_equal(journal_entry_set_applied(j, e, "0-1"), 0);
        assert_int_equal(journal_add(j, JOURNAL_UNIT, KNOB_PROC, "system.slice", "", NULL, NULL), 0);
        assert_int_equal(journal_add(j, JOURNAL_UNIT_STOP, KNOB_PROC, "rtd.slice", NULL, NULL, NULL), 0);
        assert_int_equal(journal_add(j, JOURNAL_MKDIR, KNOB_SYS, "fs/cgroup/rtd-reserved", NULL, NULL, NULL), 0);
        assert_int_equal(journal_add(j, JOURNAL_IRQBALANCE, KNOB_PROC, "@irqbalance77.sock", "NULL", &e, NULL), 0);
        e->pid = 77;
        json_object_set_new(j->meta, "reserved", json_string("2-3"));
        return j;
}

static void assert_same(const Journal *a, const Journal *b) {
        assert_int_equal(a->n_entries, b->n_entries);
        for (size_t i = 0; i < a->n_entries; i++) {
                const JournalEntry *x = &a->entries[i], *y = &b->entries[i];
                assert_int_equal(x->kind, y->kind);
                assert_int_equal(x->root, y->root);
                assert_true(streq_ptr(x->key, y->key));
                assert_true(streq_ptr(x->original, y->original));
                assert_true(streq_ptr(x->undo, y->undo));
                assert_true(streq_ptr(x->applied, y->applied));
                assert_true(streq_ptr(x->comm, y->comm));
                assert_int_equal(x->pid, y->pid);
                assert_int_equal(x->starttime, y->starttime);
        }
}

static void test_round_trip(void **state) {
        _cleanup_(journal_freep) Journal *j = sample(-1), *k = journal_new(-1);
        _cleanup_free_ char *text = journal_serialize(j), *problem = NULL;

        assert_non_null(text);
        assert_non_null(strstr(text, "\"version\":1"));
        assert_int_equal(journal_parse(k, text, &problem), 0);
        assert_null(problem);
        assert_same(j, k);
        assert_string_equal(json_string_value(json_object_get(k->meta, "reserved")), "2-3");
}

static void test_first_original_wins(void **state) {
        _cleanup_(journal_freep) Journal *j = journal_new(-1);
        JournalEntry *e;
        bool added;

        assert_int_equal(journal_add(j, JOURNAL_KNOB, KNOB_PROC, "sys/kernel/sched_rt_runtime_us", "950000", &e,
                                     &added), 0);
        assert_true(added);
        assert_int_equal(journal_add(j, JOURNAL_KNOB, KNOB_PROC, "sys/kernel/sched_rt_runtime_us", "-1", &e,
                                     &added), 0);
        assert_false(added);
        assert_string_equal(e->original, "950000");
        assert_int_equal(j->n_entries, 1);
}

static void test_torn_and_corrupt(void **state) {
        _cleanup_(journal_freep) Journal *j = sample(-1);
        _cleanup_free_ char *text = journal_serialize(j);
        char *problem = NULL;

        /* Torn in the middle of the fourth entry: the three before it are salvaged. */
        const char *p = text;
        for (int line = 0; line < 4; line++)
                p = strchr(p, '\n') + 1;
        _cleanup_free_ char *torn = strndup(text, (size_t) (p - text) + 10);
        Journal *k = journal_new(-1);
        assert_int_equal(journal_parse(k, torn, &problem), 0);
        assert_non_null(problem);
        assert_non_null(strstr(problem, "damaged"));
        assert_non_null(strstr(problem, "salvaged 3 entries"));
        assert_int_equal(k->n_entries, 3);
        assert_string_equal(k->entries[2].comm, "my (odd) comm");
        free(problem);
        journal_free(k);

        /* Garbage: reported, nothing to restore, no crash. */
        k = journal_new(-1);
        assert_int_equal(journal_parse(k, "\x01\x02 not json {{{", &problem), 0);
        assert_non_null(problem);
        assert_int_equal(k->n_entries, 0);
        free(problem);
        journal_free(k);

        /* A bad entry among good ones: skipped and counted; unknown kinds, paths escaping the root and pids
         * no pid_t holds too. */
        k = journal_new(-1);
        assert_int_equal(journal_parse(k,
                                       "{\"version\":1,\"entries\":[\n"
                                       "{\"kind\":\"knob\",\"root\":\"proc\",\"key\":\"irq/5/smp_affinity_list\",\"original\":\"0-1\"},\n"
                                       "{\"kind\":\"teleport\",\"key\":\"x\"},\n"
                                       "{\"kind\":\"knob\",\"root\":\"proc\",\"key\":\"../etc/passwd\",\"original\":\"x\"},\n"
                                       "{\"kind\":\"task\",\"original\":\"0\"},\n"
                                       "{\"kind\":\"task\",\"pid\":2147483648,\"original\":\"0\"},\n"
                                       "42\n"
                                       "]}\n",
                                       &problem),
                         0);
        assert_non_null(problem);
        assert_non_null(strstr(problem, "5 unreadable"));
        assert_int_equal(k->n_entries, 1);
        free(problem);
        journal_free(k);

        /* A newer version: said so, entries still restored. */
        k = journal_new(-1);
        assert_int_equal(journal_parse(k,
                                       "{\"version\":7,\"entries\":[\n"
                                       "{\"kind\":\"knob\",\"root\":\"sys\",\"key\":\"devices/virtual/workqueue/cpumask\",\"original\":\"f\"}\n"
                                       "]}\n",
                                       &problem),
                         0);
        assert_non_null(strstr(problem, "version 7"));
        assert_int_equal(k->n_entries, 1);
        free(problem);
        journal_free(k);
}

static void test_flush_load_remove(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        _cleanup_(journal_freep) Journal *j = sample(f->run_fd);
        Journal *k = NULL;
        char *problem = NULL;
        struct stat sb;

        assert_int_equal(journal_flush(j), 0);
        assert_int_equal(fstatat(f->run_fd, JOURNAL_FILE, &sb, 0), 0);
        assert_int_equal(sb.st_mode & 0777, 0600);
        assert_int_equal(journal_load(f->run_fd, &k, &problem), 1);
        assert_null(problem);
        assert_same(j, k);
        journal_free(k);
        /* No temp files left behind. */
        char cmd[256];
        snprintf(cmd, sizeof cmd, "test \"$(ls -A '%s/run')\" = %s", f->dir, JOURNAL_FILE);
        assert_int_equal(system(cmd), 0);

        assert_int_equal(journal_remove(j), 0);
        assert_int_equal(fstatat(f->run_fd, JOURNAL_FILE, &sb, 0), -1);
        assert_int_equal(journal_load(f->run_fd, &k, &problem), 0);
        assert_null(k);
        knob_fixture_free(f);
}

/* The original must be on disk before the knob is written. */
static KnobFixture *durable_f;
static unsigned durable_checked;
static int durable_write(int dir_fd, const char *path, const char *value) {
        _cleanup_free_ char *text = NULL;
        assert_int_equal(read_full_file_at(durable_f->run_fd, JOURNAL_FILE, &text, NULL), 0);
        assert_non_null(strstr(text, "\"original\":\"950000\""));
        durable_checked++;
        return fx_kernel_write(dir_fd, path, value);
}

static void test_knob_set_durable_first(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        ReplayReport rep;
        char *cur = NULL;

        durable_f = f;
        f->k.write = durable_write;
        assert_int_equal(knob_set(&f->k, KNOB_PROC, "sys/kernel/sched_rt_runtime_us", "-1", &cur), 0);
        assert_string_equal(cur, "950000");
        free(cur);
        assert_int_equal(durable_checked, 1);
        assert_string_equal(fx_read(f->proc_fd, "sys/kernel/sched_rt_runtime_us"), "-1");
        /* Setting it again keeps the first original. */
        assert_int_equal(knob_set(&f->k, KNOB_PROC, "sys/kernel/sched_rt_runtime_us", "900000", NULL), 0);
        assert_string_equal(journal_find(f->journal, JOURNAL_KNOB, KNOB_PROC, "sys/kernel/sched_rt_runtime_us")
                                    ->original, "950000");
        assert_int_equal(journal_replay(f->journal, f->proc_fd, f->sys_fd, &rep), 0);
        assert_int_equal(rep.restored, 1);
        assert_string_equal(fx_read(f->proc_fd, "sys/kernel/sched_rt_runtime_us"), "950000");
        replay_report_done(&rep);

        /* A journal that cannot be written means no write at all. */
        Journal *bad = journal_new(9999);       /* not an fd */
        KnobCtx k = f->k;
        k.journal = bad;
        durable_checked = 0;
        assert_true(knob_set(&k, KNOB_PROC, "sys/vm/stat_interval", "10", NULL) < 0);
        assert_int_equal(durable_checked, 0);
        assert_string_equal(fx_read(f->proc_fd, "sys/vm/stat_interval"), "1");
        assert_int_equal(bad->n_entries, 0);
        journal_free(bad);
        knob_fixture_free(f);
}

static void test_replay_reverse_and_report(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        ReplayReport rep;
        JournalEntry *e;

        /* Two originals for files, one for a vanished IRQ (skipped), one unwritable (failed). */
        assert_int_equal(journal_add(f->journal, JOURNAL_KNOB, KNOB_PROC, "irq/24/smp_affinity_list", "0-3", &e,
                                     NULL), 0);
        assert_int_equal(journal_add(f->journal, JOURNAL_KNOB, KNOB_PROC, "irq/99/smp_affinity_list", "0-3", &e,
                                     NULL), 0);
        assert_int_equal(journal_add(f->journal, JOURNAL_KNOB, KNOB_PROC, "irq", "x", &e, NULL), 0);
        fx_write(f->proc_fd, "irq/24/smp_affinity_list", "0\n");
        assert_true(journal_replay(f->journal, f->proc_fd, f->sys_fd, &rep) < 0);
        assert_int_equal(rep.restored, 1);
        assert_int_equal(rep.skipped, 1);
        assert_int_equal(rep.failed, 1);
        assert_int_equal(json_array_size(rep.problems), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(rep.problems, 0), "what")),
                            "/proc/irq");
        assert_string_equal(fx_read(f->proc_fd, "irq/24/smp_affinity_list"), "0-3");
        replay_report_done(&rep);
        knob_fixture_free(f);
}

static void test_replay_empty_cpuset(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        ReplayReport rep;
        JournalEntry *e;

        /* An empty original cpuset.cpus (inherit the parent's CPUs) must really be written back: a
         * zero-length write would leave the housekeeping CPUs in place. */
        assert_int_equal(mkdir_p_at(f->sys_fd, "fs/cgroup/system.slice", 0755), 0);
        safe_close(openat(f->sys_fd, "fs/cgroup/system.slice/cpuset.cpus", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        fx_write(f->sys_fd, "fs/cgroup/system.slice/cpuset.cpus", "0-3\n");
        assert_int_equal(journal_add(f->journal, JOURNAL_KNOB, KNOB_SYS, "fs/cgroup/system.slice/cpuset.cpus", "",
                                     &e, NULL), 0);
        assert_int_equal(journal_replay(f->journal, f->proc_fd, f->sys_fd, &rep), 0);
        assert_int_equal(rep.restored, 1);
        assert_string_equal(fx_read(f->sys_fd, "fs/cgroup/system.slice/cpuset.cpus"), "");
        assert_null(rep.notes);
        replay_report_done(&rep);
        knob_fixture_free(f);
}

static void test_task_stat(void **state) {
        pid_t ppid;
        unsigned flags;
        uint64_t start;
        char *comm = NULL;

        assert_int_equal(task_parse_stat("1234 (a) b) (c) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
                                         "777123 1000 10",
                                         &ppid, &flags, &start, &comm),
                         0);
        assert_int_equal(ppid, 1);
        assert_int_equal(flags, 4194560);
        assert_int_equal(start, 777123);
        assert_string_equal(comm, "a) b) (c");
        free(comm);
        assert_int_equal(task_parse_stat("garbage", &ppid, NULL, NULL, NULL), -EINVAL);
}

static void test_restore_task_not_same(void **state) {
        /* A pid that is not ours to judge: wrong start time means another task; left alone. */
        int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(task_restore_affinity(proc, getpid(), 1, "0", "0"), 1);
        /* Same task, but its mask is not the one rtd set: someone changed it since; left alone. */
        _cleanup_free_ char *stat = NULL;
        char path[64];
        uint64_t start;
        snprintf(path, sizeof path, "%d/stat", (int) getpid());
        assert_int_equal(read_full_file_at(proc, path, &stat, NULL), 0);
        assert_int_equal(task_parse_stat(stat, NULL, NULL, &start, NULL), 0);
        cpu_set_t before;
        assert_int_equal(sched_getaffinity(0, sizeof before, &before), 0);
        assert_int_equal(task_restore_affinity(proc, getpid(), start, "0", "4095"), 1);
        cpu_set_t after;
        assert_int_equal(sched_getaffinity(0, sizeof after, &after), 0);
        assert_true(CPU_EQUAL(&before, &after));
        close(proc);
}

/* The journal undoes the kinds it cannot undo itself through what their owners registered: the owner gets
 * the entry, 1 counts as skipped, and a kind nobody registered fails its replay (reported, not dropped). */
static unsigned undo_calls;
static int fake_unit_stop_undo(const JournalEntry *e, int proc_fd, int sys_fd) {
        undo_calls++;
        assert_string_equal(e->key, undo_calls == 1 ? "b.slice" : "a.slice");
        return undo_calls == 1 ? 1 : 0;
}

static void test_registered_undo(void **state) {
        _cleanup_(journal_freep) Journal *j = journal_new(-1);
        ReplayReport rep;

        assert_int_equal(journal_add(j, JOURNAL_UNIT_STOP, KNOB_PROC, "a.slice", NULL, NULL, NULL), 0);
        assert_int_equal(journal_add(j, JOURNAL_UNIT_STOP, KNOB_PROC, "b.slice", NULL, NULL, NULL), 0);
        journal_register_undo(JOURNAL_UNIT_STOP, fake_unit_stop_undo);
        assert_int_equal(journal_replay(j, -1, -1, &rep), 0);
        assert_int_equal(undo_calls, 2);        /* newest first: b.slice, then a.slice */
        assert_int_equal(rep.skipped, 1);
        assert_int_equal(rep.restored, 1);
        replay_report_done(&rep);

        journal_register_undo(JOURNAL_UNIT_STOP, NULL);
        assert_int_equal(journal_replay(j, -1, -1, &rep), -EIO);
        assert_int_equal(rep.failed, 2);
        assert_int_equal(json_array_size(rep.problems), 2);
        replay_report_done(&rep);
        host_register_undos();                  /* the real owners again, for the tests after this one */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_first_original_wins),
                cmocka_unit_test(test_torn_and_corrupt),
                cmocka_unit_test(test_flush_load_remove),
                cmocka_unit_test(test_knob_set_durable_first),
                cmocka_unit_test(test_replay_reverse_and_report),
                cmocka_unit_test(test_replay_empty_cpuset),
                cmocka_unit_test(test_task_stat),
                cmocka_unit_test(test_restore_task_not_same),
                cmocka_unit_test(test_registered_undo),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
