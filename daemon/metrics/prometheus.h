/* SPDX-License-Identifier: MIT */
/* Prometheus text exposition format 0.0.4: metric families, samples, label escaping, log2 histograms. */
#pragma once

#include <stdint.h>
#include <stdio.h>

#define PROMETHEUS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* "# HELP" and "# TYPE" lines; type is counter, gauge or histogram. */
void prom_family(FILE *f, const char *name, const char *type, const char *help);
/* One sample. labels is NULL or a preformatted list: cpu="1",kind="hard" (values escaped by the caller
 * with prom_label_escape()). */
void prom_uint(FILE *f, const char *name, const char *labels, uint64_t v);
void prom_double(FILE *f, const char *name, const char *labels, double v);
/* Escape a label value (backslash, double quote, newline) into buf; truncates to size. */
const char *prom_label_escape(const char *s, char *buf, size_t size);
/* Shortest decimal that parses back to v ("1e-06", "0.5", "+Inf"). */
const char *prom_format_double(double v, char buf[static 32]);
/* A histogram from n non-cumulative slots whose upper bounds are le[k] (seconds); slot n-1 is the
 * overflow, counted only in +Inf. Writes _bucket (cumulative), _sum and _count. */
void prom_histogram(FILE *f, const char *name, const char *labels, const uint64_t *slots, const double *le,
                    unsigned n, double sum);
