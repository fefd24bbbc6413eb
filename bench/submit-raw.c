/* SPDX-License-Identifier: MIT */
/*
 * A probe for bench/dispatch, not a client: what `rtctl submit --wait -q -- CMD` would cost end to end if
 * the client spoke HTTP/1.1 over the unix socket itself, with libc only, instead of through libcurl (a fixed
 * choice for rtctl). It submits CMD with an empty environment, follows the job's server-sent events on a
 * second connection until the job ends, and exits 0 if it succeeded, 1 otherwise.
 * Usage: submit-raw SOCKET CMD [ARGS...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char buf[65536];
static size_t len;

static int read_more(int fd) {
        ssize_t n = len < sizeof buf - 1 ? read(fd, buf + len, sizeof buf - 1 - len) : 0;
        if (n <= 0)
                return -1;
        len += (size_t) n;
        buf[len] = 0;
        return 0;
}

/* JSON string of s (argv elements: quotes, backslashes and control characters escaped). */
static size_t json_string(char *out, size_t size, const char *s) {
        size_t o = 0;
        out[o++] = '"';
        for (; *s && o + 8 < size; s++) {
                if ((unsigned char) *s < 0x20 || *s == '"' || *s == '\\')
                        o += (size_t) snprintf(out + o, size - o, "\\u%04x", (unsigned char) *s);
                else
                        out[o++] = *s;
        }
        out[o++] = '"';
        return o;
}

int main(int argc, char **argv) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char body[8192], req[9216], *p;
        size_t b = 0;
        int fd;

        if (argc < 3) {
                fprintf(stderr, "usage: %s SOCKET CMD [ARGS...]\n", argv[0]);
                return 2;
        }
        b += (size_t) snprintf(body, sizeof body, "{\"env\":{},\"argv\":[");
        for (int i = 2; i < argc && b + 16 < sizeof body; i++) {
                if (i > 2)
                        body[b++] = ',';
                b += json_string(body + b, sizeof body - b - 4, argv[i]);
        }
        b += (size_t) snprintf(body + b, sizeof body - b, "]}");

        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                perror("connect");
                return 1;
        }
        int n = snprintf(req, sizeof req,
                         "POST /v1/jobs HTTP/1.1\r\nHost: rtd\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n%.*s", b, (int) b, body);
        if (write(fd, req, (size_t) n) != n)
                return 1;

        /* 201 with the job: its id, once the body (Content-Length) is in. */
        char *end, *cl;
        while (!(end = strstr(buf, "\r\n\r\n")) || !(cl = strcasestr(buf, "Content-Length:")) ||
               (size_t) (end + 4 - buf) + strtoul(cl + 15, NULL, 10) > len)
                if (read_more(fd) < 0)
                        return 1;
        if (strncmp(buf, "HTTP/1.1 201", 12) != 0 || !(p = strstr(end, "\"id\":"))) {
                fprintf(stderr, "%s\n", buf);
                return 1;
        }
        unsigned long long id = strtoull(p + 5, NULL, 10);

        /* Its events, until one says it ended: on a new connection, as rtctl does (rtd answers one request per
         * connection, "Connection: close"). */
        close(fd);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                perror("connect");
                return 1;
        }
        len = 0;
        buf[0] = 0;
        n = snprintf(req, sizeof req, "GET /v1/events?job=%llu HTTP/1.1\r\nHost: rtd\r\n\r\n", id);
        if (write(fd, req, (size_t) n) != n)
                return 1;
        for (;;) {
                static const char *const final[] = { "succeeded", "failed", "cancelled", "timed_out", "lost" };
                for (size_t i = 0; i < sizeof final / sizeof final[0]; i++) {
                        char needle[32];
                        snprintf(needle, sizeof needle, "\"state\":\"%s\"", final[i]);
                        if (strstr(buf, needle)) {
                                if (i != 0)
                                        fprintf(stderr, "submit-raw: job %llu did not succeed: %s\n", id, buf);
                                return i == 0 ? 0 : 1;
                        }
                }
                if (read_more(fd) < 0) {
                        fprintf(stderr, "submit-raw: the events of job %llu ended before the job: %s\n", id, buf);
                        return 1;
                }
        }
}
