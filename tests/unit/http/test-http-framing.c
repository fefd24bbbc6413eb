/* SPDX-License-Identifier: MIT */
/* http-framing: request heads judged from raw bytes, as a table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http/http-framing.h"

static const HeadLimits lim = { .max_uri = 1024, .max_head = 4096, .max_body = 1000 };
static const HeadLimits tcp = { .max_uri = 1024, .max_head = 4096, .max_body = 0, .loopback_host = true };
/* A fleet's node listening on its management address: that literal is its own, a name never is. */
static const HeadLimits fleet = { .max_uri = 1024, .max_head = 4096, .loopback_host = true, .own_addr = "10.1.0.17" };
static const HeadLimits fleet6 = { .max_uri = 1024, .max_head = 4096, .loopback_host = true, .own_addr = "fd00::17" };

typedef struct Row {
        const char *head;
        size_t len;             /* 0: strlen */
        int expect;             /* -EAGAIN, 0 (accepted) or a status */
        const HeadLimits *lim;
} Row;

#define H "Host: rtd\r\n"
static const Row rows[] = {
        { "GET /v1/status HTTP/1.1\r\n" H "\r\n", 0, 0 },
        { "GET /v1/status HTTP/1.0\r\n\r\n", 0, 0 },
        { "GET /v1/status HTTP/1.1\r\n" H, 0, -EAGAIN },
        { "GET /v1/sta", 0, -EAGAIN },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Content-Length: 10\r\n\r\n", 0, 0 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n", 0, 0 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Content-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 400 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Content-Length: 10\r\nContent-Length: 10\r\n\r\n", 0, 400 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Content-Length: 10\r\ncontent-length: 11\r\n\r\n", 0, 400 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Content-Length: +10\r\n\r\n", 0, 400 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Content-Length: 1001\r\n\r\n", 0, 413 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Content-Length: 99999999999999999999\r\n\r\n", 0, 400 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Content-Length: 1001\r\nExpect: 100-continue\r\n\r\n", 0, 413 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Content-Length: 10\r\nExpect: 100-continue\r\n\r\n", 0, 0 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Content-Length: 10\r\nExpect: x\r\n\r\n", 0, 417 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Transfer-Encoding: gzip, chunked\r\n\r\n", 0, 400 },
        { "POST /v1/jobs HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 400 },
        { "POST /v1/jobs HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 400 },
        { "GET /v1/status HTTP/1.1\r\n" H "X-A: a\0b\r\n\r\n", 48, 400 },
        { "GET /v1/status HTTP/1.1\r\n" H "X-A: a\x01" "b\r\n\r\n", 0, 400 },
        { "GET /v1/status HTTP/1.1\r\n" H "X-A : b\r\n\r\n", 0, 400 },
        { "GET /v1/status HTTP/1.1\r\n" H "X-A: b\r\n c\r\n\r\n", 0, 400 },
        { "GET /v1/status HTTP/1.1\n" H "\n", 0, 400 },
        { "GET /v1/status HTTP/1.1\r\n" H "X-A: b\rc\r\n\r\n", 0, 400 },
        { "GET /v1/status HTTP/1.1\r\n\r\n", 0, 400 },
        { "GET /v1/status HTTP/1.1\r\n" H H "\r\n", 0, 400 },
        { "GET /v1/status HTTP/2.0\r\n" H "\r\n", 0, 400 },
        { "GET  /v1/status HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET http://rtd/v1/status HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET /v1/jobs/1%00/output HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET /v1/jobs/1%2Foutput HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET /v1/jobs/1%2foutput HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET /v1/jobs?cursor=a%2Fb HTTP/1.1\r\n" H "\r\n", 0, 0 },
        { "GET /v1/jobs?cursor=a%00b HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET /v1/jobs/%C3%28 HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET /v1/jobs/%C3%A9 HTTP/1.1\r\n" H "\r\n", 0, 0 },
        { "GET /v1/jobs/%ED%A0%80 HTTP/1.1\r\n" H "\r\n", 0, 400 },   /* surrogate */
        { "GET /v1/jobs/%C0%AF HTTP/1.1\r\n" H "\r\n", 0, 400 },      /* overlong '/' */
        { "GET /v1/jobs/\xff HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET /v1/jobs/%zz HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET /v1/jobs/% HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET /v1/jobs/%0a HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET /v1/jobs?x=%FF HTTP/1.1\r\n" H "\r\n", 0, 400 },
        { "GET /v1/status HTTP/1.1\r\n" H "X-A: \xc3\x28\r\n\r\n", 0, 400 },
        { "GET /metrics HTTP/1.1\r\nHost: localhost:9477\r\n\r\n", 0, 0, &tcp },
        { "GET /metrics HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n", 0, 0, &tcp },
        { "GET /metrics HTTP/1.1\r\nHost: [::1]:9477\r\n\r\n", 0, 0, &tcp },
        { "GET /metrics HTTP/1.1\r\nHost: LOCALHOST\r\n\r\n", 0, 0, &tcp },
        { "GET /metrics HTTP/1.1\r\nHost: evil.example\r\n\r\n", 0, 421, &tcp },
        { "GET /metrics HTTP/1.1\r\nHost: localhost.evil.example\r\n\r\n", 0, 421, &tcp },
        { "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1.nip.io\r\n\r\n", 0, 421, &tcp },
        { "GET /metrics HTTP/1.1\r\nHost: [::2]\r\n\r\n", 0, 421, &tcp },
        { "GET /metrics HTTP/1.1\r\nHost: localhost:\r\n\r\n", 0, 421, &tcp },
        { "GET /metrics HTTP/1.0\r\n\r\n", 0, 421, &tcp },
        { "GET /metrics HTTP/1.1\r\nHost: 10.1.0.17:9477\r\n\r\n", 0, 0, &fleet },
        { "GET /metrics HTTP/1.1\r\nHost: 10.1.0.17\r\n\r\n", 0, 0, &fleet },
        { "GET /metrics HTTP/1.1\r\nHost: 10.1.0.18:9477\r\n\r\n", 0, 421, &fleet },
        { "GET /metrics HTTP/1.1\r\nHost: node017:9477\r\n\r\n", 0, 421, &fleet },
        { "GET /metrics HTTP/1.1\r\nHost: 10.1.0.17:9477\r\n\r\n", 0, 421, &tcp },
        { "GET /metrics HTTP/1.1\r\nHost: [fd00::17]:9477\r\n\r\n", 0, 0, &fleet6 },
        { "GET /metrics HTTP/1.1\r\nHost: [fd00::18]:9477\r\n\r\n", 0, 421, &fleet6 },
        { "POST /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\n\r\n", 0, 413, &tcp },
        { "POST /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", 0, 0, &tcp },
};

static void test_table(void **state) {
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
                const Row *r = &rows[i];
                HeadVerdict v;
                size_t n = r->len ?: strlen(r->head);
                int got = http_head_check(r->head, n, r->lim ?: &lim, &v);

                if (got == 0)
                        got = v.status;
                if (got != r->expect)
                        fail_msg("row %zu (%s): expected %d, got %d (%s)", i, r->head, r->expect, got, v.detail);
                if (got > 0)
                        assert_true(http_utf8_valid(v.detail, strlen(v.detail)));
        }
}

static void test_sizes(void **state) {
        char buf[8192];
        HeadVerdict v;

        /* A request line longer than the URI limit: 414 before it is complete. */
        memset(buf, 'a', sizeof buf);
        memcpy(buf, "GET /", 5);
        assert_int_equal(http_head_check(buf, 2000, &lim, &v), 0);
        assert_int_equal(v.status, 414);
        /* A header longer than the head limit: 431 before it is complete. */
        int n = snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: x\r\nX: ");
        memset(buf + n, 'b', sizeof buf - (size_t) n);
        assert_int_equal(http_head_check(buf, sizeof buf, &lim, &v), 0);
        assert_int_equal(v.status, 431);
        /* Too many fields. */
        n = snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: x\r\n");
        for (int i = 0; i < HTTP_MAX_HEADER_FIELDS; i++)
                n += snprintf(buf + n, sizeof buf - (size_t) n, "X-%d: y\r\n", i);
        n += snprintf(buf + n, sizeof buf - (size_t) n, "\r\n");
        assert_int_equal(http_head_check(buf, (size_t) n, &lim, &v), 0);
        assert_int_equal(v.status, 431);
        /* Accepted heads report their size; what follows (the body) is not looked at. */
        n = snprintf(buf, sizeof buf, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n\x01\x02\x03");
        assert_int_equal(http_head_check(buf, (size_t) n, &lim, &v), 0);
        assert_int_equal(v.status, 0);
        assert_int_equal(v.head_size, (size_t) n - 3);
}

static void test_escape(void **state) {
        char *s = http_utf8_escape("a\xff" "b\x01" "c\xc3\xa9\xc2\x85");

        assert_string_equal(s, "a\\xffb\\x01c\xc3\xa9\\xc2\\x85");
        assert_true(http_utf8_valid(s, strlen(s)));
        free(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_table),
                cmocka_unit_test(test_sizes),
                cmocka_unit_test(test_escape),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
