/* SPDX-License-Identifier: MIT */
/* The job store: SQLite (WAL) in the state directory, versioned schema with migrations. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Store Store;

#define STORE_SCHEMA_VERSION 2

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
/* For /v1/status: the instance id and how many WAL checkpoints the checkpoint thread ran. */
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
} StoreJob;

int store_insert(Store *s, const StoreJob *j);
int store_update(Store *s, const StoreJob *j);
/* store_insert() or store_update() whose commit is on disk when it returns (fsync), for a power cut. */
int store_write_durable(Store *s, const StoreJob *j, bool insert);
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
} StoreFilter;
int store_list(Store *s, const StoreFilter *f, StoreJobCallback cb, void *userdata);

/* Delete finished jobs beyond the newest keep; returns how many, and their ids via cb (for output files). */
int store_prune_finished(Store *s, unsigned keep, StoreJobCallback cb, void *userdata);
