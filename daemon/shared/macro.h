/* SPDX-License-Identifier: MIT */
/* Small helpers shared by rtd, rtctl and the tests: cleanup attributes, ownership hand-off, string compare. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define streq(a, b) (strcmp((a), (b)) == 0)
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)

static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return streq(a, b);
}

static inline const char *strempty(const char *s) {
        return s ?: "";
}

static inline const char *startswith(const char *s, const char *prefix) {
        size_t l = strlen(prefix);
        return strncmp(s, prefix, l) == 0 ? s + l : NULL;
}

/* Hand ownership of a pointer or fd to someone else and leave the local empty. */
#define TAKE_PTR(p)                                \
        ({                                         \
                __typeof__(p) _p_ = (p);           \
                (p) = NULL;                        \
                _p_;                               \
        })
#define TAKE_FD(fd)                                \
        ({                                         \
                int _fd_ = (fd);                   \
                (fd) = -EBADF;                     \
                _fd_;                              \
        })

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}
static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

#include <stdio.h>
static inline void fclosep(FILE **f) {
        if (*f)
                (void) fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

#include <dirent.h>
static inline void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}
#define _cleanup_closedir_ _cleanup_(closedirp)

static inline void strv_free(char **l) {
        if (!l)
                return;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
}
static inline void strv_freep(char ***l) {
        strv_free(*l);
}
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* Errors the code invents (not from a syscall) are marked so logs do not print a stale errno. */
#define SYNTHETIC_ERRNO(e) (-(e))

/* Define a cleanup function for a type with a NULL-safe destructor. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)    \
        static inline void func##p(type *p) {      \
                if (*p)                            \
                        func(*p);                  \
        }
