/* SPDX-License-Identifier: MIT */
/*
 * libmicrohttpd in external-epoll mode inside sd-event: MHD's epoll fd is one io source of our loop, so
 * every handler runs on the loop thread and needs no locks. Callers are identified with SO_PEERCRED.
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "core/manager.h"
#include "http-deferred.h"
#include "http-framing.h"
#include "http-gate.h"
#include "http.h"
#include "shared/log.h"

#define MAX_SEGMENTS 16
#define CONNECTION_TIMEOUT_SEC 60
/* MHD's per-connection memory pool (touched as used): room for a head the gate let through
 * (MaxHeaderBytes=), MHD's copy of its fields, and read buffer for the body. */
#define CONNECTION_MEMORY_MIN 32768
/* What a push stream (events) may hold for a client that does not read: ~1000 events. */
#define HTTP_STREAM_MAX_BUFFER (256u * 1024)
/* Turns in a row MHD may run without the loop polling (rearm_timer()). */
#define RUN_NOW_MAX 16

struct Http {
        Manager *manager;
        struct MHD_Daemon *daemon;
        sd_event_source *io;
        sd_event_source *timer;
        sd_event_source *run_now;       /* MHD has work now: run it on the next turn, without polling */
        unsigned runs_now;              /* run_now's turns in a row: a bound, so the loop still polls */
        HttpGate *gate;
        HttpRouter router;
        bool read_only;
        bool resumed;                   /* a stream was resumed since MHD last ran: run it on the next turn */
        HttpStream *streams;            /* open streams, so shutdown can end them */
};

struct HttpStream {
        Http *http;
        struct MHD_Connection *connection;
        char *buf;
        size_t size, alloc;
        bool ended;
        bool suspended;
        bool counted;                   /* holds one of its uid's MaxStreamsPerUser= */
        uid_t uid;
        HttpStreamClose on_close;
        HttpStreamPull pull;            /* pull streams: MHD asks for data, nothing is buffered here */
        void *userdata;
        HttpStream *prev, *next;
};

/* Per-request state kept by MHD between calls of the access handler. */
typedef struct RequestState {
        char *body;
        size_t size;
        HttpDeferred *deferred;         /* parked until its answer is sent (http-deferred.c) */
} RequestState;

static const char *const role_names[_ROLE_MAX] = { "none", "readonly", "user", "admin" };

const char *role_to_string(Role r) {
        return r >= 0 && r < _ROLE_MAX ? role_names[r] : "none";
}

const char *request_query(Request *req, const char *key) {
        return MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, key);
}

const char *http_status_title(int status) {
        switch (status) {
        case 400: return "Bad Request";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 409: return "Conflict";
        case 413: return "Content Too Large";
        case 414: return "URI Too Long";
        case 415: return "Unsupported Media Type";
        case 417: return "Expectation Failed";
        case 421: return "Misdirected Request";
        case 422: return "Unprocessable Content";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 503: return "Service Unavailable";
        case 507: return "Insufficient Storage";
        default: return "Error";
        }
}

int reply_json(Response *resp, int status, json_t *j) {
        char *s;

        if (!j)
                return -ENOMEM;
        s = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!s)
                return -ENOMEM;
        return reply_text(resp, status, "application/json", s, strlen(s));
}

int reply_text(Response *resp, int status, const char *content_type, char *body, size_t size) {
        char *ct = strdup(content_type);

        if (!ct) {
                free(body);
                return -ENOMEM;
        }
        free(resp->content_type);
        free(resp->body);
        resp->status = status;
        resp->content_type = ct;
        resp->body = body;
        resp->body_size = size;
        return 0;
}

char *http_problem_json(int status, const char *title, const char *detail) {
        _cleanup_free_ char *type = NULL, *safe_title = NULL, *safe_detail = NULL;
        json_t *j;
        char *s;

        /* A detail may quote the client's bytes: escape what is not valid UTF-8, or json_pack fails. */
        safe_title = http_utf8_escape(title ?: http_status_title(status));
        safe_detail = http_utf8_escape(detail ?: "");
        if (!safe_title || !safe_detail || asprintf(&type, "https://rtd.invalid/problems/%d", status) < 0)
                return NULL;
        j = json_pack("{s:s, s:s, s:i, s:s}", "type", type, "title", safe_title, "status", status, "detail",
                      safe_detail);
        if (!j)
                return NULL;
        s = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        return s;
}

