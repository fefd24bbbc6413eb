/* SPDX-License-Identifier: MIT */
/* The daemon's listening sockets: taken from socket activation by name, or bound from config. */
#pragma once

#include "core/config.h"

typedef struct Listeners {
        int control;            /* AF_UNIX stream, -EBADF if none */
        int metrics;            /* TCP, -EBADF if none */
        bool activated;         /* control came from systemd */
} Listeners;

/* Take fds passed by systemd (names "control" and "metrics"; an unnamed first fd is taken as control). */
int listeners_from_activation(Listeners *l);
/*
 * Bind the unix control socket with the configured mode and group. A stale socket file (nobody accepts)
 * is replaced; a live one is not: returns -EADDRINUSE and *ret_holder is the pid that holds it.
 */
int listen_unix(const RtdConfig *c, int *ret_fd, pid_t *ret_holder);
/* Bind "HOST:PORT" (IPv4 or [IPv6]). */
int listen_tcp(const char *address, int *ret_fd);
void listeners_close(Listeners *l);
/*
 * rtd could not start: answer each client that socket activation queued for it with a 503 problem saying
 * why. systemd keeps the socket and its queue when rtd exits, and a queued client would otherwise wait for
 * its own timeout (rtctl: 60 s) for an rtd that is not coming.
 */
void listeners_refuse_waiting(const char *detail);
