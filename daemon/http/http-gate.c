/* SPDX-License-Identifier: MIT */
/*
 * The front door of a listener. libmicrohttpd's own accept knows neither who is calling nor what a
 * request head looks like before it has parsed it its own way, and its connection limit is global: one
 * user could take every slot. So rtd accepts, counts per uid (slots kept for root and admins), reads the
 * head with MSG_PEEK (the bytes stay in the socket for MHD), judges it, and hands over the socket.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <microhttpd.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "core/manager.h"
#include "http-framing.h"
#include "http-gate.h"
#include "shared/log.h"

#define ACCEPT_BATCH 64
/* A head that arrives in more pieces than this is refused: each piece costs a re-read of all before it. */
#define MAX_PEEKS 64
#define ACCEPT_RETRY_USEC (100 * 1000)

typedef struct UidCount {
        uid_t uid;
        unsigned connections, streams;
} UidCount;

struct GateConn {
        HttpGate *gate;
        int fd;                         /* owned while pending; MHD owns it once handed over */
        Caller caller;
        bool pending;
        sd_event_source *io, *timer;
        unsigned peeks;
        struct sockaddr_storage addr;
        socklen_t addrlen;
        GateConn *prev, *next;          /* pending connections, oldest first */
};

struct HttpGate {
        Manager *manager;
        int fd;
        bool tcp;
        struct MHD_Daemon *daemon;
        GateKick kick;
        void *userdata;
        sd_event_source *accept_io, *retry;
        unsigned n_conns;
        GateConn *pending_head, *pending_tail, *handing;
        UidCount *uids;
        size_t n_uids;
};

static UidCount *uid_find(HttpGate *g, uid_t uid, bool create) {
        for (size_t i = 0; i < g->n_uids; i++)
                if (g->uids[i].uid == uid)
                        return &g->uids[i];
        if (!create)
                return NULL;
        UidCount *n = reallocarray(g->uids, g->n_uids + 1, sizeof *n);
        if (!n)
                return NULL;
        g->uids = n;
        n[g->n_uids] = (UidCount){ .uid = uid };
        return &n[g->n_uids++];
}

static void uid_put(HttpGate *g, UidCount *u) {
        if (u->connections == 0 && u->streams == 0)
                *u = g->uids[--g->n_uids];
}

