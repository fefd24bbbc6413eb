/* SPDX-License-Identifier: MIT */
/* GET /metrics (Prometheus text 0.0.4) and GET /v1/metrics (JSON): read-only, also on the TCP listener.
 * Both are rendered from the metrics snapshot; they never wait on BPF maps. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "api.h"
#include "core/manager.h"
#include "lease/lease.h"
#include "metrics/metrics.h"
#include "metrics/prometheus.h"
#include "shared/macro.h"

static int get_prometheus(Request *req, Response *resp) {
        char *text = NULL;
        size_t size = 0;
        int r;

        r = metrics_render_prometheus(req->manager->metrics, &text, &size);
        if (r < 0)
                return r;
        /* The leases' series (lease-quiet.c) after the collector's. */
        char *all = NULL;
        size_t all_size = 0;
        FILE *f = open_memstream(&all, &all_size);
        if (!f) {
                free(text);
                return -ENOMEM;
        }
        fwrite(text, 1, size, f);
        free(text);
        leases_render_prometheus(req->manager->leases, f);
        if (fclose(f) != 0) {
                free(all);
                return -ENOMEM;
        }
        return reply_text(resp, 200, PROMETHEUS_CONTENT_TYPE, all, all_size);
}

/* Keys that name a process or a job: not for the TCP listener, where any local user (or, through DNS
 * rebinding, a web page) may read (the README's rule for /metrics, held for every read-only route). */
static void redact(json_t *j) {
        static const char *const keys[] = { "pid", "current_job", "job", "job_id" };
        const char *key;
        json_t *v;
        size_t i;

        if (json_is_object(j)) {
                for (size_t k = 0; k < ELEMENTSOF(keys); k++)
                        (void) json_object_del(j, keys[k]);
                json_object_foreach(j, key, v)
                        redact(v);
        } else if (json_is_array(j))
                json_array_foreach(j, i, v)
                        redact(v);
}

static int get_json(Request *req, Response *resp) {
        json_t *j = metrics_render_json(req->manager->metrics);

        if (!j)
                return -ENOMEM;
        if (req->caller.role == ROLE_READONLY)
                redact(j);
        return reply_json(resp, 200, j);
}

const Route api_metrics_routes[] = {
        { "GET", "metrics", ROLE_READONLY, get_prometheus },
        { "GET", "v1/metrics", ROLE_READONLY, get_json },
        {},
};
