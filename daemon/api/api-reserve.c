/* SPDX-License-Identifier: MIT */
/* /v1/reservation: read, change, release the reservation (admins), and /v1/reservation/plan (dry run). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "core/manager.h"
#include "host/topology.h"
#include "jobs/jobs.h"
#include "reserve/reserve.h"
#include "shared/parse-util.h"

/* force from ?force= or the body's "force"; -EINVAL when neither parses. */
static int want_force(Request *req, json_t *body, bool *ret) {
        const char *q = request_query(req, "force");
        json_t *f = body ? json_object_get(body, "force") : NULL;
        int b;

        *ret = false;
        if (q) {
                b = parse_boolean(q);
                if (b < 0)
                        return -EINVAL;
                *ret = b;
        }
        if (f) {
                if (!json_is_boolean(f))
                        return -EINVAL;
                *ret = *ret || json_is_true(f);
        }
        return 0;
}

static bool jobs_busy(Manager *m, const CpuSet *cpus) {
        return m->jobs && !cpuset_is_empty(cpus) && job_manager_cpus_busy(m->jobs, cpus);
}

static int busy_problem(Response *resp, const CpuSet *cpus, const char *what) {
        _cleanup_free_ char *l = NULL;

        (void) cpuset_format(cpus, &l);
        return reply_problem(resp, 409, "CPUs run jobs",
                             "CPU %s runs jobs; %s would take the CPU from them. Cancel those jobs first, or "
                             "force it (\"force\": true, rtctl %s --force), which cancels them",
                             strempty(l), what, streq(what, "releasing") ? "release" : "reserve");
}

static int get_reservation(Request *req, Response *resp) {
        return reply_json(resp, 200, reservation_to_json(req->manager->reservation));
}

static int put_reservation(Request *req, Response *resp) {
        Manager *m = req->manager;
        _cleanup_free_ char *error = NULL;
        json_t *body = NULL, *cpus_j;
        const char *key;
        json_t *v;
        CpuSet cpus, old, removed;
        bool force;
        int r;

        if (api_parse_body(req, resp, &body) > 0)
                return 0;
        json_object_foreach(body, key, v)
                if (!streq(key, "cpus") && !streq(key, "force")) {
                        reply_problem(resp, 400, "Unknown field",
                                      "%s: unknown field; a reservation takes \"cpus\" (a CPU list such as "
                                      "\"2-3\") and optionally \"force\" (true/false)", key);
                        goto out;
                }
        cpus_j = json_object_get(body, "cpus");
        if (!json_is_string(cpus_j)) {
                reply_problem(resp, 400, "Missing cpus", "cpus: required, a CPU list string such as \"2-3\"");
                goto out;
        }
        if (want_force(req, body, &force) < 0) {
                reply_problem(resp, 400, "Invalid force", "force: must be true or false");
                goto out;
        }
        r = topology_parse_online_cpus(m->topology, json_string_value(cpus_j), &cpus, &error);
        if (r < 0) {
                reply_problem(resp, 400, "Invalid cpus", "cpus: %s", error ?: "not a CPU list such as \"2-3\"");
                goto out;
        }
        free(error);
        error = NULL;
        r = reservation_validate(m->reservation, &cpus, &error);
        if (r < 0) {
                reply_problem(resp, 400, "Invalid reservation", "%s", strempty(error));
                goto out;
        }
        /* CPUs leaving the reservation must not run jobs, unless forced (which cancels them). */
        manager_reserved_cpus(m, &old);
        cpuset_andnot(&removed, &old, &cpus);
        if (jobs_busy(m, &removed)) {
                if (!force) {
                        busy_problem(resp, &removed, "shrinking the reservation");
                        goto out;
                }
                (void) job_manager_cancel_on_cpus(m->jobs, &removed, "the reservation was changed (forced)");
        }
        r = reservation_apply(m->reservation, &cpus);
        if (r < 0) {
                reply_problem(resp, 500, "Reservation failed",
                              "the reservation could not be applied (%s); see rtd's log; knobs already "
                              "changed are in the restore journal", strerror(-r));
                manager_reservation_changed(m);
                goto out;
        }
        manager_reservation_changed(m);
        reply_json(resp, 200, reservation_to_json(m->reservation));
out:
        json_decref(body);
        return 0;
}

static int delete_reservation(Request *req, Response *resp) {
        Manager *m = req->manager;
        CpuSet reserved, none = {};
        json_t *o;
        bool force;
        int r;

        if (want_force(req, NULL, &force) < 0)
                return reply_problem(resp, 400, "Invalid force", "force: must be true or false (?force=1)");
        manager_reserved_cpus(m, &reserved);
        if (jobs_busy(m, &reserved)) {
                if (!force)
                        return busy_problem(resp, &reserved, "releasing");
                (void) job_manager_cancel_on_cpus(m->jobs, &reserved, "the reservation was released (forced)");
        }
        /* Workers go first: they are what lives on the reserved CPUs (and in the reserved cgroup). */
        if (m->jobs)
                (void) job_manager_set_cpus(m->jobs, &none);
        r = reservation_release(m->reservation);
        manager_reservation_changed(m);
        o = json_pack("{s:s, s:O?}", "state", "none", "restore", reservation_last_restore(m->reservation));
        if (r < 0)
                return reply_problem(resp, 500, "Restore incomplete",
                                     "some knobs could not be restored (%s); the restore journal is kept, run "
                                     "'rtd --restore' once the cause is fixed; details: GET /v1/reservation",
                                     strerror(-r));
        return reply_json(resp, 200, o);
}

static int get_plan(Request *req, Response *resp) {
        Manager *m = req->manager;
        _cleanup_free_ char *error = NULL;
        const char *q = request_query(req, "cpus");
        json_t *plan = NULL;
        CpuSet cpus;
        int r;

        if (q && *q) {
                r = topology_parse_online_cpus(m->topology, q, &cpus, &error);
                if (r < 0)
                        return reply_problem(resp, 400, "Invalid cpus", "cpus: %s",
                                             error ?: "not a CPU list such as \"2-3\"");
        } else {
                manager_reserved_cpus(m, &cpus);
                if (cpuset_is_empty(&cpus) && manager_configured_cpus(m, m->config, &cpus) < 0)
                        return reply_problem(resp, 400, "Invalid cpus",
                                             "cpus: [Reserve] CPUs= cannot be reserved on this machine; name "
                                             "the CPUs (?cpus=2-3)");
        }
        r = reservation_plan(m->reservation, &cpus, &plan, &error);
        if (r == -EINVAL)
                return reply_problem(resp, 400, "Invalid reservation", "%s", strempty(error));
        if (r < 0)
                return r;
        return reply_json(resp, 200, plan);
}

const Route api_reserve_routes[] = {
        { "GET", "/v1/reservation", ROLE_ADMIN, get_reservation },
        { "PUT", "/v1/reservation", ROLE_ADMIN, put_reservation },
        { "DELETE", "/v1/reservation", ROLE_ADMIN, delete_reservation },
        { "GET", "/v1/reservation/plan", ROLE_ADMIN, get_plan },
        {},
};
