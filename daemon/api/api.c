/* SPDX-License-Identifier: MIT */
/* Route lookup over the modules' tables, and the core endpoints: /v1/status and /v1/topology. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "core/manager.h"
#include "host/topology.h"
#include "jobs/jobs.h"
#include "lease/lease.h"
#include "metrics/metrics.h"
#include "reexec.h"
#include "reserve/reserve.h"
#include "shared/log.h"

static const Route *const route_tables[] = {
        api_core_routes,
        api_jobs_routes,
        api_output_routes,
        api_reserve_routes,
        api_metrics_routes,
        api_daemon_routes,
        api_arrays_routes,
        api_leases_routes,
};

static bool pattern_matches(const char *pattern, const char *const *segments, size_t n) {
        char buf[256];
        char *save = NULL;
        size_t i = 0;

        if (strlen(pattern) >= sizeof buf)
                return false;
        strcpy(buf, pattern);
        for (char *p = strtok_r(buf, "/", &save); p; p = strtok_r(NULL, "/", &save), i++) {
                if (i >= n)
                        return false;
                if (!streq(p, "*") && !streq(p, segments[i]))
                        return false;
        }
        return i == n;
}

static int append_allow(char **allow, const char *method) {
        char *n;

        if (*allow && strstr(*allow, method))
                return 0;
        if (asprintf(&n, "%s%s%s", strempty(*allow), *allow ? ", " : "", method) < 0)
                return -ENOMEM;
        free(*allow);
        *allow = n;
        return 0;
}

const Route *api_find_route(const char *method, const char *const *segments, size_t n, char **ret_allow) {
        char *allow = NULL;
        /* HEAD is served like GET (MHD drops the body). */
        const char *m = streq(method, "HEAD") ? "GET" : method;

        for (size_t t = 0; t < ELEMENTSOF(route_tables); t++)
                for (const Route *r = route_tables[t]; r->method; r++) {
                        if (!pattern_matches(r->pattern, segments, n))
                                continue;
                        if (streq(r->method, m)) {
                                free(allow);
                                return r;
                        }
                        (void) append_allow(&allow, r->method);
                }
        *ret_allow = allow;
        return NULL;
}

int api_parse_body(Request *req, Response *resp, json_t **ret) {
        json_error_t err;
        json_t *j;

        if (!req->body || req->body_size == 0) {
                reply_problem(resp, 400, "Missing body", "this request needs a JSON object as its body");
                return 1;
        }
        j = json_loadb(req->body, req->body_size, JSON_REJECT_DUPLICATES, &err);
        if (!j) {
                reply_problem(resp, 400, "Malformed JSON", "line %d, column %d: %s", err.line, err.column,
                              err.text);
                return 1;
        }
        if (!json_is_object(j)) {
                json_decref(j);
                reply_problem(resp, 400, "Malformed JSON", "the body must be a JSON object");
                return 1;
        }
        *ret = j;
        return 0;
}

static json_t *cpuset_json(const CpuSet *s) {
        _cleanup_free_ char *str = NULL;
        if (cpuset_format(s, &str) < 0)
                return NULL;
        return json_string(str);
}

static int get_status(Request *req, Response *resp) {
        Manager *m = req->manager;
        const Topology *t = m->topology;
        CpuSet reserved, housekeeping;
        json_t *j;

        manager_reserved_cpus(m, &reserved);
        manager_housekeeping_cpus(m, &housekeeping);
        j = json_pack("{s:s, s:I, s:I, s:I, s:{s:o, s:i, s:i, s:i, s:i, s:b}, s:{s:s, s:i, s:s},"
                      " s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                      "version", RTD_VERSION,
                      "pid", (json_int_t) getpid(),
                      "uptime_sec", (json_int_t) ((now_usec(CLOCK_MONOTONIC) - m->start_usec) / 1000000),
                      "started_at", (json_int_t) (m->start_realtime_usec / 1000000),
                      "topology", "online", cpuset_json(&t->online), "cpus", (int) cpuset_count(&t->online),
                      "packages", (int) t->n_packages, "cores", (int) t->n_cores, "nodes", (int) t->n_nodes,
                      "smt", t->smt,
                      "caller", "user", req->caller.user, "uid", (int) req->caller.uid, "role",
                      role_to_string(req->caller.role),
                      "reserved_cpus", cpuset_json(&reserved),
                      "housekeeping_cpus", cpuset_json(&housekeeping),
                      "reservation", reservation_to_json(m->reservation),
                      "jobs", job_manager_to_json(m->jobs),
                      "metrics", metrics_to_json(m->metrics),
                      "socket_activated", json_boolean(m->socket_activated),
                      "reexec", reexec_to_json(),
                      "config", json_pack("{s:s, s:s, s:s, s:s}", "path",
                                          m->config_path ?: RTD_SYSCONFDIR "/rtd/rtd.conf", "socket",
                                          m->config->socket_path, "metrics_listen",
                                          m->config->metrics_listen ?: "no", "log_level",
                                          log_level_to_string(m->config->log_level)));
        json_t *leases = leases_to_json(m->leases);
        if (j && leases)
                json_object_set(j, "leases", json_object_get(leases, "leases"));
        json_decref(leases);
        return reply_json(resp, 200, j);
}

static int get_topology(Request *req, Response *resp) {
        return reply_json(resp, 200, topology_to_json(req->manager->topology));
}

const Route api_core_routes[] = {
        { "GET", "/v1/status", ROLE_USER, get_status },
        { "GET", "/v1/topology", ROLE_USER, get_topology },
        {},
};
