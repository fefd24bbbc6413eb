/* SPDX-License-Identifier: MIT */
/*
 * The SPANK plugin's pure half: its options and plugstack.conf arguments, the lease request it sends to rtd
 * and the reading of rtd's answer (a lease, or a problem+json refusal). No I/O and no Slurm here, so the unit
 * tests drive it from strings and recorded replies.
 */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#define RTLEASE_DEFAULT_PRIORITY 50
#define RTLEASE_DEFAULT_SOCKET "/run/rtd/rtd.sock"
#define RTLEASE_DEFAULT_TIMEOUT_MS 20000
#define RTLEASE_OWNER_MAX 64

typedef enum RtMode {
        RT_MODE_OFF,            /* no --rt option: the plugin does nothing */
        RT_MODE_RT,             /* --rt[=PRIO]: quiet CPUs and SCHED_FIFO (or rr) at PRIO */
        RT_MODE_QUIET,          /* --rt-quiet: quiet CPUs, the tasks' policy untouched */
} RtMode;

typedef struct RtOptions {
        bool rt_asked, quiet_asked, policy_asked;       /* what the user typed; rtlease_options_resolve() */
        RtMode mode;
        int priority;           /* 1..99 in RT_MODE_RT */
        bool rr;                /* --rt-policy=rr */
        bool optional;          /* --rt-optional: run un-quieted when rtd is not there */
} RtOptions;

typedef struct RtPluginArgs {
        char socket[108];       /* sun_path */
        int timeout_ms;         /* connect, send and the wait for each byte of the answer */
} RtPluginArgs;

typedef struct RtLease {
        uint64_t id;
        int max_priority;       /* -1 when rtd did not say */
        char cpus[256];
        bool quieted;           /* rtd has walked every task once since the lease began (true when it does not say) */
        bool ended;             /* "state" is not "active": the lease ended already */
} RtLease;

/* How often, and at most how long (the plugin's timeout=), the plugin asks whether a lease is quiet yet. */
#define RTLEASE_QUIET_POLL_MS 20

/* --rt[=PRIO]: NULL or "" is the default priority; else a decimal 1..99. -EINVAL/-ERANGE otherwise. */
int rtlease_parse_priority(const char *arg, int *ret);
/* --rt-policy=fifo|rr */
int rtlease_parse_policy(const char *arg, bool *ret_rr);
/* Set o->mode from what was asked. A sentence for the user when the options contradict each other (--rt with
 * --rt-quiet; --rt-optional or --rt-policy alone), else NULL. */
const char *rtlease_options_resolve(RtOptions *o);

/* plugstack.conf arguments: socket=PATH timeout=SECONDS. On error *ret_bad points at the argument. */
int rtlease_parse_plugin_args(int argc, char **argv, RtPluginArgs *ret, const char **ret_bad);

/* "slurm:JOBID.STEP" */
int rtlease_owner(uint32_t job, uint32_t step, char *buf, size_t size);
/* Slurm's special steps (batch script, extern, interactive) hold the whole allocation: they lease nothing. */
bool rtlease_step_is_special(uint32_t step);

/* The union of the tasks' affinities in list form ("2-3"). -EINVAL for an empty set, -ENOBUFS too long. */
int rtlease_format_cpus(const cpu_set_t *set, char *buf, size_t size);

/* The POST /v1/leases body, malloc'ed. cpus must be a CPU list and owner as rtlease_owner makes it. */
int rtlease_request_body(const char *cpus, const char *owner, int pid, const RtOptions *o, char **ret);

/* A 201 answer's body. -EBADMSG when it is not a lease (no integer id). */
int rtlease_parse_lease(const char *body, RtLease *ret);
/*
 * A refusal's body (problem+json): "title: detail" (or whichever exists), else the status line's meaning.
 * Always a malloc'ed, printable string, or NULL on ENOMEM.
 */
char *rtlease_problem_text(int status, const char *body);

/* The priority to give the tasks: the asked one, which rtd has checked against its MaxPriority=. -ERANGE
 * when rtd's answer says it is above max_priority (an rtd that did not check). */
int rtlease_task_priority(const RtOptions *o, const RtLease *l, int *ret);

/* A small, strict reader of one top-level JSON object's scalar members (exposed for the unit tests). */
int rtlease_json_string(const char *json, const char *key, char **ret);
int rtlease_json_int(const char *json, const char *key, int64_t *ret);
int rtlease_json_bool(const char *json, const char *key, bool *ret);
