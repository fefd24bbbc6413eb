/* SPDX-License-Identifier: MIT */
/* The job spec a client submits (POST /v1/jobs): strict JSON parsing with errors that name the field. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "shared/cpuset.h"

typedef enum JobPolicy {
        JOB_POLICY_FIFO,
        JOB_POLICY_RR,
        JOB_POLICY_OTHER,       /* pinned but not real-time: for comparisons */
        _JOB_POLICY_MAX,
        _JOB_POLICY_INVALID = -22,
} JobPolicy;

const char *job_policy_to_string(JobPolicy p);
JobPolicy job_policy_from_string(const char *s);

/* Limits on what a client controls (style rule 17). */
#define JOB_SPEC_MAX_ARGS 4096
#define JOB_SPEC_MAX_ENV 4096
#define JOB_SPEC_MAX_STRINGS_BYTES (128 * 1024)      /* argv + env, like a small ARG_MAX */
#define JOB_SPEC_MAX_NAME 128
#define JOB_SPEC_MAX_PATH 4096
#define JOB_SPEC_MAX_TIMEOUT_S (10.0 * 365 * 24 * 3600)
#define JOB_SPEC_QUEUE_PRIORITY_MAX 1000

typedef struct JobSpec {
        char **argv;            /* NULL-terminated, at least one element */
        char **env;             /* "KEY=VALUE", NULL-terminated; may be empty */
        char *cwd;              /* absolute, or NULL: the user's home or "/" */
        char *name;             /* NULL: argv[0]'s basename */
        unsigned cores;         /* 1.. */
        bool has_cpus;          /* explicit CPU list given */
        CpuSet cpus;
        JobPolicy policy;
        unsigned priority;      /* 0 = not given (the configured default applies); 1..99 */
        double timeout_s;       /* 0 = none */
        int queue_priority;     /* -1000..1000, default 0 */
        /* Per-job limits, 0 = not given. Once submitted: the limits in force, 0 = none (see job-limits.c). */
        uint64_t max_output_bytes;      /* per stdout/stderr file */
        uint64_t max_tasks;             /* pids.max */
        uint64_t max_memory_bytes;      /* memory.max */
} JobSpec;

void job_spec_done(JobSpec *s);

/*
 * Parse a spec. On error returns -EINVAL and sets *ret_field (the JSON field at fault, "" for the whole
 * body) and *ret_error (what is wrong and what is allowed), both malloc'd. Pure: no I/O, no config.
 */
int job_spec_parse(json_t *j, JobSpec *ret, char **ret_field, char **ret_error);
int job_spec_parse_text(const char *text, size_t size, JobSpec *ret, char **ret_field, char **ret_error);

/* The normalized spec as JSON (what the store keeps and GET shows); include_private=false drops argv/env/cwd. */
json_t *job_spec_to_json(const JobSpec *s, bool include_private);
