/* SPDX-License-Identifier: MIT */
/* The kernel's own interrupt counters (/proc/interrupts, /proc/softirqs) counted from a base: what the BPF
 * collector shows beside its programs' counts, exact by construction. */
#pragma once

#include <stdint.h>

#include "collector.h"

typedef struct KernelCounters {
        unsigned n_cpus;
        uint64_t *base;                 /* per CPU, every counter kernel_counters_read() fills */
} KernelCounters;

/* Take the base now: call it just before the programs are attached, so both count from the same moment
 * (the programs can only fall short of the kernel by what the attaching took). */
int kernel_counters_start(KernelCounters *k, int proc_fd, unsigned n_cpus);
/* s->cpus[].vec_kernel, tlb_shootdowns, hardirq_kernel and softirq_kernel since the base. */
int kernel_counters_read(const KernelCounters *k, int proc_fd, Sample *s);
void kernel_counters_done(KernelCounters *k);