int reply_problem(Response *resp, int status, const char *title, const char *detail_fmt, ...) {
        _cleanup_free_ char *detail = NULL;
        va_list ap;
        char *s;

        va_start(ap, detail_fmt);
        if (vasprintf(&detail, detail_fmt, ap) < 0)
                detail = NULL;
        va_end(ap);
        s = http_problem_json(status, title, detail);
        if (!s)
                return -ENOMEM;
        return reply_text(resp, status, "application/problem+json", s, strlen(s));
}

void http_response_done(Response *r) {
        free(r->content_type);
        free(r->body);
        free(r->location);
        free(r->allow);
        r->content_type = r->body = r->location = r->allow = NULL;
}

enum MHD_Result http_queue_response(struct MHD_Connection *c, Response *r) {
        struct MHD_Response *mr;
        enum MHD_Result ret;

        mr = MHD_create_response_from_buffer(r->body_size, r->body, MHD_RESPMEM_MUST_FREE);
        if (!mr)
                return MHD_NO;
        r->body = NULL;         /* MHD owns it now */
        (void) MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type ?: "application/json");
        if (r->location)
                (void) MHD_add_response_header(mr, MHD_HTTP_HEADER_LOCATION, r->location);
        if (r->allow)
                (void) MHD_add_response_header(mr, MHD_HTTP_HEADER_ALLOW, r->allow);
        (void) MHD_add_response_header(mr, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        /* One request per connection: the gate judged this request's head, not whatever follows it. */
        (void) MHD_add_response_header(mr, MHD_HTTP_HEADER_CONNECTION, "close");
        ret = MHD_queue_response(c, (unsigned) r->status, mr);
        MHD_destroy_response(mr);
        return ret;
}

