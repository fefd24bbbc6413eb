/* SPDX-License-Identifier: MIT */
/* Prometheus text exposition format 0.0.4 (prometheus/docs exposition_formats.md): writers only. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prometheus.h"

void prom_family(FILE *f, const char *name, const char *type, const char *help) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void prom_name(FILE *f, const char *name, const char *labels) {
        if (labels && *labels)
                fprintf(f, "%s{%s} ", name, labels);
        else
                fprintf(f, "%s ", name);
}

void prom_uint(FILE *f, const char *name, const char *labels, uint64_t v) {
        prom_name(f, name, labels);
        fprintf(f, "%" PRIu64 "\n", v);
}

const char *prom_format_double(double v, char buf[static 32]) {
        if (isnan(v))
                return "NaN";
        if (isinf(v))
                return v > 0 ? "+Inf" : "-Inf";
        for (int prec = 6; prec <= 17; prec++) {
                (void) snprintf(buf, 32, "%.*g", prec, v);
                if (strtod(buf, NULL) == v)
                        break;
        }
        return buf;
}

void prom_double(FILE *f, const char *name, const char *labels, double v) {
        char buf[32];

        prom_name(f, name, labels);
        fprintf(f, "%s\n", prom_format_double(v, buf));
}

const char *prom_label_escape(const char *s, char *buf, size_t size) {
        size_t o = 0;

        for (; *s && o + 3 < size; s++) {
                if (*s == '\\' || *s == '"') {
                        buf[o++] = '\\';
                        buf[o++] = *s;
                } else if (*s == '\n') {
                        buf[o++] = '\\';
                        buf[o++] = 'n';
                } else
                        buf[o++] = *s;
        }
        buf[o] = 0;
        return buf;
}

void prom_histogram(FILE *f, const char *name, const char *labels, const uint64_t *slots, const double *le,
                    unsigned n, double sum) {
        char lb[512], num[32];
        uint64_t cum = 0;
        const char *sep = labels && *labels ? "," : "";

        for (unsigned k = 0; k + 1 < n; k++) {
                cum += slots[k];
                fprintf(f, "%s_bucket{%s%sle=\"%s\"} %" PRIu64 "\n", name, labels ? labels : "", sep,
                        prom_format_double(le[k], num), cum);
        }
        cum += n ? slots[n - 1] : 0;
        fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels ? labels : "", sep, cum);
        (void) snprintf(lb, sizeof lb, "%s_sum", name);
        prom_double(f, lb, labels, sum);
        (void) snprintf(lb, sizeof lb, "%s_count", name);
        prom_uint(f, lb, labels, cum);
}
