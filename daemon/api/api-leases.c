/* SPDX-License-Identifier: MIT */
/* /v1/leases: CPUs quieted for a process tree rtd did not start (root, AdminGroup=, LeaseGroup=). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "core/manager.h"
#include "host/topology.h"
#include "lease/lease.h"
#include "shared/log.h"

/* The routes are open to ROLE_NONE (a LeaseGroup= member need not be in SubmitGroup=): the check is here. */
static bool may_lease(const Request *req) {
        return req->caller.role == ROLE_ADMIN || req->caller.lease;
}

static int refuse(Response *resp) {
        return reply_problem(resp, 403, "Not allowed to lease",
                             "leasing CPUs needs root, membership in AdminGroup= or in [Access] LeaseGroup=; ask "
                             "an administrator to add you to that group");
}

static bool owner_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > LEASE_OWNER_MAX)
                return false;
        for (const char *p = s; *p; p++)
                if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:._-", *p))
                        return false;
        return true;
}

/* 0 and a filled request, or 1 after replying 400 naming the field. */
static int parse_request(Request *req, Response *resp, json_t *body, LeaseRequest *ret) {
        Manager *m = req->manager;
        _cleanup_free_ char *error = NULL;
        const char *key;
        json_t *v;

        json_object_foreach(body, key, v)
                if (!streq(key, "cpus") && !streq(key, "owner") && !streq(key, "pid") && !streq(key, "priority") &&
                    !streq(key, "policy")) {
                        reply_problem(resp, 400, "Unknown field",
                                      "%s: unknown field; a lease takes \"cpus\", \"owner\", \"pid\" and optionally "
                                      "\"priority\" and \"policy\"", key);
                        return 1;
                }
        v = json_object_get(body, "cpus");
        if (!json_is_string(v)) {
                reply_problem(resp, 400, "Invalid cpus", "cpus: required, a CPU list string such as \"2-3\"");
                return 1;
        }
        if (topology_parse_online_cpus(m->topology, json_string_value(v), &ret->cpus, &error) < 0) {
                reply_problem(resp, 400, "Invalid cpus", "cpus: %s", error ?: "not a CPU list such as \"2-3\"");
                return 1;
        }
        v = json_object_get(body, "owner");
        if (!json_is_string(v) || !owner_valid(json_string_value(v))) {
                reply_problem(resp, 400, "Invalid owner",
                              "owner: required, 1 to %d characters of A-Z a-z 0-9 : . _ - such as "
                              "\"slurm:1234.0\"", LEASE_OWNER_MAX);
                return 1;
        }
        ret->owner = json_string_value(v);
        v = json_object_get(body, "pid");
        if (!json_is_integer(v) || json_integer_value(v) <= 1 || json_integer_value(v) > INT32_MAX) {
                reply_problem(resp, 400, "Invalid pid",
                              "pid: required, the process id (above 1) of the root of the job's process tree; "
                              "the lease ends when it exits");
                return 1;
        }
        ret->pid = (pid_t) json_integer_value(v);
        v = json_object_get(body, "priority");
        if (v && !json_is_null(v) &&
            (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 99)) {
                reply_problem(resp, 400, "Invalid priority",
                              "priority: a SCHED_FIFO/SCHED_RR priority 1 to 99, or absent for no real-time policy");
                return 1;
        }
        ret->priority = json_is_integer(v) ? (unsigned) json_integer_value(v) : 0;
        v = json_object_get(body, "policy");
        if (v && !json_is_null(v)) {
                if (!json_is_string(v) || (!streq(json_string_value(v), "fifo") && !streq(json_string_value(v), "rr"))) {
                        reply_problem(resp, 400, "Invalid policy", "policy: \"fifo\" or \"rr\"");
                        return 1;
                }
                if (!ret->priority) {
                        reply_problem(resp, 400, "Invalid policy", "policy: needs \"priority\" (1 to 99) as well");
                        return 1;
                }
                ret->policy = json_string_value(v);
        }
        return 0;
}

/* A POST is answered once the lease's CPUs are quiet (every other task walked off them), or after this long
 * with "quieted": false: a crowded or hostile /proc never holds the answer longer. */
#define LEASE_ANSWER_WAIT_USEC (5 * 1000 * 1000)

typedef struct PendingAnswer {
        Manager *manager;
        uint64_t id;
        HttpDeferred *answer;
        sd_event_source *timer;
} PendingAnswer;

static void pending_free(PendingAnswer *p) {
        Lease *x = lease_find(p->manager->leases, p->id);

        if (x)
                lease_on_quieted(x, NULL, NULL);
        sd_event_source_disable_unref(p->timer);
        free(p);
}

static int lease_reply(Manager *m, Lease *x, Response *resp) {
        _cleanup_free_ char *location = NULL;

        if (asprintf(&location, "/v1/leases/%" PRIu64, lease_id(x)) >= 0)
                resp->location = TAKE_PTR(location);
        return reply_json(resp, 201, lease_to_json(m->leases, x));
}

/* Quiet, ended, or out of time: the lease as it stands now is the answer ("quieted", "state" say which). */
static void pending_answer(PendingAnswer *p) {
        Response *resp = http_deferred_response(p->answer);
        Lease *x = lease_find(p->manager->leases, p->id);

        if (!x || lease_reply(p->manager, x, resp) < 0)
                (void) reply_problem(resp, 500, NULL, "lease %" PRIu64 " was created, but its answer could not "
                                     "be made; GET /v1/leases/%" PRIu64 " shows it", p->id, p->id);
        http_deferred_send(p->answer);
        pending_free(p);
}

