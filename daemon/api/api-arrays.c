/* SPDX-License-Identifier: MIT */
/*
 * /v1/arrays: create a job array (N jobs in one request, all or nothing), show its progress, cancel what
 * is left of it; and its progress on /v1/events?array=ID. The tasks themselves are jobs: GET
 * /v1/jobs?array=ID lists them. Arrays are named "a<id>" for people (rtctl), plain ids here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "core/manager.h"
#include "jobs/jobs-array.h"
#include "shared/macro.h"
#include "shared/parse-util.h"

/* "12" or "a12". */
static int parse_array_id(const char *s, uint64_t *ret) {
        if (!s)
                return -EINVAL;
        if (s[0] == 'a')
                s++;
        return safe_atou64(s, ret) < 0 || *ret == 0 ? -EINVAL : 0;
}

static int path_id(Request *req, Response *resp, uint64_t *ret) {
        if (req->n_segments < 3 || parse_array_id(req->segments[2], ret) < 0) {
                reply_problem(resp, 404, "No such array", "'%s' is not an array id (a12 or 12)",
                              req->n_segments >= 3 ? req->segments[2] : "");
                return 1;
        }
        return 0;
}

static int submit(Request *req, Response *resp) {
        _cleanup_free_ char *field = NULL, *error = NULL, *loc = NULL;
        _cleanup_(json_decrefp) json_t *body = NULL;
        gid_t groups[1024];
        json_t *array;
        JobCaller c;
        uint64_t id;
        int r;

        if (api_parse_body(req, resp, &body))
                return 0;
        api_caller_of(req, &c, groups, ELEMENTSOF(groups));
        r = job_manager_submit_array(req->manager->jobs, body, &c, &id, &field, &error);
        if (r != 0)
                return api_reply_submit_refusal(resp, r, "Invalid job array", field, error);
        r = job_manager_get_array(req->manager->jobs, id, &array, NULL);
        if (r < 0)
                return r;
        if (asprintf(&loc, "/v1/arrays/%" PRIu64, id) < 0) {
                json_decref(array);
                return -ENOMEM;
        }
        free(resp->location);
        resp->location = TAKE_PTR(loc);
        return reply_json(resp, 201, array);
}

static int show(Request *req, Response *resp) {
        json_t *array;
        uint64_t id;
        int r;

        if (path_id(req, resp, &id))
                return 0;
        r = job_manager_get_array(req->manager->jobs, id, &array, NULL);
        if (r == -ENOENT)
                return reply_problem(resp, 404, "No such array", "array a%" PRIu64 " does not exist (or was pruned "
                                     "with its tasks, see [Jobs] KeepFinished=)", id);
        if (r < 0)
                return r;
        return reply_json(resp, 200, array);
}

static int cancel(Request *req, Response *resp) {
        gid_t groups[1];
        unsigned n = 0;
        json_t *array;
        JobCaller c;
        uint64_t id;
        int r;

        if (path_id(req, resp, &id))
                return 0;
        api_caller_of(req, &c, groups, 0);
        r = job_manager_cancel_array(req->manager->jobs, id, &c, &n);
        switch (r) {
        case 0:
                break;
        case -ENOENT:
                return reply_problem(resp, 404, "No such array", "array a%" PRIu64 " does not exist", id);
        case -EPERM:
                return reply_problem(resp, 403, "Not your array", "array a%" PRIu64 " belongs to another user; only "
                                     "its owner or an administrator can cancel it", id);
        case -EALREADY:
                return reply_problem(resp, 409, "Already finished", "every task of array a%" PRIu64 " has ended", id);
        default:
                return r;
        }
        r = job_manager_get_array(req->manager->jobs, id, &array, NULL);
        if (r < 0)
                return r;
        json_object_set_new(array, "cancelled_now", json_integer(n));
        /* 200 once every task has ended; 202 while running tasks get SIGTERM and SIGKILL. */
        return reply_json(resp, streq(json_string_value(json_object_get(array, "state")) ?: "", "running") ? 202 :
                                200, array);
}

/* ---- progress on /v1/events?array=ID ---- */

int api_array_events_check(Request *req, Response *resp, const char *arg, uint64_t *ret_id) {
        _cleanup_(json_decrefp) json_t *cur = NULL;
        uint64_t id;
        uid_t uid;
        int r;

        if (parse_array_id(arg, &id) < 0) {
                reply_problem(resp, 400, "Invalid parameter", "array: '%s' is not an array id (a12 or 12)", arg);
                return 1;
        }
        r = job_manager_get_array(req->manager->jobs, id, &cur, &uid);
        if (r == -ENOENT) {
                reply_problem(resp, 404, "No such array", "array a%" PRIu64 " does not exist", id);
                return 1;
        }
        if (r < 0)
                return r;
        if (req->caller.role != ROLE_ADMIN && uid != req->caller.uid) {
                reply_problem(resp, 403, "Not your array", "only the owner of array a%" PRIu64 " or an "
                              "administrator can follow it", id);
                return 1;
        }
        *ret_id = id;
        return 0;
}

void api_array_event(HttpStream *s, uint64_t id, bool *ended, sd_event_source **keepalive, json_t *ev) {
        _cleanup_free_ char *data = NULL, *msg = NULL;
        const char *state;
        int n;

        if (*ended || !id || !streq(json_string_value(json_object_get(ev, "type")) ?: "", "array") ||
            (uint64_t) json_integer_value(json_object_get(ev, "id")) != id)
                return;
        data = json_dumps(ev, JSON_COMPACT);
        if (!data || (n = asprintf(&msg, "event: array\ndata: %s\n\n", data)) < 0)
                return;
        (void) http_stream_write(s, msg, (size_t) n);
        /* The stream ends with the array: the waiter has its summary. */
        state = json_string_value(json_object_get(ev, "state")) ?: "";
        if (streq(state, "succeeded") || streq(state, "failed")) {
                *ended = true;
                *keepalive = sd_event_source_disable_unref(*keepalive);
                http_stream_end(s);
        }
}

void api_array_event_first(JobManager *jm, HttpStream *s, uint64_t id, bool *ended, sd_event_source **keepalive) {
        _cleanup_(json_decrefp) json_t *cur = NULL;

        if (job_manager_get_array(jm, id, &cur, NULL) < 0)
                return;
        json_object_set_new(cur, "type", json_string("array"));
        api_array_event(s, id, ended, keepalive, cur);
}

const Route api_arrays_routes[] = {
        { "POST", "/v1/arrays", ROLE_USER, submit },
        { "GET", "/v1/arrays/*", ROLE_USER, show },
        { "DELETE", "/v1/arrays/*", ROLE_USER, cancel },
        {},
};