void http_write_problem(int fd, int status, const char *title, const char *detail) {
        _cleanup_free_ char *body = http_problem_json(status, title, detail), *msg = NULL;
        int n;

        if (!body)
                return;
        n = asprintf(&msg, "HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\nContent-Length: %zu\r\n"
                           "Cache-Control: no-store\r\nConnection: close\r\n\r\n%s",
                     status, http_status_title(status), strlen(body), body);
        if (n < 0)
                return;
        /* Non-blocking and small: it fits a fresh socket's buffer; a client that filled it gets nothing. */
        (void) send(fd, msg, (size_t) n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* End a connection the gate still owns; over TCP, read what is there first so close() does not send RST. */
static void close_refused(HttpGate *g, int fd) {
        char sink[4096];

        (void) shutdown(fd, SHUT_WR);
        if (g->tcp)
                for (int i = 0; i < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
                        ;
        (void) close(fd);
}

static void pending_unlink(GateConn *c) {
        HttpGate *g = c->gate;

        if (!c->pending)
                return;
        if (c->prev)
                c->prev->next = c->next;
        else
                g->pending_head = c->next;
        if (c->next)
                c->next->prev = c->prev;
        else
                g->pending_tail = c->prev;
        c->pending = false;
        c->prev = c->next = NULL;
}

static void conn_free(GateConn *c) {
        HttpGate *g = c->gate;
        UidCount *u;

        pending_unlink(c);
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timer);
        if (c->fd >= 0)
                close_refused(g, c->fd);
        g->n_conns--;
        u = g->tcp ? NULL : uid_find(g, c->caller.uid, false);
        if (u) {
                u->connections--;
                uid_put(g, u);
        }
        free(c->caller.user);
        free(c);
}

static void conn_refuse(GateConn *c, const HeadVerdict *v) {
        log_debug("Refusing a request from %s: %d %s", c->caller.user, v->status, v->detail);
        http_write_problem(c->fd, v->status, v->title, v->detail);
        conn_free(c);
}

/* Who is on the other end of a unix socket, and what may they do. */
static bool in_group(gid_t gid, const gid_t *groups, int n_groups, const char *group) {
        struct group *gr;

        if (!group)
                return false;
        gr = getgrnam(group);
        if (!gr)
                return false;
        if (gid == gr->gr_gid)
                return true;
        for (int i = 0; i < n_groups; i++)
                if (groups[i] == gr->gr_gid)
                        return true;
        return false;
}

static int identify(HttpGate *g, int fd, Caller *ret) {
        const RtdConfig *cfg = g->manager->config;
        struct ucred cred;
        socklen_t len = sizeof cred;
        gid_t groups[256];
        socklen_t glen = sizeof groups;
        int n_groups;
        struct passwd *pw;

        *ret = (Caller){ .role = ROLE_NONE, .uid = (uid_t) -1, .gid = (gid_t) -1 };
        if (g->tcp) {
                ret->role = ROLE_READONLY;
                ret->user = strdup("-");
                return ret->user ? 0 : -ENOMEM;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        ret->uid = cred.uid;
        ret->gid = cred.gid;
        ret->pid = cred.pid;

        /* The process's actual supplementary groups (not /etc/group's view of the user). */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) < 0)
                n_groups = 0;
        else
                n_groups = (int) (glen / sizeof(gid_t));

        pw = getpwuid(cred.uid);
        if (pw)
                ret->user = strdup(pw->pw_name);
        else if (asprintf(&ret->user, "%u", (unsigned) cred.uid) < 0)
                ret->user = NULL;
        if (!ret->user)
                return -ENOMEM;

        if (cred.uid == 0 || in_group(cred.gid, groups, n_groups, cfg->admin_group))
                ret->role = ROLE_ADMIN;
        else if (in_group(cred.gid, groups, n_groups, cfg->submit_group))
                ret->role = ROLE_USER;
        ret->lease = in_group(cred.gid, groups, n_groups, cfg->lease_group);
        return 0;
}

static void hand_over(GateConn *c) {
        HttpGate *g = c->gate;
        int fd = c->fd;

        c->io = sd_event_source_disable_unref(c->io);
        c->timer = sd_event_source_disable_unref(c->timer);
        pending_unlink(c);
        c->fd = -EBADF;

        /* MHD calls our notify callback (STARTED) from inside MHD_add_connection and takes c from there. */
        g->handing = c;
        if (MHD_add_connection(g->daemon, fd, (const struct sockaddr *) &c->addr, c->addrlen) != MHD_YES) {
                /* MHD closed fd. */
                g->handing = NULL;
                log_debug("libmicrohttpd did not take a connection: %m");
                conn_free(c);
                return;
        }
        g->handing = NULL;
        g->kick(g->userdata);
}

static HeadLimits head_limits(const HttpGate *g) {
        const RtdConfig *cfg = g->manager->config;

        return (HeadLimits){
                .max_uri = cfg->max_uri_bytes,
                .max_head = cfg->max_header_bytes,
                .max_body = g->tcp ? 0 : cfg->max_body_bytes,
                .loopback_host = g->tcp,
        };
}

/* The address a TCP connection came in on, as a literal ("10.1.0.17", "fd00::1"), or NULL. */
static const char *local_address(int fd, char *buf, size_t size) {
        struct sockaddr_storage a;
        socklen_t len = sizeof a;

        if (getsockname(fd, (struct sockaddr *) &a, &len) < 0)
                return NULL;
        if (a.ss_family == AF_INET)
                return inet_ntop(AF_INET, &((struct sockaddr_in *) &a)->sin_addr, buf, size);
        if (a.ss_family == AF_INET6)
                return inet_ntop(AF_INET6, &((struct sockaddr_in6 *) &a)->sin6_addr, buf, size);
        return NULL;
}

static int on_head_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        GateConn *c = userdata;
        HeadLimits lim = head_limits(c->gate);
        char own[INET6_ADDRSTRLEN];
        _cleanup_free_ char *buf = NULL;
        HeadVerdict v;
        int avail = 0, r;
        ssize_t n;

        if (lim.loopback_host)
                lim.own_addr = local_address(fd, own, sizeof own);
        if (ioctl(fd, FIONREAD, &avail) < 0 || avail <= 0) {
                /* Nothing to read: the client went away (or only shut its side) before sending a head. */
                if (revents & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))
                        conn_free(c);
                return 0;
        }
        size_t want = MIN((size_t) avail, lim.max_head + 1);
        buf = malloc(want);
        if (!buf)
                return 0;       /* try on the next event or time out */
        n = recv(fd, buf, want, MSG_PEEK | MSG_DONTWAIT);
        if (n <= 0) {
                conn_free(c);
                return 0;
        }
        r = http_head_check(buf, (size_t) n, &lim, &v);
        if (r == -EAGAIN) {
                if (++c->peeks > MAX_PEEKS) {
                        v = (HeadVerdict){ .status = 400, .title = "Malformed request" };
                        (void) snprintf(v.detail, sizeof v.detail,
                                        "the request head arrived in more than %d pieces; send it at once", MAX_PEEKS);
                        conn_refuse(c, &v);
                } else if (revents & (EPOLLHUP | EPOLLRDHUP))
                        conn_free(c);   /* the rest can never come */
                return 0;
        }
        if (r < 0) {
                conn_free(c);
                return 0;
        }
        if (v.status != 0) {
                conn_refuse(c, &v);
                return 0;
        }
        hand_over(c);
        return 0;
}

