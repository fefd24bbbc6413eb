/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/1.1 client parser and the event-stream parser (daemon/shared/http1.c, sse.c) on responses as
 * rtd (libmicrohttpd) sends them, each fed whole, byte by byte and split at every byte boundary, and on
 * malformed ones that must be refused with a reason rather than hang or be guessed at.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shared/http1.h"
#include "shared/sse.h"

/* Shaped as rtd (libmicrohttpd) answers GET /v1/jobs/1 (Content-Length) and GET /v1/events?job=1 (chunked
 * SSE); the bytes rtd really sent are in tests/fixtures/http1 (recorded by tests/fixtures/views/record.py). */
static const char rec_json[] =
        "HTTP/1.1 200 OK\r\n"
        "Connection: Keep-Alive\r\n"
        "Content-Length: 27\r\n"
        "Content-Type: application/json\r\n"
        "Date: Wed, 25 Nov 2026 19:02:11 GMT\r\n"
        "\r\n"
        "{\"id\":1,\"state\":\"running\"}\n";
static const char rec_sse[] =
        "HTTP/1.1 200 OK\r\n"
        "Transfer-Encoding: chunked\r\n"
        "Content-Type: text/event-stream\r\n"
        "Date: Wed, 25 Nov 2026 19:02:11 GMT\r\n"
        "\r\n"
        "50\r\n"
        "event: job\ndata: {\"type\":\"job\",\"id\":1,\"state\":\"running\",\"user\":\"root\",\"uid\":0}\n\n\r\n"
        "d\r\n"
        ": keepalive\n\n\r\n"
        "52\r\n"
        "event: job\ndata: {\"type\":\"job\",\"id\":1,\"state\":\"succeeded\",\"exit_code\":0,\"uid\":0}\n\n\r\n"
        "0\r\n"
        "\r\n";

typedef struct Got {
        int status;
        char headers[4096];
        char body[8192];
        size_t body_len;
        int stop_after_body;            /* >0: the body callback stops after this many bytes */
} Got;

static int got_header(const char *name, const char *value, void *userdata) {
        Got *g = userdata;
        size_t n = strlen(g->headers);
        snprintf(g->headers + n, sizeof g->headers - n, "%s=%s;", name, value);
        return 0;
}

static int got_head(int status, void *userdata) {
        ((Got *) userdata)->status = status;
        return 0;
}

static int got_body(const char *data, size_t size, void *userdata) {
        Got *g = userdata;
        assert_true(g->body_len + size < sizeof g->body);
        memcpy(g->body + g->body_len, data, size);
        g->body_len += size;
        g->body[g->body_len] = 0;
        if (g->stop_after_body && g->body_len >= (size_t) g->stop_after_body)
                return -ECANCELED;
        return 0;
}

static const Http1Callbacks cbs = { got_header, got_head, got_body };

/* Feed text in pieces cut at the given offsets (sorted, may be empty); return what feed/eof returned last. */
static int feed_cut(Http1Parser *p, Got *g, const char *text, size_t len, const size_t *cuts, size_t ncuts,
                    size_t *used_total, bool eof) {
        size_t at = 0;
        int r = 0;

        http1_parser_init(p, &cbs, g);
        *used_total = 0;
        for (size_t i = 0; i <= ncuts; i++) {
                size_t end = i < ncuts ? cuts[i] : len, used = 0;
                r = http1_parser_feed(p, text + at, end - at, &used);
                *used_total += used;
                if (r != 0)
                        return r;
                at = end;
        }
        return eof ? http1_parser_eof(p) : r;
}

static int feed_all(Http1Parser *p, Got *g, const char *text, bool eof) {
        size_t used;
        memset(g, 0, sizeof *g);
        return feed_cut(p, g, text, strlen(text), NULL, 0, &used, eof);
}

/* Every split in two and byte by byte: the same result as whole. */
static void check_every_split(const char *text, int want_r, int want_status, const char *want_body) {
        size_t len = strlen(text), used, cuts[len ? len : 1];
        Http1Parser p;
        Got g;

        for (size_t cut = 0; cut <= len; cut++) {
                memset(&g, 0, sizeof g);
                assert_int_equal(feed_cut(&p, &g, text, len, &cut, 1, &used, false), want_r);
                assert_int_equal(g.status, want_status);
                assert_string_equal(g.body, want_body);
                if (want_r == 1)
                        assert_int_equal(used, len);
        }
        for (size_t i = 0; i + 1 < len; i++)
                cuts[i] = i + 1;
        memset(&g, 0, sizeof g);
        assert_int_equal(feed_cut(&p, &g, text, len, cuts, len - 1, &used, false), want_r);
        assert_int_equal(g.status, want_status);
        assert_string_equal(g.body, want_body);
}

