/* SPDX-License-Identifier: MIT */
/* Issue 13 point 2: when `rtd --restore` as ExecStopPost= keeps knobs and jobs for the next rtd. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include <cmocka.h>

#include "jobs/job-scope.h"

static void test_pending_job(void **state) {
        /* systemctl restart (and its variants) keeps; systemctl stop and a shutdown restore, whatever the result. */
        assert_true(job_scope_keep_decision("restart", "success", NULL));
        assert_true(job_scope_keep_decision("try-restart", "success", NULL));
        assert_true(job_scope_keep_decision("reload-or-restart", "signal", NULL));
        assert_false(job_scope_keep_decision("stop", "success", "on-failure"));
        assert_false(job_scope_keep_decision("stop", "timeout", "always"));
}

static void test_died_by_itself(void **state) {
        /* kill -9, a watchdog kill, a crash: kept when Restart= brings rtd back. */
        assert_true(job_scope_keep_decision(NULL, "signal", "on-failure"));
        assert_true(job_scope_keep_decision(NULL, "watchdog", "on-failure"));
        assert_true(job_scope_keep_decision(NULL, "core-dump", "on-failure"));
        assert_true(job_scope_keep_decision(NULL, "exit-code", "on-failure"));
        assert_true(job_scope_keep_decision(NULL, "exit-code", "always"));
        assert_true(job_scope_keep_decision(NULL, "watchdog", "on-watchdog"));
        assert_true(job_scope_keep_decision(NULL, "core-dump", "on-abort"));
        assert_true(job_scope_keep_decision(NULL, "signal", "on-abort"));
        assert_false(job_scope_keep_decision(NULL, "watchdog", "on-abort"));
        assert_true(job_scope_keep_decision(NULL, "signal", "on-abnormal"));
        /* Not restarted: restore now. */
        assert_false(job_scope_keep_decision(NULL, "signal", "no"));
        assert_false(job_scope_keep_decision(NULL, "signal", "on-success"));
        assert_false(job_scope_keep_decision(NULL, "exit-code", "on-abnormal"));
        assert_false(job_scope_keep_decision(NULL, "signal", "on-watchdog"));
        assert_false(job_scope_keep_decision(NULL, "signal", NULL));    /* Restart= unknown */
        /* A clean exit is never restarted by on-failure. */
        assert_false(job_scope_keep_decision(NULL, "success", "on-failure"));
        assert_false(job_scope_keep_decision(NULL, NULL, "always"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pending_job),
                cmocka_unit_test(test_died_by_itself),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
