/* SPDX-License-Identifier: MIT */
/*
 * rtctl's human views (status, show, list, metrics) and the little toolkit they share: right-aligned
 * "Key: value" lines as systemctl status prints them, sections, human durations and times, colour on a
 * terminal unless NO_COLOR is set, and every string from the daemon printed with control characters escaped
 * (a job name or a reason must not move the cursor). Views are pure: JSON in, text out, so
 * tests/unit/test-views.c renders them from recorded API JSON and compares with golden files.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "shared/macro.h"

typedef enum ViewColor {
        VC_NONE,
        VC_BOLD,
        VC_DIM,
        VC_GOOD,        /* green: succeeded, active, quiet */
        VC_WARN,        /* yellow: queued, cancelled, something to look at */
        VC_BAD,         /* red: failed, lost, timed out, refused */
        VC_INFO,        /* blue: running */
} ViewColor;

typedef struct View {
        FILE *out;
        bool color;
        time_t now;                     /* for "3min ago"; fixed in tests */
        int key_width;                  /* right edge of the keys of view_field() */
        char **strings;                 /* escaped strings handed out, freed by view_done() */
        size_t n_strings;
} View;

/* stdout, colour if it is a terminal and NO_COLOR is unset and TERM is not dumb, now = time(NULL). */
void view_init(View *v, FILE *out);
void view_done(View *v);

/* A string from the daemon, safe to print: control characters as \n, \t, \xNN; NULL or "" as dflt. */
const char *view_s(View *v, const char *s, const char *dflt);
const char *view_jstr(View *v, json_t *o, const char *key, const char *dflt);
long long view_jint(json_t *o, const char *key);
double view_jnum(json_t *o, const char *key);

const char *view_on(View *v, ViewColor c);
const char *view_off(View *v);

/* "   Key: value" with the key right-aligned at v->key_width; value as printf. */
void view_field(View *v, const char *key, const char *fmt, ...) _printf_(3, 4);
/* The same with the value coloured. */
void view_field_color(View *v, const char *key, ViewColor c, const char *fmt, ...) _printf_(4, 5);
/* A continuation line aligned under the values. */
void view_more(View *v, const char *fmt, ...) _printf_(2, 3);
/* A blank line and a bold title. */
void view_section(View *v, const char *title);

/* Human figures into buf (size >= 32): "850ns", "12µs", "3.4ms", "1.25s", "3min 5s", "2h 10min", "3d 4h". */
const char *view_duration(double seconds, char *buf, size_t size);
/* "2026-11-25 19:02:11 UTC (3min ago)" from the API's ISO time; NULL if iso is not one. */
const char *view_time(View *v, const char *iso, char *buf, size_t size);
/* "12.3 MiB" from KiB. */
const char *view_kib(long long kib, char *buf, size_t size);
/* "1 CPU" / "2 CPUs", "CPU 1" / "CPUs 1-3" from a CPU list. */
const char *view_cpus(const char *list, char *buf, size_t size);
/* Print s left-aligned in width columns (UTF-8 aware, unlike printf's %-*s). */
void view_pad(View *v, const char *s, int width);
/* "KILL" for 9: a signal's short name, NULL for one without (what glibc's sigabbrev_np gives, in any libc). */
const char *view_signal_name(long long sig);
/* Colour for a job state. */
ViewColor view_state_color(const char *state);

/* The views. */
void view_status(View *v, json_t *status);
void view_reservation(View *v, json_t *reservation);
void view_job(View *v, json_t *job);
void view_jobs(View *v, json_t *list);
void view_array(View *v, json_t *array);
void view_metrics(View *v, json_t *metrics);
void view_leases_status(View *v, json_t *leases);       /* view-leases.c: status's lines */
void view_leases(View *v, json_t *list);                /* GET /v1/leases */
void view_lease(View *v, json_t *lease);                /* GET /v1/leases/ID */
