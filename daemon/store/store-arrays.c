/* SPDX-License-Identifier: MIT */
/* The store's job arrays: one row per array (its definition and, once it ended, its summary), and the
 * transactions that make an array's N job rows, or a cancel of N tasks, one commit. */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>

#include "shared/macro.h"
#include "store.h"
#include "store-internal.h"

static int exec(Store *s, const char *sql) {
        return store_sqlite_errno(sqlite3_exec(s->db, sql, NULL, NULL, NULL));
}

int store_begin(Store *s) {
        return exec(s, "BEGIN IMMEDIATE");
}

int store_commit(Store *s) {
        return exec(s, "COMMIT");
}

void store_rollback(Store *s) {
        if (!sqlite3_get_autocommit(s->db))
                (void) exec(s, "ROLLBACK");
}

static int step_done(sqlite3_stmt *st) {
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        return rc == SQLITE_DONE ? 0 : store_sqlite_errno(rc) ?: -EIO;
}

int store_array_insert(Store *s, uint64_t id, uid_t uid, json_t *data) {
        _cleanup_free_ char *text = json_dumps(data, JSON_COMPACT);
        sqlite3_stmt *st = NULL;

        if (!text)
                return -ENOMEM;
        if (sqlite3_prepare_v2(s->db, "INSERT INTO arrays (id, uid, done, data) VALUES (?, ?, 0, ?)", -1, &st,
                               NULL) != SQLITE_OK)
                return -EIO;
        sqlite3_bind_int64(st, 1, (sqlite3_int64) id);
        sqlite3_bind_int64(st, 2, uid);
        sqlite3_bind_text(st, 3, text, -1, SQLITE_STATIC);
        return step_done(st);
}

int store_array_update(Store *s, uint64_t id, bool done, json_t *data) {
        _cleanup_free_ char *text = json_dumps(data, JSON_COMPACT);
        sqlite3_stmt *st = NULL;

        if (!text)
                return -ENOMEM;
        if (sqlite3_prepare_v2(s->db, "UPDATE arrays SET done = ?2, data = ?3 WHERE id = ?1", -1, &st, NULL) !=
            SQLITE_OK)
                return -EIO;
        sqlite3_bind_int64(st, 1, (sqlite3_int64) id);
        sqlite3_bind_int(st, 2, done);
        sqlite3_bind_text(st, 3, text, -1, SQLITE_STATIC);
        return step_done(st);
}

int store_array_get(Store *s, uint64_t id, json_t **ret, uid_t *ret_uid, bool *ret_done) {
        sqlite3_stmt *st = NULL;
        int rc, r = -ENOENT;

        if (sqlite3_prepare_v2(s->db, "SELECT uid, done, data FROM arrays WHERE id = ?", -1, &st, NULL) !=
            SQLITE_OK)
                return -EIO;
        sqlite3_bind_int64(st, 1, (sqlite3_int64) id);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                json_t *d = json_loads((const char *) sqlite3_column_text(st, 2), 0, NULL);
                if (ret_uid)
                        *ret_uid = (uid_t) sqlite3_column_int64(st, 0);
                if (ret_done)
                        *ret_done = sqlite3_column_int(st, 1) != 0;
                *ret = d ?: json_object();      /* damaged row: still shown, with what we know */
                r = *ret ? 0 : -ENOMEM;
        } else if (rc != SQLITE_DONE)
                r = store_sqlite_errno(rc) ?: -EIO;
        sqlite3_finalize(st);
        return r;
}

uint64_t store_array_max_id(Store *s) {
        sqlite3_stmt *st = NULL;
        uint64_t v = 0;

        if (sqlite3_prepare_v2(s->db, "SELECT COALESCE(MAX(id), 0) FROM arrays", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
                v = (uint64_t) sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
}

int store_array_foreach_live(Store *s, StoreArrayCallback cb, void *userdata) {
        sqlite3_stmt *st = NULL;
        int rc, r = 0;

        if (sqlite3_prepare_v2(s->db, "SELECT id, uid, data FROM arrays WHERE done = 0 ORDER BY id", -1, &st,
                               NULL) != SQLITE_OK)
                return -EIO;
        while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                json_t *d = json_loads((const char *) sqlite3_column_text(st, 2), 0, NULL);
                r = cb((uint64_t) sqlite3_column_int64(st, 0), (uid_t) sqlite3_column_int64(st, 1),
                       d ?: json_object(), userdata);
                json_decref(d);
        }
        if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
                r = store_sqlite_errno(rc) ?: -EIO;
        sqlite3_finalize(st);
        return r;
}

int store_array_count_states(Store *s, uint64_t id, StoreCountCallback cb, void *userdata) {
        sqlite3_stmt *st = NULL;
        int rc, r = 0;

        if (sqlite3_prepare_v2(s->db, "SELECT state, COUNT(*) FROM jobs WHERE array_id = ? GROUP BY state", -1,
                               &st, NULL) != SQLITE_OK)
                return -EIO;
        sqlite3_bind_int64(st, 1, (sqlite3_int64) id);
        while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW)
                r = cb((const char *) sqlite3_column_text(st, 0), (unsigned) sqlite3_column_int64(st, 1),
                       userdata);
        if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
                r = store_sqlite_errno(rc) ?: -EIO;
        sqlite3_finalize(st);
        return r;
}

int store_array_first_failure(Store *s, uint64_t id, StoreJobCallback cb, void *userdata) {
        sqlite3_stmt *st = NULL;
        int rc, r = 0;

        if (sqlite3_prepare_v2(s->db, "SELECT id, state, uid, data FROM jobs WHERE array_id = ? AND state NOT IN"
                               " ('queued','starting','running','succeeded') ORDER BY id LIMIT 1", -1, &st,
                               NULL) != SQLITE_OK)
                return -EIO;
        sqlite3_bind_int64(st, 1, (sqlite3_int64) id);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                StoreJob j = {
                        .id = (uint64_t) sqlite3_column_int64(st, 0),
                        .state = (const char *) sqlite3_column_text(st, 1),
                        .uid = (uid_t) sqlite3_column_int64(st, 2),
                        .data = json_loads((const char *) sqlite3_column_text(st, 3), 0, NULL),
                        .array_id = id,
                };
                if (!j.data)
                        j.data = json_object();
                r = cb(&j, userdata);
                json_decref(j.data);
        } else if (rc != SQLITE_DONE)
                r = store_sqlite_errno(rc) ?: -EIO;
        sqlite3_finalize(st);
        return r;
}
