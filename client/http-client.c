/* SPDX-License-Identifier: MIT */
/* rtctl's HTTP client: libcurl over the unix socket, with errors a person can act on. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rtctl.h"
#include "shared/macro.h"

typedef struct Buffer {
        char *data;
        size_t size;
        CtlChunk on_chunk;
        void *userdata;
        bool stopped;
} Buffer;

void ctl_response_done(CtlResponse *r) {
        free(r->body);
        free(r->content_type);
        free(r->location);
        json_decref(r->json);
        *r = (CtlResponse){};
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata) {
        Buffer *b = userdata;
        size_t n = size * nmemb;
        char *nd;

        if (b->on_chunk) {
                if (!b->on_chunk(ptr, n, b->userdata)) {
                        b->stopped = true;
                        return 0;       /* aborts the transfer */
                }
                return n;
        }
        nd = realloc(b->data, b->size + n + 1);
        if (!nd)
                return 0;
        memcpy(nd + b->size, ptr, n);
        b->size += n;
        nd[b->size] = 0;
        b->data = nd;
        return n;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *userdata) {
        CtlResponse *r = userdata;
        size_t n = size * nitems;
        char **field = NULL;
        size_t skip = 0;

        if (n > 13 && strncasecmp(buf, "Content-Type:", 13) == 0)
                field = &r->content_type, skip = 13;
        else if (n > 9 && strncasecmp(buf, "Location:", 9) == 0)
                field = &r->location, skip = 9;
        if (field) {
                const char *v = buf + skip;
                size_t len = n - skip;
                while (len > 0 && (*v == ' ' || *v == '\t'))
                        v++, len--;
                while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n'))
                        len--;
                free(*field);
                *field = strndup(v, len);
        }
        return n;
}

/* Why could we not connect? Say it in terms of what to do. */
static int explain_unreachable(Ctl *c) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;
        int fd, e = 0;

        if (stat(c->socket_path, &st) < 0) {
                if (errno == EACCES)
                        fprintf(stderr, "rtctl: cannot reach %s: permission denied on a parent directory.\n",
                                c->socket_path);
                else
                        fprintf(stderr,
                                "rtctl: cannot reach rtd: %s does not exist. Is rtd running? "
                                "(systemctl start rtd.socket, or rtd --config FILE; --socket/RTD_SOCKET select "
                                "another socket)\n",
                                c->socket_path);
                return RTCTL_EXIT_UNREACHABLE;
        }
        strncpy(sa.sun_path, c->socket_path, sizeof sa.sun_path - 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                e = errno;
        if (fd >= 0)
                close(fd);
        if (e == EACCES || e == EPERM)
                fprintf(stderr,
                        "rtctl: permission denied on %s. Only root and members of rtd's group may use it: ask an "
                        "administrator to add you (usermod -aG rtd $USER) and log in again.\n",
                        c->socket_path);
        else if (e == ECONNREFUSED)
                fprintf(stderr, "rtctl: %s exists but nobody is listening: rtd is not running (stale socket). "
                                "Start it with 'systemctl start rtd'.\n",
                        c->socket_path);
        else
                fprintf(stderr, "rtctl: cannot talk to rtd on %s: %s\n", c->socket_path,
                        e ? strerror(e) : "connection failed");
        return RTCTL_EXIT_UNREACHABLE;
}

static int perform(Ctl *c, const char *method, const char *path, json_t *body, Buffer *buf, CtlResponse *ret) {
        _cleanup_free_ char *url = NULL, *payload = NULL;
        struct curl_slist *headers = NULL;
        CURL *curl;
        CURLcode cc;
        int r = 0;

        *ret = (CtlResponse){};
        if (asprintf(&url, "http://rtd%s", path) < 0)
                return RTCTL_EXIT_REFUSED;
        curl = curl_easy_init();
        if (!curl)
                return RTCTL_EXIT_REFUSED;
        curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, c->socket_path);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, buf);
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, ret);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        headers = curl_slist_append(headers, "Accept: application/json");
        if (body) {
                payload = json_dumps(body, JSON_COMPACT);
                if (!payload) {
                        curl_easy_cleanup(curl);
                        return RTCTL_EXIT_REFUSED;
                }
                headers = curl_slist_append(headers, "Content-Type: application/json");
                curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload);
                curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long) strlen(payload));
        }
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

        cc = curl_easy_perform(curl);
        if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST)
                r = explain_unreachable(c);
        else if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && buf->stopped)) {
                fprintf(stderr, "rtctl: request to rtd failed: %s\n", curl_easy_strerror(cc));
                r = RTCTL_EXIT_UNREACHABLE;
        } else
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &ret->status);
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
        return r;
}

int ctl_request(Ctl *c, const char *method, const char *path, json_t *body, CtlResponse *ret) {
        Buffer buf = {};
        int r;

        r = perform(c, method, path, body, &buf, ret);
        if (r != 0) {
                free(buf.data);
                ctl_response_done(ret);
                return r;
        }
        ret->body = buf.data;
        ret->size = buf.size;
        if (ret->body && ret->content_type && strstr(ret->content_type, "json"))
                ret->json = json_loadb(ret->body, ret->size, 0, NULL);
        return 0;
}

int ctl_stream(Ctl *c, const char *path, CtlChunk on_chunk, void *userdata, CtlResponse *ret) {
        Buffer buf = { .on_chunk = on_chunk, .userdata = userdata };
        return perform(c, "GET", path, NULL, &buf, ret);
}

int ctl_fail(Ctl *c, CtlResponse *r) {
        const char *title = NULL, *detail = NULL;

        if (r->json) {
                title = json_string_value(json_object_get(r->json, "title"));
                detail = json_string_value(json_object_get(r->json, "detail"));
        }
        if (c->json && r->body)
                fprintf(stderr, "%s\n", r->body);
        else if (title || detail)
                fprintf(stderr, "rtctl: %s%s%s\n", strempty(title), title && detail ? ": " : "", strempty(detail));
        else
                fprintf(stderr, "rtctl: rtd answered HTTP %ld%s%s\n", r->status, r->body ? ": " : "",
                        strempty(r->body));
        return RTCTL_EXIT_REFUSED;
}

void ctl_dump_json(json_t *j) {
        json_dumpf(j, stdout, JSON_INDENT(2));
        putchar('\n');
}

int ctl_print_json(CtlResponse *r) {
        if (r->json)
                ctl_dump_json(r->json);
        else if (r->body)
                printf("%s\n", r->body);
        return RTCTL_EXIT_OK;
}

int ctl_get_json(Ctl *c, const char *path, json_t **ret) {
        CtlResponse r;
        int k;

        k = ctl_request(c, "GET", path, NULL, &r);
        if (k != 0)
                return k;
        if (r.status < 200 || r.status >= 300 || !r.json) {
                k = r.status >= 200 && r.status < 300 ? (fprintf(stderr, "rtctl: rtd sent no JSON\n"),
                                                         RTCTL_EXIT_REFUSED)
                                                      : ctl_fail(c, &r);
                ctl_response_done(&r);
                return k;
        }
        *ret = json_incref(r.json);
        ctl_response_done(&r);
        return 0;
}
