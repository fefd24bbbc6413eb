/* SPDX-License-Identifier: MIT */
/* SQLite job store: one table of jobs (indexed columns + JSON), schema versions in PRAGMA user_version. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "shared/macro.h"
#include "store.h"
#include "store-internal.h"

/*
 * Checkpoints (copying the WAL into the database, with an fsync on each) run in a thread of their own, on
 * a connection of their own: SQLite's automatic checkpoint would run them inside a commit, stalling rtd's
 * loop, and with it the next job's dispatch, for as long as the disk takes to sync (milliseconds). The
 * loop's commits only nudge the thread, through an eventfd, once the WAL has grown past
 * STORE_CHECKPOINT_PAGES; a PASSIVE checkpoint never blocks the loop's writes.
 */
#define STORE_CHECKPOINT_PAGES 1000     /* SQLite's own default for the automatic checkpoint */

/*
 * Migrations, applied in order from the stored user_version. Never edit a released step: add one.
 * 1: the jobs table and its queue index. 2: per-user listing index, instance id in meta. 3: job arrays
 * (store-arrays.c) and each job's array.
 */
static const char *const migrations[STORE_SCHEMA_VERSION] = {
        "CREATE TABLE jobs ("
        "  id INTEGER PRIMARY KEY,"
        "  state TEXT NOT NULL,"
        "  uid INTEGER NOT NULL,"
        "  seq INTEGER NOT NULL,"
        "  data TEXT NOT NULL);"
        "CREATE INDEX jobs_state_seq ON jobs(state, seq);"
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);",

        "CREATE INDEX jobs_uid ON jobs(uid, id);",

        "ALTER TABLE jobs ADD COLUMN array_id INTEGER;"
        "CREATE INDEX jobs_array ON jobs(array_id, id) WHERE array_id IS NOT NULL;"
        "CREATE TABLE arrays ("
        "  id INTEGER PRIMARY KEY,"
        "  uid INTEGER NOT NULL,"
        "  done INTEGER NOT NULL DEFAULT 0,"
        "  data TEXT NOT NULL);",
};

int store_sqlite_errno(int rc) {
        switch (rc) {
        case SQLITE_OK:
        case SQLITE_DONE:
        case SQLITE_ROW:
                return 0;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_READONLY:
        case SQLITE_PERM:
        case SQLITE_AUTH:
                return -EACCES;
        case SQLITE_CANTOPEN:
                return -ENOENT;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
                return -EBADMSG;
        default:
                return -EIO;
        }
}

static int exec_sql(Store *s, const char *sql) {
        return store_sqlite_errno(sqlite3_exec(s->db, sql, NULL, NULL, NULL));
}

static int pragma_int(Store *s, const char *sql) {
        sqlite3_stmt *st = NULL;
        int v = -EIO;

        if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        return v;
}

static int migrate(Store *s) {
        int v = pragma_int(s, "PRAGMA user_version"), r;
        char sql[64];

        if (v < 0)
                return v;
        if (v > STORE_SCHEMA_VERSION)
                return -EPROTONOSUPPORT;        /* written by a newer rtd: never downgrade it silently */
        for (; v < STORE_SCHEMA_VERSION; v++) {
                r = exec_sql(s, "BEGIN IMMEDIATE");
                if (r < 0)
                        return r;
                r = exec_sql(s, migrations[v]);
                snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v + 1);
                if (r >= 0)
                        r = exec_sql(s, sql);
                if (r < 0) {
                        (void) exec_sql(s, "ROLLBACK");
                        return r;
                }
                r = exec_sql(s, "COMMIT");
                if (r < 0)
                        return r;
        }
        return 0;
}

static int load_instance(Store *s) {
        sqlite3_stmt *st = NULL;
        int r = 0;

        if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'instance'", -1, &st, NULL) != SQLITE_OK)
                return -EIO;
        if (sqlite3_step(st) == SQLITE_ROW) {
                snprintf(s->instance, sizeof s->instance, "%s", (const char *) sqlite3_column_text(st, 0));
                sqlite3_finalize(st);
                return 0;
        }
        sqlite3_finalize(st);

        uint64_t rnd;
        if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
                return -errno ?: -EIO;
        snprintf(s->instance, sizeof s->instance, "%016llx", (unsigned long long) rnd);
        if (sqlite3_prepare_v2(s->db, "INSERT INTO meta (key, value) VALUES ('instance', ?)", -1, &st, NULL) !=
            SQLITE_OK)
                return -EIO;
        sqlite3_bind_text(st, 1, s->instance, -1, SQLITE_STATIC);
        r = store_sqlite_errno(sqlite3_step(st));
        sqlite3_finalize(st);
        return r;
}

