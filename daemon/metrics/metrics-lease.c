/* SPDX-License-Identifier: MIT */
/* Metrics for leases: the collector watches leased CPUs beside reserved ones, and lease.c reads one CPU's
 * cumulative figures from the snapshot (it keeps the baseline of each lease). */
#include <errno.h>

#include "metrics-internal.h"

void metrics_set_leased(Metrics *x, const CpuSet *leased) {
        if (!x)
                return;
        x->leased = *leased;
        metrics_set_reserved(x, &x->reserved);
}

int metrics_cpu_figures(Metrics *x, unsigned cpu, MetricsCpuFigures *ret) {
        const Sample *s;

        *ret = (MetricsCpuFigures){};
        if (!x)
                return -ENODATA;
        s = &x->cur;
        if (!s->cpus || cpu >= s->n_cpus)
                return -ENODATA;
        const CpuCounters *c = &s->cpus[cpu];
        ret->intrusion_ns = c->intrusion_ns;
        ret->intrusions = c->intrusions;
        ret->switches = c->switches_total;
        for (size_t k = 0; k < s->n_irqs; k++)
                ret->hardirqs += s->irqs[k].count[cpu];
        for (unsigned v = 0; v < METRICS_NR_VECTORS; v++)
                ret->hardirqs += c->vec_kernel[v];         /* the kernel's count: exact */
        return 0;
}
