/* SPDX-License-Identifier: MIT */
/* /v1/jobs and /v1/events: submit, list, show, cancel, and job events (SSE); output is in api-output.c. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api.h"
#include "core/manager.h"
#include "jobs/jobs.h"
#include "shared/macro.h"
#include "shared/parse-util.h"

static void json_decrefp_(json_t **j) {
        json_decref(*j);
}
#define _cleanup_json_ _cleanup_(json_decrefp_)

/* The caller's credentials with the supplementary groups of the connected process (SO_PEERGROUPS). */
void api_caller_of(Request *req, JobCaller *ret, gid_t *groups, size_t max_groups) {
        const union MHD_ConnectionInfo *info = req->connection ?
                MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CONNECTION_FD) : NULL;
        socklen_t len = (socklen_t) (max_groups * sizeof(gid_t));

        *ret = (JobCaller){
                .uid = req->caller.uid,
                .gid = req->caller.gid,
                .groups = groups,
                .user = req->caller.user,
                .admin = req->caller.role == ROLE_ADMIN,
        };
        if (info && getsockopt(info->connect_fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) >= 0)
                ret->n_groups = len / sizeof(gid_t);
}

static int parse_id(Request *req, Response *resp, uint64_t *ret) {
        if (req->n_segments < 3 || safe_atou64(req->segments[2], ret) < 0 || *ret == 0) {
                reply_problem(resp, 404, "No such job", "'%s' is not a job id (a positive integer)",
                              req->n_segments >= 3 ? req->segments[2] : "");
                return 1;
        }
        return 0;
}