/* A checkpoint that met a lock is tried again soon: the nudge that asked for it will not come twice if the
 * loop stops writing now, and the WAL would then grow until close. */
static bool checkpoint_passive(Checkpointer *c) {
        for (int attempt = 0; attempt < 50 && !atomic_load(&c->stop); attempt++) {
                int r = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
                if (r == SQLITE_OK)
                        return true;
                if (r != SQLITE_BUSY && r != SQLITE_LOCKED)
                        return false;
                nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
        }
        return false;
}

/*
 * The store's threads (checkpoints, group sync) run just below rtd's loop. Not SCHED_IDLE: under a user's
 * load on the housekeeping CPUs an idle-class thread gets no CPU at all, so checkpoints stop and a killed
 * rtd stays a zombie until the load ends (it cannot exit). When the loop is real-time (main.c says why), one
 * priority below it: never starved by CFS load, always preempted by the loop. The loop's
 * SCHED_RESET_ON_FORK gave this thread SCHED_OTHER (it applies to threads too): ask the loop's thread (the
 * thread group leader) what it runs.
 */
void store_thread_below_loop(void) {
        struct sched_param sp;
        int policy = sched_getscheduler(getpid());

        if (policy >= 0 && (policy & ~SCHED_RESET_ON_FORK) == SCHED_RR && sched_getparam(getpid(), &sp) == 0 &&
            sp.sched_priority > 1) {
                sp.sched_priority--;
                (void) pthread_setschedparam(pthread_self(), SCHED_RR | SCHED_RESET_ON_FORK, &sp);
        } else
                (void) setpriority(PRIO_PROCESS, (id_t) gettid(), getpriority(PRIO_PROCESS, (id_t) getpid()));
}

static void *checkpoint_thread(void *userdata) {
        Checkpointer *c = userdata;
        uint64_t n;

        store_thread_below_loop();
        while (read(c->wake_fd, &n, sizeof n) == sizeof n || errno == EINTR) {
                if (atomic_load(&c->stop))
                        break;
                if (checkpoint_passive(c))
                        atomic_fetch_add(&c->done, 1);
                atomic_store(&c->busy, false);
        }
        return NULL;
}

/* After each commit of the loop's connection: nudge the thread when the WAL is long enough. */
static int on_wal_commit(void *userdata, sqlite3 *db, const char *name, int pages) {
        Checkpointer *c = userdata;
        uint64_t one = 1;

        if (pages >= STORE_CHECKPOINT_PAGES && !atomic_exchange(&c->busy, true))
                (void) !write(c->wake_fd, &one, sizeof one);
        return SQLITE_OK;
}

static int checkpointer_start(Store *s, const char *path) {
        Checkpointer *c = &s->ckpt;
        int r;

        c->wake_fd = eventfd(0, EFD_CLOEXEC);
        if (c->wake_fd < 0)
                return -errno;
        r = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
        if (r != SQLITE_OK)
                return store_sqlite_errno(r);
        sqlite3_busy_timeout(c->db, 1000);
        /* A connection learns that the database is in WAL mode only once it reads it: checkpoints on it
         * are no-ops until then. */
        r = store_sqlite_errno(sqlite3_exec(c->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL));
        if (r < 0)
                return r;
        /* The thread takes no signals: rtd's (SIGTERM, SIGCHLD...) are for its loop's signalfd. */
        sigset_t all, saved;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &saved);
        r = pthread_create(&c->thread, NULL, checkpoint_thread, c);
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (r != 0)
                return -r;
        c->running = true;
        /* Replaces SQLite's automatic checkpoint, which is a WAL hook too. */
        sqlite3_wal_hook(s->db, on_wal_commit, c);
        return 0;
}

static void checkpointer_stop(Checkpointer *c) {
        uint64_t one = 1;

        if (c->running) {
                atomic_store(&c->stop, true);
                (void) !write(c->wake_fd, &one, sizeof one);
                pthread_join(c->thread, NULL);
                c->running = false;
        }
        sqlite3_close_v2(c->db);
        c->db = NULL;
        if (c->wake_fd >= 0)
                close(c->wake_fd);
        c->wake_fd = -1;
}

