/* SPDX-License-Identifier: MIT */
/*
 * Deferred answers: a handler that must wait for something the loop does later (a lease is answered once its
 * CPUs are quiet) parks its connection with MHD_suspend_connection(); MHD neither reads nor times it out
 * meanwhile, so the owner bounds the wait itself. The answer resumes it, and MHD calls the access handler again,
 * which queues the answer (http.c).
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdlib.h>

#include "http-deferred.h"

struct HttpDeferred {
        Http *http;
        struct MHD_Connection *connection;
        Response resp;
        bool sent;
        HttpDeferredAbandon on_abandon;
        void *userdata;
        HttpDeferred *prev, *next;
};

static HttpDeferred *pending;   /* parked, of every listener: shutdown answers them */

int http_defer(Response *resp, HttpDeferredAbandon on_abandon, void *userdata, HttpDeferred **ret) {
        HttpDeferred *d = calloc(1, sizeof *d);

        if (!d)
                return -ENOMEM;
        d->resp.status = 500;
        d->on_abandon = on_abandon;
        d->userdata = userdata;
        resp->deferred = d;
        *ret = d;
        return 0;
}

Response *http_deferred_response(HttpDeferred *d) {
        return &d->resp;
}

void http_deferred_send(HttpDeferred *d) {
        if (d->sent)
                return;
        d->sent = true;
        if (d->connection)
                http_resume(d->http, d->connection);
}

void http_deferred_park(HttpDeferred *d, Http *h, struct MHD_Connection *c) {
        d->http = h;
        d->connection = c;
        d->next = pending;
        if (pending)
                pending->prev = d;
        pending = d;
        /* An answer given before the handler returned (nothing to wait for after all) goes out at once. */
        MHD_suspend_connection(c);
        if (d->sent)
                http_resume(h, c);
}

bool http_deferred_sent(const HttpDeferred *d) {
        return d->sent;
}

int http_deferred_queue(HttpDeferred *d) {
        enum MHD_Result ret = http_queue_response(d->connection, &d->resp);

        http_deferred_free(d);
        return ret;
}

void http_deferred_free(HttpDeferred *d) {
        if (!d)
                return;
        if (d->prev)
                d->prev->next = d->next;
        else if (pending == d)
                pending = d->next;
        if (d->next)
                d->next->prev = d->prev;
        if (!d->sent && d->on_abandon)
                d->on_abandon(d, d->userdata);
        http_response_done(&d->resp);
        free(d);
}

unsigned http_deferred_abandon_all(Http *h) {
        unsigned n = 0;

        for (HttpDeferred *d = pending; d; d = d->next) {
                if (d->http != h || d->sent)
                        continue;
                if (d->on_abandon)
                        d->on_abandon(d, d->userdata);
                d->on_abandon = NULL;
                (void) reply_problem(&d->resp, 503, "rtd is stopping",
                                     "rtd stopped before it could answer; ask again once it runs (GET the "
                                     "resource to see whether the request took effect)");
                http_deferred_send(d);
                n++;
        }
        return n;
}