static int on_head_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        GateConn *c = userdata;
        HeadVerdict v = { .status = 408, .title = "Request Timeout" };

        (void) snprintf(v.detail, sizeof v.detail, "the request head did not arrive within %u s (HeaderTimeoutSec=)",
                        c->gate->manager->config->header_timeout_sec);
        conn_refuse(c, &v);
        return 0;
}

/* May this caller have one more connection? Fills v with the refusal if not. */
static bool admit(HttpGate *g, const Caller *caller, HeadVerdict *v) {
        const RtdConfig *cfg = g->manager->config;
        unsigned max = g->tcp ? cfg->metrics_max_connections : cfg->max_connections;
        UidCount *u;

        if (g->n_conns >= max && g->tcp && g->pending_head) {
                /* The metrics listener cannot tell local users apart: a full house of silent connections
                 * gives way to a new one, oldest first, so a scraper always gets in. */
                conn_free(g->pending_head);
        }
        if (g->n_conns >= max) {
                *v = (HeadVerdict){ .status = 503, .title = "Service Unavailable" };
                (void) snprintf(v->detail, sizeof v->detail, "all %u connections are in use (%s=); try again later",
                                max, g->tcp ? "MetricsMaxConnections" : "MaxConnections");
                return false;
        }
        if (g->tcp || caller->role == ROLE_ADMIN)
                return true;
        /* At most half: a small MaxConnections= keeps room for everybody else too. */
        unsigned reserved = MIN(cfg->reserved_admin_connections, max / 2);
        if (g->n_conns + reserved >= max) {
                *v = (HeadVerdict){ .status = 503, .title = "Service Unavailable" };
                (void) snprintf(v->detail, sizeof v->detail, "the last %u of %u connections are kept for root and "
                                "administrators (ReservedAdminConnections=); try again later", reserved, max);
                return false;
        }
        u = uid_find(g, caller->uid, false);
        if (u && u->connections >= cfg->max_connections_per_user) {
                *v = (HeadVerdict){ .status = 429, .title = "Too Many Requests" };
                (void) snprintf(v->detail, sizeof v->detail, "uid %u already has %u connections open "
                                "(MaxConnectionsPerUser=); close some first", (unsigned) caller->uid, u->connections);
                return false;
        }
        return true;
}

static void accept_one(HttpGate *g, int fd, const struct sockaddr_storage *addr, socklen_t addrlen) {
        GateConn *c;
        HeadVerdict v;
        UidCount *u = NULL;
        int r;

        c = calloc(1, sizeof *c);
        if (!c) {
                (void) close(fd);
                return;
        }
        c->gate = g;
        c->fd = fd;
        c->addr = *addr;
        c->addrlen = addrlen;
        r = identify(g, fd, &c->caller);
        if (r < 0) {
                log_debug_errno(r, "Cannot identify a caller, closing the connection: %m");
                free(c->caller.user);
                free(c);
                (void) close(fd);
                return;
        }
        if (!admit(g, &c->caller, &v)) {
                log_debug("Refusing a connection from %s: %s", c->caller.user, v.detail);
                http_write_problem(fd, v.status, v.title, v.detail);
                close_refused(g, fd);
                free(c->caller.user);
                free(c);
                return;
        }
        if (!g->tcp) {
                u = uid_find(g, c->caller.uid, true);
                if (!u) {
                        free(c->caller.user);
                        free(c);
                        (void) close(fd);
                        return;
                }
                u->connections++;
        }
        g->n_conns++;
        c->pending = true;
        c->prev = g->pending_tail;
        if (g->pending_tail)
                g->pending_tail->next = c;
        else
                g->pending_head = c;
        g->pending_tail = c;

        /* Edge-triggered: peeked bytes stay readable, a level-triggered source would fire without end. */
        r = sd_event_add_io(g->manager->event, &c->io, fd, EPOLLIN | EPOLLRDHUP | EPOLLET, on_head_io, c);
        if (r >= 0)
                r = sd_event_add_time_relative(g->manager->event, &c->timer, CLOCK_MONOTONIC,
                                               g->manager->config->header_timeout_sec * 1000000ULL, 0,
                                               on_head_timeout, c);
        if (r < 0)
                conn_free(c);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        HttpGate *g = userdata;

        return sd_event_source_set_enabled(g->accept_io, SD_EVENT_ON);
}

