/* SPDX-License-Identifier: MIT */
/*
 * Job arrays in rtctl: submit --array/--each (one POST /v1/arrays), and show, list, cancel, wait with an
 * array id. Array ids are written "a12": a letter first, so they can never be taken for job 12.
 *
 * --each FILE: one task per line (FILE "-" is stdin). A line is split into words at blanks as a shell
 * would, without expanding anything: 'single quotes' keep everything literally, "double quotes" keep all
 * but \" and \\, a backslash outside quotes keeps the next character. Blank lines and lines whose first
 * word starts with # are skipped. A line's words are appended to the command; the task's index is its
 * number among the tasks (0, 1, ...). NUL bytes, lines longer than 64 KiB and open quotes are refused,
 * naming the line.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rtctl.h"
#include "view.h"
#include "shared/http1.h"
#include "shared/macro.h"

#define EACH_LINE_MAX (64 * 1024)

bool ctl_is_array_id(const char *s) {
        if (!s || s[0] != 'a' || !s[1])
                return false;
        for (const char *p = s + 1; *p; p++)
                if (*p < '0' || *p > '9')
                        return false;
        return strspn(s + 1, "0") < strlen(s + 1);
}

/* One line into words (see the header comment); -EINVAL with *why on an open quote. */
static int split_line(const char *line, json_t *words, const char **why) {
        char *w = malloc(strlen(line) + 1);
        const char *p = line;

        if (!w)
                return -ENOMEM;
        for (;;) {
                size_t n = 0;
                bool any = false;
                while (*p == ' ' || *p == '\t' || *p == '\r')
                        p++;
                if (!*p)
                        break;
                while (*p && *p != ' ' && *p != '\t' && *p != '\r') {
                        any = true;
                        if (*p == '\'') {
                                const char *end = strchr(p + 1, '\'');
                                if (!end)
                                        goto open_quote;
                                memcpy(w + n, p + 1, (size_t) (end - p - 1));
                                n += (size_t) (end - p - 1);
                                p = end + 1;
                        } else if (*p == '"') {
                                for (p++; *p && *p != '"'; p++) {
                                        if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                                                p++;
                                        w[n++] = *p;
                                }
                                if (!*p)
                                        goto open_quote;
                                p++;
                        } else if (*p == '\\' && p[1]) {
                                w[n++] = p[1];
                                p += 2;
                        } else
                                w[n++] = *p++;
                }
                if (any)
                        json_array_append_new(words, json_stringn(w, n));
        }
        free(w);
        return 0;
open_quote:
        free(w);
        *why = "a quote is not closed";
        return -EINVAL;
}

/* The tasks of an --each file as an array of argument arrays; an exit code on error (printed). */
static int read_each(const char *path, json_t **ret) {
        FILE *f = streq(path, "-") ? stdin : fopen(path, "re");
        _cleanup_free_ char *line = NULL;
        json_t *tasks = json_array();
        size_t cap = 0;
        ssize_t len;
        unsigned lineno = 0;
        int k = RTCTL_EXIT_OK;

        if (!f) {
                fprintf(stderr, "rtctl submit: --each %s: %m\n", path);
                json_decref(tasks);
                return RTCTL_EXIT_USAGE;
        }
        while ((len = getline(&line, &cap, f)) >= 0) {
                const char *why = NULL;
                json_t *words;
                lineno++;
                if (len > 0 && line[len - 1] == '\n')
                        line[--len] = 0;
                if (memchr(line, 0, (size_t) len))
                        why = "it has a NUL byte";
                else if (len > EACH_LINE_MAX)
                        why = "it is longer than 64 KiB";
                words = json_array();
                if (!why && split_line(line, words, &why) < 0 && !why)
                        why = "out of memory";
                if (why) {
                        fprintf(stderr, "rtctl submit: --each %s, line %u: %s; one task's arguments per line, "
                                "quoted as in a shell\n", path, lineno, why);
                        json_decref(words);
                        k = RTCTL_EXIT_USAGE;
                        break;
                }
                const char *first = json_string_value(json_array_get(words, 0));
                if (json_array_size(words) == 0 || (first && first[0] == '#'))
                        json_decref(words);
                else
                        json_array_append_new(tasks, words);
        }
        if (f != stdin)
                fclose(f);
        if (k == RTCTL_EXIT_OK && json_array_size(tasks) == 0) {
                fprintf(stderr, "rtctl submit: --each %s has no tasks (no line with arguments)\n", path);
                k = RTCTL_EXIT_USAGE;
        }
        if (k != RTCTL_EXIT_OK) {
                json_decref(tasks);
                return k;
        }
        *ret = tasks;
        return RTCTL_EXIT_OK;
}

