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
#include <sys/un.h>
#include <time.h>

#include "rtlease-conn.h"
#include "shared/http1.h"
#include "shared/macro.h"

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
        RtReply *r = c->reply;

        if (r->size + size > RTLEASE_MAX_BODY)
                return -EFBIG;
        if (r->size + size + 1 > c->alloc) {
                size_t n = MAX(c->alloc * 2, r->size + size + 1);
                char *b = realloc(r->body, n);
                if (!b)
                        return -ENOMEM;
                r->body = b;
                c->alloc = n;
        }
        memcpy(r->body + r->size, data, size);
        r->size += size;
        r->body[r->size] = 0;
        return 0;
}

static const Http1Callbacks callbacks = {
        .on_head_done = on_head_done,
        .on_body = on_body,
};

static long long now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 1 ready, -ETIMEDOUT, -errno. */
static int wait_fd(int fd, short events, int ms) {
        struct pollfd p = { .fd = fd, .events = events };
        long long deadline = now_ms() + ms;

        for (;;) {
                int r = poll(&p, 1, (int) MAX(0, deadline - now_ms()));
                if (r > 0)
                        return 1;
                if (r == 0)
                        return -ETIMEDOUT;
                if (errno != EINTR)
                        return -errno;
        }
}

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
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = a->timeout_ms / 1000, .tv_usec = a->timeout_ms % 1000 * 1000 };
        _cleanup_close_ int fd = -EBADF;

        if (strlen(a->socket) >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, a->socket, strlen(a->socket));
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* connect() on a unix socket whose listener's backlog is full blocks; SO_SNDTIMEO bounds it. */
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int e = errno;

                if (e == ENOENT || e == ENOTDIR)
                        set_error(ret_error, "rtd is not running on this node: %s does not exist", a->socket);
                else if (e == ECONNREFUSED)
                        set_error(ret_error, "rtd is not running on this node: nobody listens on %s", a->socket);
                else if (e == EAGAIN || e == EINPROGRESS) {
                        set_error(ret_error, "rtd on %s did not accept the connection within %d s", a->socket,
                                  a->timeout_ms / 1000);
                        return -ETIMEDOUT;
                } else
                        set_error(ret_error, "cannot connect to rtd on %s: %s", a->socket, strerror(e));
                return -e;
        }
        return TAKE_FD(fd);
}

static int send_all(int fd, const char *data, size_t size, int ms) {
        while (size > 0) {
                ssize_t n = send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                        int r = wait_fd(fd, POLLOUT, ms);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (n < 0)
                        return -errno;
                data += n;
                size -= (size_t) n;
        }
        return 0;
}

int rtlease_call(const RtPluginArgs *a, const char *method, const char *path, const char *body, RtReply *ret,
                 char **ret_error) {
        _cleanup_free_ char *req = NULL;
        _cleanup_close_ int fd = -EBADF;
        RtReply reply = {};
        Collect c = { .reply = &reply };
        Http1Parser p;
        size_t req_size;
        char buf[4096];
        int r;

        r = http1_format_request(method, path, body ? "application/json" : NULL, body, body ? strlen(body) : 0,
                                 &req, &req_size);
        if (r < 0)
                return r;
        fd = connect_socket(a, ret_error);
        if (fd < 0)
                return fd;

        http1_parser_init(&p, &callbacks, &c);
        r = send_all(fd, req, req_size, a->timeout_ms);
        /* rtd may refuse and close before reading everything: its answer is still there to read. */
        if (r == -EPIPE || r == -ECONNRESET)
                r = 0;
        while (r == 0) {
                ssize_t n;
                size_t used;

                r = wait_fd(fd, POLLIN, a->timeout_ms);
                if (r < 0)
                        break;
                n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                        r = 0;
                        continue;
                }
                if (n < 0) {
                        r = -errno;
                        break;
                }
                r = n == 0 ? http1_parser_eof(&p) : http1_parser_feed(&p, buf, (size_t) n, &used);
        }
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
