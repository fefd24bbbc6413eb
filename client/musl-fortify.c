/* SPDX-License-Identifier: MIT */
/*
 * Only in the musl build of rtctl (client/meson.build): Debian's libjansson.a was compiled against glibc with
 * _FORTIFY_SOURCE, so it calls glibc's checked variants of three functions, which musl does not have. They
 * keep glibc's check (abort when the stated size exceeds the object's) and do the plain work.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int __vsnprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt, va_list ap);
int __snprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt, ...);
char *__strncpy_chk(char *dest, const char *src, size_t n, size_t destlen);

int __vsnprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt, va_list ap) {
        if (n > slen)
                abort();
        return vsnprintf(s, n, fmt, ap);
}

int __snprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = __vsnprintf_chk(s, n, flag, slen, fmt, ap);
        va_end(ap);
        return r;
}

char *__strncpy_chk(char *dest, const char *src, size_t n, size_t destlen) {
        if (n > destlen)
                abort();
        return strncpy(dest, src, n);
}
