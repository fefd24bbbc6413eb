/* SPDX-License-Identifier: MIT */
/* The SQLite job store in a temporary directory: schema version, migration from v1, writes, queries, pruning. */
#include <fcntl.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shared/macro.h"
#include "store/store.h"

typedef struct T {
        char dir[64];
        int fd;
} T;

static int setup(void **state) {
        T *t = calloc(1, sizeof *t);
        strcpy(t->dir, "/tmp/test-store-XXXXXX");
        assert_non_null(mkdtemp(t->dir));
        t->fd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(t->fd >= 0);
        *state = t;
        return 0;
}

static int teardown(void **state) {
        T *t = *state;
        char cmd[128];
        close(t->fd);
        snprintf(cmd, sizeof cmd, "rm -rf %s", t->dir);
        assert_int_equal(system(cmd), 0);
        free(t);
        return 0;
}

static int put(Store *s, uint64_t id, const char *state, uid_t uid, uint64_t seq, bool insert) {
        json_t *d = json_pack("{s:I,s:s}", "id", (json_int_t) id, "state", state);
        StoreJob j = { .id = id, .state = state, .uid = uid, .seq = seq, .data = d };
        int r = insert ? store_insert(s, &j) : store_update(s, &j);
        json_decref(d);
        return r;
}

static int collect(const StoreJob *j, void *userdata) {
        char *buf = userdata;
        sprintf(buf + strlen(buf), "%llu:%s ", (unsigned long long) j->id, j->state);
        /* data comes back as written */
        assert_int_equal(json_integer_value(json_object_get(j->data, "id")), (json_int_t) j->id);
        return 0;
}

static void test_create_write_read(void **state) {
        T *t = *state;
        Store *s = NULL;
        char buf[512] = "", inst[32];

        assert_int_equal(store_open(t->fd, "jobs.db", &s), 0);
        assert_int_equal(store_schema_version(s), STORE_SCHEMA_VERSION);
        assert_int_equal(strlen(store_instance_id(s)), 16);
        strcpy(inst, store_instance_id(s));
        assert_int_equal(store_max_id(s), 0);

        assert_int_equal(put(s, 1, "queued", 1000, 5, true), 0);
        assert_int_equal(put(s, 2, "queued", 1001, 3, true), 0);
        assert_int_equal(put(s, 3, "running", 1000, 1, true), 0);
        assert_int_equal(put(s, 4, "succeeded", 0, 0, true), 0);
        assert_true(put(s, 1, "queued", 1000, 5, true) < 0);            /* ids are unique */
        assert_int_equal(put(s, 9, "queued", 1, 1, false), -ENOENT);    /* update needs a row */
        assert_int_equal(put(s, 4, "failed", 0, 0, false), 0);
        assert_int_equal(store_max_id(s), 4);
        assert_int_equal(store_max_seq(s), 5);

        /* Active jobs in queue (seq) order. */
        const char *const active[] = { "queued", "starting", "running", NULL };
        assert_int_equal(store_foreach_in_states(s, active, collect, buf), 3);
        assert_string_equal(buf, "3:running 2:queued 1:queued ");

        json_t *d = NULL;
        char *st = NULL;
        uid_t uid;
        assert_int_equal(store_get(s, 4, &d, &st, &uid), 0);
        assert_string_equal(st, "failed");
        assert_int_equal(uid, 0);
        free(st);
        json_decref(d);
        assert_int_equal(store_get(s, 99, &d, NULL, NULL), -ENOENT);

        /* Listing: newest first, filters, cursor. */
        buf[0] = 0;
        assert_int_equal(store_list(s, &(StoreFilter){ .uid = -1, .limit = 2 }, collect, buf), 2);
        assert_string_equal(buf, "4:failed 3:running ");
        buf[0] = 0;
        assert_int_equal(store_list(s, &(StoreFilter){ .uid = -1, .limit = 2, .before_id = 3 }, collect, buf), 2);
        assert_string_equal(buf, "2:queued 1:queued ");
        buf[0] = 0;
        assert_int_equal(store_list(s, &(StoreFilter){ .uid = 1000, .limit = 10 }, collect, buf), 2);
        assert_string_equal(buf, "3:running 1:queued ");
        buf[0] = 0;
        assert_int_equal(store_list(s, &(StoreFilter){ .uid = -1, .state = "queued", .limit = 10 }, collect, buf),
                         2);
        assert_string_equal(buf, "2:queued 1:queued ");
        store_free(s);

        /* Everything is still there after reopening, with the same instance id. */
        assert_int_equal(store_open(t->fd, "jobs.db", &s), 0);
        assert_string_equal(store_instance_id(s), inst);
        assert_int_equal(store_max_id(s), 4);
        store_free(s);

        /* WAL mode, so a crash after a commit loses nothing. */
        assert_int_equal(faccessat(t->fd, "jobs.db-wal", F_OK, 0), -1);       /* checkpointed on close */
}

