/* SPDX-License-Identifier: MIT */
/* rtctl's responses: errors a person can act on, JSON output. The transport is transport.c. */
#include <errno.h>
#include <inttypes.h>
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

void ctl_response_done(CtlResponse *r) {
        free(r->body);
        free(r->content_type);
        free(r->location);
        json_decref(r->json);
        *r = (CtlResponse){};
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

int ctl_create(Ctl *c, const char *path, json_t *body, CtlResponse *ret, uint64_t *ret_id) {
        int k = ctl_request(c, "POST", path, body, ret);

        if (k != 0)
                return k;
        if (ret->status != 201) {
                k = ctl_fail(c, ret);
                ctl_response_done(ret);
                return k;
        }
        *ret_id = (uint64_t) json_integer_value(json_object_get(ret->json, "id"));
        return 0;
}

int ctl_print_created(Ctl *c, CtlResponse *r, const char *prefix, uint64_t id) {
        if (c->json)
                ctl_print_json(r);
        else
                printf("%s%" PRIu64 "\n", prefix, id);
        ctl_response_done(r);
        return RTCTL_EXIT_OK;
}

int ctl_follow(Ctl *c, const char *path, CtlEvent on_event, void *userdata, json_t *const *final,
               CtlResponse *refused) {
        unsigned unreachable = 0;

        *refused = (CtlResponse){};
        for (;;) {
                CtlResponse resp;
                int r = ctl_events(c, path, on_event, userdata, &resp);

                if (!*final && r == 0 && resp.status != 200) {
                        *refused = resp;        /* 404/403: the caller explains */
                        return 0;
                }
                ctl_response_done(&resp);
                if (*final)
                        return 0;
                if (r == RTCTL_EXIT_UNREACHABLE && ++unreachable > 120)
                        return r;
                if (r != 0 && r != RTCTL_EXIT_UNREACHABLE)
                        return r;       /* a malformed answer does not get better by asking again */
                usleep(500000);         /* rtd restarting: reconnect */
        }
}
