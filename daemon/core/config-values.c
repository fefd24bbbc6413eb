/* SPDX-License-Identifier: MIT */
/* rtd.conf's value parsers: strings, paths, groups, numbers, sizes, durations, enums and kernel tunables, each
 * writing one field of RtdConfig and saying what is allowed when the value is not. The table is in config.c. */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "config-internal.h"
#include "config.h"
#include "shared/log.h"
#include "shared/parse-util.h"

int parse_string(const char *v, void *ptr, const void *arg, const char **allowed) {
        char **s = ptr;
        char *n;

        if (!*v) {
                *allowed = "a non-empty string";
                return -EINVAL;
        }
        n = strdup(v);
        if (!n)
                return -ENOMEM;
        free(*s);
        *s = n;
        return 0;
}

int parse_absolute_path(const char *v, void *ptr, const void *arg, const char **allowed) {
        if (v[0] != '/' || strstr(v, "/../") || strlen(v) >= 108) {
                *allowed = "an absolute path (at most 107 characters)";
                return -EINVAL;
        }
        return parse_string(v, ptr, arg, allowed);
}

int parse_group_or_none(const char *v, void *ptr, const void *arg, const char **allowed) {
        char **s = ptr;

        if (streq(v, "") || streq(v, "none")) {
                *s = (free(*s), NULL);
                return 0;
        }
        for (const char *p = v; *p; p++)
                if (!isalnum((unsigned char) *p) && !strchr("_-.", *p)) {
                        *allowed = "a group name (letters, digits, '_', '-', '.') or 'none'";
                        return -EINVAL;
                }
        return parse_string(v, ptr, arg, allowed);
}

int parse_uint(const char *v, void *ptr, const void *arg, const char **allowed) {
        const UintRange *range = arg;
        unsigned u;

        if (safe_atou(v, &u) < 0 || u < range->min || u > range->max) {
                *allowed = range->allowed;
                return -EINVAL;
        }
        *(unsigned *) ptr = u;
        return 0;
}

int parse_bool(const char *v, void *ptr, const void *arg, const char **allowed) {
        int b = parse_boolean(v);

        (void) arg;
        if (b < 0) {
                *allowed = "yes or no";
                return -EINVAL;
        }
        *(bool *) ptr = b;
        return 0;
}

int parse_socket_mode(const char *v, void *ptr, const void *arg, const char **allowed) {
        unsigned mode;

        if (parse_mode(v, &mode) < 0 || mode > 0777) {
                *allowed = "an octal file mode such as 0660";
                return -EINVAL;
        }
        *(unsigned *) ptr = mode;
        return 0;
}

int parse_log_level(const char *v, void *ptr, const void *arg, const char **allowed) {
        int l = log_level_from_string(v);
        if (l < 0) {
                *allowed = "debug, info, notice, warning, err, crit, alert or emerg";
                return -EINVAL;
        }
        *(int *) ptr = l;
        return 0;
}

/* "127.0.0.1:9477", "[::1]:9477", "no". Only loopback makes sense by default, but any address is allowed. */
int parse_listen(const char *v, void *ptr, const void *arg, const char **allowed) {
        char **s = ptr;
        const char *colon = strrchr(v, ':');
        unsigned port;

        if (streq(v, "no") || streq(v, "none")) {
                *s = (free(*s), NULL);
                return 0;
        }
        *allowed = "HOST:PORT (e.g. 127.0.0.1:9477 or [::1]:9477) or 'no'";
        if (!colon || colon == v || safe_atou(colon + 1, &port) < 0 || port == 0 || port > 65535)
                return -EINVAL;
        if (v[0] == '[' && colon[-1] != ']')
                return -EINVAL;
        return parse_string(v, ptr, arg, allowed);
}

int parse_enum(const char *v, void *ptr, const void *arg, const char **allowed) {
        const EnumSpec *spec = arg;

        for (int i = 0; spec->names[i]; i++)
                if (streq(v, spec->names[i])) {
                        *(int *) ptr = i;
                        return 0;
                }
        *allowed = spec->allowed;
        return -EINVAL;
}

