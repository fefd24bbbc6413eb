/* SPDX-License-Identifier: MIT */
/*
 * The request head as raw bytes, judged before libmicrohttpd parses it. libmicrohttpd 0.9.75 picks one of
 * two framings silently (Content-Length or Transfer-Encoding), truncates a header value at a NUL, folds
 * obs-fold lines and decodes %00 and %2F before routing; a request that any two parsers could read
 * differently is refused here instead.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http-framing.h"
#include "shared/macro.h"

#define MAX_METHOD 16

static int refuse(HeadVerdict *v, int status, const char *title, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static int refuse(HeadVerdict *v, int status, const char *title, const char *fmt, ...) {
        va_list ap;

        v->status = status;
        v->title = title;
        va_start(ap, fmt);
        (void) vsnprintf(v->detail, sizeof v->detail, fmt, ap);
        va_end(ap);
        return 0;
}

/* Client bytes for a message: printable ASCII kept, the rest as \xNN, cut at 48 bytes of input. */
static const char *quote(const char *s, size_t n, char buf[static 200]) {
        size_t o = 0;

        for (size_t i = 0; i < n && i < 48; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
                        buf[o++] = (char) c;
                else
                        o += (size_t) snprintf(buf + o, 5, "\\x%02x", c);
        }
        if (n > 48)
                o += (size_t) snprintf(buf + o, 4, "...");
        buf[o] = 0;
        return buf;
}

/* RFC 9110 §5.6.2 token characters. */
static bool is_tchar(unsigned char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Length of the UTF-8 sequence at s (at most n bytes), or 0 if it is not valid (overlong, surrogate, >U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n) {
        unsigned c = s[0], len, cp;

        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                len = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
                len = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
                len = 4, cp = c & 0x07;
        else
                return 0;
        if (n < len)
                return 0;
        for (unsigned i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

bool http_utf8_valid(const char *s, size_t n) {
        for (size_t i = 0; i < n;) {
                size_t l = utf8_seq((const unsigned char *) s + i, n - i);
                if (l == 0)
                        return false;
                i += l;
        }
        return true;
}

char *http_utf8_escape(const char *s) {
        size_t n = strlen(s), o = 0;
        char *r = malloc(n * 4 + 1);

        if (!r)
                return NULL;
        for (size_t i = 0; i < n;) {
                const unsigned char *p = (const unsigned char *) s + i;
                size_t l = utf8_seq(p, n - i);
                /* C1 controls are U+0080..U+009F: two bytes, 0xc2 0x80..0x9f. */
                bool control = l == 1 ? (p[0] < 0x20 && p[0] != '\t') || p[0] == 0x7f : l == 2 && p[0] == 0xc2 && p[1] < 0xa0;

                if (l == 0 || control) {
                        l = l ?: 1;
                        for (size_t k = 0; k < l; k++)
                                o += (size_t) sprintf(r + o, "\\x%02x", p[k]);
                } else {
                        memcpy(r + o, p, l);
                        o += l;
                }
                i += l;
        }
        r[o] = 0;
        return r;
}

static int hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        c = (char) (c | 0x20);
        return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/*
 * Percent-decode one path segment or query component into out (at least n bytes) and check it. In a
 * path segment an encoded '/' would move the segment boundary after routing; NUL cuts C strings short.
 */
static int check_component(const char *s, size_t n, bool path, HeadVerdict *v, char *out) {
        char q[200];
        size_t o = 0;

        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c == '%') {
                        int hi = i + 2 < n ? hexval(s[i + 1]) : -1, lo = i + 2 < n ? hexval(s[i + 2]) : -1;

                        if (hi < 0 || lo < 0)
                                return refuse(v, 400, "Malformed URL", "'%%' must be followed by two hex digits in %s",
                                              quote(s, n, q));
                        c = (unsigned char) (hi << 4 | lo);
                        i += 2;
                        if (c == 0)
                                return refuse(v, 400, "Malformed URL", "%%00 (NUL) is not allowed in %s",
                                              quote(s, n, q));
                        if (path && c == '/')
                                return refuse(v, 400, "Malformed URL",
                                              "%%2F inside a path segment is not allowed: %s", quote(s, n, q));
                }
                if (path && (c < 0x20 || c == 0x7f))
                        return refuse(v, 400, "Malformed URL", "control character 0x%02x in the path segment %s",
                                      c, quote(s, n, q));
                out[o++] = (char) c;
        }
        if (!http_utf8_valid(out, o))
                return refuse(v, 400, "Malformed URL", "%s does not decode to valid UTF-8", quote(s, n, q));
        return 1;
}

static int check_target(const char *t, size_t n, HeadVerdict *v) {
        _cleanup_free_ char *out = malloc(n + 1);
        const char *q = memchr(t, '?', n), *end = q ?: t + n;
        char buf[200];
        int r;

        if (!out)
                return -ENOMEM;
        if (n == 0 || t[0] != '/')
                return refuse(v, 400, "Malformed URL", "the request target must be a path starting with '/', not %s",
                              quote(t, n, buf));
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) t[i] <= 0x20 || (unsigned char) t[i] >= 0x7f || t[i] == '#')
                        return refuse(v, 400, "Malformed URL",
                                      "byte 0x%02x at offset %zu of the URL must be percent-encoded",
                                      (unsigned char) t[i], i);
        for (const char *seg = t + 1; seg <= end;) {
                const char *slash = memchr(seg, '/', (size_t) (end - seg));
                const char *e = slash ?: end;
                r = check_component(seg, (size_t) (e - seg), true, v, out);
                if (r <= 0)
                        return r;
                seg = e + 1;
        }
        for (const char *c = q ? q + 1 : NULL; c && c <= t + n;) {
                const char *amp = memchr(c, '&', (size_t) (t + n - c));
                const char *e = amp ?: t + n;
                r = check_component(c, (size_t) (e - c), false, v, out);
                if (r <= 0)
                        return r;
                c = e + 1;
        }
        return 1;
}

