/* SPDX-License-Identifier: MIT */
/* The job store: SQLite (WAL) in the state directory, versioned schema with migrations. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Store Store;

#define STORE_SCHEMA_VERSION 3

/*
 * Open (creating or migrating) dir_fd/name, mode 0600 (also -wal and -shm). Durability: WAL with
 * synchronous=NORMAL, so a committed write survives a crash of rtd; a power cut may lose the last
 * transactions since the last checkpoint, except those written with store_write_durable().
 */
int store_open(int dir_fd, const char *name, Store **ret);
Store *store_free(Store *s);
/* The schema version of dir_fd/name without opening it for writing or migrating it (0 when it does not exist yet):
 * what `rtd --check-upgrade` compares with STORE_SCHEMA_VERSION. */
int store_peek_schema(int dir_fd, const char *name, int *ret_version);
int store_schema_version(Store *s);
/* A random id made once per store (names the job cgroups, so two daemons never collide). */
const char *store_instance_id(Store *s);
/* For /v1/status: the instance id, how many WAL checkpoints the checkpoint thread ran, and how many group
 * syncs (store-sync.c) ran and failed. */
json_t *store_to_json(Store *s);

/*
 * A job row: the indexed columns plus the job as JSON (spec, credentials, times, result). seq orders the
 * queue; it is kept separate from id so a queued job keeps its place across restarts.
 */
typedef struct StoreJob {
        uint64_t id;
        const char *state;
        uid_t uid;
        uint64_t seq;
        json_t *data;           /* borrowed on write, owned by the callback's caller on read */
        uint64_t array_id;      /* the array it is a task of (written on insert only), or 0 */
} StoreJob;

int store_insert(Store *s, const StoreJob *j);
int store_update(Store *s, const StoreJob *j);
/* store_insert() or store_update() whose commit is on disk when it returns (fsync), for a power cut. */
int store_write_durable(Store *s, const StoreJob *j, bool insert);
/* store_insert() or store_update() committed at once (it survives a crash of rtd), on disk within
 * STORE_SYNC_BATCH_USEC plus one disk flush, which it shares with the other writes of that time (store-sync.c). */
int store_write_synced_soon(Store *s, const StoreJob *j, bool insert);
uint64_t store_max_id(Store *s);
uint64_t store_max_seq(Store *s);

/* Every job whose state is one of states (NULL-terminated), in seq order. Stops if cb returns < 0. */
typedef int (*StoreJobCallback)(const StoreJob *j, void *userdata);
int store_foreach_in_states(Store *s, const char *const *states, StoreJobCallback cb, void *userdata);
/* One job's data (new reference in *ret), -ENOENT if absent. */
int store_get(Store *s, uint64_t id, json_t **ret, char **ret_state, uid_t *ret_uid);

/* List, newest first: ids below before_id (0 = from the newest), optional state and uid filters. */
typedef struct StoreFilter {
        const char *state;      /* NULL = any */
        int64_t uid;            /* -1 = any */
        uint64_t before_id;
        unsigned limit;
        uint64_t array_id;      /* 0 = any */
} StoreFilter;
int store_list(Store *s, const StoreFilter *f, StoreJobCallback cb, void *userdata);

/* Delete finished jobs beyond the newest keep; returns how many, and their ids via cb (for output files). */
int store_prune_finished(Store *s, unsigned keep, StoreJobCallback cb, void *userdata);

/* ---- store-arrays.c: job arrays, and transactions that make many writes one commit ---- */

int store_begin(Store *s);
int store_commit(Store *s);
void store_rollback(Store *s);

/* An array row: its owner, whether every task has ended, and its definition and summary as JSON. */
int store_array_insert(Store *s, uint64_t id, uid_t uid, json_t *data);
int store_array_update(Store *s, uint64_t id, bool done, json_t *data);
/* data as a new reference; -ENOENT if absent (or pruned with its tasks). */
int store_array_get(Store *s, uint64_t id, json_t **ret, uid_t *ret_uid, bool *ret_done);
uint64_t store_array_max_id(Store *s);
/* Arrays not marked done, in id order. */
typedef int (*StoreArrayCallback)(uint64_t id, uid_t uid, json_t *data, void *userdata);
int store_array_foreach_live(Store *s, StoreArrayCallback cb, void *userdata);
/* How many of an array's tasks are in each state: cb(state, count) per state present. */
typedef int (*StoreCountCallback)(const char *state, unsigned count, void *userdata);
int store_array_count_states(Store *s, uint64_t id, StoreCountCallback cb, void *userdata);
/* The first (lowest id) task of an array that ended other than succeeded, through cb; 0 if none. */
int store_array_first_failure(Store *s, uint64_t id, StoreJobCallback cb, void *userdata);