/* [Reserve] CPUs=: auto, none, or a CPU list (checked against the online CPUs at start-up). */
int parse_reserve_cpus(const char *v, void *ptr, const void *arg, const char **allowed) {
        RtdConfig *c = (RtdConfig *) ((char *) ptr - offsetof(RtdConfig, reserve_mode));
        int r;

        if (streq(v, "auto")) {
                c->reserve_mode = RESERVE_AUTO;
                return 0;
        }
        if (streq(v, "none") || streq(v, "")) {
                c->reserve_mode = RESERVE_NONE;
                return 0;
        }
        r = cpuset_parse(v, &c->reserve_cpus, NULL);
        if (r < 0 || cpuset_is_empty(&c->reserve_cpus)) {
                *allowed = "auto, none, or a CPU list such as 1-3,5";
                return -EINVAL;
        }
        c->reserve_mode = RESERVE_LIST;
        return 0;
}

/* keep, or a signed number within the given range ("-1" allowed where the arg says so). */

int parse_tune(const char *v, void *ptr, const void *arg, const char **allowed) {
        const TuneRange *range = arg;
        int64_t n;

        if (streq(v, "keep")) {
                *(int64_t *) ptr = TUNE_KEEP;
                return 0;
        }
        if (safe_atoi64(v, &n) < 0 || n < range->min || n > range->max) {
                *allowed = range->allowed;
                return -EINVAL;
        }
        *(int64_t *) ptr = n;
        return 0;
}

/* Seconds with up to six decimals ("0.25"), stored as µs, within [min, max] µs. */

int parse_sec_usec(const char *v, void *ptr, const void *arg, const char **allowed) {
        const UsecRange *range = arg;
        const char *dot = strchr(v, '.');
        uint64_t whole = 0, frac = 0, scale = 1000000;
        _cleanup_free_ char *w = strndup(v, dot ? (size_t) (dot - v) : strlen(v));
        int r = w ? 0 : -ENOMEM;

        if (r < 0)
                return r;
        *allowed = range->allowed;
        if ((*w || !dot) && (safe_atou64(w, &whole) < 0 || whole > 1000000))
                return -EINVAL;
        if (dot) {
                const char *f = dot + 1;
                if (!*f || strlen(f) > 6 || strspn(f, "0123456789") != strlen(f))
                        return -EINVAL;
                for (; *f; f++) {
                        scale /= 10;
                        frac += (uint64_t) (*f - '0') * scale;
                }
        }
        uint64_t usec = whole * 1000000 + frac;
        if (usec < range->min || usec > range->max)
                return -EINVAL;
        *(uint64_t *) ptr = usec;
        return 0;
}

/* A size or count: a number with an optional K, M, G or T (powers of 1024), or "infinity". */

int parse_size(const char *v, void *ptr, const void *arg, const char **allowed) {
        const SizeRange *range = arg;
        static const char units[] = "KMGT";
        _cleanup_free_ char *num = strdup(v);
        const char *u;
        uint64_t n;
        size_t l;

        if (!num)
                return -ENOMEM;
        *allowed = range->allowed;
        if (streq(v, "infinity")) {
                *(uint64_t *) ptr = CONFIG_INFINITY;
                return 0;
        }
        l = strlen(num);
        u = l > 0 ? strchr(units, num[l - 1]) : NULL;
        if (u && *u)
                num[l - 1] = 0;
        if (safe_atou64(num, &n) < 0)
                return -EINVAL;
        for (const char *p = units; u && *u && p <= u; p++) {
                if (n > UINT64_MAX / 1024 / 2)
                        return -EINVAL;
                n *= 1024;
        }
        if (n < range->min || n == CONFIG_INFINITY)
                return -EINVAL;
        *(uint64_t *) ptr = n;
        return 0;
}
