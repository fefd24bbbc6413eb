/* SPDX-License-Identifier: MIT */
/* Reservation validation on captured topologies (laptop with SMT): empty, offline, no housekeeping CPU,
 * SMT=exclusive whole cores; and a leftover journal is restored by reservation_new(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/manager.h"
#include "host/topology.h"
#include "knob-fixture.h"
#include "reserve/reserve.h"

static CpuSet set_of(const char *s) {
        CpuSet set;
        assert_int_equal(cpuset_parse(s, &set, NULL), 0);
        return set;
}

typedef struct Env {
        KnobFixture *f;
        Manager m;
        Reservation *r;
} Env;

static Env *env_new(const char *topology, SmtMode smt) {
        Env *e = calloc(1, sizeof *e);
        char path[512];
        int fd;

        assert_non_null(e);
        e->f = knob_fixture_new("irq-basic");
        snprintf(path, sizeof path, "%s/%s/sys", fixtures_dir(), topology);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(topology_load(fd, &e->m.topology), 0);
        close(fd);
        e->m.config = config_new();
        e->m.config->smt = smt;
        e->m.proc_fd = e->f->proc_fd;
        e->m.sys_fd = e->f->sys_fd;
        e->m.runtime_fd = e->f->run_fd;
        assert_int_equal(reservation_new(&e->m, &e->r), 0);
        return e;
}

static void env_free(Env *e) {
        reservation_free(e->r);
        topology_free(e->m.topology);
        config_free(e->m.config);
        knob_fixture_free(e->f);
        free(e);
}

static void expect_error(Env *e, const char *cpus, const char *needle) {
        CpuSet s = set_of(cpus);
        char *err = NULL;

        assert_int_equal(reservation_validate(e->r, &s, &err), -EINVAL);
        assert_non_null(err);
        if (!strstr(err, needle))
                fail_msg("error for %s: \"%s\" does not say \"%s\"", cpus, err, needle);
        assert_true(startswith(err, "cpus: "));
        free(err);
}

static void test_validate(void **state) {
        Env *e = env_new("laptop-2c4t", SMT_EXCLUSIVE);   /* cores {0,2} and {1,3} */
        CpuSet ok = set_of("1,3");
        char *err = NULL;

        expect_error(e, "", "empty");
        expect_error(e, "9", "not online");
        expect_error(e, "0-3", "no housekeeping CPU");
        expect_error(e, "1", "shares its core with CPU 3");
        expect_error(e, "1", "SMT=shared");
        assert_int_equal(reservation_validate(e->r, &ok, &err), 0);
        assert_null(err);
        env_free(e);

        e = env_new("laptop-2c4t", SMT_SHARED);
        ok = set_of("1");
        assert_int_equal(reservation_validate(e->r, &ok, &err), 0);
        expect_error(e, "0-3", "no housekeeping CPU");
        env_free(e);
}

static void test_leftover_journal_restored(void **state) {
        KnobFixture *f = knob_fixture_new("irq-basic");
        Journal *j = journal_new(f->run_fd);
        char path[512];
        Manager m = {};
        Reservation *r;
        struct stat sb;

        /* A dead run changed a knob and left its journal. */
        assert_int_equal(journal_add(j, JOURNAL_KNOB, KNOB_PROC, "sys/kernel/sched_rt_runtime_us", "950000", NULL,
                                     NULL), 0);
        assert_int_equal(journal_flush(j), 0);
        journal_free(j);
        fx_write(f->proc_fd, "sys/kernel/sched_rt_runtime_us", "-1");

        snprintf(path, sizeof path, "%s/laptop-2c4t/sys", fixtures_dir());
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(topology_load(fd, &m.topology), 0);
        close(fd);
        m.config = config_new();
        m.proc_fd = f->proc_fd;
        m.sys_fd = f->sys_fd;
        m.runtime_fd = f->run_fd;
        assert_int_equal(reservation_new(&m, &r), 0);
        /* Loaded, not yet decided on: a start without a reservation restores it. */
        assert_string_equal(fx_read(f->proc_fd, "sys/kernel/sched_rt_runtime_us"), "-1");
        CpuSet none;
        cpuset_zero(&none);
        assert_int_equal(reservation_start(r, &none), 0);
        assert_string_equal(fx_read(f->proc_fd, "sys/kernel/sched_rt_runtime_us"), "950000");
        assert_int_equal(fstatat(f->run_fd, JOURNAL_FILE, &sb, 0), -1);
        json_t *s = reservation_to_json(r);
        assert_string_equal(json_string_value(json_object_get(s, "state")), "none");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "last_restore"), "restored")), 1);
        json_decref(s);
        reservation_free(r);

        /* rtd --restore with nothing to do. */
        assert_int_equal(reservation_restore_only(f->proc_fd, f->sys_fd, f->run_fd), 0);
        topology_free(m.topology);
        config_free(m.config);
        knob_fixture_free(f);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_validate),
                cmocka_unit_test(test_leftover_journal_restored),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
