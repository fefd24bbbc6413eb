/* SPDX-License-Identifier: MIT */
/*
 * The plugin's transport: a fresh connection per request (a step makes two), the project's HTTP/1.1 parser
 * (shared/http1.c), and a deadline on every wait: connect (a full listen backlog blocks it), send, and each
 * read. slurmstepd calls this with the step's tasks waiting to exec: an rtd that stopped answering must cost
 * a bounded delay and a clear error, never a hung step.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rtlease-conn.h"
#include "shared/http1.h"
#include "shared/macro.h"
#include "shared/unix-conn.h"

#define RTLEASE_MAX_BODY (1024 * 1024)

typedef struct Collect {
        RtReply *reply;
        size_t alloc;
} Collect;

void rtlease_reply_done(RtReply *r) {
        free(r->body);
        *r = (RtReply) {};
}

static int on_head_done(int status, void *userdata) {
        Collect *c = userdata;
        c->reply->status = status;
        return 0;
}

static int on_body(const char *data, size_t size, void *userdata) {
        Collect *c = userdata;
        return unix_conn_append(&c->reply->body, &c->reply->size, &c->alloc, data, size, RTLEASE_MAX_BODY);
}

static const Http1Callbacks callbacks = {
        .on_head_done = on_head_done,
        .on_body = on_body,
};

static void set_error(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static void set_error(char **ret_error, const char *fmt, ...) {
        va_list ap;

        if (!ret_error)
                return;
        free(*ret_error);
        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
}

static int connect_socket(const RtPluginArgs *a, char **ret_error) {
        int fd = unix_conn_open(a->socket, a->timeout_ms);

        if (fd == -ENOENT || fd == -ENOTDIR)
                set_error(ret_error, "rtd is not running on this node: %s does not exist", a->socket);
        else if (fd == -ECONNREFUSED)
                set_error(ret_error, "rtd is not running on this node: nobody listens on %s", a->socket);
        else if (fd == -EAGAIN || fd == -EINPROGRESS) {
                set_error(ret_error, "rtd on %s did not accept the connection within %d s", a->socket,
                          a->timeout_ms / 1000);
                return -ETIMEDOUT;
        } else if (fd < 0)
                set_error(ret_error, "cannot connect to rtd on %s: %s", a->socket, strerror(-fd));
        return fd;
}

int rtlease_call(const RtPluginArgs *a, const char *method, const char *path, const char *body, RtReply *ret,
                 char **ret_error) {
        _cleanup_free_ char *req = NULL;
        _cleanup_close_ int fd = -EBADF;
        RtReply reply = {};
        Collect c = { .reply = &reply };
        Http1Parser p;
        size_t req_size;
        int r;

        r = http1_format_request(method, path, body ? "application/json" : NULL, body, body ? strlen(body) : 0,
                                 &req, &req_size);
        if (r < 0)
                return r;
        fd = connect_socket(a, ret_error);
        if (fd < 0)
                return fd;

        http1_parser_init(&p, &callbacks, &c);
        r = unix_conn_exchange(fd, req, req_size, &p, a->timeout_ms, a->timeout_ms, NULL);
        if (r == 1) {
                *ret = reply;
                return 0;
        }
        rtlease_reply_done(&reply);
        if (r == -ETIMEDOUT)
                set_error(ret_error, "rtd on %s did not answer within %d s", a->socket, a->timeout_ms / 1000);
        else if (r == -EBADMSG)
                set_error(ret_error, "rtd on %s sent a malformed answer: %s", a->socket, strempty(p.error));
        else if (r == -EPIPE)
                set_error(ret_error, "rtd on %s closed the connection early%s%s", a->socket,
                          p.error ? ": " : "", strempty(p.error));
        else
                set_error(ret_error, "talking to rtd on %s failed: %s", a->socket, strerror(-r));
        return r;
}
