/* SPDX-License-Identifier: MIT */
/* The job spec parser: defaults, every field's checks (each error names its field), limits, round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jobs/job-spec.h"
#include "shared/macro.h"

static int parse(const char *text, JobSpec *s, char **field, char **error) {
        return job_spec_parse_text(text, strlen(text), s, field, error);
}

static void test_minimal_defaults(void **state) {
        JobSpec s;
        assert_int_equal(parse("{\"argv\":[\"/bin/echo\",\"hi\"]}", &s, NULL, NULL), 0);
        assert_string_equal(s.argv[0], "/bin/echo");
        assert_string_equal(s.argv[1], "hi");
        assert_null(s.argv[2]);
        assert_non_null(s.env);
        assert_null(s.env[0]);
        assert_int_equal(s.cores, 1);
        assert_false(s.has_cpus);
        assert_int_equal(s.policy, JOB_POLICY_FIFO);
        assert_int_equal(s.priority, 0);
        assert_true(s.timeout_s == 0);
        assert_int_equal(s.queue_priority, 0);
        assert_null(s.cwd);
        job_spec_done(&s);
}

static void test_full_spec(void **state) {
        JobSpec s;
        assert_int_equal(parse("{\"argv\":[\"a\"],\"env\":{\"LANG\":\"C\",\"X\":\"1=2\"},\"cwd\":\"/tmp\","
                               "\"name\":\"my job\",\"cpus\":\"2-3\",\"policy\":\"rr\",\"priority\":7,"
                               "\"timeout_s\":1.5,\"queue_priority\":-3}", &s, NULL, NULL), 0);
        assert_string_equal(s.env[0], "LANG=C");
        assert_string_equal(s.env[1], "X=1=2");
        assert_string_equal(s.cwd, "/tmp");
        assert_string_equal(s.name, "my job");
        assert_true(s.has_cpus);
        assert_int_equal(s.cores, 2);
        assert_true(cpuset_isset(&s.cpus, 2) && cpuset_isset(&s.cpus, 3) && !cpuset_isset(&s.cpus, 1));
        assert_int_equal(s.policy, JOB_POLICY_RR);
        assert_int_equal(s.priority, 7);
        assert_true(s.timeout_s == 1.5);
        assert_int_equal(s.queue_priority, -3);

        /* The normalized JSON parses back to the same spec. */
        json_t *j = job_spec_to_json(&s, true);
        JobSpec t;
        assert_int_equal(job_spec_parse(j, &t, NULL, NULL), 0);
        assert_string_equal(t.argv[0], "a");
        assert_int_equal(t.cores, 2);
        assert_true(cpuset_equal(&t.cpus, &s.cpus));
        assert_int_equal(t.priority, 7);
        assert_string_equal(t.cwd, "/tmp");
        job_spec_done(&t);
        json_decref(j);

        /* The public view leaves out the command line, environment and directory. */
        j = job_spec_to_json(&s, false);
        assert_null(json_object_get(j, "argv"));
        assert_null(json_object_get(j, "env"));
        assert_null(json_object_get(j, "cwd"));
        assert_non_null(json_object_get(j, "cores"));
        json_decref(j);
        job_spec_done(&s);
}

static void test_cpus_array(void **state) {
        JobSpec s;
        assert_int_equal(parse("{\"argv\":[\"a\"],\"cpus\":[1,3],\"cores\":2}", &s, NULL, NULL), 0);
        assert_int_equal(s.cores, 2);
        assert_true(cpuset_isset(&s.cpus, 1) && cpuset_isset(&s.cpus, 3));
        job_spec_done(&s);
}