static int count_ids(const StoreJob *j, void *userdata) {
        (*(int *) userdata)++;
        return 0;
}

static void test_prune(void **state) {
        T *t = *state;
        Store *s = NULL;
        int n = 0;

        assert_int_equal(store_open(t->fd, "jobs.db", &s), 0);
        for (uint64_t i = 1; i <= 10; i++)
                assert_int_equal(put(s, i, i == 5 ? "running" : i == 6 ? "queued" : "succeeded", 0, i, true), 0);
        /* Keep the newest 3 finished; never touch active ones. */
        assert_int_equal(store_prune_finished(s, 3, count_ids, &n), 5);
        assert_int_equal(n, 5);
        char buf[256] = "";
        assert_int_equal(store_list(s, &(StoreFilter){ .uid = -1, .limit = 100 }, collect, buf), 5);
        assert_string_equal(buf, "10:succeeded 9:succeeded 8:succeeded 6:queued 5:running ");
        assert_int_equal(store_prune_finished(s, 3, NULL, NULL), 0);
        store_free(s);
}

static void test_migrate_from_v1(void **state) {
        T *t = *state;
        char path[128];
        sqlite3 *db;
        Store *s = NULL;

        /* A store as schema version 1 wrote it. */
        snprintf(path, sizeof path, "%s/old.db", t->dir);
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db,
                                      "CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL, uid INTEGER "
                                      "NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL);"
                                      "CREATE INDEX jobs_state_seq ON jobs(state, seq);"
                                      "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                                      "INSERT INTO jobs VALUES (7, 'queued', 1000, 7, '{\"id\":7}');"
                                      "PRAGMA user_version = 1;",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        sqlite3_close(db);

        assert_int_equal(store_open(t->fd, "old.db", &s), 0);
        assert_int_equal(store_schema_version(s), STORE_SCHEMA_VERSION);
        assert_int_equal(store_max_id(s), 7);
        char buf[64] = "";
        assert_int_equal(store_list(s, &(StoreFilter){ .uid = 1000, .limit = 5 }, collect, buf), 1);
        assert_string_equal(buf, "7:queued ");
        store_free(s);

        /* A store from a newer rtd is refused rather than downgraded. */
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        assert_int_equal(store_open(t->fd, "old.db", &s), -EPROTONOSUPPORT);
}

