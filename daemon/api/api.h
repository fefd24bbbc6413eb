/* SPDX-License-Identifier: MIT */
/* The HTTP API's route tables, one per module, joined by api.c. */
#pragma once

#include "http/http.h"

extern const Route api_core_routes[];      /* api.c: /v1/status, /v1/topology */
extern const Route api_jobs_routes[];      /* api-jobs.c */
extern const Route api_output_routes[];    /* api-output.c: /v1/jobs/ID/output */
extern const Route api_reserve_routes[];   /* api-reserve.c */
extern const Route api_metrics_routes[];   /* api-metrics.c: /metrics, /v1/metrics */
extern const Route api_daemon_routes[];    /* api-daemon.c: /v1/daemon/reexec */
extern const Route api_arrays_routes[];    /* api-arrays.c: /v1/arrays */
extern const Route api_leases_routes[];    /* api-leases.c: /v1/leases */

/* Find the route for method+segments; sets *ret_allow to the allowed methods when only the method is wrong. */
const Route *api_find_route(const char *method, const char *const *segments, size_t n, char **ret_allow);

/* Helpers for handlers. */
int api_parse_body(Request *req, Response *resp, json_t **ret);  /* 400 problem on bad JSON; returns 0 or 1 (replied) */

/* api-jobs.c: the caller as the job manager sees it, with its supplementary groups. */
#include <systemd/sd-event.h>

#include "jobs/jobs.h"
void api_caller_of(Request *req, JobCaller *ret, gid_t *groups, size_t max_groups);
/* A refused submission as its problem+json (400/403/409/429/503/507); rtd's own errors returned as they are. */
int api_reply_submit_refusal(Response *resp, int r, const char *invalid_title, const char *field, const char *error);

/* api-arrays.c: an array's progress on /v1/events?array=ID. The check replies (403, 404) and returns 1, or
 * sets *ret_id and returns 0. An "array" event for array id goes to the stream, which ends with the array. */
int api_array_events_check(Request *req, Response *resp, const char *arg, uint64_t *ret_id);
void api_array_event(HttpStream *s, uint64_t id, bool *ended, sd_event_source **keepalive, json_t *ev);
void api_array_event_first(JobManager *jm, HttpStream *s, uint64_t id, bool *ended, sd_event_source **keepalive);