static size_t split_path(char *path, const char *segments[static MAX_SEGMENTS + 1]) {
        size_t n = 0;
        char *save = NULL;

        for (char *s = strtok_r(path, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
                if (n >= MAX_SEGMENTS)
                        return SIZE_MAX;
                segments[n++] = s;
        }
        segments[n] = NULL;
        return n;
}

static int dispatch(Http *h, struct MHD_Connection *c, const char *method, const char *url, RequestState *st,
                    Response *resp) {
        _cleanup_free_ char *path = strdup(url), *allow = NULL;
        const char *segments[MAX_SEGMENTS + 1];
        Request req = {
                .manager = h->manager, .method = method, .path = url, .connection = c,
                .body = st->body, .body_size = st->size,
        };
        const Route *route;
        size_t n;
        int r;

        if (!path)
                return -ENOMEM;

        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        if (!info || !info->socket_context)
                return -EIO;
        /* Identified at accept; the user name stays owned by the connection. */
        req.caller = *gate_conn_caller(info->socket_context);
        /* A LeaseGroup= member outside SubmitGroup= gets as far as the lease routes (ROLE_NONE). */
        if (req.caller.role == ROLE_NONE && !req.caller.lease) {
                r = reply_problem(resp, 403, "Not allowed",
                                  "uid %u is neither root nor a member of group '%s'; ask an administrator to add "
                                  "you to that group (usermod -aG %s USER), then log in again",
                                  (unsigned) req.caller.uid, h->manager->config->submit_group ?: "(none)",
                                  h->manager->config->submit_group ?: "GROUP");
                goto out;
        }
        n = split_path(path, segments);
        if (n == SIZE_MAX) {
                r = reply_problem(resp, 404, NULL, "no such resource: %s", url);
                goto out;
        }
        req.segments = segments;
        req.n_segments = n;

        route = h->router(method, segments, n, &allow);
        if (!route && allow) {
                r = reply_problem(resp, 405, NULL, "%s is not allowed on %s; allowed: %s", method, url, allow);
                resp->allow = TAKE_PTR(allow);
                goto out;
        }
        if (!route) {
                r = reply_problem(resp, 404, NULL, "no such resource: %s (see rtd(8) for the API)", url);
                goto out;
        }
        if (req.caller.role < route->min_role) {
                if (req.caller.role == ROLE_NONE)
                        r = reply_problem(resp, 403, "Not allowed",
                                          "uid %u may only lease CPUs (LeaseGroup=); %s %s needs membership in "
                                          "group '%s'", (unsigned) req.caller.uid, method, url,
                                          h->manager->config->submit_group ?: "(none)");
                else if (req.caller.role == ROLE_READONLY)
                        r = reply_problem(resp, 403, "Read-only listener",
                                          "%s %s is only available on the control socket", method, url);
                else
                        r = reply_problem(resp, 403, "Administrators only",
                                          "%s %s needs root or membership in AdminGroup=", method, url);
                goto out;
        }
        r = route->handler(&req, resp);
        if (r < 0 && !resp->stream) {
                log_warning_errno(r, "Handler for %s %s failed: %m", method, url);
                r = reply_problem(resp, 500, NULL, "internal error: %s", strerror(-r));
        }
out:
        return r;
}

/* A chunked body grew past MaxRequestBodyBytes=: MHD cannot queue a response mid-body, so answer on the
 * socket directly (nothing else was written on it yet) and let MHD close the connection. */
static enum MHD_Result body_too_large(Http *h, struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        char detail[128];

        (void) snprintf(detail, sizeof detail, "the body may have at most %u bytes (MaxRequestBodyBytes=)",
                        h->manager->config->max_body_bytes);
        if (info)
                http_write_problem(info->connect_fd, 413, NULL, detail);
        return MHD_NO;
}

/* The stream's uid may hold one more stream, or resp becomes a 429. */
static int stream_admit(Http *h, struct MHD_Connection *c, Response *resp, struct MHD_Response *mr) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        HttpStream *s = resp->stream;
        const char *why = NULL;
        int r;

        r = info && info->socket_context ? gate_stream_acquire(info->socket_context, &why) : -EIO;
        if (r >= 0) {
                s->counted = r > 0;
                s->uid = gate_conn_caller(info->socket_context)->uid;
                return 0;
        }
        /* Destroying the response frees the stream and tells its owner (on_close). */
        resp->stream = NULL;
        MHD_destroy_response(mr);
        if (r != -EBUSY)
                return r;
        return reply_problem(resp, 429, NULL, "uid %u already has %u open streams (%s=); close one first",
                             (unsigned) gate_conn_caller(info->socket_context)->uid,
                             h->manager->config->max_streams_per_user, why);
}

/* MHD's access handler: called for headers, each body chunk, and once more when the body is complete. The
 * gate has judged the head's framing and sizes before MHD saw it. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
        Http *h = cls;
        RequestState *st = *con_cls;
        Response resp = { .status = 500 };
        enum MHD_Result ret;
        int r;

        if (!st) {
                st = calloc(1, sizeof *st);
                if (!st)
                        return MHD_NO;
                *con_cls = st;
                return MHD_YES;
        }

        /* Called again after a parked request was resumed: its answer is ready. */
        if (st->deferred) {
                HttpDeferred *d = st->deferred;
                if (!http_deferred_sent(d))
                        return MHD_YES;
                st->deferred = NULL;
                return http_deferred_queue(d);
        }

        if (*upload_data_size > 0) {
                if (st->size + *upload_data_size > h->manager->config->max_body_bytes)
                        return body_too_large(h, c);
                char *nb = realloc(st->body, st->size + *upload_data_size + 1);
                if (!nb)
                        return MHD_NO;
                memcpy(nb + st->size, upload_data, *upload_data_size);
                st->size += *upload_data_size;
                nb[st->size] = 0;
                st->body = nb;
                *upload_data_size = 0;
                return MHD_YES;
        }

        r = dispatch(h, c, method, url, st, &resp);
        if (resp.deferred) {
                st->deferred = TAKE_PTR(resp.deferred);
                http_response_done(&resp);
                if (r < 0) {
                        http_deferred_free(TAKE_PTR(st->deferred));
                        return MHD_NO;
                }
                http_deferred_park(st->deferred, h, c);
                return MHD_YES;
        }
        if (r >= 0 && resp.stream) {
                struct MHD_Response *mr = (struct MHD_Response *) (void *) resp.body;  /* see http_stream_start */
                resp.body = NULL;
                r = stream_admit(h, c, &resp, mr);
                if (r >= 0 && resp.stream) {
                        HttpStream *s = resp.stream;
                        s->connection = c;
                        s->http = h;
                        s->next = h->streams;
                        if (h->streams)
                                h->streams->prev = s;
                        h->streams = s;
                        ret = MHD_queue_response(c, (unsigned) resp.status, mr);
                        MHD_destroy_response(mr);
                        http_response_done(&resp);
                        return ret;
                }
        }
        if (r < 0) {
                http_response_done(&resp);
                return MHD_NO;
        }
        ret = http_queue_response(c, &resp);
        http_response_done(&resp);
        return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
        RequestState *st = *con_cls;

        if (st) {
                http_deferred_free(st->deferred);
                free(st->body);
                free(st);
                *con_cls = NULL;
        }
}