/* What `rtd --check-upgrade` reads: the version, without migrating (v1 stays v1) or creating anything. */
static void test_peek_schema(void **state) {
        T *t = *state;
        char path[128];
        sqlite3 *db;
        int v = -1;

        assert_int_equal(store_peek_schema(t->fd, "none.db", &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(faccessat(t->fd, "none.db", F_OK, 0), -1);
        snprintf(path, sizeof path, "%s/v1.db", t->dir);
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, "CREATE TABLE x (y); PRAGMA user_version = 1;", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        assert_int_equal(store_peek_schema(t->fd, "v1.db", &v), 0);
        assert_int_equal(v, 1);
        assert_int_equal(store_peek_schema(t->fd, "v1.db", &v), 0);
        assert_int_equal(v, 1);
}

static off_t file_size(int dir_fd, const char *name) {
        struct stat st;
        return fstatat(dir_fd, name, &st, 0) == 0 ? st.st_size : -1;
}

/*
 * The store replaces SQLite's automatic checkpoint with its own thread: once the WAL passes its threshold
 * the database file must still take the rows while the store stays open (a missed nudge would let the WAL
 * grow until close).
 */
static void test_checkpoints_while_open(void **state) {
        T *t = *state;
        Store *s = NULL;
        char pad[3000];

        memset(pad, 'x', sizeof pad - 1);
        pad[sizeof pad - 1] = 0;
        assert_int_equal(store_open(t->fd, "jobs.db", &s), 0);
        off_t before = file_size(t->fd, "jobs.db");
        for (uint64_t i = 1; i <= 2000; i++) {
                json_t *d = json_pack("{s:I,s:s}", "id", (json_int_t) i, "pad", pad);
                StoreJob j = { .id = i, .state = "succeeded", .seq = i, .data = d };
                assert_int_equal(store_insert(s, &j), 0);
                json_decref(d);
        }
        /* 2000 rows of 3 KB: about 6 MB went through the WAL, at least 4 MB of it checkpointed by now. */
        off_t after = file_size(t->fd, "jobs.db");
        for (int i = 0; i < 200 && after < 4 * 1024 * 1024; i++) {
                nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
                after = file_size(t->fd, "jobs.db");
        }
        assert_true(after >= 4 * 1024 * 1024);
        assert_true(after > before);
        assert_int_equal(store_max_id(s), 2000);
        store_free(s);

        /* Everything is there after a reopen. */
        assert_int_equal(store_open(t->fd, "jobs.db", &s), 0);
        assert_int_equal(store_max_id(s), 2000);
        store_free(s);
}

/*
 * Writes that must be on disk soon, not each at once (an array's task starts): they are committed at once and
 * share their disk flushes (store-sync.c). 200 of them in a row end up on disk with far fewer flushes than
 * writes, and the store's status counts those flushes.
 */
static void test_group_sync(void **state) {
        T *t = *state;
        Store *s = NULL;
        json_int_t syncs = 0;

        assert_int_equal(store_open(t->fd, "jobs.db", &s), 0);
        for (uint64_t i = 1; i <= 200; i++) {
                json_t *d = json_pack("{s:I}", "id", (json_int_t) i);
                StoreJob j = { .id = i, .state = "starting", .seq = i, .data = d, .array_id = 1 };
                assert_int_equal(store_write_synced_soon(s, &j, true), 0);
                json_decref(d);
        }
        /* committed at once: readable before any flush */
        assert_int_equal(store_max_id(s), 200);
        for (int i = 0; i < 100 && syncs == 0; i++) {
                nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
                json_t *st = store_to_json(s);
                syncs = json_integer_value(json_object_get(st, "group_syncs"));
                assert_int_equal(json_integer_value(json_object_get(st, "group_sync_failures")), 0);
                json_decref(st);
        }
        assert_true(syncs >= 1);
        assert_true(syncs <= 50);       /* a batch gathers for 0.1 s: one flush for many writes, not one each */
        store_free(s);
        assert_int_equal(store_open(t->fd, "jobs.db", &s), 0);
        assert_int_equal(store_max_id(s), 200);
        store_free(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_create_write_read, setup, teardown),
                cmocka_unit_test_setup_teardown(test_prune, setup, teardown),
                cmocka_unit_test_setup_teardown(test_migrate_from_v1, setup, teardown),
                cmocka_unit_test_setup_teardown(test_peek_schema, setup, teardown),
                cmocka_unit_test_setup_teardown(test_checkpoints_while_open, setup, teardown),
                cmocka_unit_test_setup_teardown(test_group_sync, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
