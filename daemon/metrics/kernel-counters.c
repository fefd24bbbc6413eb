/* SPDX-License-Identifier: MIT */
/* The kernel's own interrupt counters since the BPF programs were attached (see kernel-counters.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kernel-counters.h"
#include "shared/macro.h"

/* Per CPU: the vector rows, TLB, the numbered rows' sum, the softirqs. */
#define KSLOTS (METRICS_NR_VECTORS + 2 + METRICS_NR_SOFTIRQS)

static void slots(CpuCounters *o, uint64_t *k[static KSLOTS]) {
        unsigned n = 0;

        for (unsigned v = 0; v < METRICS_NR_VECTORS; v++)
                k[n++] = &o->vec_kernel[v];
        k[n++] = &o->tlb_shootdowns;
        k[n++] = &o->hardirq_kernel;
        for (unsigned v = 0; v < METRICS_NR_SOFTIRQS; v++)
                k[n++] = &o->softirq_kernel[v];
}

/* The counters as the kernel shows them now (since boot). */
static int read_now(int proc_fd, Sample *s) {
        int r = procfs_read_vectors(proc_fd, s);
        return r < 0 ? r : procfs_read_kernel_irqs(proc_fd, s);
}

int kernel_counters_start(KernelCounters *k, int proc_fd, unsigned n_cpus) {
        Sample s = { .n_cpus = n_cpus };
        int r;

        *k = (KernelCounters) { .n_cpus = n_cpus };
        k->base = calloc((size_t) n_cpus * KSLOTS, sizeof *k->base);
        s.cpus = calloc(n_cpus, sizeof *s.cpus);
        if (!k->base || !s.cpus) {
                free(s.cpus);
                return -ENOMEM;
        }
        r = read_now(proc_fd, &s);
        for (unsigned i = 0; r >= 0 && i < n_cpus; i++) {
                uint64_t *p[KSLOTS];

                slots(&s.cpus[i], p);
                for (unsigned v = 0; v < KSLOTS; v++)
                        k->base[(size_t) i * KSLOTS + v] = *p[v];
        }
        free(s.cpus);
        return r;
}

int kernel_counters_read(const KernelCounters *k, int proc_fd, Sample *s) {
        int r = read_now(proc_fd, s);

        for (unsigned i = 0; r >= 0 && k->base && i < s->n_cpus && i < k->n_cpus; i++) {
                uint64_t *p[KSLOTS];

                slots(&s->cpus[i], p);
                /* Never below zero: a CPU that went offline and came back may restart its rows. */
                for (unsigned v = 0; v < KSLOTS; v++)
                        *p[v] -= MIN(k->base[(size_t) i * KSLOTS + v], *p[v]);
        }
        return r;
}

void kernel_counters_done(KernelCounters *k) {
        free(k->base);
        k->base = NULL;
}
