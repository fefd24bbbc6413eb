/* SPDX-License-Identifier: MIT */
/*
 * rtctl's transport: HTTP/1.1 over rtd's unix socket with the shared parser (shared/http1.c, shared/sse.c),
 * libc and nothing else, so starting rtctl costs an exec and not a TLS stack. One connection is kept and
 * reused (submit --wait sends its two requests on it). Every wait has a limit: rtd that stops answering
 * is an error with exit code 69 after RTCTL_TIMEOUT seconds (default 60) without a byte, never a hang;
 * only `logs -f` waits on a quiet job for as long as it runs. An answer that is not well-formed HTTP/1.1
 * (or event stream) is exit code 76 with what was wrong.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rtctl.h"
#include "shared/http1.h"
#include "shared/macro.h"
#include "shared/sse.h"
#include "shared/unix-conn.h"

#define DEFAULT_TIMEOUT_MS 60000
#define MAX_BUFFERED_BODY (64u * 1024 * 1024)

static int conn_fd = -EBADF;
static bool conn_reused;

typedef struct Exchange {
        Ctl *ctl;
        CtlResponse *resp;
        CtlChunk on_chunk;              /* 2xx bodies go here when set; others are kept for ctl_fail */
        void *userdata;
        size_t alloc;
        bool too_big;
} Exchange;

/* RTCTL_TIMEOUT=SEC (a decimal number > 0), else 60 s. */
static int timeout_ms(void) {
        const char *e = getenv("RTCTL_TIMEOUT");
        char *end;
        double s;

        if (!e || !*e)
                return DEFAULT_TIMEOUT_MS;
        s = strtod(e, &end);
        if (*end || !(s > 0) || s > 86400) {
                fprintf(stderr, "rtctl: ignoring RTCTL_TIMEOUT='%s' (seconds, e.g. 30)\n", e);
                return DEFAULT_TIMEOUT_MS;
        }
        return (int) (s * 1000 + 0.5) ?: 1;
}

/* Why could we not connect? Say it in terms of what to do. */
static int explain_unreachable(Ctl *c, int e) {
        struct stat st;

        if (stat(c->socket_path, &st) < 0) {
                if (errno == EACCES)
                        fprintf(stderr, "rtctl: cannot reach %s: permission denied on a parent directory.\n",
                                c->socket_path);
                else
                        fprintf(stderr,
                                "rtctl: cannot reach rtd: %s does not exist. Is rtd running? "
                                "(systemctl start rtd.socket, or rtd --config FILE; --socket/RTD_SOCKET select "
                                "another socket)\n",
                                c->socket_path);
        } else if (e == EACCES || e == EPERM)
                fprintf(stderr,
                        "rtctl: permission denied on %s. Only root and members of rtd's group may use it: ask an "
                        "administrator to add you (usermod -aG rtd $USER) and log in again.\n",
                        c->socket_path);
        else if (e == ECONNREFUSED)
                fprintf(stderr, "rtctl: %s exists but nobody is listening: rtd is not running (stale socket). "
                                "Start it with 'systemctl start rtd'.\n",
                        c->socket_path);
        else if (e == EAGAIN || e == EINPROGRESS)
                fprintf(stderr, "rtctl: rtd on %s did not accept the connection within %.0f s (overloaded?)\n",
                        c->socket_path, timeout_ms() / 1000.0);
        else
                fprintf(stderr, "rtctl: cannot talk to rtd on %s: %s\n", c->socket_path, strerror(e));
        return RTCTL_EXIT_UNREACHABLE;
}

static void conn_close(void) {
        conn_fd = safe_close(conn_fd);
        conn_reused = false;
}