/*
 * The store holds every job's argv and environment (tokens included): 0600, also when an older rtd made it
 * 0644. SQLite gives -wal and -shm the database's mode when it creates them; existing ones are fixed here.
 */
static int store_make_private(int dir_fd, const char *name) {
        static const char *const suffixes[] = { "", "-wal", "-shm", "-journal" };

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                _cleanup_close_ int fd = -EBADF;
                char path[PATH_MAX];

                snprintf(path, sizeof path, "%s%s", name, suffixes[i]);
                fd = openat(dir_fd, path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | (i == 0 ? O_CREAT : 0),
                            0600);
                if (fd < 0 && (errno == ENOENT && i > 0))
                        continue;
                if (fd < 0)
                        return -errno;
                if (fchmod(fd, 0600) < 0)
                        return -errno;
        }
        return 0;
}

int store_peek_schema(int dir_fd, const char *name, int *ret_version) {
        _cleanup_free_ char *path = NULL;
        Store s = {};
        int v;

        if (faccessat(dir_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return -errno;
                *ret_version = 0;
                return 0;
        }
        if (asprintf(&path, "file:/proc/self/fd/%d/%s?mode=ro", dir_fd, name) < 0)
                return -ENOMEM;
        if (sqlite3_open_v2(path, &s.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK) {
                sqlite3_close(s.db);
                return -EIO;
        }
        sqlite3_busy_timeout(s.db, 1000);
        v = pragma_int(&s, "PRAGMA user_version");
        sqlite3_close(s.db);
        if (v < 0)
                return v;
        *ret_version = v;
        return 0;
}

int store_open(int dir_fd, const char *name, Store **ret) {
        _cleanup_free_ char *path = NULL;
        Store *s;
        int r;

        /* SQLite wants a path (it creates -wal and -shm next to the file): reach the dirfd through /proc. */
        if (dir_fd == AT_FDCWD)
                path = strdup(name);
        else if (asprintf(&path, "/proc/self/fd/%d/%s", dir_fd, name) < 0)
                path = NULL;
        if (!path)
                return -ENOMEM;

        r = store_make_private(dir_fd, name);
        if (r < 0)
                return r;
        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->ckpt.wake_fd = -1;
        s->sync.wake_fd = -1;
        r = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
        if (r != SQLITE_OK) {
                r = store_sqlite_errno(r);
                goto fail;
        }
        /* A second daemon on the same state dir must fail fast rather than wait. */
        sqlite3_busy_timeout(s->db, 1000);
        r = exec_sql(s, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;");
        if (r < 0)
                goto fail;
        r = migrate(s);
        if (r < 0)
                goto fail;
        r = load_instance(s);
        if (r < 0)
                goto fail;
        r = checkpointer_start(s, path);
        if (r < 0)
                goto fail;
        r = store_syncer_start(&s->sync, path);
        if (r < 0)
                goto fail;
        if (sqlite3_prepare_v2(s->db, "INSERT INTO jobs (id, state, uid, seq, data, array_id) VALUES (?, ?, ?, ?, ?, ?)", -1,
                               &s->insert, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(s->db, "UPDATE jobs SET state = ?2, seq = ?3, data = ?4 WHERE id = ?1", -1,
                               &s->update, NULL) != SQLITE_OK) {
                r = -EIO;
                goto fail;
        }
        *ret = s;
        return 0;
fail:
        store_free(s);
        return r;
}

Store *store_free(Store *s) {
        if (!s)
                return NULL;
        if (s->db)
                sqlite3_wal_hook(s->db, NULL, NULL);
        checkpointer_stop(&s->ckpt);
        store_syncer_stop(&s->sync);
        sqlite3_finalize(s->insert);
        sqlite3_finalize(s->update);
        sqlite3_close_v2(s->db);     /* the last connection: SQLite checkpoints what is left */
        free(s);
        return NULL;
}

int store_schema_version(Store *s) {
        return pragma_int(s, "PRAGMA user_version");
}

const char *store_instance_id(Store *s) {
        return s->instance;
}

json_t *store_to_json(Store *s) {
        return json_pack("{s:s, s:I, s:I, s:I}", "instance", s->instance, "checkpoints",
                         (json_int_t) atomic_load(&s->ckpt.done), "group_syncs",
                         (json_int_t) atomic_load(&s->sync.syncs), "group_sync_failures",
                         (json_int_t) atomic_load(&s->sync.failures));
}

static int run_write(sqlite3_stmt *st) {
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return rc == SQLITE_DONE ? 0 : store_sqlite_errno(rc) ?: -EIO;
}

int store_insert(Store *s, const StoreJob *j) {
        _cleanup_free_ char *data = json_dumps(j->data, JSON_COMPACT);

        if (!data)
                return -ENOMEM;
        sqlite3_bind_int64(s->insert, 1, (sqlite3_int64) j->id);
        sqlite3_bind_text(s->insert, 2, j->state, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s->insert, 3, j->uid);
        sqlite3_bind_int64(s->insert, 4, (sqlite3_int64) j->seq);
        sqlite3_bind_text(s->insert, 5, data, -1, SQLITE_STATIC);
        if (j->array_id)
                sqlite3_bind_int64(s->insert, 6, (sqlite3_int64) j->array_id);
        else
                sqlite3_bind_null(s->insert, 6);
        return run_write(s->insert);
}

int store_update(Store *s, const StoreJob *j) {
        _cleanup_free_ char *data = json_dumps(j->data, JSON_COMPACT);
        int r;

        if (!data)
                return -ENOMEM;
        sqlite3_bind_int64(s->update, 1, (sqlite3_int64) j->id);
        sqlite3_bind_text(s->update, 2, j->state, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s->update, 3, (sqlite3_int64) j->seq);
        sqlite3_bind_text(s->update, 4, data, -1, SQLITE_STATIC);
        r = run_write(s->update);
        if (r >= 0 && sqlite3_changes(s->db) == 0)
                return -ENOENT;
        return r;
}

int store_write_durable(Store *s, const StoreJob *j, bool insert) {
        int r, k;

        /* FULL in WAL mode: this commit's WAL frames are fsync()ed before it returns. Only the writes that
         * must survive a power cut pay for it; the rest stay NORMAL (durable at the next checkpoint). */
        r = exec_sql(s, "PRAGMA synchronous = FULL");
        if (r < 0)
                return r;
        r = insert ? store_insert(s, j) : store_update(s, j);
        k = exec_sql(s, "PRAGMA synchronous = NORMAL");
        return r < 0 ? r : k;
}

static uint64_t max_of(Store *s, const char *sql) {
        sqlite3_stmt *st = NULL;
        uint64_t v = 0;

        if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
                v = (uint64_t) sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
}

uint64_t store_max_id(Store *s) {
        return max_of(s, "SELECT COALESCE(MAX(id), 0) FROM jobs");
}

uint64_t store_max_seq(Store *s) {
        return max_of(s, "SELECT COALESCE(MAX(seq), 0) FROM jobs");
}

/* Run a prepared SELECT of (id, state, uid, seq, data) rows into cb. */
static int run_rows(sqlite3_stmt *st, StoreJobCallback cb, void *userdata) {
        int rc, r = 0, n = 0;

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                json_error_t err;
                StoreJob j = {
                        .id = (uint64_t) sqlite3_column_int64(st, 0),
                        .state = (const char *) sqlite3_column_text(st, 1),
                        .uid = (uid_t) sqlite3_column_int64(st, 2),
                        .seq = (uint64_t) sqlite3_column_int64(st, 3),
                };
                j.data = json_loads((const char *) sqlite3_column_text(st, 4), 0, &err);
                if (!j.data)
                        j.data = json_object();         /* damaged row: still listed, with what we know */
                n++;
                if (cb)
                        r = cb(&j, userdata);
                json_decref(j.data);
                if (r < 0)
                        break;
        }
        if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
                r = store_sqlite_errno(rc) ?: -EIO;
        sqlite3_finalize(st);
        return r < 0 ? r : n;
}

int store_foreach_in_states(Store *s, const char *const *states, StoreJobCallback cb, void *userdata) {
        char sql[512] = "SELECT id, state, uid, seq, data FROM jobs WHERE state IN (";
        sqlite3_stmt *st = NULL;
        int n = 0;

        for (const char *const *p = states; *p; p++, n++)
                strncat(sql, n ? ",?" : "?", sizeof sql - strlen(sql) - 1);
        strncat(sql, ") ORDER BY seq, id", sizeof sql - strlen(sql) - 1);
        if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
                return -EIO;
        for (int i = 0; i < n; i++)
                sqlite3_bind_text(st, i + 1, states[i], -1, SQLITE_STATIC);
        return run_rows(st, cb, userdata);
}

struct get_ctx {
        json_t *data;
        char *state;
        uid_t uid;
};

static int get_cb(const StoreJob *j, void *userdata) {
        struct get_ctx *c = userdata;
        c->data = json_incref(j->data);
        c->state = strdup(j->state);
        c->uid = j->uid;
        return c->state ? 0 : -ENOMEM;
}

int store_get(Store *s, uint64_t id, json_t **ret, char **ret_state, uid_t *ret_uid) {
        struct get_ctx c = {};
        sqlite3_stmt *st = NULL;
        int r;

        if (sqlite3_prepare_v2(s->db, "SELECT id, state, uid, seq, data FROM jobs WHERE id = ?", -1, &st, NULL) !=
            SQLITE_OK)
                return -EIO;
        sqlite3_bind_int64(st, 1, (sqlite3_int64) id);
        r = run_rows(st, get_cb, &c);
        if (r == 0)
                return -ENOENT;
        if (r < 0 || !c.data) {
                json_decref(c.data);
                free(c.state);
                return r < 0 ? r : -ENOENT;
        }
        *ret = c.data;
        if (ret_state)
                *ret_state = c.state;
        else
                free(c.state);
        if (ret_uid)
                *ret_uid = c.uid;
        return 0;
}

int store_list(Store *s, const StoreFilter *f, StoreJobCallback cb, void *userdata) {
        sqlite3_stmt *st = NULL;

        if (sqlite3_prepare_v2(s->db,
                               "SELECT id, state, uid, seq, data FROM jobs"
                               " WHERE (?1 IS NULL OR state = ?1) AND (?2 < 0 OR uid = ?2) AND (?3 = 0 OR id < ?3)"
                               " AND (?5 = 0 OR array_id = ?5)"
                               " ORDER BY id DESC LIMIT ?4",
                               -1, &st, NULL) != SQLITE_OK)
                return -EIO;
        if (f->state)
                sqlite3_bind_text(st, 1, f->state, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, 1);
        sqlite3_bind_int64(st, 2, f->uid);
        sqlite3_bind_int64(st, 3, (sqlite3_int64) f->before_id);
        sqlite3_bind_int64(st, 4, f->limit ?: 100);
        sqlite3_bind_int64(st, 5, (sqlite3_int64) f->array_id);
        return run_rows(st, cb, userdata);
}

int store_prune_finished(Store *s, unsigned keep, StoreJobCallback cb, void *userdata) {
        static const char *const where =
                " FROM jobs WHERE state NOT IN ('queued','starting','running') AND id NOT IN"
                " (SELECT id FROM jobs WHERE state NOT IN ('queued','starting','running') ORDER BY id DESC LIMIT ?1)"
                /* An array's tasks stay while any of them has not ended: its counts come from them. */
                " AND (array_id IS NULL OR array_id NOT IN (SELECT id FROM arrays WHERE done = 0))";
        _cleanup_free_ char *sel = NULL, *del = NULL;
        sqlite3_stmt *st = NULL;
        int r, n;

        if (asprintf(&sel, "SELECT id, state, uid, seq, '{}'%s", where) < 0 ||
            asprintf(&del, "DELETE%s", where) < 0)
                return -ENOMEM;
        if (sqlite3_prepare_v2(s->db, sel, -1, &st, NULL) != SQLITE_OK)
                return -EIO;
        sqlite3_bind_int64(st, 1, keep);
        n = run_rows(st, cb, userdata);
        if (n <= 0)
                return n;
        if (sqlite3_prepare_v2(s->db, del, -1, &st, NULL) != SQLITE_OK)
                return -EIO;
        sqlite3_bind_int64(st, 1, keep);
        r = sqlite3_step(st);
        sqlite3_finalize(st);
        if (r != SQLITE_DONE)
                return -EIO;
        /* Arrays that ended and whose every task is pruned go too. */
        r = exec_sql(s, "DELETE FROM arrays WHERE done = 1 AND id NOT IN"
                        " (SELECT DISTINCT array_id FROM jobs WHERE array_id IS NOT NULL)");
        return r < 0 ? r : n;
}
