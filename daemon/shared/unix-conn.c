/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shared/macro.h"
#include "unix-conn.h"

long long unix_conn_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int unix_conn_open(const char *path, int timeout_ms) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = timeout_ms % 1000 * 1000 };
        size_t len = strlen(path);
        int fd;

        if (len >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, len);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

int unix_conn_wait(int fd, short events, int ms) {
        struct pollfd p = { .fd = fd, .events = events };
        long long deadline = ms < 0 ? 0 : unix_conn_now_ms() + ms;

        for (;;) {
                int left = ms < 0 ? -1 : (int) MAX(0, deadline - unix_conn_now_ms());
                int r = poll(&p, 1, left);
                if (r >= 0)
                        return r > 0;
                if (errno != EINTR)
                        return -errno;
        }
}

int unix_conn_send_all(int fd, const char *data, size_t size, int ms) {
        while (size > 0) {
                ssize_t n = send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                        int r = unix_conn_wait(fd, POLLOUT, ms);
                        if (r <= 0)
                                return r == 0 ? -ETIMEDOUT : r;
                        continue;
                }
                if (n < 0)
                        return -errno;
                data += n;
                size -= (size_t) n;
        }
        return 0;
}

int unix_conn_append(char **buf, size_t *size, size_t *alloc, const char *data, size_t n, size_t max) {
        if (*size + n > max)
                return -EFBIG;
        if (*size + n + 1 > *alloc) {
                size_t grown = MAX(*alloc * 2, *size + n + 1);
                char *b = realloc(*buf, grown);
                if (!b)
                        return -ENOMEM;
                *buf = b;
                *alloc = grown;
        }
        memcpy(*buf + *size, data, n);
        *size += n;
        (*buf)[*size] = 0;
        return 0;
}

int unix_conn_exchange(int fd, const char *req, size_t req_size, Http1Parser *p, int head_ms, int body_idle_ms,
                       size_t *ret_got) {
        char buf[16384];
        size_t got = 0;
        int r;

        r = unix_conn_send_all(fd, req, req_size, head_ms);
        /* rtd may have answered and closed before reading it all (a refusal): read the answer. */
        if (r == -EPIPE || r == -ECONNRESET)
                r = 0;
        while (r == 0) {
                int ms = p->state >= HTTP1_BODY_LENGTH && p->state != HTTP1_TRAILER ? body_idle_ms : head_ms;
                ssize_t n;
                size_t used;

                r = unix_conn_wait(fd, POLLIN, ms);
                if (r == 0)
                        r = -ETIMEDOUT;
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
                if (n == 0) {
                        r = http1_parser_eof(p);
                        break;
                }
                got += (size_t) n;
                r = http1_parser_feed(p, buf, (size_t) n, &used);
                if (r == 1 && used != (size_t) n)
                        p->close = true;        /* bytes after the response: do not trust the rest */
        }
        if (ret_got)
                *ret_got = got;
        return r;
}