static int conn_open(Ctl *c) {
        int fd;

        if (conn_fd >= 0) {
                conn_reused = true;
                return 0;
        }
        fd = unix_conn_open(c->socket_path, timeout_ms());
        if (fd == -ENAMETOOLONG) {
                fprintf(stderr, "rtctl: the socket path %s is longer than a unix socket path can be\n",
                        c->socket_path);
                return RTCTL_EXIT_UNREACHABLE;
        }
        if (fd < 0)
                return explain_unreachable(c, -fd);
        conn_fd = fd;
        conn_reused = false;
        return 0;
}

static int on_header(const char *name, const char *value, void *userdata) {
        Exchange *x = userdata;
        char **field = NULL;

        if (strcasecmp(name, "Content-Type") == 0)
                field = &x->resp->content_type;
        else if (strcasecmp(name, "Location") == 0)
                field = &x->resp->location;
        if (field) {
                free(*field);
                *field = strdup(value);
                if (!*field)
                        return -ENOMEM;
        }
        return 0;
}

static int on_head_done(int status, void *userdata) {
        Exchange *x = userdata;
        x->resp->status = status;
        return 0;
}

static int on_body(const char *data, size_t size, void *userdata) {
        Exchange *x = userdata;
        CtlResponse *r = x->resp;

        if (x->on_chunk && r->status >= 200 && r->status < 300)
                return x->on_chunk(data, size, x->userdata) ? 0 : -ECANCELED;
        int e = unix_conn_append(&r->body, &r->size, &x->alloc, data, size, MAX_BUFFERED_BODY);
        x->too_big = e == -EFBIG;
        return e;
}

static const Http1Callbacks callbacks = {
        .on_header = on_header,
        .on_head_done = on_head_done,
        .on_body = on_body,
};

static int protocol_error(const char *what) {
        fprintf(stderr, "rtctl: rtd sent a malformed response: %s\n", what);
        return RTCTL_EXIT_PROTOCOL;
}

static int timed_out(Ctl *c, int ms) {
        fprintf(stderr, "rtctl: rtd on %s did not answer within %g s (RTCTL_TIMEOUT= sets the limit)\n",
                c->socket_path, ms / 1000.0);
        return RTCTL_EXIT_UNREACHABLE;
}

/*
 * Send one request and read its response. body_idle_ms bounds the wait between bytes once the head is in
 * (< 0: none). Returns 0 or an rtctl exit code after saying why.
 */
static int exchange(Ctl *c, const char *method, const char *path, json_t *body, Exchange *x, int body_idle_ms) {
        _cleanup_free_ char *payload = NULL, *req = NULL;
        Http1Parser p;
        size_t req_size;
        int ms = timeout_ms(), r;

        if (body) {
                payload = json_dumps(body, JSON_COMPACT);
                if (!payload)
                        return protocol_error("(out of memory formatting the request)");
        }
        r = http1_format_request(method, path, payload ? "application/json" : NULL, payload,
                                 payload ? strlen(payload) : 0, &req, &req_size);
        if (r < 0) {
                fprintf(stderr, "rtctl: cannot send '%s %s': %s\n", method, path,
                        r == -EINVAL ? "the path has a space or control character" : strerror(-r));
                return RTCTL_EXIT_USAGE;
        }

        for (int attempt = 0;; attempt++) {
                size_t got = 0;

                r = conn_open(c);
                if (r != 0)
                        return r;
                http1_parser_init(&p, &callbacks, x);
                r = unix_conn_exchange(conn_fd, req, req_size, &p, ms, body_idle_ms, &got);
                /* A kept connection that rtd closed meanwhile: nothing was answered, so try a new one once. */
                if (conn_reused && got == 0 && attempt == 0 &&
                    (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN)) {
                        conn_close();
                        continue;
                }
                break;
        }

        if (r == 1 && http1_parser_keep_alive(&p))
                return 0;
        conn_close();
        if (r == 1 || r == -ECANCELED)
                return 0;
        if (r == -ETIMEDOUT)
                return timed_out(c, p.state >= HTTP1_BODY_LENGTH ? body_idle_ms : ms);
        if (r == -EPIPE) {
                /* rtd stopped or restarted mid-answer: unreachable, not malformed (wait reconnects). */
                fprintf(stderr, "rtctl: rtd closed the connection early: %s\n",
                        p.error ? p.error : "while rtctl was sending its request");
                return RTCTL_EXIT_UNREACHABLE;
        }
        if (r == -EBADMSG)
                return protocol_error(p.error ? p.error : "?");
        if (x->too_big)
                return protocol_error("the body is larger than 64 MiB");
        if (r == -ENOMEM) {
                fprintf(stderr, "rtctl: out of memory reading rtd's answer\n");
                return RTCTL_EXIT_REFUSED;
        }
        fprintf(stderr, "rtctl: request to rtd failed: %s\n", strerror(-r));
        return RTCTL_EXIT_UNREACHABLE;
}