/* ---- waiting, with a progress bar on a terminal ---- */

typedef struct ArrayWait {
        json_t *final;
        json_t *last;
        bool bar;
        uint64_t start_ns;
        unsigned start_ended;
        bool have_start;
} ArrayWait;

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void draw_bar(ArrayWait *w, json_t *a) {
        long long size = view_jint(a, "size"), ended = view_jint(a, "ended"), ok = view_jint(a, "succeeded"),
                  bad = view_jint(a, "not_succeeded"), running = view_jint(a, "running");
        char bar[41], eta[32] = "";
        double secs, rate = 0;
        int fill;

        if (!w->have_start) {
                w->have_start = true;
                w->start_ns = now_ns();
                w->start_ended = (unsigned) ended;
        }
        secs = (double) (now_ns() - w->start_ns) / 1e9;
        if (secs > 0.2)
                rate = (double) (ended - w->start_ended) / secs;
        if (rate > 0 && ended < size)
                view_duration((double) (size - ended) / rate, eta, sizeof eta);
        fill = size > 0 ? (int) (40 * ended / size) : 40;
        memset(bar, '#', (size_t) fill);
        memset(bar + fill, '.', (size_t) (40 - fill));
        bar[40] = 0;
        fprintf(stderr, "\r\033[K[%s] %lld/%lld done, %lld failed, %lld running, %.0f/s%s%s", bar, ok, size, bad,
                running, rate, *eta ? ", ETA " : "", eta);
        fflush(stderr);
}

static bool on_array_event(const char *type, const char *data, size_t size, void *userdata) {
        ArrayWait *w = userdata;
        json_t *a;
        const char *state;

        if (!streq(type, "array") || !(a = json_loadb(data, size, 0, NULL)))
                return true;
        if (w->bar)
                draw_bar(w, a);
        state = json_string_value(json_object_get(a, "state")) ?: "";
        json_decref(w->last);
        w->last = a;
        if (streq(state, "succeeded") || streq(state, "failed"))
                w->final = json_incref(a);
        return !w->final;
}

static int print_summary(Ctl *c, json_t *a) {
        json_t *ff = json_object_get(a, "first_failure");
        int code = json_is_object(ff) ? ctl_job_exit_code(ff) : 0;

        if (c->json) {
                ctl_dump_json(a);
                return code;
        }
        printf("array a%lld: %lld of %lld succeeded", view_jint(a, "id"), view_jint(a, "succeeded"),
               view_jint(a, "size"));
        if (view_jint(a, "failed") || view_jint(a, "timed_out") || view_jint(a, "lost"))
                printf(", %lld failed", view_jint(a, "failed") + view_jint(a, "timed_out") + view_jint(a, "lost"));
        if (view_jint(a, "cancelled"))
                printf(", %lld cancelled", view_jint(a, "cancelled"));
        printf("\n");
        if (json_is_object(ff))
                printf("first failure: index %lld (job %lld) %s%s%s, exit %d\n", view_jint(ff, "index"),
                       view_jint(ff, "job"), ctl_jstr(ff, "state", "?"),
                       json_is_string(json_object_get(ff, "reason")) ? ": " : "", ctl_jstr(ff, "reason", ""), code);
        if (code == 0 && json_is_object(ff))
                code = RTCTL_EXIT_REFUSED;
        return code;
}

