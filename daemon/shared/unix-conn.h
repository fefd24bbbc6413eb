/* SPDX-License-Identifier: MIT */
/*
 * A client's side of a unix stream socket with every wait bounded: rtctl and the SPANK plugin share it (a
 * client of rtd must report an rtd that stopped answering, never hang). libc only.
 */
#pragma once

#include <stddef.h>

#include "http1.h"

/* CLOCK_MONOTONIC in milliseconds. */
long long unix_conn_now_ms(void);

/*
 * A connected socket to path, or -errno (-ENAMETOOLONG for a path no sockaddr_un holds). connect() blocks on
 * a listener whose backlog is full: timeout_ms bounds that (SO_SNDTIMEO; it then fails with EAGAIN).
 */
int unix_conn_open(const char *path, int timeout_ms);

/* Wait until fd is ready for events: 1 ready, 0 timed out, -errno. ms < 0 waits for ever. */
int unix_conn_wait(int fd, short events, int ms);

/* Send all of data, waiting at most ms each time the socket is full: 0, -ETIMEDOUT or -errno (-EPIPE). */
int unix_conn_send_all(int fd, const char *data, size_t size, int ms);

/*
 * Append data to a NUL-terminated growing buffer (*buf of *size bytes in *alloc), keeping it at most max
 * bytes: 0, -EFBIG past max, -ENOMEM.
 */
int unix_conn_append(char **buf, size_t *size, size_t *alloc, const char *data, size_t n, size_t max);

/*
 * Send one request on fd and feed the answer to p until it is complete (1), or fails (-errno: -ETIMEDOUT,
 * -EPIPE for a connection closed mid-answer, -EBADMSG from the parser, a callback's error). head_ms bounds the
 * send and each wait until the body starts, body_idle_ms each wait once it has (< 0: none). *ret_got (may
 * be NULL): the bytes read, 0 when the peer answered nothing (a kept connection it had closed).
 */
int unix_conn_exchange(int fd, const char *req, size_t req_size, Http1Parser *p, int head_ms, int body_idle_ms,
                       size_t *ret_got);