void http_gate_stop_accepting(HttpGate *g) {
        if (!g)
                return;
        (void) sd_event_source_set_enabled(g->retry, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(g->accept_io, SD_EVENT_OFF);
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        HttpGate *g = userdata;

        for (unsigned i = 0; i < ACCEPT_BATCH; i++) {
                struct sockaddr_storage addr;
                socklen_t len = sizeof addr;
                int cfd = accept4(fd, (struct sockaddr *) &addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (cfd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                                /* Out of descriptors: pause accepting rather than spin on a ready listener. */
                                log_warning_errno(errno, "Cannot accept connections, pausing for 100 ms: %m");
                                (void) sd_event_source_set_enabled(g->accept_io, SD_EVENT_OFF);
                                (void) sd_event_source_set_time_relative(g->retry, ACCEPT_RETRY_USEC);
                                (void) sd_event_source_set_enabled(g->retry, SD_EVENT_ONESHOT);
                        }
                        break;
                }
                accept_one(g, cfd, &addr, len);
        }
        return 0;
}

int http_gate_new(Manager *m, int fd, bool tcp, struct MHD_Daemon *daemon, GateKick kick, void *userdata,
                  HttpGate **ret) {
        HttpGate *g;
        int r, flags;

        g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        *g = (HttpGate){ .manager = m, .fd = -EBADF, .tcp = tcp, .daemon = daemon, .kick = kick, .userdata = userdata };
        /* A socket passed by systemd may be blocking: the accept loop needs EAGAIN. */
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
                r = -errno;
                goto fail;
        }
        r = sd_event_add_io(m->event, &g->accept_io, fd, EPOLLIN, on_accept, g);
        if (r < 0)
                goto fail;
        r = sd_event_add_time_relative(m->event, &g->retry, CLOCK_MONOTONIC, ACCEPT_RETRY_USEC, 0, on_retry, g);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(g->retry, SD_EVENT_OFF);
        g->fd = fd;
        *ret = g;
        return 0;
fail:
        http_gate_free(g);
        return r;
}

HttpGate *http_gate_free(HttpGate *g) {
        if (!g)
                return NULL;
        while (g->pending_head)
                conn_free(g->pending_head);
        sd_event_source_disable_unref(g->accept_io);
        sd_event_source_disable_unref(g->retry);
        safe_close(g->fd);
        free(g->uids);
        free(g);
        return NULL;
}

GateConn *http_gate_handing(HttpGate *g) {
        return g->handing;
}

void http_gate_conn_closed(GateConn *c) {
        /* MHD also reports CLOSED when MHD_add_connection() fails after STARTED: hand_over() frees c then. */
        if (c && c->gate->handing != c)
                conn_free(c);
}

const Caller *gate_conn_caller(const GateConn *c) {
        return &c->caller;
}

int gate_stream_acquire(GateConn *c, const char **ret_why) {
        HttpGate *g = c->gate;
        UidCount *u;

        if (g->tcp || c->caller.role == ROLE_ADMIN)
                return 0;
        u = uid_find(g, c->caller.uid, true);
        if (!u)
                return -ENOMEM;
        if (u->streams >= g->manager->config->max_streams_per_user) {
                *ret_why = "MaxStreamsPerUser";
                return -EBUSY;
        }
        u->streams++;
        return 1;
}

void gate_stream_release(HttpGate *g, uid_t uid) {
        UidCount *u = uid_find(g, uid, false);

        if (u && u->streams > 0) {
                u->streams--;
                uid_put(g, u);
        }
}
