/* SPDX-License-Identifier: MIT */
/* The event-stream parser (https://html.spec.whatwg.org/multipage/server-sent-events.html). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sse.h"

void sse_parser_init(SseParser *p, SseEventFn on_event, SseCommentFn on_comment, void *userdata) {
        *p = (SseParser){ .on_event = on_event, .on_comment = on_comment, .userdata = userdata, .retry_ms = -1 };
}

void sse_parser_done(SseParser *p) {
        free(p->line);
        free(p->data);
        free(p->id);
        *p = (SseParser){};
}

static int grow(char **buf, size_t *alloc, size_t need) {
        size_t n;
        char *b;

        if (need <= *alloc)
                return 0;
        n = *alloc ? *alloc : 256;
        while (n < need)
                n *= 2;
        b = realloc(*buf, n);
        if (!b)
                return -ENOMEM;
        *buf = b;
        *alloc = n;
        return 0;
}

static int dispatch(SseParser *p) {
        int r = 0;

        /* An event without data lines is not dispatched, only its buffers reset (the spec). */
        if (p->has_data) {
                if (p->data_len > 0 && p->data[p->data_len - 1] == '\n')
                        p->data_len--;
                p->data[p->data_len] = 0;
                if (p->on_event)
                        r = p->on_event(p->type[0] ? p->type : "message", p->data, p->data_len, p->id,
                                        p->userdata);
        }
        p->data_len = 0;
        p->has_data = false;
        p->type[0] = 0;
        return r;
}

static int field(SseParser *p, const char *name, const char *value, size_t vlen) {
        if (strcmp(name, "data") == 0) {
                if (p->data_len + vlen + 2 > SSE_MAX_EVENT) {
                        p->error = "an event is larger than 1 MiB";
                        return -EMSGSIZE;
                }
                if (grow(&p->data, &p->data_alloc, p->data_len + vlen + 2) < 0)
                        return -ENOMEM;
                memcpy(p->data + p->data_len, value, vlen);
                p->data_len += vlen;
                p->data[p->data_len++] = '\n';
                p->has_data = true;
        } else if (strcmp(name, "event") == 0) {
                size_t n = vlen < sizeof p->type - 1 ? vlen : sizeof p->type - 1;
                memcpy(p->type, value, n);
                p->type[n] = 0;
        } else if (strcmp(name, "id") == 0) {
                if (!memchr(value, 0, vlen)) {
                        char *id = strndup(value, vlen);
                        if (!id)
                                return -ENOMEM;
                        free(p->id);
                        p->id = id;
                }
        } else if (strcmp(name, "retry") == 0) {
                long v = 0;
                size_t i;
                for (i = 0; i < vlen && value[i] >= '0' && value[i] <= '9' && v < 100000000; i++)
                        v = v * 10 + (value[i] - '0');
                if (i == vlen && vlen > 0)
                        p->retry_ms = v;
        }
        return 0;       /* other fields are ignored */
}

static int line(SseParser *p) {
        char *l = p->line ? p->line : (char *) "", *colon, *value;
        size_t len = p->line_len, vlen;

        if (p->line)
                p->line[len] = 0;
        p->line_len = 0;
        if (len == 0)
                return dispatch(p);
        if (l[0] == ':')
                return p->on_comment ? p->on_comment(l + 1 + (l[1] == ' '), p->userdata) : 0;
        colon = memchr(l, ':', len);
        if (!colon)
                return field(p, l, "", 0);
        *colon = 0;
        value = colon + 1;
        if (*value == ' ')
                value++;
        vlen = len - (size_t) (value - l);
        return field(p, l, value, vlen);
}

int sse_feed(SseParser *p, const char *data, size_t size) {
        int r;

        for (size_t i = 0; i < size; i++) {
                char ch = data[i];

                if (!p->started) {
                        /* A leading UTF-8 byte-order mark is skipped: keep the bytes until they can be told. */
                        static const char bom[] = "\xef\xbb\xbf";
                        if (p->line_len < 3 && ch == bom[p->line_len]) {
                                if (grow(&p->line, &p->line_alloc, p->line_len + 2) < 0)
                                        return -ENOMEM;
                                p->line[p->line_len++] = ch;
                                if (p->line_len == 3) {
                                        p->line_len = 0;
                                        p->started = true;
                                }
                                continue;
                        }
                        p->started = true;
                }
                if (p->after_cr) {
                        p->after_cr = false;
                        if (ch == '\n')
                                continue;
                }
                if (ch == '\r' || ch == '\n') {
                        p->after_cr = ch == '\r';
                        r = line(p);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (p->line_len + 2 > SSE_MAX_EVENT) {
                        p->error = "a line of the event stream is longer than 1 MiB";
                        return -EMSGSIZE;
                }
                if (grow(&p->line, &p->line_alloc, p->line_len + 2) < 0)
                        return -ENOMEM;
                p->line[p->line_len++] = ch;
        }
        return 0;
}
