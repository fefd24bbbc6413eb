/* SPDX-License-Identifier: MIT */
/* http.c's side of deferred answers (http.h, http_defer()): parking a connection, its answer, shutdown. */
#pragma once

#include "http.h"

/* The connection's answer is due: http.c queues d->resp when MHD calls its access handler again. */
void http_deferred_park(HttpDeferred *d, Http *h, struct MHD_Connection *c);
/* Queues a sent answer on its connection and frees d (MHD's access handler, after the resume). */
int http_deferred_queue(HttpDeferred *d);
bool http_deferred_sent(const HttpDeferred *d);
/* The request ended (answered, or closed unanswered): an owner still waiting is told (on_abandon). */
void http_deferred_free(HttpDeferred *d);
/* At shutdown: every answer of h still pending becomes a 503 (its owner told), sent. Returns how many. */
unsigned http_deferred_abandon_all(Http *h);

/* http.c, for the above. */
void http_response_done(Response *r);
enum MHD_Result http_queue_response(struct MHD_Connection *c, Response *r);
void http_resume(Http *h, struct MHD_Connection *c);
