/* SPDX-License-Identifier: MIT */
/*
 * The front door of a listener: rtd accepts each connection itself, learns who is calling (SO_PEERCRED at
 * accept), applies the per-uid and reserved-admin connection caps, reads the request head with MSG_PEEK
 * under a deadline, judges its framing (http-framing.h), and only then hands the socket to libmicrohttpd.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "http.h"

typedef struct HttpGate HttpGate;
typedef struct GateConn GateConn;
struct MHD_Daemon;

/* Called after a connection was handed to MHD, so MHD runs for it on this loop turn. */
typedef void (*GateKick)(void *userdata);

/* Takes fd (the listening socket) on success. */
int http_gate_new(Manager *m, int fd, bool tcp, struct MHD_Daemon *daemon, GateKick kick, void *userdata,
                  HttpGate **ret);
/* Leave new connections in the listening socket's backlog (a re-exec hands it on); open ones go on. */
void http_gate_stop_accepting(HttpGate *g);
/* Closes pending connections and the listening socket; call after MHD_stop_daemon(). */
HttpGate *http_gate_free(HttpGate *g);

/* For MHD's connection notifications: the GateConn being handed over, and its end. */
GateConn *http_gate_handing(HttpGate *g);
void http_gate_conn_closed(GateConn *c);

const Caller *gate_conn_caller(const GateConn *c);

/* Count one more stream for this connection's uid: -EBUSY when MaxStreamsPerUser= is reached. */
int gate_stream_acquire(GateConn *c, const char **ret_why);
void gate_stream_release(HttpGate *g, uid_t uid);

/* Write a complete problem+json response with "Connection: close" straight to fd (best effort). */
void http_write_problem(int fd, int status, const char *title, const char *detail);