/* Streams. */
static void stream_unlink(HttpStream *s) {
        if (!s->http)
                return;
        if (s->prev)
                s->prev->next = s->next;
        else
                s->http->streams = s->next;
        if (s->next)
                s->next->prev = s->prev;
        s->http = NULL;
}

static void stream_park(HttpStream *s) {
        if (s->connection && !s->suspended) {
                MHD_suspend_connection(s->connection);
                s->suspended = true;
        }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
        HttpStream *s = cls;
        size_t n;

        if (s->pull) {
                /* Called only when the socket has room: a slow reader holds MHD's buffer and nothing more. */
                ssize_t k = s->ended ? HTTP_PULL_END : s->pull(s->userdata, pos, buf, max);
                if (k == 0)
                        stream_park(s);
                return k > 0 ? k : k == 0 ? 0 : k == HTTP_PULL_END ? MHD_CONTENT_READER_END_OF_STREAM
                                                                   : MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (s->size == 0) {
                if (s->ended)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                /* Nothing to send: park the connection until http_stream_write() resumes it. */
                stream_park(s);
                return 0;
        }
        n = MIN(max, s->size);
        memcpy(buf, s->buf, n);
        memmove(s->buf, s->buf + n, s->size - n);
        s->size -= n;
        return (ssize_t) n;
}

static void stream_free(void *cls) {
        HttpStream *s = cls;

        if (s->counted && s->http)
                gate_stream_release(s->http->gate, s->uid);
        stream_unlink(s);
        if (s->on_close)
                s->on_close(s, s->userdata);
        free(s->buf);
        free(s);
}

static int rearm_timer(Http *h);

void http_resume(Http *h, struct MHD_Connection *c) {
        MHD_resume_connection(c);
        /* Resuming does not wake the external epoll by itself, and MHD_get_timeout() does not count it: note
         * it, so every rearm until MHD runs again asks for the next loop turn. */
        if (h && h->timer) {
                h->resumed = true;
                (void) rearm_timer(h);
        }
}

static void stream_wake(HttpStream *s) {
        if (s->suspended && s->connection) {
                s->suspended = false;
                http_resume(s->http, s->connection);
        }
}

static int stream_start(Response *resp, const char *content_type, uint64_t size, HttpStreamPull pull,
                        HttpStreamClose on_close, void *userdata, HttpStream **ret) {
        HttpStream *s;
        struct MHD_Response *mr;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->pull = pull;
        mr = MHD_create_response_from_callback(size, 16 * 1024, stream_read, s, stream_free);
        if (!mr) {
                free(s);
                return -ENOMEM;
        }
        (void) MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        (void) MHD_add_response_header(mr, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        (void) MHD_add_response_header(mr, MHD_HTTP_HEADER_CONNECTION, "close");
        s->on_close = on_close;
        s->userdata = userdata;
        free(resp->body);
        /* Smuggle the MHD response out through resp->body; on_request() queues it. */
        resp->body = (char *) (void *) mr;
        resp->status = 200;
        resp->stream = s;
        *ret = s;
        return 0;
}

int http_stream_start(Response *resp, const char *content_type, HttpStreamClose on_close, void *userdata,
                      HttpStream **ret) {
        return stream_start(resp, content_type, MHD_SIZE_UNKNOWN, NULL, on_close, userdata, ret);
}

int http_stream_start_pull(Response *resp, const char *content_type, uint64_t size, HttpStreamPull pull,
                           HttpStreamClose on_close, void *userdata, HttpStream **ret) {
        return stream_start(resp, content_type, size == UINT64_MAX ? MHD_SIZE_UNKNOWN : size, pull, on_close,
                            userdata, ret);
}

void http_stream_wake(HttpStream *s) {
        stream_wake(s);
}

int http_stream_write(HttpStream *s, const void *data, size_t size) {
        if (s->ended)
                return -EPIPE;
        if (s->size + size > s->alloc) {
                size_t na = MAX(s->alloc * 2, s->size + size + 4096);
                char *nb;
                if (na > HTTP_STREAM_MAX_BUFFER) {
                        /* A client that does not read: end its stream (it reconnects and catches up) rather
                         * than grow, or drop data it would never know it missed. */
                        s->ended = true;
                        stream_wake(s);
                        return -ENOBUFS;
                }
                nb = realloc(s->buf, na);
                if (!nb)
                        return -ENOMEM;
                s->buf = nb;
                s->alloc = na;
        }
        memcpy(s->buf + s->size, data, size);
        s->size += size;
        stream_wake(s);
        return 0;
}

void http_stream_end(HttpStream *s) {
        s->ended = true;
        stream_wake(s);
}

/* Event loop glue. */
static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata);

static int rearm_timer(Http *h) {
        MHD_UNSIGNED_LONG_LONG ms = 0;
        bool timeout = h->resumed || MHD_get_timeout(h->daemon, &ms) == MHD_YES;
        bool now = h->resumed || (timeout && ms == 0);

        if (!now)
                h->runs_now = 0;
        else if (h->runs_now < RUN_NOW_MAX) {
                /*
                 * MHD has connections with data it has not processed yet (its epoll is edge-triggered, so no
                 * io event will come for them) or a resumed one (which wakes no epoll): run it on the next
                 * turn. A defer source is pending at once, so that turn dispatches it without polling; a
                 * timer set in the past costs a timerfd that fires at once (37 µs in a VM, on every answer
                 * to a stream or a request that came in more than one read) and a poll.
                 */
                (void) sd_event_source_set_enabled(h->timer, SD_EVENT_OFF);
                return sd_event_source_set_enabled(h->run_now, SD_EVENT_ONESHOT);
        }
        /* While a defer source is pending the loop does not poll: after RUN_NOW_MAX turns in a row (a long
         * body read one buffer per turn), one through the timer, so every other source is heard meanwhile. */
        (void) sd_event_source_set_enabled(h->run_now, SD_EVENT_OFF);
        if (!timeout)
                return sd_event_source_set_enabled(h->timer, SD_EVENT_OFF);
        /* A time in the past fires on the next turn; now+0 would be rounded up by the timer's accuracy. */
        (void) sd_event_source_set_time(h->timer, ms == 0 ? 1 : now_usec(CLOCK_MONOTONIC) + ms * 1000ULL);
        return sd_event_source_set_enabled(h->timer, SD_EVENT_ONESHOT);
}

static void run_mhd(Http *h) {
        h->resumed = false;     /* MHD_run() takes resumed connections back first */
        (void) MHD_run(h->daemon);
        (void) rearm_timer(h);
}

static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        run_mhd(userdata);
        return 0;
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        Http *h = userdata;

        h->runs_now = 0;
        run_mhd(h);
        return 0;
}

