/* SPDX-License-Identifier: MIT */
/* Job arrays without a daemon: the indices grammar and its bounds, the request's shape, and the store's
 * array rows (one commit for an array and its jobs, a rollback leaves nothing, live arrays' tasks are not
 * pruned, counts by state, the first failure). */
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

#include "jobs/jobs-array.h"
#include "shared/macro.h"
#include "store/store.h"

static void expect_indices(const char *s, unsigned n, const unsigned *want) {
        _cleanup_free_ unsigned *got = NULL;
        _cleanup_free_ char *err = NULL;
        unsigned k = 0;

        assert_int_equal(job_array_parse_indices(s, 10000, &got, &k, &err), 0);
        assert_int_equal(k, n);
        for (unsigned i = 0; i < n; i++)
                assert_int_equal(got[i], want[i]);
}

static void expect_refused(const char *s, unsigned max, int r, const char *words) {
        _cleanup_free_ unsigned *got = NULL;
        _cleanup_free_ char *err = NULL;
        unsigned k = 0;

        assert_int_equal(job_array_parse_indices(s, max, &got, &k, &err), r);
        assert_null(got);
        assert_non_null(err);
        if (!strstr(err, words))
                fail_msg("'%s' not in '%s'", words, err);
}

static void test_indices(void **state) {
        expect_indices("0-4", 5, (unsigned[]){ 0, 1, 2, 3, 4 });
        expect_indices("1-10:4", 3, (unsigned[]){ 1, 5, 9 });
        expect_indices("7,3,5", 3, (unsigned[]){ 7, 3, 5 });
        expect_indices("0-1,10-20:10,999999999", 5, (unsigned[]){ 0, 1, 10, 20, 999999999 });

        expect_refused("", 100, -EINVAL, "empty");
        expect_refused("1,,2", 100, -EINVAL, "not a list");
        expect_refused("-1", 100, -EINVAL, "not a list");
        expect_refused("1-", 100, -EINVAL, "not a list");
        expect_refused("0-9:0", 100, -EINVAL, "not a list");
        expect_refused("0-9 ", 100, -EINVAL, "not a list");
        expect_refused("5-1", 100, -EINVAL, "ends before it starts");
        expect_refused("1000000000", 100, -EINVAL, "0 to 999999999");
        expect_refused("99999999999999999999999", 100, -EINVAL, "0 to 999999999");
        expect_refused("1,2,1", 100, -EINVAL, "index 1 twice");
        expect_refused("0-5,3", 100, -EINVAL, "index 3 twice");
        /* Counted, never expanded: a huge range costs nothing. */
        expect_refused("0-999999999", 10000, -E2BIG, "1000000000 tasks");
        expect_refused("0-99,0-999999999:1", 100, -E2BIG, "MaxArraySize=");
        expect_refused("0-100", 100, -E2BIG, "101 tasks");
}

static void expect_request(const char *body, int r, const char *field) {
        _cleanup_(json_decrefp) json_t *j = json_loads(body, 0, NULL);
        _cleanup_free_ char *rf = NULL, *re = NULL;
        _cleanup_free_ unsigned *idx = NULL;
        JobArrayRequest req;

        assert_non_null(j);
        assert_int_equal(job_array_request_parse(j, 100, &req, &idx, &rf, &re), r);
        if (r < 0)
                assert_string_equal(rf, field);
}

static void test_request(void **state) {
        expect_request("{\"spec\":{\"argv\":[\"x\"]},\"indices\":\"0-9\",\"max_running\":2,\"substitute\":true}", 0, NULL);
        expect_request("{\"spec\":{\"argv\":[\"x\"]},\"tasks\":[[\"a\"],[]]}", 0, NULL);
        expect_request("{\"indices\":\"0-9\"}", -EINVAL, "spec");
        expect_request("{\"spec\":{},\"indices\":\"0-9\",\"tasks\":[[]]}", -EINVAL, "tasks");
        expect_request("{\"spec\":{}}", -EINVAL, "indices");
        expect_request("{\"spec\":{},\"indices\":7}", -EINVAL, "indices");
        expect_request("{\"spec\":{},\"tasks\":[]}", -EINVAL, "tasks");
        expect_request("{\"spec\":{},\"tasks\":[[1]]}", -EINVAL, "tasks");
        expect_request("{\"spec\":{},\"tasks\":[\"a\"]}", -EINVAL, "tasks");
        expect_request("{\"spec\":{},\"indices\":\"0-9\",\"max_running\":11}", -EINVAL, "max_running");
        expect_request("{\"spec\":{},\"indices\":\"0-9\",\"max_running\":-1}", -EINVAL, "max_running");
        expect_request("{\"spec\":{},\"indices\":\"0-9\",\"substitute\":1}", -EINVAL, "substitute");
        expect_request("{\"spec\":{},\"indices\":\"0-9\",\"x\":1}", -EINVAL, "x");
        expect_request("{\"spec\":{},\"indices\":\"0-100\"}", -E2BIG, "indices");
}

