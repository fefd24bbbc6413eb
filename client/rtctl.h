/* SPDX-License-Identifier: MIT */
/* rtctl internals shared by the verb files: the HTTP client over the unix socket (transport.c), output,
 * exit codes. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* Exit codes (documented in rtctl(1)). Job verbs add their own in verb-jobs.c. */
#define RTCTL_EXIT_OK 0
#define RTCTL_EXIT_REFUSED 1            /* the daemon said no (problem+json shown) */
#define RTCTL_EXIT_USAGE 2
#define RTCTL_EXIT_UNREACHABLE 69       /* EX_UNAVAILABLE: socket missing, refused, permission denied */
#define RTCTL_EXIT_PROTOCOL 76          /* EX_PROTOCOL: rtd's answer was not well-formed HTTP or events */

typedef struct Ctl {
        const char *socket_path;
        bool json;                      /* --json: print the server's JSON */
        bool quiet;
} Ctl;

typedef struct CtlResponse {
        long status;
        char *body;
        size_t size;
        char *content_type;
        char *location;
        json_t *json;                   /* parsed when the body is JSON */
} CtlResponse;

void ctl_response_done(CtlResponse *r);
/* jansson >= 2.9 provides json_decrefp() for _cleanup_(json_decrefp). */

/*
 * One request. body may be NULL. Returns 0 when a response came back (any status), or an rtctl exit
 * code after printing why the daemon could not be reached.
 */
int ctl_request(Ctl *c, const char *method, const char *path, json_t *body, CtlResponse *ret);
/*
 * GET path and hand a 2xx body to a callback as it arrives (logs); other bodies are kept in ret for
 * ctl_fail. The callback returns false to stop. endless: no limit on a quiet stream (logs -f).
 * Returns like ctl_request.
 */
typedef bool (*CtlChunk)(const char *data, size_t size, void *userdata);
int ctl_stream(Ctl *c, const char *path, bool endless, CtlChunk on_chunk, void *userdata, CtlResponse *ret);
/* GET a server-sent event stream; each event's type and data (NUL-terminated) go to the callback. */
typedef bool (*CtlEvent)(const char *type, const char *data, size_t size, void *userdata);
int ctl_events(Ctl *c, const char *path, CtlEvent on_event, void *userdata, CtlResponse *ret);

/* For a non-2xx response: print "rtctl: <title>: <detail>" and return RTCTL_EXIT_REFUSED. */
int ctl_fail(Ctl *c, CtlResponse *r);
/* Print a JSON value indented, with a final newline (the --json output). */
void ctl_dump_json(json_t *j);
/* --json: print the JSON body and return 0. */
int ctl_print_json(CtlResponse *r);
/* GET path; on 2xx stores the JSON in *ret (caller frees) and returns 0, else returns an exit code. */
int ctl_get_json(Ctl *c, const char *path, json_t **ret);
/*
 * POST body to path, expecting 201 and the new object: 0 with its "id" in *ret_id and the response in
 * *ret (the caller frees it), else an exit code after saying why. ctl_print_created(): what submit prints
 * without --wait, the object (--json) or its id after prefix ("" for a job, "a" for an array); frees r.
 */
int ctl_create(Ctl *c, const char *path, json_t *body, CtlResponse *ret, uint64_t *ret_id);
int ctl_print_created(Ctl *c, CtlResponse *r, const char *prefix, uint64_t id);
/*
 * Follow an event stream until *final is set by on_event, reconnecting every 0.5 s while rtd restarts
 * (for a minute at most). Returns 0 once *final is set, or when rtd answered with a non-2xx status, which
 * is then left in *refused for the caller (else *refused is empty); otherwise an exit code.
 */
int ctl_follow(Ctl *c, const char *path, CtlEvent on_event, void *userdata, json_t *const *final,
               CtlResponse *refused);

/*
 * escape.c: strings from rtd made safe for a terminal. C0/C1 control characters and bytes that are not
 * UTF-8 become \xNN or \u00NN. ctl_escape() returns a new string; ctl_safe() returns s itself when it is
 * clean, else an escaped copy that lives for the next 32 calls; ctl_jstr() is ctl_safe() of a string
 * member (dflt when missing or empty).
 */
char *ctl_escape(const char *s);
const char *ctl_safe(const char *s);
const char *ctl_jstr(json_t *o, const char *key, const char *dflt);

/* Verbs: argc/argv start at the verb name; getopt with optind = 1 inside. Return an exit code. */
typedef int (*VerbFn)(Ctl *c, int argc, char **argv);
int verb_status(Ctl *c, int argc, char **argv);
int verb_topology(Ctl *c, int argc, char **argv);
int verb_submit(Ctl *c, int argc, char **argv);         /* verb-jobs.c */
int verb_list(Ctl *c, int argc, char **argv);
int verb_show(Ctl *c, int argc, char **argv);
int verb_cancel(Ctl *c, int argc, char **argv);
int verb_wait(Ctl *c, int argc, char **argv);
int verb_logs(Ctl *c, int argc, char **argv);
int verb_reserve(Ctl *c, int argc, char **argv);        /* verb-reserve.c */
int verb_reexec(Ctl *c, int argc, char **argv);         /* verb-daemon.c */
int verb_release(Ctl *c, int argc, char **argv);
int verb_plan(Ctl *c, int argc, char **argv);
int verb_metrics(Ctl *c, int argc, char **argv);        /* verb-metrics.c */
int verb_top(Ctl *c, int argc, char **argv);
int verb_leases(Ctl *c, int argc, char **argv);         /* verb-leases.c */

/* verb-jobs.c: how a job (or an array's first failure: state, exit_code, signal) ended, as an exit code. */
int ctl_job_exit_code(json_t *job);

/* verb-array.c: job arrays. Their ids are "a12" (a letter first: never taken for job 12). */
typedef struct CtlArrayOptions {
        const char *indices;            /* --array 0-999 */
        const char *each;               /* --each FILE ("-": stdin) */
        unsigned max_running;
        bool subst;                     /* --array-subst: {} in the command is the index */
        bool wait, quiet;
} CtlArrayOptions;
bool ctl_is_array_id(const char *s);
int ctl_array_submit(Ctl *c, json_t *spec, const CtlArrayOptions *o);
int ctl_array_show(Ctl *c, const char *arg);
int ctl_array_cancel(Ctl *c, const char *arg);
int ctl_array_wait(Ctl *c, const char *arg);
