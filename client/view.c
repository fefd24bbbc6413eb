/* SPDX-License-Identifier: MIT */
/* The toolkit of rtctl's human views: aligned fields, colour, escaping, human durations and times. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rtctl.h"
#include "view.h"

void view_init(View *v, FILE *out) {
        const char *term = getenv("TERM");

        *v = (View){ .out = out, .now = time(NULL), .key_width = 13 };
        const char *no_color = getenv("NO_COLOR");

        /* https://no-color.org: set and not empty means no colour. */
        v->color = isatty(fileno(out)) && !(no_color && *no_color) && !(term && streq(term, "dumb"));
}

void view_done(View *v) {
        for (size_t i = 0; i < v->n_strings; i++)
                free(v->strings[i]);
        free(v->strings);
        v->strings = NULL;
        v->n_strings = 0;
}

static const char *keep(View *v, char *s) {
        char **n;

        if (!s)
                return "?";
        n = realloc(v->strings, (v->n_strings + 1) * sizeof *n);
        if (!n) {
                free(s);
                return "?";
        }
        v->strings = n;
        v->strings[v->n_strings++] = s;
        return s;
}

/* Strings are anyone's (job names, argv, task names): C0 and C1 controls and bytes that are not UTF-8 are
 * printed escaped (escape.c), never sent to the terminal as they are. */
const char *view_s(View *v, const char *s, const char *dflt) {
        char *o;

        if (!s || !*s)
                return dflt;
        o = ctl_escape(s);
        if (!o)
                return "?";
        if (streq(o, s)) {
                free(o);
                return s;       /* nothing to escape: the JSON owns it for as long as the view runs */
        }
        return keep(v, o);
}

const char *view_jstr(View *v, json_t *o, const char *key, const char *dflt) {
        return view_s(v, json_string_value(json_object_get(o, key)), dflt);
}

long long view_jint(json_t *o, const char *key) {
        return json_integer_value(json_object_get(o, key));
}

double view_jnum(json_t *o, const char *key) {
        json_t *x = json_object_get(o, key);
        return json_is_number(x) ? json_number_value(x) : 0;
}

const char *view_on(View *v, ViewColor c) {
        static const char *const seq[] = {
                [VC_NONE] = "", [VC_BOLD] = "\033[1m", [VC_DIM] = "\033[2m", [VC_GOOD] = "\033[32m",
                [VC_WARN] = "\033[33m", [VC_BAD] = "\033[1;31m", [VC_INFO] = "\033[34m",
        };
        return v->color ? seq[c] : "";
}

const char *view_off(View *v) {
        return v->color ? "\033[0m" : "";
}

static void field(View *v, const char *key, ViewColor c, const char *fmt, va_list ap) {
        fprintf(v->out, "%*s%s ", v->key_width, key, *key ? ":" : " ");
        fputs(view_on(v, c), v->out);
        vfprintf(v->out, fmt, ap);
        if (c != VC_NONE)
                fputs(view_off(v), v->out);
        fputc('\n', v->out);
}

void view_field(View *v, const char *key, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        field(v, key, VC_NONE, fmt, ap);
        va_end(ap);
}

void view_field_color(View *v, const char *key, ViewColor c, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        field(v, key, c, fmt, ap);
        va_end(ap);
}

void view_more(View *v, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        field(v, "", VC_NONE, fmt, ap);
        va_end(ap);
}

void view_section(View *v, const char *title) {
        fprintf(v->out, "\n%s%s%s\n", view_on(v, VC_BOLD), title, view_off(v));
}

const char *view_duration(double s, char *buf, size_t size) {
        long long t;

        if (s <= 0)
                snprintf(buf, size, "0");
        else if (s < 1e-6)
                snprintf(buf, size, "%.0fns", s * 1e9);
        else if (s < 1e-3)
                snprintf(buf, size, "%.0fµs", s * 1e6);
        else if (s < 1)
                snprintf(buf, size, "%.*fms", s < 0.01 ? 2 : 1, s * 1e3);
        else if (s < 60 && s == (double) (long long) s)
                snprintf(buf, size, "%llds", (long long) s);      /* whole seconds (uptime, intervals) */
        else if (s < 60)
                snprintf(buf, size, "%.*fs", s < 10 ? 2 : 1, s);
        else if ((t = (long long) (s + 0.5)) < 3600)
                snprintf(buf, size, "%lldmin %llds", t / 60, t % 60);
        else if (t < 86400)
                snprintf(buf, size, "%lldh %lldmin", t / 3600, t % 3600 / 60);
        else
                snprintf(buf, size, "%lldd %lldh", t / 86400, t % 86400 / 3600);
        return buf;
}

const char *view_time(View *v, const char *iso, char *buf, size_t size) {
        struct tm tm = {};
        char ago[40];
        const char *end;
        time_t t;

        if (!iso || !(end = strptime(iso, "%Y-%m-%dT%H:%M:%S", &tm)))
                return NULL;
        t = timegm(&tm);
        if (v->now == t)
                snprintf(ago, sizeof ago, "just now");
        else if (v->now > t)
                snprintf(ago, sizeof ago, "%s ago", view_duration((double) (v->now - t), (char[32]){}, 32));
        else
                snprintf(ago, sizeof ago, "in the future");
        /* Seconds are enough for a person; the fraction stays in --json. */
        snprintf(buf, size, "%.10s %.8s UTC (%s)", iso, iso + 11, ago);
        return buf;
}

const char *view_kib(long long kib, char *buf, size_t size) {
        if (kib < 1024)
                snprintf(buf, size, "%lld KiB", kib);
        else if (kib < 1024 * 1024)
                snprintf(buf, size, "%.1f MiB", kib / 1024.0);
        else
                snprintf(buf, size, "%.2f GiB", kib / (1024.0 * 1024.0));
        return buf;
}

const char *view_cpus(const char *list, char *buf, size_t size) {
        if (!list || !*list)
                snprintf(buf, size, "none");
        else
                snprintf(buf, size, "%s %s", strpbrk(list, ",-") ? "CPUs" : "CPU", list);
        return buf;
}

ViewColor view_state_color(const char *s) {
        if (!s)
                return VC_NONE;
        if (streq(s, "succeeded") || streq(s, "active") || streq(s, "idle"))
                return VC_GOOD;
        if (streq(s, "running") || streq(s, "starting") || streq(s, "busy"))
                return VC_INFO;
        if (streq(s, "queued") || streq(s, "cancelled"))
                return VC_WARN;
        if (streq(s, "failed") || streq(s, "timed_out") || streq(s, "lost") || streq(s, "down"))
                return VC_BAD;
        return VC_NONE;
}

void view_pad(View *v, const char *s, int width) {
        int cols = 0;

        for (const unsigned char *c = (const unsigned char *) s; *c; c++)
                cols += (*c & 0xc0) != 0x80;    /* UTF-8: count characters, not bytes (µ) */
        fputs(s, v->out);
        for (; cols < width; cols++)
                fputc(' ', v->out);
}

const char *view_signal_name(long long sig) {
        static const char *const names[] = {
                [1] = "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
                "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG", "XCPU",
                "XFSZ", "VTALRM", "PROF", "WINCH", "POLL", "PWR", "SYS",
        };
        return sig > 0 && sig < (long long) ELEMENTSOF(names) ? names[sig] : NULL;
}