static int on_run_now(sd_event_source *src, void *userdata) {
        Http *h = userdata;

        h->runs_now++;
        run_mhd(h);
        return 0;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
        Http *h = cls;

        if (code == MHD_CONNECTION_NOTIFY_STARTED)
                *socket_context = http_gate_handing(h->gate);
        else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
                http_gate_conn_closed(*socket_context);
                *socket_context = NULL;
        }
}

/*
 * MHD's messages, through rtd's log rather than its own fprintf to stderr. On a unix socket MHD tries
 * TCP_NODELAY and TCP_CORK around every answer, the kernel says EOPNOTSUPP (MHD learns that a socket is not
 * TCP only from EINVAL or ENOPROTOOPT), and MHD printed that, and that it could not push its buffers, about
 * fifteen lines per `rtctl submit --wait`: writes on the way to every answer and event, and under systemd
 * as many journal entries. Both say nothing on a unix socket (there is no Nagle to push past) and cannot
 * come on TCP, where the options work: they are dropped.
 */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        char buf[512];
        size_t n;

        if (startswith(fmt, "Setting %s option to %s state failed: ") ||
            startswith(fmt, "Failed to push the data from buffers to the network."))
                return;
        (void) vsnprintf(buf, sizeof buf, fmt, ap);
        n = strlen(buf);
        if (n > 0 && buf[n - 1] == '\n')
                buf[n - 1] = 0;
        log_warning("libmicrohttpd: %s", buf);
}

