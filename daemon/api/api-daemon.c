/* SPDX-License-Identifier: MIT */
/* /v1/daemon/reexec: replace the running rtd by its (upgraded) binary in place, jobs and reservation kept. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "core/manager.h"
#include "reexec.h"

static int post_reexec(Request *req, Response *resp) {
        _cleanup_free_ char *reason = NULL;
        json_t *j;
        int r;

        if (req->body_size > 0 && !(req->body_size == 2 && memcmp(req->body, "{}", 2) == 0))
                return reply_problem(resp, 400, "Unexpected body", "POST /v1/daemon/reexec takes no body: the "
                                     "binary is always the one rtd was started from");
        r = reexec_request(req->manager, &reason);
        if (r == -EBUSY)
                return reply_problem(resp, 409, "Re-exec under way", "%s", reason);
        if (r < 0 && reason)
                /* The new binary's fault, not ours: the old rtd keeps running, nothing changed. */
                return reply_problem(resp, 422, "New binary refused", "%s; rtd keeps running as it was", reason);
        if (r < 0)
                return r;
        j = reexec_to_json();
        json_object_set_new(j, "pid", json_integer(getpid()));
        return reply_json(resp, 202, j);
}

const Route api_daemon_routes[] = {
        { "POST", "/v1/daemon/reexec", ROLE_ADMIN, post_reexec },
        {},
};
