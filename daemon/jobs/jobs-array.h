/* SPDX-License-Identifier: MIT */
/* Job arrays (jobs-array.c): N tasks of one command created by one request, all or nothing. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "jobs.h"

/* Highest index an --array range may name (Slurm's is MaxArraySize-1; ours only bounds the numbers). */
#define JOB_ARRAY_INDEX_MAX 999999999u

typedef struct JobArrayRequest {
        unsigned size;
        unsigned max_running;           /* 0: no cap */
        bool substitute;                /* "{}" in argv becomes the task's index */
        const char *indices;            /* borrowed from the body; NULL for the "tasks" form */
} JobArrayRequest;

/*
 * "0-999", "1-10:2", "1,3,5", or a mix ("0-9,20-29:5"): each index once, at most max of them, each at most
 * JOB_ARRAY_INDEX_MAX. The indices in the order given in *ret (malloc'd). -EINVAL: malformed; -E2BIG: more
 * than max (counted without expanding, so 0-999999999 costs nothing); *re says what and how to fix it.
 */
int job_array_parse_indices(const char *s, unsigned max, unsigned **ret, unsigned *ret_n, char **re);
/*
 * The body of POST /v1/arrays: {"spec": {...job spec...}, "indices": "0-999" | "tasks": [[args...], ...],
 * "max_running": K, "substitute": bool}. Checks the array's shape (the spec itself is checked per task);
 * -EINVAL or -E2BIG with *rf naming the field.
 */
int job_array_request_parse(json_t *body, unsigned max_size, JobArrayRequest *ret, unsigned **ret_indices,
                            char **rf, char **re);

/*
 * Create the array's jobs: every task's spec checked and counted against the queue limits first, then the
 * array and its jobs stored in one commit, then queued. Errors as job_manager_submit(), plus -E2BIG.
 */
int job_manager_submit_array(JobManager *jm, json_t *body, const JobCaller *c, uint64_t *ret_id, char **rf,
                             char **re);
/* The array as JSON (counts, first failure); -ENOENT if unknown or pruned. */
int job_manager_get_array(JobManager *jm, uint64_t id, json_t **ret, uid_t *ret_uid);
/* Cancel every task that has not ended: -ENOENT, -EPERM (not the owner), -EALREADY (all ended). */
int job_manager_cancel_array(JobManager *jm, uint64_t id, const JobCaller *c, unsigned *ret_cancelled);