static int put(Store *s, uint64_t id, const char *state, uint64_t array, unsigned index, bool insert) {
        json_t *d = json_pack("{s:I,s:s,s:{s:I,s:i},s:i}", "id", (json_int_t) id, "state", state, "array", "id",
                              (json_int_t) array, "index", (int) index, "exit_code", 3);
        StoreJob j = { .id = id, .state = state, .uid = 1000, .seq = id, .data = d, .array_id = array };
        int r = insert ? store_insert(s, &j) : store_update(s, &j);
        json_decref(d);
        return r;
}

static int count(const char *state, unsigned n, void *userdata) {
        sprintf((char *) userdata + strlen(userdata), "%s=%u ", state, n);
        return 0;
}

static int first(const StoreJob *j, void *userdata) {
        *(uint64_t *) userdata = j->id;
        return 0;
}

static void test_store(void **state) {
        char dir[] = "/tmp/test-arrays-XXXXXX", cmd[64], buf[128] = "";
        _cleanup_(json_decrefp) json_t *def = json_pack("{s:i}", "size", 3), *got = NULL;
        uint64_t ff = 0;
        Store *s = NULL;
        bool done = true;
        uid_t uid = 0;
        int fd;

        assert_non_null(mkdtemp(dir));
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(store_open(fd, "jobs.db", &s), 0);

        /* A rollback leaves neither the array nor its jobs. */
        assert_int_equal(store_begin(s), 0);
        assert_int_equal(store_array_insert(s, 1, 1000, def), 0);
        assert_int_equal(put(s, 1, "queued", 1, 0, true), 0);
        store_rollback(s);
        assert_int_equal(store_array_get(s, 1, &got, NULL, NULL), -ENOENT);
        assert_int_equal(store_max_id(s), 0);

        assert_int_equal(store_begin(s), 0);
        assert_int_equal(store_array_insert(s, 1, 1000, def), 0);
        for (unsigned i = 0; i < 3; i++)
                assert_int_equal(put(s, 1 + i, "queued", 1, i, true), 0);
        assert_int_equal(store_commit(s), 0);
        assert_int_equal(store_array_max_id(s), 1);
        assert_int_equal(put(s, 2, "failed", 1, 1, false), 0);
        assert_int_equal(put(s, 3, "succeeded", 1, 2, false), 0);
        assert_int_equal(store_array_count_states(s, 1, count, buf), 0);
        assert_string_equal(buf, "failed=1 queued=1 succeeded=1 ");
        assert_int_equal(store_array_first_failure(s, 1, first, &ff), 0);
        assert_int_equal(ff, 2);

        /* A live array's ended tasks are kept whatever KeepFinished= says; a done one's are pruned, then it. */
        assert_int_equal(store_prune_finished(s, 0, NULL, NULL), 0);
        assert_int_equal(store_array_get(s, 1, &got, &uid, &done), 0);
        assert_false(done);
        assert_int_equal(uid, 1000);
        json_decref(got);
        got = NULL;
        assert_int_equal(put(s, 1, "cancelled", 1, 0, false), 0);
        assert_int_equal(store_array_update(s, 1, true, def), 0);
        assert_int_equal(store_prune_finished(s, 0, NULL, NULL), 3);
        assert_int_equal(store_array_get(s, 1, &got, NULL, NULL), -ENOENT);

        store_free(s);
        close(fd);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        assert_int_equal(system(cmd), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_indices),
                cmocka_unit_test(test_request),
                cmocka_unit_test(test_store),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
