/* SPDX-License-Identifier: MIT */
/* The HTTP/1.1 client side: request writer and incremental response parser (RFC 9112), strict by design. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http1.h"

void http1_parser_init(Http1Parser *p, const Http1Callbacks *cb, void *userdata) {
        *p = (Http1Parser){ .state = HTTP1_STATUS, .cb = cb, .userdata = userdata };
}

static int fail(Http1Parser *p, const char *why) {
        p->state = HTTP1_ERROR;
        p->error = why;
        return -EBADMSG;
}

static bool is_tchar(unsigned char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Field values: visible characters, space, tab and obs-text; never CR, LF, NUL or other controls. */
static bool is_field_char(unsigned char c) {
        return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static int parse_status_line(Http1Parser *p, const char *l) {
        /* HTTP/1.x SP 3DIGIT [SP reason] */
        if (strncmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ')
                return fail(p, "the response does not start with an HTTP/1.x status line");
        for (int i = 9; i < 12; i++)
                if (l[i] < '0' || l[i] > '9')
                        return fail(p, "the status code is not three digits");
        if (l[12] != 0 && l[12] != ' ')
                return fail(p, "the status code is not three digits");
        for (const char *c = l + 12; *c; c++)
                if (!is_field_char((unsigned char) *c))
                        return fail(p, "the status line has a control character");
        p->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
        if (p->status < 100)
                return fail(p, "the status code is below 100");
        if (l[7] == '0')
                p->close = true;        /* HTTP/1.0: no persistent connection unless we knew better */
        p->state = HTTP1_HEADER;
        return 0;
}

/* "chunked" as the last coding of Transfer-Encoding; any other coding is not something rtd sends. */
static int parse_transfer_encoding(Http1Parser *p, const char *v) {
        if (p->chunked)
                return fail(p, "Transfer-Encoding appears twice");
        if (strcasecmp(v, "chunked") != 0)
                return fail(p, "the Transfer-Encoding is not plain chunked");
        p->chunked = true;
        return 0;
}

static int parse_content_length(Http1Parser *p, const char *v) {
        uint64_t n = 0;

        if (!*v)
                return fail(p, "Content-Length is empty");
        for (const char *c = v; *c; c++) {
                if (*c < '0' || *c > '9')
                        return fail(p, "Content-Length is not a number");
                if (n > (UINT64_MAX - 9) / 10)
                        return fail(p, "Content-Length is too large");
                n = n * 10 + (uint64_t) (*c - '0');
        }
        if (p->has_length && n != p->length)
                return fail(p, "two different Content-Length headers");
        p->has_length = true;
        p->length = n;
        return 0;
}

static bool has_token(const char *list, const char *token) {
        size_t n = strlen(token);
        for (const char *c = list; *c;) {
                c += strspn(c, " \t,");
                size_t len = strcspn(c, ",");
                size_t t = len;
                while (t > 0 && (c[t - 1] == ' ' || c[t - 1] == '\t'))
                        t--;
                if (t == n && strncasecmp(c, token, n) == 0)
                        return true;
                c += len;
        }
        return false;
}

/* The header section ended: decide how the body is delimited. */
static int head_done(Http1Parser *p) {
        int r;

        if (p->status < 200) {
                /* 1xx: an interim response; the real one follows. 101 would switch protocols: not ours. */
                if (p->status == 101)
                        return fail(p, "the server switched protocols (101)");
                bool close = p->close;
                size_t head = p->head_bytes;
                http1_parser_init(p, p->cb, p->userdata);
                p->close = close;
                p->head_bytes = head;
                return 0;
        }
        if (p->chunked && p->has_length)
                return fail(p, "both Transfer-Encoding and Content-Length");
        if (p->cb && p->cb->on_head_done && (r = p->cb->on_head_done(p->status, p->userdata)) < 0)
                return r;
        if (p->no_body || p->status == 204 || p->status == 304)
                p->state = HTTP1_DONE;
        else if (p->chunked)
                p->state = HTTP1_CHUNK_SIZE;
        else if (p->has_length)
                p->state = p->length == 0 ? HTTP1_DONE : HTTP1_BODY_LENGTH;
        else {
                p->state = HTTP1_BODY_CLOSE;
                p->close = true;
        }
        return 0;
}

static int parse_header_line(Http1Parser *p, char *l) {
        char *colon, *v, *end;
        int r;

        if (*l == 0)
                return head_done(p);
        if (*l == ' ' || *l == '\t')
                return fail(p, "a header is folded over lines (obsolete line folding)");
        colon = strchr(l, ':');
        if (!colon || colon == l)
                return fail(p, "a header line has no name");
        for (char *c = l; c < colon; c++)
                if (!is_tchar((unsigned char) *c))
                        return fail(p, "a header name has a character that is not allowed");
        *colon = 0;
        v = colon + 1;
        for (char *c = v; *c; c++)
                if (!is_field_char((unsigned char) *c))
                        return fail(p, "a header value has a control character");
        v += strspn(v, " \t");
        end = v + strlen(v);
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
                *--end = 0;

        if (strcasecmp(l, "Content-Length") == 0)
                r = parse_content_length(p, v);
        else if (strcasecmp(l, "Transfer-Encoding") == 0)
                r = parse_transfer_encoding(p, v);
        else {
                if (strcasecmp(l, "Connection") == 0 && has_token(v, "close"))
                        p->close = true;
                r = 0;
        }
        if (r < 0)
                return r;
        if (p->cb && p->cb->on_header)
                return p->cb->on_header(l, v, p->userdata);
        return 0;
}

/* chunk-size [ BWS ";" chunk-ext ] */
static int parse_chunk_size(Http1Parser *p, const char *l) {
        uint64_t n = 0;
        const char *c = l;

        if (hexval(*c) < 0)
                return fail(p, "a chunk size is not a hexadecimal number");
        for (; hexval(*c) >= 0; c++) {
                if (n > (UINT64_MAX >> 4))
                        return fail(p, "a chunk size is too large");
                n = n << 4 | (uint64_t) hexval(*c);
        }
        c += strspn(c, " \t");
        if (*c != 0 && *c != ';')
                return fail(p, "a chunk size is followed by something that is not an extension");
        for (; *c; c++)
                if (!is_field_char((unsigned char) *c))
                        return fail(p, "a chunk extension has a control character");
        p->length = n;
        p->state = n == 0 ? HTTP1_TRAILER : HTTP1_CHUNK_DATA;
        return 0;
}

/* One complete line (terminator stripped) in the current state. */
static int on_line(Http1Parser *p) {
        char *l = p->line;

        p->line[p->line_len] = 0;
        if (memchr(l, 0, p->line_len))
                return fail(p, "a line has a NUL byte");
        switch (p->state) {
        case HTTP1_STATUS:
                return parse_status_line(p, l);
        case HTTP1_HEADER:
                return parse_header_line(p, l);
        case HTTP1_CHUNK_SIZE:
                return parse_chunk_size(p, l);
        case HTTP1_CHUNK_END:
                if (*l)
                        return fail(p, "a chunk is longer than its size says");
                p->state = HTTP1_CHUNK_SIZE;
                return 0;
        case HTTP1_TRAILER:
                if (*l == 0) {
                        p->state = HTTP1_DONE;
                        return 0;
                }
                for (char *c = l; *c; c++)
                        if (!is_field_char((unsigned char) *c))
                                return fail(p, "a trailer has a control character");
                if (!strchr(l, ':') || *l == ':' || *l == ' ' || *l == '\t')
                        return fail(p, "a trailer line is not a header field");
                return 0;
        default:
                return fail(p, "internal error: a line in a body state");
        }
}

static bool counts_to_head(const Http1Parser *p) {
        return p->state == HTTP1_STATUS || p->state == HTTP1_HEADER || p->state == HTTP1_TRAILER;
}

/* Take bytes of a line; returns the bytes used, or a negative value. Lines end in LF, CRLF accepted. */
static int take_line(Http1Parser *p, const char *data, size_t size, size_t *used) {
        size_t i;

        for (i = 0; i < size; i++) {
                char ch = data[i];

                if (counts_to_head(p) && ++p->head_bytes > HTTP1_MAX_HEAD)
                        return fail(p, "the response head is larger than 64 KiB");
                if (ch == '\n') {
                        int r = on_line(p);
                        *used = i + 1;
                        p->line_cr = false;
                        p->line_len = 0;
                        return r;
                }
                if (p->line_cr)
                        return fail(p, "a CR is not followed by LF");
                if (ch == '\r') {
                        p->line_cr = true;
                        continue;
                }
                if (p->line_len >= HTTP1_MAX_LINE - 1)
                        return fail(p, counts_to_head(p) ? "a header line is longer than 8 KiB"
                                                         : "a chunk-size line is longer than 8 KiB");
                p->line[p->line_len++] = ch;
        }
        *used = size;
        return 0;
}

static int deliver(Http1Parser *p, const char *data, size_t n) {
        p->body_bytes += n;
        if (n && p->cb && p->cb->on_body)
                return p->cb->on_body(data, n, p->userdata);
        return 0;
}

int http1_parser_feed(Http1Parser *p, const char *data, size_t size, size_t *ret_used) {
        size_t off = 0;
        int r;

        while (off < size || p->state == HTTP1_DONE) {
                switch (p->state) {
                case HTTP1_DONE:
                        if (ret_used)
                                *ret_used = off;
                        return 1;
                case HTTP1_ERROR:
                        return -EBADMSG;
                case HTTP1_BODY_CLOSE:
                        r = deliver(p, data + off, size - off);
                        if (r < 0)
                                return r;
                        off = size;
                        break;
                case HTTP1_BODY_LENGTH:
                case HTTP1_CHUNK_DATA: {
                        size_t n = size - off;
                        if (n > p->length)
                                n = (size_t) p->length;
                        p->length -= n;
                        r = deliver(p, data + off, n);
                        if (r < 0)
                                return r;
                        off += n;
                        if (p->length == 0)
                                p->state = p->state == HTTP1_CHUNK_DATA ? HTTP1_CHUNK_END : HTTP1_DONE;
                        break;
                }
                default: {
                        size_t used = 0;
                        r = take_line(p, data + off, size - off, &used);
                        if (r < 0)
                                return r;
                        off += used;
                        break;
                }
                }
        }
        if (ret_used)
                *ret_used = off;
        return 0;
}

int http1_parser_eof(Http1Parser *p) {
        switch (p->state) {
        case HTTP1_DONE:
                return 1;
        case HTTP1_BODY_CLOSE:
                p->state = HTTP1_DONE;
                return 1;
        case HTTP1_ERROR:
                return -EBADMSG;
        case HTTP1_STATUS:
                p->error = p->line_len == 0 && p->head_bytes == 0 ? "the connection closed before a response"
                                                                   : "the connection closed in the status line";
                break;
        case HTTP1_HEADER:
                p->error = "the connection closed in the response headers";
                break;
        case HTTP1_BODY_LENGTH:
                p->error = "the connection closed before the end of the body (Content-Length)";
                break;
        default:
                p->error = "the connection closed before the last chunk of the body";
                break;
        }
        p->state = HTTP1_ERROR;
        return -EPIPE;
}

bool http1_parser_keep_alive(const Http1Parser *p) {
        return p->state == HTTP1_DONE && !p->close;
}

static bool valid_path(const char *path) {
        if (path[0] != '/')
                return false;
        for (const unsigned char *c = (const unsigned char *) path; *c; c++)
                if (*c <= 0x20 || *c >= 0x7f)
                        return false;
        return true;
}

int http1_format_request(const char *method, const char *path, const char *content_type, const char *body,
                         size_t body_size, char **ret, size_t *ret_size) {
        char *out = NULL;
        size_t head;
        int n;

        if (!method || !*method || !path || !valid_path(path) || (body && !content_type))
                return -EINVAL;
        for (const char *c = method; *c; c++)
                if (!is_tchar((unsigned char) *c))
                        return -EINVAL;
        if (content_type)
                for (const char *c = content_type; *c; c++)
                        if (!is_field_char((unsigned char) *c))
                                return -EINVAL;
        if (body)
                n = asprintf(&out, "%s %s HTTP/1.1\r\nHost: rtd\r\nAccept: application/json\r\n"
                                   "Content-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                             method, path, content_type, body_size);
        else
                n = asprintf(&out, "%s %s HTTP/1.1\r\nHost: rtd\r\nAccept: application/json\r\n\r\n", method, path);
        if (n < 0)
                return -ENOMEM;
        head = (size_t) n;
        if (body) {
                char *o = realloc(out, head + body_size + 1);
                if (!o) {
                        free(out);
                        return -ENOMEM;
                }
                out = o;
                memcpy(out + head, body, body_size);
                out[head + body_size] = 0;
        }
        *ret = out;
        *ret_size = head + (body ? body_size : 0);
        return 0;
}

char *http1_escape_query(const char *s) {
        char *out = malloc(strlen(s) * 3 + 1), *o = out;

        if (!out)
                return NULL;
        for (const unsigned char *c = (const unsigned char *) s; *c; c++) {
                if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                    strchr("-._~", *c))
                        *o++ = (char) *c;
                else
                        o += sprintf(o, "%%%02X", *c);
        }
        *o = 0;
        return out;
}
