/* SPDX-License-Identifier: MIT */
/* Small-file I/O with dirfds; kernel knobs want one write() per value. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"

#define READ_FULL_MAX (4u * 1024 * 1024)

int read_full_file_at(int dir_fd, const char *path, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, alloc = 4096;

        fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        buf = malloc(alloc);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n;

                if (size + 1 >= alloc) {
                        char *nb;
                        if (alloc >= READ_FULL_MAX)
                                return -EFBIG;
                        alloc *= 2;
                        nb = realloc(buf, alloc);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                }
                n = read(fd, buf + size, alloc - size - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                size += (size_t) n;
        }
        buf[size] = 0;
        if (ret_size)
                *ret_size = size;
        *ret = TAKE_PTR(buf);
        return 0;
}

int read_one_line_at(int dir_fd, const char *path, char **ret) {
        char *s;
        int r;

        r = read_full_file_at(dir_fd, path, &s, NULL);
        if (r < 0)
                return r;
        s[strcspn(s, "\n")] = 0;
        *ret = s;
        return 0;
}

int write_string_at(int dir_fd, const char *path, const char *s) {
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(s);
        ssize_t n;

        fd = openat(dir_fd, path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        n = write(fd, s, len);
        if (n < 0)
                return -errno;
        if ((size_t) n != len)
                return -EIO;
        return 0;
}

int write_file_atomic_at(int dir_fd, const char *path, const char *data, size_t size, int mode) {
        _cleanup_free_ char *tmp = NULL, *dir = NULL;
        _cleanup_close_ int fd = -EBADF, dfd = -EBADF;
        const char *slash;
        int r;

        if (asprintf(&tmp, "%s.tmp.%d", path, (int) getpid()) < 0)
                return -ENOMEM;
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        for (size_t done = 0; done < size;) {
                ssize_t n = write(fd, data + done, size - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        goto fail;
                }
                done += (size_t) n;
        }
        if (fsync(fd) < 0 || renameat(dir_fd, tmp, dir_fd, path) < 0) {
                r = -errno;
                goto fail;
        }
        /* Make the rename itself durable. */
        slash = strrchr(path, '/');
        dir = slash ? strndup(path, (size_t) (slash - path + 1)) : strdup(".");
        if (dir) {
                dfd = openat(dir_fd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd >= 0)
                        (void) fsync(dfd);
        }
        return 0;
fail:
        (void) unlinkat(dir_fd, tmp, 0);
        return r;
}

int mkdir_p_at(int dir_fd, const char *path, int mode) {
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = 0;
                if (mkdirat(dir_fd, p, (mode_t) mode) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdirat(dir_fd, p, (mode_t) mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

DIR *opendir_at(int dir_fd, const char *path) {
        int fd = openat(dir_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;

        if (fd < 0)
                return NULL;
        d = fdopendir(fd);
        if (!d)
                safe_close(fd);         /* keeps fdopendir's errno */
        return d;
}
