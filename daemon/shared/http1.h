/* SPDX-License-Identifier: MIT */
/*
 * A small, strict HTTP/1.1 client side (rtctl's transport over the unix socket): a request writer and an
 * incremental response parser, a state machine over bytes that never needs more than one line in memory.
 * It knows Content-Length, chunked and close-delimited bodies and 1xx interim responses; anything else
 * (a bad status line, folded or malformed headers, conflicting lengths, a bad chunk size, an oversize
 * head) is an error with a sentence saying what was wrong, never a guess. libc only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP1_MAX_LINE 8192             /* one status, header, chunk-size or trailer line */
#define HTTP1_MAX_HEAD (64 * 1024)      /* the whole status line and header section */

/* Callbacks return 0 to go on or a negative errno-style value to stop; the parser returns that value. */
typedef struct Http1Callbacks {
        int (*on_header)(const char *name, const char *value, void *userdata);
        int (*on_head_done)(int status, void *userdata);
        int (*on_body)(const char *data, size_t size, void *userdata);
} Http1Callbacks;

typedef enum Http1State {
        HTTP1_STATUS,
        HTTP1_HEADER,
        HTTP1_BODY_LENGTH,
        HTTP1_BODY_CLOSE,
        HTTP1_CHUNK_SIZE,
        HTTP1_CHUNK_DATA,
        HTTP1_CHUNK_END,
        HTTP1_TRAILER,
        HTTP1_DONE,
        HTTP1_ERROR,
} Http1State;

typedef struct Http1Parser {
        Http1State state;
        const Http1Callbacks *cb;
        void *userdata;
        bool no_body;                   /* the request was HEAD: no body whatever the headers say */

        int status;
        bool chunked, has_length, close;
        uint64_t length;                /* Content-Length, or what is left of the body or chunk */
        uint64_t body_bytes;            /* body bytes delivered so far */
        size_t head_bytes;

        char line[HTTP1_MAX_LINE];
        size_t line_len;
        bool line_cr;                   /* the last byte of the line so far was CR */

        const char *error;              /* set in HTTP1_ERROR: what was wrong, for a person */
} Http1Parser;

void http1_parser_init(Http1Parser *p, const Http1Callbacks *cb, void *userdata);

/*
 * Feed bytes as they arrive. Returns 0 when it needs more, 1 when the response is complete (*ret_used says
 * how many of these bytes belonged to it: the rest starts the next response), or a negative value: -EBADMSG
 * for a malformed response (p->error says what), or what a callback returned.
 */
int http1_parser_feed(Http1Parser *p, const char *data, size_t size, size_t *ret_used);

/* The connection closed. Returns 1 if that completes the response (a close-delimited body), else -EPIPE
 * with p->error saying where it was cut. */
int http1_parser_eof(Http1Parser *p);

/* Whether the connection may carry another request once this response is complete. */
bool http1_parser_keep_alive(const Http1Parser *p);

/* s percent-encoded for a query value (unreserved characters kept), malloc'ed; NULL on ENOMEM. */
char *http1_escape_query(const char *s);

/*
 * Format a request with an optional body (content_type must be given with a body). Method and path must be
 * plain tokens and an origin-form path without spaces or control characters: -EINVAL otherwise.
 * Returns 0 with *ret a malloc'ed request (head, then the body) of *ret_size bytes, or -ENOMEM.
 */

int http1_format_request(const char *method, const char *path, const char *content_type, const char *body,
                         size_t body_size, char **ret, size_t *ret_size);
