/* SPDX-License-Identifier: MIT */
/* CPU set arithmetic and the kernel's two text forms: lists and hex masks. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpuset.h"
#include "macro.h"

unsigned cpuset_count(const CpuSet *s) {
        unsigned n = 0;
        for (size_t i = 0; i < ELEMENTSOF(s->bits); i++)
                n += (unsigned) __builtin_popcountll(s->bits[i]);
        return n;
}

bool cpuset_is_empty(const CpuSet *s) {
        for (size_t i = 0; i < ELEMENTSOF(s->bits); i++)
                if (s->bits[i])
                        return false;
        return true;
}

bool cpuset_equal(const CpuSet *a, const CpuSet *b) {
        return memcmp(a->bits, b->bits, sizeof a->bits) == 0;
}

bool cpuset_is_subset(const CpuSet *a, const CpuSet *b) {
        for (size_t i = 0; i < ELEMENTSOF(a->bits); i++)
                if (a->bits[i] & ~b->bits[i])
                        return false;
        return true;
}

bool cpuset_intersects(const CpuSet *a, const CpuSet *b) {
        for (size_t i = 0; i < ELEMENTSOF(a->bits); i++)
                if (a->bits[i] & b->bits[i])
                        return true;
        return false;
}

void cpuset_and(CpuSet *ret, const CpuSet *a, const CpuSet *b) {
        for (size_t i = 0; i < ELEMENTSOF(ret->bits); i++)
                ret->bits[i] = a->bits[i] & b->bits[i];
}

void cpuset_or(CpuSet *ret, const CpuSet *a, const CpuSet *b) {
        for (size_t i = 0; i < ELEMENTSOF(ret->bits); i++)
                ret->bits[i] = a->bits[i] | b->bits[i];
}

void cpuset_andnot(CpuSet *ret, const CpuSet *a, const CpuSet *b) {
        for (size_t i = 0; i < ELEMENTSOF(ret->bits); i++)
                ret->bits[i] = a->bits[i] & ~b->bits[i];
}

int cpuset_next(const CpuSet *s, int after) {
        for (unsigned cpu = (unsigned) (after + 1); cpu < CPUSET_MAX;) {
                uint64_t w = s->bits[cpu / 64] >> (cpu % 64);
                if (w)
                        return (int) (cpu + (unsigned) __builtin_ctzll(w));
                cpu = (cpu / 64 + 1) * 64;
        }
        return -1;
}

int cpuset_first(const CpuSet *s) {
        return cpuset_next(s, -1);
}

int cpuset_last(const CpuSet *s) {
        for (int i = (int) ELEMENTSOF(s->bits) - 1; i >= 0; i--)
                if (s->bits[i])
                        return i * 64 + 63 - __builtin_clzll(s->bits[i]);
        return -1;
}

static int parse_cpu_number(const char *p, const char **end, unsigned *ret) {
        char *e;
        unsigned long v;

        if (!isdigit((unsigned char) *p))
                return -EINVAL;
        errno = 0;
        v = strtoul(p, &e, 10);
        if (errno == ERANGE || v >= CPUSET_MAX)
                return -ERANGE;
        *end = e;
        *ret = (unsigned) v;
        return 0;
}

static int fail_at(const char *part, size_t len, char **ret_bad, int r) {
        if (ret_bad)
                *ret_bad = strndup(part, len);
        return r;
}

int cpuset_parse(const char *s, CpuSet *ret, char **ret_bad) {
        CpuSet set = {};
        const char *p, *end;
        size_t len;

        while (isspace((unsigned char) *s))
                s++;
        len = strlen(s);
        while (len > 0 && isspace((unsigned char) s[len - 1]))
                len--;

        for (p = s; p < s + len;) {
                const char *comma = memchr(p, ',', (size_t) (s + len - p));
                const char *stop = comma ?: s + len;
                unsigned lo, hi;
                int r;

                r = parse_cpu_number(p, &end, &lo);
                if (r < 0)
                        return fail_at(p, (size_t) (stop - p), ret_bad, r);
                hi = lo;
                if (end < stop && *end == '-') {
                        r = parse_cpu_number(end + 1, &end, &hi);
                        if (r < 0)
                                return fail_at(p, (size_t) (stop - p), ret_bad, r);
                }
                if (end != stop || hi < lo)
                        return fail_at(p, (size_t) (stop - p), ret_bad, -EINVAL);
                for (unsigned c = lo; c <= hi; c++) {
                        if (cpuset_isset(&set, c))
                                return fail_at(p, (size_t) (stop - p), ret_bad, -EINVAL);
                        cpuset_set(&set, c);
                }
                if (!comma)
                        break;
                p = comma + 1;
                if (p >= s + len)       /* trailing comma */
                        return fail_at(",", 1, ret_bad, -EINVAL);
        }

        *ret = set;
        return 0;
}

