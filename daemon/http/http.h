/* SPDX-License-Identifier: MIT */
/* libmicrohttpd driven from sd-event: listeners, caller identity, routing, problem+json, streaming. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Manager Manager;
typedef struct Http Http;
typedef struct HttpStream HttpStream;
typedef struct HttpDeferred HttpDeferred;
struct MHD_Connection;

typedef enum Role {
        ROLE_NONE,      /* not allowed on the control socket: 403 */
        ROLE_READONLY,  /* the TCP metrics listener: read-only endpoints only */
        ROLE_USER,      /* member of SubmitGroup= */
        ROLE_ADMIN,     /* root or member of AdminGroup= */
        _ROLE_MAX,
} Role;

const char *role_to_string(Role r);

typedef struct Caller {
        uid_t uid;
        gid_t gid;
        pid_t pid;
        Role role;
        char *user;     /* user name, or the uid in decimal when it has none */
        bool lease;     /* member of LeaseGroup= (may lease CPUs whatever its role) */
} Caller;

typedef struct Request {
        Manager *manager;
        const char *method;
        const char *path;               /* without the query string */
        const char *const *segments;    /* path split at '/', NULL-terminated ("v1","jobs","42") */
        size_t n_segments;
        const char *body;
        size_t body_size;
        Caller caller;
        struct MHD_Connection *connection;
} Request;

typedef struct Response {
        int status;
        char *content_type;     /* default application/json */
        char *body;
        size_t body_size;
        char *location;         /* Location: header */
        char *allow;            /* Allow: header (405) */
        HttpStream *stream;     /* set by http_stream_start(): body comes from the stream instead */
        HttpDeferred *deferred; /* set by http_defer(): the answer comes later */
} Response;

/*
 * A route: method, a pattern of path segments where "*" matches one segment, the least role
 * allowed, and the handler. A handler fills resp (with reply_* below) and returns 0, or returns
 * -errno for an internal error (500). Tables end with an all-zero entry.
 */
typedef int (*RouteHandler)(Request *req, Response *resp);
typedef struct Route {
        const char *method;
        const char *pattern;
        Role min_role;
        RouteHandler handler;
} Route;

/* Query parameter, or NULL. */
const char *request_query(Request *req, const char *key);

/* Replies. reply_json takes ownership of j. */
int reply_json(Response *resp, int status, json_t *j);
int reply_text(Response *resp, int status, const char *content_type, char *body, size_t size); /* takes body */
/* problem+json (RFC 9457): type is derived from status; title short, detail says what and how to fix. */
int reply_problem(Response *resp, int status, const char *title, const char *detail_fmt, ...)
        __attribute__((format(printf, 4, 5)));

/*
 * Streaming responses (job output with follow=1, server-sent events). http_stream_start() turns resp
 * into a chunked stream; push data with http_stream_write() whenever it arrives (from any sd-event
 * callback), end it with http_stream_end(). on_close (may be NULL) is called once when the client goes
 * away or the stream ends, after which the stream pointer is invalid.
 */
typedef void (*HttpStreamClose)(HttpStream *s, void *userdata);
int http_stream_start(Response *resp, const char *content_type, HttpStreamClose on_close, void *userdata,
                      HttpStream **ret);
int http_stream_write(HttpStream *s, const void *data, size_t size);
/*
 * A pull stream: MHD calls pull() for the next bytes only when the client's socket can take them, so a
 * slow reader costs MHD's connection buffer and nothing more. pull() copies up to max bytes at body offset
 * pos into buf and returns how many, 0 when nothing is there yet (the stream parks until
 * http_stream_wake()), HTTP_PULL_END at the end, or -errno to cut the response short. size is the body's
 * length (Content-Length), or UINT64_MAX for a chunked body of unknown length.
 */
#define HTTP_PULL_END ((ssize_t) -1000000)
typedef ssize_t (*HttpStreamPull)(void *userdata, uint64_t pos, char *buf, size_t max);
int http_stream_start_pull(Response *resp, const char *content_type, uint64_t size, HttpStreamPull pull,
                           HttpStreamClose on_close, void *userdata, HttpStream **ret);
void http_stream_wake(HttpStream *s);
void http_stream_end(HttpStream *s);

/*
 * An answer given later, from any loop callback (a lease answered once its CPUs are quiet): the handler calls
 * http_defer() and returns 0; the connection is parked, neither read nor timed out, so the owner must bound
 * the wait itself. Fill http_deferred_response() with reply_* and call http_deferred_send(); the handle is
 * invalid after that. When the answer cannot come (rtd stops: 503 to the client), on_abandon is called instead
 * and the handle is invalid after it returns.
 */
typedef void (*HttpDeferredAbandon)(HttpDeferred *d, void *userdata);
int http_defer(Response *resp, HttpDeferredAbandon on_abandon, void *userdata, HttpDeferred **ret);
Response *http_deferred_response(HttpDeferred *d);
void http_deferred_send(HttpDeferred *d);

/* The problem+json body for a status (invalid UTF-8 and control bytes in detail escaped), and a status's reason phrase. */
char *http_problem_json(int status, const char *title, const char *detail);
const char *http_status_title(int status);

/* The route for method+segments, or NULL with *ret_allow set to the allowed methods when only the method is
 * wrong. http knows no routes of its own: the API hands this in (api_find_route). */
typedef const Route *(*HttpRouter)(const char *method, const char *const *segments, size_t n, char **ret_allow);

/* Listeners. fd is a listening socket (AF_UNIX control or TCP read-only). */
int http_new(Manager *m, int fd, bool read_only, HttpRouter router, Http **ret);
/* New connections wait in the backlog from now on (for the next image after a re-exec); open ones are served. */
void http_stop_accepting(Http *h);
Http *http_free(Http *h);