static void test_content_length(void **state) {
        Http1Parser p;
        Got g;

        check_every_split(rec_json, 1, 200, "{\"id\":1,\"state\":\"running\"}\n");
        assert_int_equal(feed_all(&p, &g, rec_json, false), 1);
        assert_non_null(strstr(g.headers, "Content-Type=application/json;"));
        assert_true(http1_parser_keep_alive(&p));
}

static void test_chunked_recorded(void **state) {
        Http1Parser p;
        Got g;

        check_every_split(rec_sse, 1, 200,
                          "event: job\ndata: {\"type\":\"job\",\"id\":1,\"state\":\"running\",\"user\":\"root\","
                          "\"uid\":0}\n\n: keepalive\n\nevent: job\ndata: {\"type\":\"job\",\"id\":1,\"state\":"
                          "\"succeeded\",\"exit_code\":0,\"uid\":0}\n\n");
        assert_int_equal(feed_all(&p, &g, rec_sse, false), 1);
        assert_true(http1_parser_keep_alive(&p));
}

static void test_chunked_extensions_trailers(void **state) {
        static const char text[] =
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"
                "5;name=value;q=\"x y\"\r\nhello\r\n"
                "6 ; ext\r\n world\r\n"
                "0;last\r\nX-Trailer: yes\r\nOther: 1\r\n\r\n";
        check_every_split(text, 1, 200, "hello world");
        /* LF alone ends lines too (RFC 9112 lets a recipient accept it). */
        check_every_split("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n", 1, 200, "abc");
}

static void test_bad_chunks(void **state) {
        static const char *const bad[] = {
                "zz\r\n", "\r\n", "-1\r\n", "0x10\r\n", "1 2\r\n", "10000000000000000\r\n", "5\r\nhelloX\r\n",
                "5\r\nhello", /* then garbage instead of CRLF: */ "3\r\nabc\rX\n", "2\x01\r\nab\r\n",
                "0\r\nbad trailer\r\n\r\n", "0\r\n: empty name\r\n\r\n",
        };
        Http1Parser p;
        Got g;

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                char text[256];
                int r;
                snprintf(text, sizeof text, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%s", bad[i]);
                r = feed_all(&p, &g, text, true);
                if (r != -EBADMSG && r != -EPIPE)
                        fail_msg("chunked body %zu (%s) gave %d", i, bad[i], r);
                assert_non_null(p.error);
        }
}