int ctl_request(Ctl *c, const char *method, const char *path, json_t *body, CtlResponse *ret) {
        Exchange x = { .ctl = c, .resp = ret };
        int r;

        *ret = (CtlResponse){};
        r = exchange(c, method, path, body, &x, timeout_ms());
        if (r != 0) {
                ctl_response_done(ret);
                return r;
        }
        if (ret->body && ret->content_type && strstr(ret->content_type, "json"))
                ret->json = json_loadb(ret->body, ret->size, 0, NULL);
        return 0;
}

int ctl_stream(Ctl *c, const char *path, bool endless, CtlChunk on_chunk, void *userdata, CtlResponse *ret) {
        Exchange x = { .ctl = c, .resp = ret, .on_chunk = on_chunk, .userdata = userdata };
        int r;

        *ret = (CtlResponse){};
        r = exchange(c, "GET", path, NULL, &x, endless ? -1 : timeout_ms());
        if (r == 0 && ret->body && ret->content_type && strstr(ret->content_type, "json"))
                ret->json = json_loadb(ret->body, ret->size, 0, NULL);
        return r;
}

typedef struct EventSink {
        SseParser sse;
        CtlEvent on_event;
        void *userdata;
        bool stopped;
} EventSink;

static int sink_event(const char *type, const char *data, size_t size, const char *id, void *userdata) {
        EventSink *s = userdata;
        if (!s->on_event(type, data, size, s->userdata)) {
                s->stopped = true;
                return -ECANCELED;
        }
        return 0;
}

static bool sink_chunk(const char *data, size_t size, void *userdata) {
        EventSink *s = userdata;
        int r = sse_feed(&s->sse, data, size);
        if (r < 0 && r != -ECANCELED)
                fprintf(stderr, "rtctl: rtd sent a malformed event stream: %s\n",
                        s->sse.error ? s->sse.error : strerror(-r));
        return r == 0;
}

int ctl_events(Ctl *c, const char *path, CtlEvent on_event, void *userdata, CtlResponse *ret) {
        EventSink s = { .on_event = on_event, .userdata = userdata };
        Exchange x = { .ctl = c, .resp = ret, .on_chunk = sink_chunk, .userdata = &s };
        int r;

        sse_parser_init(&s.sse, sink_event, NULL, &s);
        *ret = (CtlResponse){};
        /* rtd sends a comment every 15 s: a minute of silence (or RTCTL_TIMEOUT if longer) means it is gone
         * or stuck; a short RTCTL_TIMEOUT does not cut a wait for a long job. */
        r = exchange(c, "GET", path, NULL, &x, MAX(timeout_ms(), 60000));
        if (r == 0 && ret->status >= 200 && ret->status < 300 && !s.stopped && s.sse.error)
                r = RTCTL_EXIT_PROTOCOL;        /* said above */
        sse_parser_done(&s.sse);
        if (r == 0 && ret->body && ret->content_type && strstr(ret->content_type, "json"))
                ret->json = json_loadb(ret->body, ret->size, 0, NULL);
        return r;
}
