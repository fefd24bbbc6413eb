/* SPDX-License-Identifier: MIT */
/*
 * Server-sent events (the WHATWG event-stream format), parsed incrementally from a response body: lines end
 * in CRLF, LF or CR; "event:", "data:" (several join with LF), "id:", "retry:"; ":" starts a comment; an
 * empty line dispatches the event. An event larger than SSE_MAX_EVENT is an error rather than unbounded
 * memory. libc only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define SSE_MAX_EVENT (1024 * 1024)

/* Returns 0 to go on or a negative value to stop (sse_feed returns it). data is NUL-terminated. */
typedef int (*SseEventFn)(const char *type, const char *data, size_t size, const char *id, void *userdata);
/* Comments (": keepalive"), for a client that wants to know the stream is alive. May be NULL. */
typedef int (*SseCommentFn)(const char *text, void *userdata);

typedef struct SseParser {
        SseEventFn on_event;
        SseCommentFn on_comment;
        void *userdata;

        char *line;                     /* the line being read */
        size_t line_len, line_alloc;
        bool after_cr;                  /* the last byte was CR: a following LF belongs to it */
        bool started;                   /* past a leading byte-order mark */

        char *data;                     /* the data lines of the event being read, LF-joined */
        size_t data_len, data_alloc;
        bool has_data;
        char type[64];
        char *id;                       /* the last event id (it persists across events) */
        long retry_ms;                  /* -1 until the server sets it */

        const char *error;
} SseParser;

void sse_parser_init(SseParser *p, SseEventFn on_event, SseCommentFn on_comment, void *userdata);
void sse_parser_done(SseParser *p);

/* Feed body bytes. Returns 0, -EMSGSIZE for an oversize line or event (p->error says), -ENOMEM, or what
 * a callback returned. */
int sse_feed(SseParser *p, const char *data, size_t size);