static void test_bad_heads(void **state) {
        /* Each refused with its own reason, so a check that goes missing shows even if another catches it. */
        static const struct { const char *text, *why; } bad[] = {
                { "HTTP/2 200 OK\r\n\r\n", "HTTP/1.x status line" },
                { "HTTP/1.1 20 OK\r\n\r\n", "three digits" },
                { "HTTP/1.1 2000 OK\r\n\r\n", "three digits" },
                { "http/1.1 200 OK\r\n\r\n", "HTTP/1.x status line" },
                { "HTTP/1.1 099 Low\r\n\r\n", "below 100" },
                { "<html>hello</html>\r\n\r\n", "HTTP/1.x status line" },
                { "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "two different" },
                { "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nab", "not a number" },
                { "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nab", "not a number" },
                { "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", "too large" },
                { "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", "both" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "not plain chunked" },
                { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", "twice" },
                { "HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n", "folded" },
                { "HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n", "name has a character" },
                { "HTTP/1.1 200 OK\r\n: no name\r\n\r\n", "no name" },
                { "HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n", "no name" },
                { "HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n", "CR is not followed by LF" },
                { "HTTP/1.1 200 OK\r\nX-A: a\x01\r\n\r\n", "control character" },
                { "HTTP/1.1 101 Switching Protocols\r\n\r\n", "switched protocols" },
        };
        Http1Parser p;
        Got g;

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                int r = feed_all(&p, &g, bad[i].text, true);
                if (r != -EBADMSG || !p.error || !strstr(p.error, bad[i].why))
                        fail_msg("head %zu gave %d (%s), expected: %s", i, r, p.error ? p.error : "-", bad[i].why);
                assert_int_equal(g.body_len, 0);
        }
        /* A NUL inside a header line. */
        static const char nul[] = "HTTP/1.1 200 OK\r\nX-A: a\0b\r\n\r\n";
        size_t used;
        memset(&g, 0, sizeof g);
        assert_int_equal(feed_cut(&p, &g, nul, sizeof nul - 1, NULL, 0, &used, false), -EBADMSG);
        assert_non_null(strstr(p.error, "NUL"));
}

static void test_oversize(void **state) {
        size_t big = HTTP1_MAX_LINE + 16, i;
        char *text = malloc(HTTP1_MAX_HEAD + 4096);
        Http1Parser p;
        Got g;

        assert_non_null(text);
        /* One header line over 8 KiB. */
        i = (size_t) sprintf(text, "HTTP/1.1 200 OK\r\nX-Big: ");
        memset(text + i, 'a', big);
        strcpy(text + i + big, "\r\n\r\n");
        assert_int_equal(feed_all(&p, &g, text, false), -EBADMSG);
        assert_non_null(strstr(p.error, "8 KiB"));
        /* Many short headers, 64 KiB in all. */
        i = (size_t) sprintf(text, "HTTP/1.1 200 OK\r\n");
        while (i < HTTP1_MAX_HEAD + 100)
                i += (size_t) sprintf(text + i, "X-Many: %06zu\r\n", i);
        strcpy(text + i, "\r\n");
        assert_int_equal(feed_all(&p, &g, text, false), -EBADMSG);
        assert_non_null(strstr(p.error, "64 KiB"));
        /* A chunk-size line with endless extensions. */
        i = (size_t) sprintf(text, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;");
        memset(text + i, 'e', big);
        strcpy(text + i + big, "\r\nx\r\n0\r\n\r\n");
        assert_int_equal(feed_all(&p, &g, text, false), -EBADMSG);
        free(text);
}

static void test_truncated(void **state) {
        static const char *const cut[] = {
                "",
                "HTTP/1.1 20",
                "HTTP/1.1 200 OK\r\nContent-Le",
                "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n",
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n",
        };
        Http1Parser p;
        Got g;

        for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
                assert_int_equal(feed_all(&p, &g, cut[i], true), -EPIPE);
                assert_non_null(p.error);
        }
        /* Without a length the body runs to the close, which completes it. */
        assert_int_equal(feed_all(&p, &g, "HTTP/1.1 200 OK\r\n\r\nuntil close", false), 0);
        assert_int_equal(http1_parser_eof(&p), 1);
        assert_string_equal(g.body, "until close");
        assert_false(http1_parser_keep_alive(&p));
}

static void test_framing(void **state) {
        static const char two[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 404 Not Found\r\n";
        Http1Parser p;
        Got g;
        size_t used;

        /* Interim responses are skipped; 204 has no body whatever it says; Connection: close and HTTP/1.0. */
        check_every_split("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx", 1,
                          201, "x");
        assert_int_equal(feed_all(&p, &g, "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", false), 1);
        assert_int_equal(g.body_len, 0);
        assert_int_equal(feed_all(&p, &g, "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\n"
                                          "Content-Length: 0\r\n\r\n", false), 1);
        assert_false(http1_parser_keep_alive(&p));
        assert_int_equal(feed_all(&p, &g, "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false), 1);
        assert_false(http1_parser_keep_alive(&p));
        /* Bytes after the response are not consumed. */
        memset(&g, 0, sizeof g);
        assert_int_equal(feed_cut(&p, &g, two, strlen(two), NULL, 0, &used, false), 1);
        assert_int_equal(used, strlen("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
        /* A callback stops the parse with its own value. */
        memset(&g, 0, sizeof g);
        g.stop_after_body = 3;
        http1_parser_init(&p, &cbs, &g);
        assert_int_equal(http1_parser_feed(&p, rec_sse, strlen(rec_sse), &used), -ECANCELED);
}

static void test_format_request(void **state) {
        char *req = NULL;
        size_t n;

        assert_int_equal(http1_format_request("POST", "/v1/jobs", "application/json", "{\"a\":1}", 7, &req, &n), 0);
        assert_string_equal(req, "POST /v1/jobs HTTP/1.1\r\nHost: rtd\r\nAccept: application/json\r\n"
                                 "Content-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}");
        assert_int_equal(n, strlen(req));
        free(req);
        assert_int_equal(http1_format_request("GET", "/v1/events?job=3", NULL, NULL, 0, &req, &n), 0);
        assert_string_equal(req, "GET /v1/events?job=3 HTTP/1.1\r\nHost: rtd\r\nAccept: application/json\r\n\r\n");
        free(req);
        char *q = http1_escape_query("queued&user=root x/ü");
        assert_string_equal(q, "queued%26user%3Droot%20x%2F%C3%BC");
        free(q);
        /* No request smuggling through a path, method or content type. */
        assert_int_equal(http1_format_request("GET", "/a b", NULL, NULL, 0, &req, &n), -EINVAL);
        assert_int_equal(http1_format_request("GET", "/a\r\nX: 1", NULL, NULL, 0, &req, &n), -EINVAL);
        assert_int_equal(http1_format_request("GET", "relative", NULL, NULL, 0, &req, &n), -EINVAL);
        assert_int_equal(http1_format_request("GE T", "/", NULL, NULL, 0, &req, &n), -EINVAL);
        assert_int_equal(http1_format_request("POST", "/", "a\r\nb", "x", 1, &req, &n), -EINVAL);
        assert_int_equal(http1_format_request("POST", "/", NULL, "x", 1, &req, &n), -EINVAL);
}

/* ---- server-sent events ---- */

typedef struct Events {
        char log[8192];
        int comments;
        int stop_at;                    /* >0: stop at this event */
        int n;
} Events;

static int ev(const char *type, const char *data, size_t size, const char *id, void *userdata) {
        Events *e = userdata;
        size_t l = strlen(e->log);
        assert_int_equal(strlen(data), size);
        snprintf(e->log + l, sizeof e->log - l, "[%s|%s|%s]", type, data, id ? id : "-");
        return ++e->n == e->stop_at ? -ECANCELED : 0;
}

static int comment(const char *text, void *userdata) {
        ((Events *) userdata)->comments++;
        return 0;
}

/* Feed in every two-piece split and byte by byte; all must give want. */
static void sse_every_split(const char *text, const char *want, int want_comments) {
        size_t len = strlen(text);

        for (size_t cut = 0; cut <= len + 1; cut++) {
                SseParser p;
                Events e = {};
                sse_parser_init(&p, ev, comment, &e);
                if (cut <= len) {
                        assert_int_equal(sse_feed(&p, text, cut), 0);
                        assert_int_equal(sse_feed(&p, text + cut, len - cut), 0);
                } else
                        for (size_t i = 0; i < len; i++)
                                assert_int_equal(sse_feed(&p, text + i, 1), 0);
                assert_string_equal(e.log, want);
                assert_int_equal(e.comments, want_comments);
                sse_parser_done(&p);
        }
}

static void test_sse(void **state) {
        /* rtd's own stream, as its body. */
        sse_every_split("event: job\ndata: {\"id\":1}\n\n: keepalive\n\nevent: job\ndata: {\"id\":2}\n\n",
                        "[job|{\"id\":1}|-][job|{\"id\":2}|-]", 1);
        /* Multi-line data joined with LF; the type defaults to message; id persists; retry is read. */
        sse_every_split("data: a\ndata:b\ndata:  c\n\nid: 7\nretry: 300\ndata\n\ndata: x\n\n",
                        "[message|a\nb\n c|-][message||7][message|x|7]", 0);
        /* CRLF, CR and LF line ends, mixed. */
        sse_every_split("event: e\r\ndata: 1\r\n\r\ndata: 2\r\rdata: 3\n\r\n", "[e|1|-][message|2|-][message|3|-]", 0);
        /* Comments and unknown fields are no events; an event without data is not dispatched. */
        sse_every_split(":c1\n: c2\nfoo: bar\nevent: nothing\n\ndata: y\n\n", "[message|y|-]", 2);
        /* A leading byte-order mark is skipped; an unfinished event at the end is not dispatched. */
        sse_every_split("\xef\xbb\xbf" "data: bom\n\ndata: unfinished", "[message|bom|-]", 0);
}

static void test_sse_limits(void **state) {
        size_t big = SSE_MAX_EVENT / 4;
        char *line = malloc(big + 16);
        SseParser p;
        Events e = {};
        int r = 0;

        assert_non_null(line);
        memcpy(line, "data: ", 6);
        memset(line + 6, 'x', big);
        line[6 + big] = '\n';
        sse_parser_init(&p, ev, NULL, &e);
        for (int i = 0; i < 8 && r == 0; i++)
                r = sse_feed(&p, line, big + 7);
        assert_int_equal(r, -EMSGSIZE);
        assert_non_null(p.error);
        assert_int_equal(e.n, 0);
        sse_parser_done(&p);
        /* One endless line. */
        sse_parser_init(&p, ev, NULL, &e);
        memset(line, 'y', big);
        for (int i = 0; i < 8 && r == -EMSGSIZE; i++)
                r = sse_feed(&p, line, big);
        r = 0;
        for (int i = 0; i < 8 && r == 0; i++)
                r = sse_feed(&p, line, big);
        assert_int_equal(r, -EMSGSIZE);
        sse_parser_done(&p);
        /* The callback stops the stream with its value. */
        e = (Events){ .stop_at = 1 };
        sse_parser_init(&p, ev, NULL, &e);
        assert_int_equal(sse_feed(&p, "data: 1\n\ndata: 2\n\n", 18), -ECANCELED);
        assert_int_equal(e.n, 1);
        sse_parser_done(&p);
        free(line);
}

static char *load(const char *name, size_t *size) {
        const char *d = getenv("RTD_FIXTURES");
        char path[4096], *data = NULL;
        FILE *f;

        snprintf(path, sizeof path, "%s/http1/%s", d ? d : RTD_FIXTURES_DIR, name);
        f = fopen(path, "re");
        if (!f)
                fail_msg("cannot open %s", path);
        *size = 0;
        data = malloc(1 << 20);
        assert_non_null(data);
        *size = fread(data, 1, (1 << 20) - 1, f);
        data[*size] = 0;
        fclose(f);
        return data;
}

static int first_event(const char *type, const char *data, size_t size, const char *id, void *userdata) {
        char **ret = userdata;
        if (!*ret && strcmp(type, "job") == 0)
                *ret = strdup(data);
        return 0;
}

/* The bytes rtd really sent: parsed alike whole and split at every byte boundary. */
static void test_recorded(void **state) {
        static const struct { const char *file; int status; const char *in_body; } rec[] = {
                { "job.http", 200, "\"state\":\"succeeded\"" },
                { "events-job.http", 200, "event: job" },
                { "not-found.http", 404, "No such job" },
        };

        for (size_t i = 0; i < sizeof rec / sizeof rec[0]; i++) {
                size_t size, used;
                char *text = load(rec[i].file, &size), *whole;
                Http1Parser p;
                Got g;

                memset(&g, 0, sizeof g);
                assert_int_equal(feed_cut(&p, &g, text, size, NULL, 0, &used, false), 1);
                assert_int_equal(used, size);
                assert_int_equal(g.status, rec[i].status);
                if (!strstr(g.body, rec[i].in_body))
                        fail_msg("%s: body lacks %s: %s", rec[i].file, rec[i].in_body, g.body);
                whole = strdup(g.body);
                check_every_split(text, 1, rec[i].status, whole);
                if (strcmp(rec[i].file, "events-job.http") == 0) {
                        SseParser sse;
                        char *ev = NULL;
                        sse_parser_init(&sse, first_event, NULL, &ev);
                        assert_int_equal(sse_feed(&sse, whole, strlen(whole)), 0);
                        assert_non_null(ev);
                        assert_non_null(strstr(ev, "\"state\":\"succeeded\""));
                        free(ev);
                        sse_parser_done(&sse);
                }
                free(whole);
                free(text);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_content_length),
                cmocka_unit_test(test_chunked_recorded),
                cmocka_unit_test(test_chunked_extensions_trailers),
                cmocka_unit_test(test_bad_chunks),
                cmocka_unit_test(test_bad_heads),
                cmocka_unit_test(test_oversize),
                cmocka_unit_test(test_truncated),
                cmocka_unit_test(test_framing),
                cmocka_unit_test(test_format_request),
                cmocka_unit_test(test_sse),
                cmocka_unit_test(test_sse_limits),
                cmocka_unit_test(test_recorded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