static void on_quieted(Lease *x, void *userdata) {
        pending_answer(userdata);
}

static int on_answer_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        PendingAnswer *p = userdata;
        Lease *x = lease_find(p->manager->leases, p->id);

        if (x)
                log_warning("Lease %" PRIu64 " (%s): not every task walked off its CPUs after %d s; answering "
                            "\"quieted\": false, the walk goes on", p->id, lease_owner(x),
                            LEASE_ANSWER_WAIT_USEC / 1000000);
        pending_answer(p);
        return 0;
}

static void on_abandon(HttpDeferred *d, void *userdata) {
        pending_free(userdata);
}

/* 0: the answer comes once x is quiet (or the wait's bound); <0: answer now. */
static int answer_when_quiet(Request *req, Response *resp, Lease *x) {
        PendingAnswer *p;
        int r;

        if (lease_quieted(x))
                return -EALREADY;
        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        *p = (PendingAnswer){ .manager = req->manager, .id = lease_id(x) };
        /* From now: sd-event's relative times count from the loop turn's start, and the lease's first pass
         * may have taken seconds of it (a slow emulated guest). */
        r = sd_event_add_time(req->manager->event, &p->timer, CLOCK_MONOTONIC,
                              now_usec(CLOCK_MONOTONIC) + LEASE_ANSWER_WAIT_USEC, 0, on_answer_timeout, p);
        if (r >= 0)
                r = http_defer(resp, on_abandon, p, &p->answer);
        if (r < 0) {
                pending_free(p);
                return r;
        }
        lease_on_quieted(x, on_quieted, p);
        return 0;
}

static int post_lease(Request *req, Response *resp) {
        Manager *m = req->manager;
        _cleanup_free_ char *error = NULL;
        LeaseRequest lr = {};
        json_t *body = NULL;
        Lease *x = NULL;
        int status, r;

        if (!may_lease(req))
                return refuse(resp);
        if (api_parse_body(req, resp, &body) > 0)
                return 0;
        if (parse_request(req, resp, body, &lr) > 0)
                goto out;
        lr.uid = req->caller.uid;
        lr.user = req->caller.user;
        lr.admin = req->caller.role == ROLE_ADMIN;
        r = lease_create(m->leases, &lr, &x, &status, &error);
        if (r < 0 && error) {
                reply_problem(resp, status,
                              status == 409 ? "CPUs not available" : status == 403 ? "Not allowed" :
                              status == 422 ? "No such process" : status == 400 ? "Invalid lease" : "Lease failed",
                              "%s", error);
                goto out;
        }
        if (r < 0) {
                json_decref(body);
                return r;
        }
        if (answer_when_quiet(req, resp, x) < 0)
                lease_reply(m, x, resp);
out:
        json_decref(body);
        return 0;
}

static Lease *find(Request *req, Response *resp) {
        const char *s = req->segments[2];
        char *end;
        unsigned long long id;
        Lease *x;

        errno = 0;
        id = strtoull(s, &end, 10);
        if (errno || *end || end == s || s[0] == '-' || s[0] == '+') {
                reply_problem(resp, 404, "No such lease", "%s: a lease id is a number (GET /v1/leases lists them)", s);
                return NULL;
        }
        x = lease_find(req->manager->leases, id);
        if (!x)
                reply_problem(resp, 404, "No such lease", "lease %llu: not known (ended long ago, or never was)", id);
        return x;
}

static int get_leases(Request *req, Response *resp) {
        if (req->caller.role < ROLE_USER && !may_lease(req))
                return refuse(resp);
        return reply_json(resp, 200, leases_to_json(req->manager->leases));
}

static int get_lease(Request *req, Response *resp) {
        Lease *x;

        if (req->caller.role < ROLE_USER && !may_lease(req))
                return refuse(resp);
        x = find(req, resp);
        if (!x)
                return 0;
        return reply_json(resp, 200, lease_to_json(req->manager->leases, x));
}

static int delete_lease(Request *req, Response *resp) {
        Lease *x;
        char reason[128];

        if (!may_lease(req))
                return refuse(resp);
        x = find(req, resp);
        if (!x)
                return 0;
        if (req->caller.role != ROLE_ADMIN && lease_uid(x) != req->caller.uid)
                return reply_problem(resp, 403, "Not your lease",
                                     "lease %" PRIu64 " belongs to uid %u; only its owner, root or AdminGroup= members "
                                     "may release it", lease_id(x), (unsigned) lease_uid(x));
        snprintf(reason, sizeof reason, "released by %s (DELETE)", req->caller.user ?: "?");
        (void) lease_release(req->manager->leases, x, reason);
        return reply_json(resp, 200, lease_to_json(req->manager->leases, x));
}

const Route api_leases_routes[] = {
        { "POST", "v1/leases", ROLE_NONE, post_lease },
        { "GET", "v1/leases", ROLE_NONE, get_leases },
        { "GET", "v1/leases/*", ROLE_NONE, get_lease },
        { "DELETE", "v1/leases/*", ROLE_NONE, delete_lease },
        {},
};
