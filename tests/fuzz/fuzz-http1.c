/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: rtctl's response and event-stream parsers (daemon/shared/http1.c, sse.c) on anything a
 * server could send. Never crash, leak or run past a limit; a refusal always says why; and the result does
 * not depend on how the bytes were split into reads: the input is parsed whole and again in pieces (sizes
 * taken from its first byte), and both runs must agree on outcome, status, body and events.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shared/http1.h"
#include "shared/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Run {
        int status;
        uint64_t body_hash, event_hash;
        size_t body_len, events;
        int sse_r;
        SseParser sse;
} Run;

static uint64_t mix(uint64_t h, const void *p, size_t n) {
        const uint8_t *b = p;
        for (size_t i = 0; i < n; i++)
                h = (h ^ b[i]) * 1099511628211ull;
        return h;
}

static int on_event(const char *type, const char *d, size_t n, const char *id, void *userdata) {
        Run *r = userdata;
        if (d[n] != 0)
                abort();        /* data is NUL-terminated for the caller */
        r->event_hash = mix(mix(mix(r->event_hash, type, strlen(type) + 1), d, n), id ? id : "", id ? strlen(id) : 0);
        r->events++;
        return 0;
}

static int on_head(int status, void *userdata) {
        ((Run *) userdata)->status = status;
        if (status < 200 || status > 999)
                abort();        /* interim responses are never reported */
        return 0;
}

static int on_body(const char *d, size_t n, void *userdata) {
        Run *r = userdata;
        if (n == 0)
                abort();
        r->body_hash = mix(r->body_hash, d, n);
        r->body_len += n;
        if (r->sse_r == 0)
                r->sse_r = sse_feed(&r->sse, d, n);
        return 0;
}

static const Http1Callbacks cbs = { NULL, on_head, on_body };

static int run(const uint8_t *data, size_t size, uint8_t pattern, Run *out, size_t *ret_used) {
        Http1Parser p;
        size_t off = 0, used_total = 0, step = (size_t) (pattern & 0x0f) + 1;
        int r = 0;

        *out = (Run){ .body_hash = 1469598103934665603ull, .event_hash = 1469598103934665603ull };
        sse_parser_init(&out->sse, on_event, NULL, out);
        http1_parser_init(&p, &cbs, out);
        while (off < size) {
                size_t n = pattern == 0 ? size - off : step, used = 0;
                if (n > size - off)
                        n = size - off;
                r = http1_parser_feed(&p, (const char *) data + off, n, &used);
                if (used > n)
                        abort();
                used_total += used;
                if (r != 0)
                        break;
                off += n;
                step = step * 3 % 17 + 1;       /* uneven pieces */
        }
        if (r == 0)
                r = http1_parser_eof(&p);
        if (r < 0 && !p.error)
                abort();        /* every refusal says why */
        if (r == -EBADMSG && p.state != HTTP1_ERROR)
                abort();
        if (r < 0 && r != -EBADMSG && r != -EPIPE)
                abort();
        if (out->sse_r < 0 && out->sse_r != -EMSGSIZE && out->sse_r != -ENOMEM)
                abort();
        if (out->sse_r == -EMSGSIZE && !out->sse.error)
                abort();
        sse_parser_done(&out->sse);
        *ret_used = used_total;
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Run whole, pieces;
        size_t used_whole, used_pieces;
        uint8_t pattern;
        int a, b;

        if (size < 1)
                return 0;
        pattern = data[0] | 1;
        data++, size--;
        a = run(data, size, 0, &whole, &used_whole);
        b = run(data, size, pattern, &pieces, &used_pieces);
        if (a != b || whole.status != pieces.status || whole.body_len != pieces.body_len ||
            whole.body_hash != pieces.body_hash || whole.events != pieces.events ||
            whole.event_hash != pieces.event_hash || whole.sse_r != pieces.sse_r)
                abort();
        if (a == 1 && used_whole != used_pieces)
                abort();
        return 0;
}