static void kick(void *userdata) {
        Http *h = userdata;

        (void) rearm_timer(h);
}

int http_new(Manager *m, int fd, bool read_only, HttpRouter router, Http **ret) {
        const union MHD_DaemonInfo *info;
        const RtdConfig *cfg = m->config;
        Http *h;
        int r;

        h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        h->manager = m;
        h->router = router;
        h->read_only = read_only;

        /* No listening socket: the gate accepts and hands over connections whose head it accepted, and
         * enforces the connection caps (from the live config, so a reload changes them); MHD's limit is
         * only the largest MaxConnections= there can be. */
        h->daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                                     MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL,
                                     on_request, h,
                                     MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,     /* first: MHD says so */
                                     MHD_OPTION_CONNECTION_LIMIT, 65536u,
                                     MHD_OPTION_CONNECTION_TIMEOUT,
                                     (unsigned) (read_only ? cfg->metrics_timeout_sec : CONNECTION_TIMEOUT_SEC),
                                     MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                     (size_t) MAX(CONNECTION_MEMORY_MIN, 2 * cfg->max_header_bytes + 16384),
                                     MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                                     MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                                     MHD_OPTION_END);
        if (!h->daemon) {
                free(h);
                return -EIO;
        }
        info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info) {
                r = -EIO;
                goto fail;
        }
        r = sd_event_add_io(m->event, &h->io, info->epoll_fd, EPOLLIN, on_io, h);
        if (r < 0)
                goto fail;
        /* MHD's timeouts; what it wants at once goes through run_now (rearm_timer()). Accuracy 1 µs, not
         * sd-event's default of 250 ms, so a timeout is kept as MHD asked. */
        r = sd_event_add_time(m->event, &h->timer, CLOCK_MONOTONIC, UINT64_MAX, 1, on_timer, h);
        if (r < 0)
                goto fail;
        r = sd_event_add_defer(m->event, &h->run_now, on_run_now, h);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(h->run_now, SD_EVENT_OFF);
        r = http_gate_new(m, fd, read_only, h->daemon, kick, h, &h->gate);
        if (r < 0)
                goto fail;
        (void) rearm_timer(h);
        *ret = h;
        return 0;
fail:
        http_free(h);
        return r;
}

void http_stop_accepting(Http *h) {
        if (h)
                http_gate_stop_accepting(h->gate);
}

Http *http_free(Http *h) {
        if (!h)
                return NULL;
        /* MHD must not be stopped with suspended connections: end and resume every stream and answer every
         * parked request first. */
        for (HttpStream *s = h->streams; s; s = s->next)
                http_stream_end(s);
        if (h->daemon && (http_deferred_abandon_all(h) > 0 || h->streams))
                (void) MHD_run(h->daemon);
        for (HttpStream *s = h->streams, *next; s; s = next) {
                next = s->next;
                stream_unlink(s);
        }
        sd_event_source_disable_unref(h->io);
        sd_event_source_disable_unref(h->timer);
        sd_event_source_disable_unref(h->run_now);
        if (h->daemon)
                MHD_stop_daemon(h->daemon);     /* tells the gate about each connection it closes */
        http_gate_free(h->gate);
        free(h);
        return NULL;
}
