/* SPDX-License-Identifier: MIT */
/* CPU sets: the kernel's list syntax ("0-3,8,10-11") and hex mask syntax ("00000000,0000000f"). */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#define CPUSET_MAX 4096         /* CPUs numbered 0..CPUSET_MAX-1; larger numbers are rejected */

typedef struct CpuSet {
        uint64_t bits[CPUSET_MAX / 64];
} CpuSet;

#define CPUSET_FOREACH(cpu, set) \
        for (int cpu = cpuset_next((set), -1); cpu >= 0; cpu = cpuset_next((set), cpu))

static inline void cpuset_zero(CpuSet *s) {
        *s = (CpuSet){};
}
static inline void cpuset_set(CpuSet *s, unsigned cpu) {
        if (cpu < CPUSET_MAX)
                s->bits[cpu / 64] |= UINT64_C(1) << (cpu % 64);
}
static inline void cpuset_clear(CpuSet *s, unsigned cpu) {
        if (cpu < CPUSET_MAX)
                s->bits[cpu / 64] &= ~(UINT64_C(1) << (cpu % 64));
}
static inline bool cpuset_isset(const CpuSet *s, unsigned cpu) {
        return cpu < CPUSET_MAX && (s->bits[cpu / 64] >> (cpu % 64)) & 1;
}

unsigned cpuset_count(const CpuSet *s);
bool cpuset_is_empty(const CpuSet *s);
bool cpuset_equal(const CpuSet *a, const CpuSet *b);
bool cpuset_is_subset(const CpuSet *a, const CpuSet *b);     /* a ⊆ b */
bool cpuset_intersects(const CpuSet *a, const CpuSet *b);
void cpuset_and(CpuSet *ret, const CpuSet *a, const CpuSet *b);
void cpuset_or(CpuSet *ret, const CpuSet *a, const CpuSet *b);
void cpuset_andnot(CpuSet *ret, const CpuSet *a, const CpuSet *b);   /* a \ b */
int cpuset_next(const CpuSet *s, int after);    /* next set CPU > after, or -1 */
int cpuset_first(const CpuSet *s);
int cpuset_last(const CpuSet *s);

/*
 * Strict list parser: "", "0", "0-3,8". Whitespace around the whole string and a trailing newline are
 * accepted; garbage, reversed ranges, duplicates are not. On error *ret_bad (if non-NULL) gets a copy
 * of the offending part. Returns 0 or -EINVAL/-ERANGE/-ENOMEM.
 */
int cpuset_parse(const char *s, CpuSet *ret, char **ret_bad);
int cpuset_format(const CpuSet *s, char **ret);         /* "0-3,8"; "" for the empty set */
/* Kernel hex mask: comma-separated 32-bit words, most significant first ("00000000,0000000f"). */
int cpuset_parse_mask(const char *s, CpuSet *ret);
/* Format as a mask covering at least nr_cpu_ids CPUs (the kernel wants as many words as it has). */
int cpuset_format_mask(const CpuSet *s, unsigned nr_cpu_ids, char **ret);

void cpuset_to_cpu_set(const CpuSet *s, cpu_set_t *ret);      /* CPUs >= CPU_SETSIZE are dropped */
void cpuset_from_cpu_set(const cpu_set_t *c, CpuSet *ret);
