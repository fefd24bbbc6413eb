/* SPDX-License-Identifier: MIT */
/* Listening sockets: socket activation by name, or a unix socket with mode/group and a TCP listener. */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "http-gate.h"
#include "listen.h"
#include "shared/log.h"
#include "shared/parse-util.h"

#define LISTEN_BACKLOG 128

int listeners_from_activation(Listeners *l) {
        char **names = NULL;
        int n;

        *l = (Listeners){ .control = -EBADF, .metrics = -EBADF };
        n = sd_listen_fds_with_names(true, &names);
        if (n <= 0)
                return n;
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                const char *name = names ? names[i] : NULL;

                if (streq_ptr(name, "metrics") && l->metrics < 0)
                        l->metrics = fd;
                else if ((streq_ptr(name, "control") || (i == 0 && !streq_ptr(name, "metrics"))) && l->control < 0)
                        l->control = fd;
                else {
                        log_warning("Ignoring passed socket %d with unknown name '%s'", fd, strempty(name));
                        (void) close(fd);
                }
        }
        strv_free(names);
        l->activated = l->control >= 0;
        return n;
}

/* Is somebody accepting on this socket path? Returns the holder's pid (>0), 0 if stale, <0 on error. */
static int probe_socket(const struct sockaddr_un *sa, pid_t *ret_holder) {
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct ucred cred;
        socklen_t len = sizeof cred;

        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *) sa, sizeof *sa) < 0)
                return errno == ECONNREFUSED || errno == ENOENT ? 0 : -errno;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        *ret_holder = cred.pid;
        return 1;
}

int listen_unix(const RtdConfig *c, int *ret_fd, pid_t *ret_holder) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        pid_t holder = 0;
        mode_t old_umask;
        int r;

        if (strlen(c->socket_path) >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, c->socket_path);

        r = probe_socket(&sa, &holder);
        if (r < 0 && r != -ENOTSOCK)
                return r;
        if (r > 0) {
                *ret_holder = holder;
                return -EADDRINUSE;
        }
        if (unlink(c->socket_path) < 0 && errno != ENOENT)
                return -errno;

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* Create it with no access at all, then open it up: no window where anyone can connect. */
        old_umask = umask(0777);
        r = bind(fd, (struct sockaddr *) &sa, sizeof sa);
        umask(old_umask);
        if (r < 0)
                return -errno;
        if (c->socket_group) {
                struct group *g = getgrnam(c->socket_group);
                if (!g)
                        log_warning("SocketGroup=%s does not exist: only root can use %s (create the group with "
                                    "'groupadd --system %s')",
                                    c->socket_group, c->socket_path, c->socket_group);
                else if (chown(c->socket_path, 0, g->gr_gid) < 0)
                        return log_error_errno(errno, "Failed to chown %s to group %s: %m", c->socket_path,
                                               c->socket_group);
        }
        if (chmod(c->socket_path, c->socket_mode) < 0)
                return -errno;
        if (listen(fd, LISTEN_BACKLOG) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int listen_tcp(const char *address, int *ret_fd) {
        _cleanup_free_ char *host = NULL;
        const char *colon = strrchr(address, ':');
        struct sockaddr_storage ss = {};
        socklen_t sl;
        _cleanup_close_ int fd = -EBADF;
        unsigned port;
        int one = 1;

        if (!colon || safe_atou(colon + 1, &port) < 0 || port == 0 || port > 65535)
                return -EINVAL;
        if (address[0] == '[')
                host = strndup(address + 1, (size_t) (colon - address - 2));
        else
                host = strndup(address, (size_t) (colon - address));
        if (!host)
                return -ENOMEM;

        struct sockaddr_in *in4 = (struct sockaddr_in *) &ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
        if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons((uint16_t) port);
                sl = sizeof *in4;
        } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t) port);
                sl = sizeof *in6;
        } else
                return -EINVAL;

        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *) &ss, sl) < 0)
                return -errno;
        if (listen(fd, LISTEN_BACKLOG) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

void listeners_close(Listeners *l) {
        l->control = safe_close(l->control);
        l->metrics = safe_close(l->metrics);
}

/* At most this many queued clients are answered: the backlog a client could fill before rtd ran. */
#define REFUSE_MAX_CLIENTS 256

static void refuse_queue(int listen_fd, const char *detail) {
        for (int i = 0; i < REFUSE_MAX_CLIENTS; i++) {
                struct pollfd p = { .fd = listen_fd, .events = POLLIN };
                char sink[4096];

                /* poll, not O_NONBLOCK: the listening socket is systemd's, shared with the next rtd. */
                if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN))
                        return;
                _cleanup_close_ int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        return;
                /* Read what the client sent first: closing with unread data resets the connection (unix and
                 * TCP alike), and the client could lose the answer. */
                for (int k = 0; k < 64 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; k++)
                        ;
                http_write_problem(fd, 503, "rtd could not start", detail);
                (void) shutdown(fd, SHUT_WR);
        }
}

void listeners_refuse_waiting(const char *detail) {
        Listeners l;

        if (listeners_from_activation(&l) <= 0)
                return;
        if (l.control >= 0)
                refuse_queue(l.control, detail);
        if (l.metrics >= 0)
                refuse_queue(l.metrics, detail);
        listeners_close(&l);
}