int cpuset_format(const CpuSet *s, char **ret) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        bool first = true;

        if (!f)
                return -ENOMEM;
        for (int cpu = cpuset_first(s); cpu >= 0;) {
                int last = cpu;
                while (cpuset_isset(s, (unsigned) last + 1))
                        last++;
                fprintf(f, first ? "%d" : ",%d", cpu);
                if (last > cpu)
                        fprintf(f, "-%d", last);
                first = false;
                cpu = cpuset_next(s, last);
        }
        if (fclose(f) != 0 || !buf) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}

int cpuset_parse_mask(const char *s, CpuSet *ret) {
        CpuSet set = {};
        size_t len = strlen(s);
        unsigned word = 0;

        while (len > 0 && isspace((unsigned char) s[len - 1]))
                len--;
        if (len == 0)
                return -EINVAL;
        /*
         * Each comma-separated chunk is one 32-bit word of up to 8 hex digits, least significant last, as
         * the kernel's bitmap_parse() reads it: "1,0" is CPU 32, not CPU 4.
         */
        for (size_t end = len;; word++) {
                size_t start = end;
                uint32_t v = 0;

                while (start > 0 && s[start - 1] != ',')
                        start--;
                if (start == end || end - start > 8)
                        return -EINVAL;
                for (size_t i = start; i < end; i++) {
                        char c = s[i];
                        if (!isxdigit((unsigned char) c))
                                return -EINVAL;
                        v = v << 4 | (uint32_t) (isdigit((unsigned char) c) ? c - '0'
                                                                            : tolower((unsigned char) c) - 'a' + 10);
                }
                if (v != 0 && word >= CPUSET_MAX / 32)
                        return -ERANGE;
                if (word < CPUSET_MAX / 32)
                        set.bits[word / 2] |= (uint64_t) v << ((word % 2) * 32);
                if (start == 0)
                        break;
                end = start - 1;
        }
        *ret = set;
        return 0;
}

int cpuset_format_mask(const CpuSet *s, unsigned nr_cpu_ids, char **ret) {
        int last = cpuset_last(s);
        /* Words past CPUSET_MAX would read beyond bits[]. */
        unsigned ncpus = MIN(MAX(nr_cpu_ids, (unsigned) (last + 1)), (unsigned) CPUSET_MAX);
        unsigned nwords = MAX(1u, (ncpus + 31) / 32);
        char *buf = malloc(nwords * 9);

        if (!buf)
                return -ENOMEM;
        char *p = buf;
        for (unsigned w = nwords; w-- > 0;) {
                uint32_t word = (uint32_t) (s->bits[w / 2] >> ((w % 2) * 32));
                p += sprintf(p, w == nwords - 1 ? "%08" PRIx32 : ",%08" PRIx32, word);
        }
        *ret = buf;
        return 0;
}

void cpuset_to_cpu_set(const CpuSet *s, cpu_set_t *ret) {
        CPU_ZERO(ret);
        CPUSET_FOREACH(cpu, s)
                if (cpu < CPU_SETSIZE)
                        CPU_SET(cpu, ret);
}

void cpuset_from_cpu_set(const cpu_set_t *c, CpuSet *ret) {
        cpuset_zero(ret);
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
                if (CPU_ISSET(cpu, c))
                        cpuset_set(ret, (unsigned) cpu);
}
