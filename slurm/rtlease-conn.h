/* SPDX-License-Identifier: MIT */
/* One HTTP/1.1 exchange with rtd over its unix socket, every wait bounded (the plugin must never hang a step). */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "rtlease.h"

typedef struct RtReply {
        int status;
        char *body;             /* NUL-terminated, malloc'ed; NULL when empty */
        size_t size;
} RtReply;

void rtlease_reply_done(RtReply *r);

/*
 * Send method path (with a JSON body when body is non-NULL) to a->socket and read the answer, each wait at
 * most a->timeout_ms. Returns 0 with *ret filled, or a negative errno: -ENOENT, -ECONNREFUSED (nobody
 * listens), -EACCES, -ETIMEDOUT, -EBADMSG (not HTTP), -EPIPE (closed early). *ret_error (may be NULL)
 * gets a sentence for the user on failure.
 */
int rtlease_call(const RtPluginArgs *a, const char *method, const char *path, const char *body, RtReply *ret,
                 char **ret_error);

/* Whether a failure of rtlease_call means "rtd is not running here" (what --rt-optional forgives). */
static inline bool rtlease_error_is_absent(int r) {
        return r == -ENOENT || r == -ECONNREFUSED || r == -ENOTDIR;
}
