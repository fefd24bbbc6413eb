/* SPDX-License-Identifier: MIT */
/* The store's internals, shared by store.c (jobs, schema, checkpoints) and store-arrays.c (job arrays). */
#pragma once

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct Checkpointer {
        sqlite3 *db;
        pthread_t thread;
        int wake_fd;                    /* eventfd: a checkpoint is due */
        atomic_bool busy;               /* nudged and not done yet: no more nudges meanwhile */
        atomic_bool stop;
        atomic_uint_fast64_t done;      /* checkpoints run, for status */
        bool running;
} Checkpointer;

/* store-sync.c: the group sync of the WAL for store_write_synced_soon(). */
#define STORE_SYNC_BATCH_USEC 100000    /* how long a batch gathers before its one fdatasync() */
typedef struct StoreSyncer {
        pthread_t thread;
        int wake_fd;                    /* eventfd: a batch has begun */
        char *wal_path;
        atomic_bool stop;
        atomic_uint_fast64_t requested; /* writes asked to be synced, ever */
        atomic_uint_fast64_t synced;    /* of them, those a finished fdatasync() covered */
        atomic_uint_fast64_t syncs, failures;
        bool running;
} StoreSyncer;

int store_syncer_start(StoreSyncer *y, const char *db_path);
void store_syncer_stop(StoreSyncer *y);
/* Gives the calling store thread its scheduling: one priority below rtd's loop (store.c says why). */
void store_thread_below_loop(void);

struct Store {
        sqlite3 *db;
        sqlite3_stmt *insert, *update;
        char instance[17];
        Checkpointer ckpt;
        StoreSyncer sync;
};

/* An SQLite result code as -errno (0 for OK, DONE, ROW). */
int store_sqlite_errno(int rc);