/*
 * Host must name this machine's loopback (localhost, 127.0.0.0/8 or ::1) or the listener's own address as a
 * literal, with an optional port. A name other than localhost is never taken: that is what a DNS rebinding
 * page sends, while an address literal in Host makes the browser's origin that address itself.
 */
static bool host_is_own(const char *h, size_t n, const char *own_addr) {
        char name[64];
        const char *port = NULL;
        struct in6_addr a6;
        struct in_addr a4;

        if (n > 0 && h[0] == '[') {
                const char *close = memchr(h, ']', n);
                if (!close || (size_t) (close - h - 1) >= sizeof name)
                        return false;
                memcpy(name, h + 1, (size_t) (close - h - 1));
                name[close - h - 1] = 0;
                if (close + 1 < h + n) {
                        if (close[1] != ':')
                                return false;
                        port = close + 2;
                }
                if (port)
                        for (const char *p = port; p < h + n; p++)
                                if (*p < '0' || *p > '9')
                                        return false;
                if (own_addr && streq(name, own_addr))
                        return true;
                return inet_pton(AF_INET6, name, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
        }
        const char *colon = memchr(h, ':', n);
        size_t hl = colon ? (size_t) (colon - h) : n;
        if (hl == 0 || hl >= sizeof name)
                return false;
        if (colon) {
                if (colon + 1 == h + n)
                        return false;
                for (const char *p = colon + 1; p < h + n; p++)
                        if (*p < '0' || *p > '9')
                                return false;
        }
        memcpy(name, h, hl);
        name[hl] = 0;
        if (strcasecmp(name, "localhost") == 0 || strcasecmp(name, "localhost.") == 0)
                return true;
        if (own_addr && streq(name, own_addr))
                return true;
        return inet_pton(AF_INET, name, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

typedef struct Fields {
        unsigned n_cl, n_te, n_host, n_expect;
        uint64_t content_length;
        bool chunked;
        const char *host, *expect;
        size_t host_len, expect_len;
} Fields;

static bool value_eq(const char *v, size_t n, const char *s) {
        return n == strlen(s) && strncasecmp(v, s, n) == 0;
}

static int check_field(const char *line, size_t n, Fields *f, HeadVerdict *v) {
        const char *colon = memchr(line, ':', n), *val, *end = line + n;
        char q[200];

        if (line[0] == ' ' || line[0] == '\t')
                return refuse(v, 400, "Malformed header", "obsolete line folding (a line starting with white space) "
                              "is not accepted: %s", quote(line, n, q));
        if (!colon)
                return refuse(v, 400, "Malformed header", "header line without ':': %s", quote(line, n, q));
        if (colon == line)
                return refuse(v, 400, "Malformed header", "empty header name: %s", quote(line, n, q));
        for (const char *p = line; p < colon; p++)
                if (!is_tchar((unsigned char) *p))
                        return refuse(v, 400, "Malformed header",
                                      "byte 0x%02x in the header name %s (no white space or control bytes before ':')",
                                      (unsigned char) *p, quote(line, (size_t) (colon - line), q));
        for (const char *p = colon + 1; p < end; p++) {
                unsigned char c = (unsigned char) *p;
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return refuse(v, 400, "Malformed header", "control byte 0x%02x in the value of %s", c,
                                      quote(line, (size_t) (colon - line), q));
        }
        val = colon + 1;
        while (val < end && (*val == ' ' || *val == '\t'))
                val++;
        while (end > val && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
        if (!http_utf8_valid(val, (size_t) (end - val)))
                return refuse(v, 400, "Malformed header", "the value of %s is not valid UTF-8",
                              quote(line, (size_t) (colon - line), q));

        size_t name_len = (size_t) (colon - line), vl = (size_t) (end - val);
        if (name_len == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
                uint64_t x = 0;
                if (++f->n_cl > 1)
                        return refuse(v, 400, "Ambiguous framing",
                                      "Content-Length appears more than once; send it once (RFC 9112 section 6.3)");
                if (vl == 0 || vl > 19)
                        return refuse(v, 400, "Malformed header", "Content-Length must be 1 to 19 digits, not %s",
                                      quote(val, vl, q));
                for (size_t i = 0; i < vl; i++) {
                        if (val[i] < '0' || val[i] > '9')
                                return refuse(v, 400, "Malformed header", "Content-Length must be digits only, not %s",
                                              quote(val, vl, q));
                        x = x * 10 + (uint64_t) (val[i] - '0');
                }
                f->content_length = x;
        } else if (name_len == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0) {
                if (++f->n_te > 1)
                        return refuse(v, 400, "Ambiguous framing", "Transfer-Encoding appears more than once");
                if (!value_eq(val, vl, "chunked"))
                        return refuse(v, 400, "Unsupported framing",
                                      "Transfer-Encoding must be exactly 'chunked', not %s", quote(val, vl, q));
                f->chunked = true;
        } else if (name_len == 4 && strncasecmp(line, "Host", 4) == 0) {
                if (++f->n_host > 1)
                        return refuse(v, 400, "Malformed header", "Host appears more than once");
                f->host = val;
                f->host_len = vl;
        } else if (name_len == 6 && strncasecmp(line, "Expect", 6) == 0) {
                f->n_expect++;
                f->expect = val;
                f->expect_len = vl;
        }
        return 1;
}

int http_head_check(const char *buf, size_t n, const HeadLimits *lim, HeadVerdict *v) {
        Fields f = {};
        size_t pos = 0;
        unsigned n_fields = 0;
        bool http10 = false;
        char q[200];
        int r;

        *v = (HeadVerdict){};
        for (unsigned line_no = 0;; line_no++) {
                const char *nl = memchr(buf + pos, '\n', n - pos);
                const char *line = buf + pos, *cr;
                size_t len;

                if (!nl) {
                        /* Incomplete: judge the size now, so a client cannot stream an endless head. */
                        if (line_no == 0 && n > lim->max_uri + MAX_METHOD + 12)
                                return refuse(v, 414, "URI Too Long",
                                              "the request line exceeds %zu bytes (MaxURIBytes=)", lim->max_uri);
                        if (n > lim->max_head)
                                return refuse(v, 431, "Request Header Fields Too Large",
                                              "the request head exceeds %zu bytes (MaxHeaderBytes=)", lim->max_head);
                        return -EAGAIN;
                }
                if (nl == line || nl[-1] != '\r')
                        return refuse(v, 400, "Malformed request", "line %u ends in a bare LF; lines end in CRLF",
                                      line_no + 1);
                len = (size_t) (nl - 1 - line);
                cr = memchr(line, '\r', len);
                if (cr)
                        return refuse(v, 400, "Malformed request", "bare CR in line %u", line_no + 1);
                if ((size_t) (nl + 1 - buf) > lim->max_head)
                        return line_no == 0 ? refuse(v, 414, "URI Too Long", "the request line exceeds "
                                                     "MaxHeaderBytes=%zu", lim->max_head) : refuse(v, 431, "Request Header Fields Too Large",
                                      "the request head exceeds %zu bytes (MaxHeaderBytes=)", lim->max_head);
                pos = (size_t) (nl + 1 - buf);

                if (line_no == 0) {
                        const char *sp1 = memchr(line, ' ', len), *sp2;
                        if (!sp1 || sp1 == line || sp1 - line > MAX_METHOD)
                                return refuse(v, 400, "Malformed request", "the request line must be 'METHOD "
                                              "/path HTTP/1.1', not %s", quote(line, len, q));
                        for (const char *p = line; p < sp1; p++)
                                if (!is_tchar((unsigned char) *p))
                                        return refuse(v, 400, "Malformed request", "invalid method %s",
                                                      quote(line, (size_t) (sp1 - line), q));
                        sp2 = memrchr(sp1 + 1, ' ', (size_t) (line + len - sp1 - 1));
                        if (!sp2 || sp2 == sp1 + 1)
                                return refuse(v, 400, "Malformed request", "the request line must be 'METHOD "
                                              "/path HTTP/1.1', not %s", quote(line, len, q));
                        if ((size_t) (sp2 - sp1 - 1) > lim->max_uri)
                                return refuse(v, 414, "URI Too Long", "the URL exceeds %zu bytes (MaxURIBytes=)",
                                              lim->max_uri);
                        const char *ver = sp2 + 1;
                        size_t vlen = (size_t) (line + len - ver);
                        if (vlen == 8 && memcmp(ver, "HTTP/1.0", 8) == 0)
                                http10 = true;
                        else if (vlen != 8 || memcmp(ver, "HTTP/1.1", 8) != 0)
                                return refuse(v, 400, "Malformed request", "the protocol must be HTTP/1.1 or "
                                              "HTTP/1.0, not %s", quote(ver, vlen, q));
                        r = check_target(sp1 + 1, (size_t) (sp2 - sp1 - 1), v);
                        if (r <= 0)
                                return r;
                        continue;
                }
                if (len == 0)
                        break;
                if (++n_fields > HTTP_MAX_HEADER_FIELDS)
                        return refuse(v, 431, "Request Header Fields Too Large", "more than %u header fields",
                                      HTTP_MAX_HEADER_FIELDS);
                r = check_field(line, len, &f, v);
                if (r <= 0)
                        return r;
        }

        if (f.n_cl > 0 && f.n_te > 0)
                return refuse(v, 400, "Ambiguous framing", "Content-Length and Transfer-Encoding together; send "
                              "one of them (RFC 9112 section 6.3)");
        if (f.n_te > 0 && http10)
                return refuse(v, 400, "Ambiguous framing", "Transfer-Encoding is not defined for HTTP/1.0");
        if (f.n_host == 0 && !http10)
                return refuse(v, 400, "Malformed request", "HTTP/1.1 requests need a Host header");
        if (lim->loopback_host && (f.n_host == 0 || !host_is_own(f.host, f.host_len, lim->own_addr)))
                return refuse(v, 421, "Misdirected Request", "this listener answers only to a loopback Host "
                              "(localhost, 127.0.0.1 or [::1]) or its own address, not %s", f.host ? quote(f.host, f.host_len, q) : "none");
        if (f.n_expect > 1 || (f.n_expect == 1 && !value_eq(f.expect, f.expect_len, "100-continue")))
                return refuse(v, 417, "Expectation Failed", "the only expectation understood is 'Expect: 100-continue'");
        if (f.content_length > lim->max_body || (f.chunked && lim->max_body == 0))
                return refuse(v, 413, "Content Too Large",
                              lim->max_body ? "the body may have at most %" PRIu64 " bytes (MaxRequestBodyBytes=)"
                                            : "no request on this listener takes a body (%" PRIu64 " bytes)",
                              lim->max_body);
        v->head_size = pos;
        return 0;
}
