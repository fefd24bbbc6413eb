/* SPDX-License-Identifier: MIT */
/* GET /metrics (Prometheus text 0.0.4) and GET /v1/metrics (JSON): read-only, also on the TCP listener.
 * Both are rendered from the metrics snapshot; they never wait on BPF maps. */
#include <errno.h>

#include "api.h"
#include "manager.h"
#include "metrics.h"
#include "prometheus.h"

static int get_prometheus(Request *req, Response *resp) {
        char *text = NULL;
        size_t size = 0;
        int r;

        r = metrics_render_prometheus(req->manager->metrics, &text, &size);
        if (r < 0)
                return r;
        return reply_text(resp, 200, PROMETHEUS_CONTENT_TYPE, text, size);
}

static int get_json(Request *req, Response *resp) {
        json_t *j = metrics_render_json(req->manager->metrics);

        if (!j)
                return -ENOMEM;
        return reply_json(resp, 200, j);
}

const Route api_metrics_routes[] = {
        { "GET", "metrics", ROLE_READONLY, get_prometheus },
        { "GET", "v1/metrics", ROLE_READONLY, get_json },
        {},
};
