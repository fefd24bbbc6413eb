/* SPDX-License-Identifier: MIT */
/*
 * Safe to print: what rtd sends back comes from other users (job names, argv, paths, task names), and
 * control characters in it must not reach an administrator's terminal as commands. Human views print
 * strings through ctl_safe(); `rtctl logs` prints the job's bytes as they are, on purpose.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtctl.h"
#include "shared/macro.h"

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s) {
        uint32_t c;
        size_t n;

        if (s[0] < 0x80)
                return 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                n = 2, c = s[0] & 0x1f;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                n = 3, c = s[0] & 0x0f;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                n = 4, c = s[0] & 0x07;
        else
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                c = c << 6 | (s[i] & 0x3f);
        }
        /* Overlong forms, surrogates and code points past U+10FFFF are not UTF-8. */
        if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) || (c >= 0xd800 && c <= 0xdfff))
                return 0;
        return n;
}

/* C0 controls and DEL (one byte), C1 controls U+0080..U+009F (two bytes: C2 80..9F). */
static bool is_control(const unsigned char *s, size_t n) {
        return (n == 1 && (s[0] < 0x20 || s[0] == 0x7f)) || (n == 2 && s[0] == 0xc2 && s[1] < 0xa0);
}

char *ctl_escape(const char *str) {
        const unsigned char *s = (const unsigned char *) str;
        size_t len = strlen(str), o = 0;
        char *out = malloc(len * 6 + 1);

        if (!out)
                return NULL;
        for (size_t i = 0; i < len;) {
                size_t n = utf8_len(s + i);
                if (n == 0)     /* not UTF-8: the byte, escaped (0x9b alone is CSI to some terminals) */
                        o += (size_t) sprintf(out + o, "\\x%02x", s[i++]);
                else if (n == 1 && (s[i] == '\n' || s[i] == '\t')) {
                        o += (size_t) sprintf(out + o, s[i] == '\n' ? "\\n" : "\\t");    /* as people write them */
                        i++;
                } else if (is_control(s + i, n)) {
                        o += (size_t) sprintf(out + o, n == 1 ? "\\x%02x" : "\\u%04x", n == 1 ? s[i] : s[i + 1]);
                        i += n;
                } else {
                        memcpy(out + o, s + i, n);
                        o += n;
                        i += n;
                }
        }
        out[o] = 0;
        return out;
}

const char *ctl_safe(const char *s) {
        /* A ring of results, so several can be arguments of one printf(); each lives for 32 more calls. */
        static char *ring[32];
        static unsigned next;
        char *e;

        if (!s)
                return NULL;
        e = ctl_escape(s);
        if (!e || streq(e, s)) {
                free(e);
                return e ? s : "?";
        }
        free(ring[next % 32]);
        ring[next++ % 32] = e;
        return e;
}

const char *ctl_jstr(json_t *o, const char *key, const char *dflt) {
        const char *s = json_string_value(json_object_get(o, key));
        return s && *s ? ctl_safe(s) : dflt;
}
