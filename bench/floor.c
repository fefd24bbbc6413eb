/* SPDX-License-Identifier: MIT */
/* floor: the busy-loop probe of issue 18 (in the manner of oslat). Reads CLOCK_MONOTONIC in a tight loop on
 * the CPU it runs on and records every gap between two reads above a threshold: the time something else
 * (an interrupt, a softirq, another task, the hypervisor) took from it. Never pins itself or changes its
 * policy: rtd (or taskset + chrt) does that.
 *   floor [-d SECONDS] [-t THRESHOLD_NS] [-g GAPFILE]
 * Prints one JSON object: the window (CLOCK_MONOTONIC ns), loop count, the loop's own period (the minimum
 * delta), gaps over the threshold (count, per second, max, stolen ns = sum of gap - period), a log2
 * histogram of the gaps in ns and p99.9999 of all loop deltas. -g writes every gap as "start_ns dur_ns"
 * lines, so a caller can cut the window to the samples of rtd it compares with. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_GAPS (4u << 20)
#define SLOTS 40

static inline uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static unsigned slot(uint64_t ns) {
        unsigned s = 0;

        while (ns > 1 && s < SLOTS - 1) {
                ns >>= 1;
                s++;
        }
        return s;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

/* The gaps, one "start length" line each after the loop period: for bench/floor-run's accounting. */
static int write_gaps(const char *path, uint64_t period, const uint64_t *start, const uint64_t *len, size_t n) {
        FILE *f = fopen(path, "w");

        if (!f) {
                fprintf(stderr, "floor: %s: %s\n", path, strerror(errno));
                return 1;
        }
        fprintf(f, "%llu\n", (unsigned long long) period);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%llu %llu\n", (unsigned long long) start[i], (unsigned long long) len[i]);
        return fclose(f) != 0;
}

int main(int argc, char **argv) {
        double seconds = 10;
        uint64_t threshold = 1000, start, end, prev, t, loops = 0, min = UINT64_MAX, max = 0, stolen = 0;
        uint64_t hist[SLOTS] = {}, *gap_start, *gap_len, *sorted;
        const char *gapfile = NULL;
        size_t n = 0, lost = 0;
        int opt;

        while ((opt = getopt(argc, argv, "d:t:g:")) != -1) {
                char *e;

                errno = 0;
                if (opt == 'd')
                        seconds = strtod(optarg, &e);
                else if (opt == 't')
                        threshold = strtoull(optarg, &e, 10);
                else if (opt == 'g') {
                        gapfile = optarg;
                        continue;
                } else
                        goto usage;
                if (errno || *e || e == optarg || seconds <= 0 || seconds > 3600 || threshold == 0)
                        goto usage;
        }
        if (optind != argc)
                goto usage;
        gap_start = calloc(MAX_GAPS, sizeof *gap_start);
        gap_len = calloc(MAX_GAPS, sizeof *gap_len);
        if (!gap_start || !gap_len) {
                fprintf(stderr, "floor: out of memory\n");
                return 1;
        }
        /* Touch the arrays first: a page fault inside the loop would be a gap of our own making. */
        memset(gap_start, 0, MAX_GAPS * sizeof *gap_start);
        memset(gap_len, 0, MAX_GAPS * sizeof *gap_len);

        start = prev = now_ns();
        end = start + (uint64_t) (seconds * 1e9);
        do {
                uint64_t d;

                t = now_ns();
                d = t - prev;
                loops++;
                if (d < min)
                        min = d;
                if (d > threshold) {
                        if (n < MAX_GAPS) {
                                gap_start[n] = prev;
                                gap_len[n++] = d;
                        } else
                                lost++;
                        if (d > max)
                                max = d;
                }
                prev = t;
        } while (t < end);

        /* The loop's own period is not stolen: each gap costs the probe gap - min. */
        for (size_t i = 0; i < n; i++) {
                stolen += gap_len[i] - min;
                hist[slot(gap_len[i])]++;
        }
        /* p99.9999 of all loop deltas: the gaps are the largest deltas, so it is among them if there are
         * more than loops / 1e6 of them, else it is at most the threshold. */
        uint64_t rank = loops / 1000000, p = threshold;
        sorted = malloc((n ? n : 1) * sizeof *sorted);
        if (sorted && n > rank) {
                memcpy(sorted, gap_len, n * sizeof *sorted);
                qsort(sorted, n, sizeof *sorted, cmp_u64);
                p = sorted[n - 1 - rank];
        }
        printf("{\"start_ns\": %llu, \"end_ns\": %llu, \"threshold_ns\": %llu, \"loops\": %llu, \"period_ns\": %llu, "
               "\"gaps\": %zu, \"gaps_lost\": %zu, \"gaps_per_s\": %.1f, \"max_ns\": %llu, \"p99_9999_ns\": %llu, "
               "\"stolen_ns\": %llu, \"hist_log2_ns\": [",
               (unsigned long long) start, (unsigned long long) t, (unsigned long long) threshold,
               (unsigned long long) loops, (unsigned long long) min, n, lost, n / ((t - start) / 1e9),
               (unsigned long long) max, (unsigned long long) p, (unsigned long long) stolen);
        for (unsigned i = 0; i < SLOTS; i++)
                printf("%s%llu", i ? ", " : "", (unsigned long long) hist[i]);
        printf("]}\n");
        int rc = gapfile ? write_gaps(gapfile, min, gap_start, gap_len, n) : 0;
        free(sorted);
        free(gap_start);
        free(gap_len);
        return rc;
usage:
        fprintf(stderr, "usage: floor [-d SECONDS] [-t THRESHOLD_NS] [-g GAPFILE]\n");
        return 2;
}
