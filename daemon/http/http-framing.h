/* SPDX-License-Identifier: MIT */
/*
 * A request head as raw bytes, judged before libmicrohttpd parses it: one framing only (RFC 9112 §6.1,
 * §6.3), bounded sizes, no NUL or control bytes, a path whose segments decode to clean UTF-8.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct HeadLimits {
        size_t max_uri;         /* request-target bytes: 414 beyond */
        size_t max_head;        /* request line and headers: 431 beyond */
        uint64_t max_body;      /* declared Content-Length: 413 beyond; 0 means no body at all */
        bool loopback_host;     /* Host must name a loopback address (TCP listener, DNS rebinding): 421 */
        const char *own_addr;   /* ... or this listener's own address literal (a fleet's scrape), if set */
} HeadLimits;

typedef struct HeadVerdict {
        int status;             /* 0: acceptable, else the status to answer with before closing */
        const char *title;
        char detail[320];       /* printable ASCII only: client bytes in it are escaped */
        size_t head_size;       /* with status 0: bytes up to and including the empty line */
} HeadVerdict;

/* Most header fields one request may carry. */
#define HTTP_MAX_HEADER_FIELDS 64

/*
 * Judge buf[0..n). Returns -EAGAIN while the head is incomplete and still within the limits (wait for
 * more bytes), 0 when judged: v->status is 0 for a request to pass on, or the error status. Pure.
 */
int http_head_check(const char *buf, size_t n, const HeadLimits *lim, HeadVerdict *v);

bool http_utf8_valid(const char *s, size_t n);
/* s with every byte that is not part of valid UTF-8, and every C0/C1 control, written as \xNN. */
char *http_utf8_escape(const char *s);