static int set_location(Response *resp, uint64_t id) {
        free(resp->location);
        if (asprintf(&resp->location, "/v1/jobs/%" PRIu64, id) < 0) {
                resp->location = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* A refused submission (job_manager_submit() and its array form) as the problem a client can act on; other
 * errors are rtd's own and go back to the caller. */
int api_reply_submit_refusal(Response *resp, int r, const char *invalid_title, const char *field, const char *error) {
        switch (r) {
        case -EINVAL:
                return reply_problem(resp, 400, invalid_title, "%s: %s", strempty(field), strempty(error));
        case -E2BIG:
                return reply_problem(resp, 400, "Job array too large", "%s: %s", strempty(field), strempty(error));
        case -EPERM:
                return reply_problem(resp, 403, "Above your limits", "%s: %s", strempty(field), strempty(error));
        case -EUSERS:
        case -ENOSPC:
                return reply_problem(resp, 429, "Too many queued jobs", "%s", strempty(error));
        case -ENXIO:
                return reply_problem(resp, 409, "No CPUs reserved", "%s", strempty(error));
        case -EDQUOT:
                return reply_problem(resp, 507, "Job store full", "%s", strempty(error));
        case -EIO:
                return reply_problem(resp, 503, "Job store failed", "%s", strempty(error));
        default:
                return r;
        }
}

static int submit(Request *req, Response *resp) {
        _cleanup_free_ char *field = NULL, *error = NULL;
        JobManager *jm = req->manager->jobs;
        gid_t groups[1024];
        JobCaller c;
        JobSpec spec;
        uint64_t id;
        json_t *job;
        int r;

        if (!req->body || req->body_size == 0)
                return reply_problem(resp, 400, "Missing body", "POST /v1/jobs needs a JSON job spec, at least "
                                     "{\"argv\": [\"/bin/true\"]}");
        r = job_spec_parse_text(req->body, req->body_size, &spec, &field, &error);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return reply_problem(resp, 400, "Invalid job spec", "%s%s%s", strempty(field), *strempty(field) ?
                                     ": " : "", strempty(error));

        api_caller_of(req, &c, groups, ELEMENTSOF(groups));
        r = job_manager_submit(jm, &spec, &c, &id, &field, &error);
        job_spec_done(&spec);
        if (r != 0)
                return api_reply_submit_refusal(resp, r, "Impossible job", field, error);
        r = job_manager_get(jm, id, true, &job, NULL);
        if (r < 0)
                return r;
        r = set_location(resp, id);
        if (r < 0) {
                json_decref(job);
                return r;
        }
        return reply_json(resp, 201, job);
}

static int list(Request *req, Response *resp) {
        const char *state = request_query(req, "state"), *user = request_query(req, "user"),
                   *limit = request_query(req, "limit"), *cursor = request_query(req, "cursor"),
                   *array = request_query(req, "array");
        JobListFilter f = {
                .uid = -1,
                .limit = 100,
                .viewer = req->caller.uid,
                .viewer_admin = req->caller.role == ROLE_ADMIN,
        };
        json_t *jobs;
        uint64_t next;
        int r;

        if (state && *state) {
                if (job_state_from_string(state) < 0)
                        return reply_problem(resp, 400, "Invalid filter", "state: '%s' is not a job state; use "
                                             "queued, starting, running, succeeded, failed, cancelled, timed_out "
                                             "or lost", state);
                f.state = state;
        }
        if (user && *user) {
                unsigned uid;
                if (safe_atou(user, &uid) >= 0)
                        f.uid = uid;
                else {
                        struct passwd *pw = getpwnam(user);
                        if (!pw)
                                return reply_problem(resp, 400, "Invalid filter", "user: no such user '%s'", user);
                        f.uid = pw->pw_uid;
                }
        }
        if (limit && (safe_atou(limit, &f.limit) < 0 || f.limit < 1 || f.limit > 1000))
                return reply_problem(resp, 400, "Invalid filter", "limit: must be an integer from 1 to 1000");
        if (array && *array && (safe_atou64(array[0] == 'a' ? array + 1 : array, &f.array_id) < 0 || !f.array_id))
                return reply_problem(resp, 400, "Invalid filter", "array: '%s' is not an array id (a12 or 12)",
                                     array);
        if (cursor && *cursor && safe_atou64(cursor, &f.before_id) < 0)
                return reply_problem(resp, 400, "Invalid filter", "cursor: use the next_cursor of the previous "
                                     "page");
        r = job_manager_list(req->manager->jobs, &f, &jobs, &next);
        if (r < 0)
                return r;
        return reply_json(resp, 200, json_pack("{s:o,s:o}", "jobs", jobs, "next_cursor",
                                               next ? json_sprintf("%" PRIu64, next) : json_null()));
}

static int show(Request *req, Response *resp) {
        uint64_t id;
        json_t *job;
        uid_t uid;
        int r;

        if (parse_id(req, resp, &id))
                return 0;
        r = job_manager_get(req->manager->jobs, id, true, &job, &uid);
        if (r == -ENOENT)
                return reply_problem(resp, 404, "No such job", "job %" PRIu64 " does not exist (or was pruned, "
                                     "see [Jobs] KeepFinished=)", id);
        if (r < 0)
                return r;
        if (req->caller.role != ROLE_ADMIN && uid != req->caller.uid) {
                /* Other users' jobs are visible, but not their command line or environment. */
                json_decref(job);
                r = job_manager_get(req->manager->jobs, id, false, &job, NULL);
                if (r < 0)
                        return r;
        }
        return reply_json(resp, 200, job);
}

static int cancel(Request *req, Response *resp) {
        gid_t groups[1];
        JobState state;
        JobCaller c;
        uint64_t id;
        json_t *job;
        int r;

        if (parse_id(req, resp, &id))
                return 0;
        api_caller_of(req, &c, groups, 0);
        r = job_manager_cancel(req->manager->jobs, id, &c, &state);
        switch (r) {
        case 0:
                break;
        case -ENOENT:
                return reply_problem(resp, 404, "No such job", "job %" PRIu64 " does not exist", id);
        case -EPERM:
                return reply_problem(resp, 403, "Not your job", "job %" PRIu64 " belongs to another user; only "
                                     "its owner or an administrator can cancel it", id);
        case -EALREADY:
                return reply_problem(resp, 409, "Already finished", "job %" PRIu64 " already ended (%s)", id,
                                     job_state_to_string(state));
        default:
                return r;
        }
        r = job_manager_get(req->manager->jobs, id, true, &job, NULL);
        if (r < 0)
                return r;
        /* 200 when it is already gone (it was queued); 202 while SIGTERM/SIGKILL take effect. */
        return reply_json(resp, job_state_is_final(state) ? 200 : 202, job);
}

/* ---- events (server-sent events) ---- */

typedef struct EventSub {
        Manager *manager;
        HttpStream *stream;
        JobSubscription *sub;
        uid_t uid;
        bool admin;
        uint64_t job;           /* 0: all jobs the caller may see */
        uint64_t array;         /* not 0: only that array's progress ("array" events) */
        bool ended;
        sd_event_source *keepalive;
} EventSub;

static void sse_send(EventSub *e, const char *event, json_t *data) {
        _cleanup_free_ char *s = json_dumps(data, JSON_COMPACT), *msg = NULL;
        int n;

        if (!s || (n = asprintf(&msg, "event: %s\ndata: %s\n\n", event, s)) < 0)
                return;
        (void) http_stream_write(e->stream, msg, (size_t) n);
}

/*
 * A stream for one job ends with that job: the waiter has what it came for, and the connection does not
 * linger (a client that went away is only noticed when something is written to it).
 */
static void sse_end_if_final(EventSub *e, json_t *ev) {
        if (e->job && !e->ended &&
            job_state_is_final(job_state_from_string(json_string_value(json_object_get(ev, "state"))))) {
                e->ended = true;
                e->keepalive = sd_event_source_disable_unref(e->keepalive);
                http_stream_end(e->stream);
        }
}

static void on_job_event(json_t *ev, void *userdata) {
        EventSub *e = userdata;
        uint64_t id = (uint64_t) json_integer_value(json_object_get(ev, "id"));

        if (streq(json_string_value(json_object_get(ev, "type")) ?: "", "array") || e->array) {
                api_array_event(e->stream, e->array, &e->ended, &e->keepalive, ev);
                return;
        }
        if (e->job && id != e->job)
                return;
        if (!e->admin && (uid_t) json_integer_value(json_object_get(ev, "uid")) != e->uid)
                return;
        sse_send(e, "job", ev);
        sse_end_if_final(e, ev);
}

static int on_keepalive(sd_event_source *s, uint64_t usec, void *userdata) {
        EventSub *e = userdata;
        (void) http_stream_write(e->stream, ": keepalive\n\n", 13);
        (void) sd_event_source_set_time_relative(s, 15000000);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static void on_events_close(HttpStream *s, void *userdata) {
        EventSub *e = userdata;
        if (e->manager->jobs)
                job_manager_unsubscribe(e->manager->jobs, e->sub);
        sd_event_source_disable_unref(e->keepalive);
        free(e);
}

static int events(Request *req, Response *resp) {
        const char *job = request_query(req, "job"), *array = request_query(req, "array");
        EventSub *e;
        HttpStream *s;
        int r;

        e = calloc(1, sizeof *e);
        if (!e)
                return -ENOMEM;
        *e = (EventSub){ .manager = req->manager, .uid = req->caller.uid, .admin = req->caller.role == ROLE_ADMIN };
        if (job && (safe_atou64(job, &e->job) < 0 || e->job == 0)) {
                free(e);
                return reply_problem(resp, 400, "Invalid parameter", "job: must be a job id");
        }
        if (array && job) {
                free(e);
                return reply_problem(resp, 400, "Invalid parameter", "give job= or array=, not both");
        }
        if (array) {
                r = api_array_events_check(req, resp, array, &e->array);
                if (r != 0) {
                        free(e);
                        return r < 0 ? r : 0;
                }
        }
        /* With job=ID the stream opens with that job's current state, so a waiter cannot miss the end. */
        if (e->job) {
                _cleanup_json_ json_t *cur = NULL;
                uid_t uid;
                r = job_manager_get(req->manager->jobs, e->job, false, &cur, &uid);
                uint64_t id = e->job;
                bool mine = r >= 0 && (e->admin || uid == e->uid);
                if (r == -ENOENT || !mine)
                        free(e);
                if (r == -ENOENT)
                        return reply_problem(resp, 404, "No such job", "job %" PRIu64 " does not exist", id);
                if (!mine)
                        return reply_problem(resp, 403, "Not your job", "only the owner of job %" PRIu64 " or an "
                                             "administrator can follow it", id);
        }
        r = http_stream_start(resp, "text/event-stream", on_events_close, e, &s);
        if (r < 0) {
                free(e);
                return r;
        }
        e->stream = s;
        r = job_manager_subscribe(req->manager->jobs, on_job_event, e, &e->sub);
        if (r < 0)
                return r;       /* the stream's close callback frees e */
        (void) sd_event_add_time_relative(req->manager->event, &e->keepalive, CLOCK_MONOTONIC, 15000000, 0,
                                          on_keepalive, e);
        if (e->array)
                api_array_event_first(req->manager->jobs, e->stream, e->array, &e->ended, &e->keepalive);
        else if (e->job) {
                _cleanup_json_ json_t *cur = NULL;
                if (job_manager_get(req->manager->jobs, e->job, false, &cur, NULL) >= 0) {
                        json_t *ev = json_pack("{s:s,s:O,s:O,s:O,s:O,s:O?,s:O?,s:O?}", "type", "job", "id",
                                               json_object_get(cur, "id"), "state", json_object_get(cur, "state"),
                                               "user", json_object_get(cur, "user"), "uid",
                                               json_object_get(cur, "uid"), "exit_code",
                                               json_object_get(cur, "exit_code"), "signal",
                                               json_object_get(cur, "signal"), "reason",
                                               json_object_get(cur, "reason"));
                        if (ev) {
                                sse_send(e, "job", ev);
                                sse_end_if_final(e, ev);
                        }
                        json_decref(ev);
                }
        } else
                (void) http_stream_write(s, ": connected\n\n", strlen(": connected\n\n"));
        return 0;
}

const Route api_jobs_routes[] = {
        { "POST", "/v1/jobs", ROLE_USER, submit },
        { "GET", "/v1/jobs", ROLE_USER, list },
        { "GET", "/v1/jobs/*", ROLE_USER, show },
        { "DELETE", "/v1/jobs/*", ROLE_USER, cancel },
        { "GET", "/v1/events", ROLE_USER, events },
        {},
};