static const struct {
        const char *body;
        const char *field;
} bad[] = {
        { "[]", "" },
        { "nope", "" },
        { "{}", "argv" },
        { "{\"argv\":[]}", "argv" },
        { "{\"argv\":\"ls\"}", "argv" },
        { "{\"argv\":[\"\"]}", "argv" },
        { "{\"argv\":[1]}", "argv" },
        { "{\"argv\":[\"a\\u0000b\"]}", "" },    /* jansson refuses NUL: the body is invalid */
        { "{\"argv\":[\"a\"],\"extra\":1}", "extra" },
        { "{\"argv\":[\"a\"],\"env\":[\"A=B\"]}", "env" },
        { "{\"argv\":[\"a\"],\"env\":{\"\":\"x\"}}", "env" },
        { "{\"argv\":[\"a\"],\"env\":{\"A=B\":\"x\"}}", "env" },
        { "{\"argv\":[\"a\"],\"env\":{\"A\":null}}", "env" },
        { "{\"argv\":[\"a\"],\"cwd\":\"tmp\"}", "cwd" },
        { "{\"argv\":[\"a\"],\"cwd\":5}", "cwd" },
        { "{\"argv\":[\"a\"],\"name\":\"\"}", "name" },
        { "{\"argv\":[\"a\"],\"name\":\"a\\nb\"}", "name" },
        { "{\"argv\":[\"a\"],\"name\":\"a\\u001b[2Jb\"}", "name" },       /* ESC: C0 */
        { "{\"argv\":[\"a\"],\"name\":\"a\\u009b2Jb\"}", "name" },        /* CSI: C1 */
        { "{\"argv\":[\"a\"],\"name\":\"a\\u0085b\"}", "name" },          /* NEL: C1 */
        { "{\"argv\":[\"a\"],\"name\":\"a\\u007fb\"}", "name" },          /* DEL */
        { "{\"argv\":[\"a\"],\"cores\":0}", "cores" },
        { "{\"argv\":[\"a\"],\"cores\":1.5}", "cores" },
        { "{\"argv\":[\"a\"],\"cores\":\"2\"}", "cores" },
        { "{\"argv\":[\"a\"],\"cpus\":\"\"}", "cpus" },
        { "{\"argv\":[\"a\"],\"cpus\":\"3-1\"}", "cpus" },
        { "{\"argv\":[\"a\"],\"cpus\":[1,1]}", "cpus" },
        { "{\"argv\":[\"a\"],\"cpus\":[-1]}", "cpus" },
        { "{\"argv\":[\"a\"],\"cpus\":\"1\",\"cores\":2}", "cores" },
        { "{\"argv\":[\"a\"],\"policy\":\"deadline\"}", "policy" },
        { "{\"argv\":[\"a\"],\"policy\":1}", "policy" },
        { "{\"argv\":[\"a\"],\"priority\":0}", "priority" },
        { "{\"argv\":[\"a\"],\"priority\":100}", "priority" },
        { "{\"argv\":[\"a\"],\"priority\":\"5\"}", "priority" },
        { "{\"argv\":[\"a\"],\"policy\":\"other\",\"priority\":5}", "priority" },
        { "{\"argv\":[\"a\"],\"timeout_s\":0}", "timeout_s" },
        { "{\"argv\":[\"a\"],\"timeout_s\":-2}", "timeout_s" },
        { "{\"argv\":[\"a\"],\"timeout_s\":1e300}", "timeout_s" },
        { "{\"argv\":[\"a\"],\"timeout_s\":true}", "timeout_s" },
        { "{\"argv\":[\"a\"],\"queue_priority\":1001}", "queue_priority" },
        { "{\"argv\":[\"a\"],\"queue_priority\":1.0}", "queue_priority" },
        { "{\"argv\":[\"a\"],\"argv\":[\"b\"]}", "" },
};

static void test_bad_specs(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *field = NULL, *error = NULL;
                JobSpec s;
                int r = parse(bad[i].body, &s, &field, &error);
                if (r != -EINVAL)
                        fail_msg("%s: expected -EINVAL, got %d", bad[i].body, r);
                if (!field || !streq(field, bad[i].field))
                        fail_msg("%s: expected field '%s', got '%s' (%s)", bad[i].body, bad[i].field,
                                 strempty(field), strempty(error));
                assert_non_null(error);
                assert_true(strlen(error) > 10);
        }
}

static void test_size_limits(void **state) {
        _cleanup_free_ char *field = NULL, *error = NULL, *body = NULL;
        size_t n = JOB_SPEC_MAX_STRINGS_BYTES + 100, off;
        JobSpec s;

        body = malloc(n + 64);
        assert_non_null(body);
        off = (size_t) sprintf(body, "{\"argv\":[\"a\",\"");
        memset(body + off, 'x', n);
        strcpy(body + off + n, "\"]}");
        assert_int_equal(parse(body, &s, &field, &error), -EINVAL);
        assert_string_equal(field, "argv");
        assert_non_null(strstr(error, "bytes"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_minimal_defaults),
                cmocka_unit_test(test_full_spec),
                cmocka_unit_test(test_cpus_array),
                cmocka_unit_test(test_bad_specs),
                cmocka_unit_test(test_size_limits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