/* Wait for every task to end; reconnects across an rtd restart. Exit code: 0, or the first failure's. */
static int wait_array(Ctl *c, uint64_t id, bool quiet) {
        ArrayWait w = { .bar = !quiet && !c->json && isatty(STDERR_FILENO) };
        CtlResponse refused;
        char path[64];
        int r;

        snprintf(path, sizeof path, "/v1/events?array=%" PRIu64, id);
        r = ctl_follow(c, path, on_array_event, &w, &w.final, &refused);
        if (r == 0 && !w.final) {
                r = ctl_fail(c, &refused);
                ctl_response_done(&refused);
        }
        if (!w.final) {
                json_decref(w.last);
                return r;
        }
        if (w.bar)
                fputc('\n', stderr);
        r = quiet && !c->json ? (json_is_object(json_object_get(w.final, "first_failure")) ?
                                 ctl_job_exit_code(json_object_get(w.final, "first_failure")) ?: RTCTL_EXIT_REFUSED : 0)
                              : print_summary(c, w.final);
        json_decref(w.final);
        json_decref(w.last);
        return r;
}

/* ---- verbs ---- */

int ctl_array_submit(Ctl *c, json_t *spec, const CtlArrayOptions *o) {
        _cleanup_(json_decrefp) json_t *body = json_pack("{s:O,s:b}", "spec", spec, "substitute", o->subst);
        json_t *tasks = NULL;
        CtlResponse r;
        uint64_t id;
        int k;

        if (!body)
                return RTCTL_EXIT_REFUSED;
        if (o->each) {
                k = read_each(o->each, &tasks);
                if (k != 0)
                        return k;
                json_object_set_new(body, "tasks", tasks);
        } else
                json_object_set_new(body, "indices", json_string(o->indices));
        if (o->max_running)
                json_object_set_new(body, "max_running", json_integer(o->max_running));
        k = ctl_create(c, "/v1/arrays", body, &r, &id);
        if (k != 0)
                return k;
        if (!o->wait)
                return ctl_print_created(c, &r, "a", id);
        if (!o->quiet && !c->json)
                fprintf(stderr, "array a%" PRIu64 ": %lld tasks\n", id, view_jint(r.json, "size"));
        ctl_response_done(&r);
        return wait_array(c, id, o->quiet);
}

static uint64_t array_number(const char *s) {
        return strtoull(s + 1, NULL, 10);
}

int ctl_array_show(Ctl *c, const char *arg) {
        char path[64];
        json_t *a;
        int r;

        snprintf(path, sizeof path, "/v1/arrays/%" PRIu64, array_number(arg));
        r = ctl_get_json(c, path, &a);
        if (r != 0)
                return r;
        if (c->json)
                ctl_dump_json(a);
        else {
                View v;
                view_init(&v, stdout);
                view_array(&v, a);
                view_done(&v);
        }
        json_decref(a);
        return RTCTL_EXIT_OK;
}

int ctl_array_cancel(Ctl *c, const char *arg) {
        char path[64];
        CtlResponse resp;
        int r;

        snprintf(path, sizeof path, "/v1/arrays/%" PRIu64, array_number(arg));
        r = ctl_request(c, "DELETE", path, NULL, &resp);
        if (r != 0)
                return r;
        if (resp.status != 200 && resp.status != 202)
                r = ctl_fail(c, &resp);
        else if (c->json)
                r = ctl_print_json(&resp);
        else
                printf("array %s: %lld tasks cancelled%s\n", arg, view_jint(resp.json, "cancelled_now"),
                       resp.status == 202 ? " (running ones are stopping: SIGTERM sent)" : "");
        ctl_response_done(&resp);
        return r;
}

int ctl_array_wait(Ctl *c, const char *arg) {
        return wait_array(c, array_number(arg), false);
}
