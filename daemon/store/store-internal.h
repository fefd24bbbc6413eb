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

struct Store {
        sqlite3 *db;
        sqlite3_stmt *insert, *update;
        char instance[17];
        Checkpointer ckpt;
};

/* An SQLite result code as -errno (0 for OK, DONE, ROW). */
int store_sqlite_errno(int rc);
