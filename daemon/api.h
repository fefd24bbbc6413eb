/* SPDX-License-Identifier: MIT */
/* The HTTP API's route tables, one per module, joined by api.c. */
#pragma once

#include "http.h"

extern const Route api_core_routes[];      /* api.c: /v1/status, /v1/topology */
extern const Route api_jobs_routes[];      /* api-jobs.c */
extern const Route api_output_routes[];    /* api-output.c: /v1/jobs/ID/output */
extern const Route api_reserve_routes[];   /* api-reserve.c */
extern const Route api_metrics_routes[];   /* api-metrics.c: /metrics, /v1/metrics */
extern const Route api_leases_routes[];    /* api-leases.c: /v1/leases */

/* Find the route for method+segments; sets *ret_allow to the allowed methods when only the method is wrong. */
const Route *api_find_route(const char *method, const char *const *segments, size_t n, char **ret_allow);

/* Helpers for handlers. */
int api_parse_body(Request *req, Response *resp, json_t **ret);  /* 400 problem on bad JSON; returns 0 or 1 (replied) */
