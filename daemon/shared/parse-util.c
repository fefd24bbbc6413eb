/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <strings.h>

#include "macro.h"
#include "parse-util.h"

int safe_atou64(const char *s, uint64_t *ret) {
        char *e;
        unsigned long long v;

        if (!s || !isdigit((unsigned char) *s))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &e, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*e)
                return -EINVAL;
        *ret = v;
        return 0;
}

int safe_atoi64(const char *s, int64_t *ret) {
        char *e;
        long long v;

        if (!s || !(isdigit((unsigned char) *s) || (*s == '-' && isdigit((unsigned char) s[1]))))
                return -EINVAL;
        errno = 0;
        v = strtoll(s, &e, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*e)
                return -EINVAL;
        *ret = v;
        return 0;
}

int safe_atou(const char *s, unsigned *ret) {
        uint64_t v;
        int r = safe_atou64(s, &v);
        if (r < 0)
                return r;
        if (v > UINT_MAX)
                return -ERANGE;
        *ret = (unsigned) v;
        return 0;
}

int safe_atoi(const char *s, int *ret) {
        int64_t v;
        int r = safe_atoi64(s, &v);
        if (r < 0)
                return r;
        if (v < INT_MIN || v > INT_MAX)
                return -ERANGE;
        *ret = (int) v;
        return 0;
}

int parse_boolean(const char *s) {
        static const char *const yes[] = { "1", "yes", "y", "true", "on" };
        static const char *const no[] = { "0", "no", "n", "false", "off" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (strcasecmp(s, yes[i]) == 0)
                        return 1;
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (strcasecmp(s, no[i]) == 0)
                        return 0;
        return -EINVAL;
}

int parse_mode(const char *s, unsigned *ret) {
        char *e;
        unsigned long v;

        if (!s || !isdigit((unsigned char) *s))
                return -EINVAL;
        errno = 0;
        v = strtoul(s, &e, 8);
        if (errno || *e || v > 07777)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}
