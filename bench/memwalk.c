/* SPDX-License-Identifier: MIT */
/* memwalk: the task-manager experiment's job (design.md §1): a 5 MiB array traversed cyclically with a
 * large stride, incrementing every element it visits.  Prints one JSON line with its own wall time, CPU
 * time and context switches, so bench/run can compare D, M and R runs without trusting anything else. */

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define ARRAY_BYTES (5u * 1024u * 1024u)
#define ARRAY_ELEMS (ARRAY_BYTES / sizeof(uint32_t))     /* 1310720 = 2^18 * 5 */
/* 4099 elements = 16396 bytes: every access lands on another page (dTLB pressure, as in the paper) and
 * another cache line.  Prime and coprime with 2^18*5, so one lap of ARRAY_ELEMS steps visits every element. */
#define STRIDE_ELEMS 4099u
/* Calibrated on the 2-CPU EPYC VM the project runs on: about 2.5 s for one thread on an idle core. */
#define DEFAULT_STEPS 2000000000ull

typedef struct Walker {
        pthread_t thread;
        uint32_t *array;
        uint64_t steps;
        uint64_t checksum;
} Walker;

static double now_s(clockid_t clk) {
        struct timespec ts;

        clock_gettime(clk, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void *walk(void *arg) {
        Walker *w = arg;
        uint32_t *a = w->array;
        uint64_t sum = 0;
        size_t i = 0;

        for (uint64_t n = 0; n < w->steps; n++) {
                a[i]++;
                i += STRIDE_ELEMS;
                if (i >= ARRAY_ELEMS)
                        i -= ARRAY_ELEMS;
        }
        for (size_t k = 0; k < ARRAY_ELEMS; k++)
                sum += a[k] * (uint64_t) (k + 1);
        w->checksum = sum;
        return NULL;
}

static void help(void) {
        printf("memwalk [-n STEPS] [-t THREADS] [-c SECONDS] [-o FILE] [-l LABEL]\n\n"
               "Walk a 5 MiB array cyclically with a %u-byte stride, incrementing each element visited.\n"
               "  -n STEPS     element visits per thread (default %llu, ~2.5 s on the reference VM)\n"
               "  -t THREADS   threads, each walking its own array with STEPS visits (default 1)\n"
               "  -c SECONDS   calibrate: print the STEPS that take about SECONDS here, and exit\n"
               "  -o FILE      append the JSON result line to FILE instead of stdout\n"
               "  -l LABEL     copy LABEL into the result line (\"label\")\n",
               (unsigned) (STRIDE_ELEMS * sizeof(uint32_t)), DEFAULT_STEPS);
}

static int run(unsigned nthreads, uint64_t steps, double *ret_wall, double *ret_cpu, uint64_t *ret_sum) {
        Walker *w = calloc(nthreads, sizeof(Walker));
        double t0, c0;
        int r = 0;

        if (!w)
                return -ENOMEM;
        for (unsigned k = 0; k < nthreads; k++) {
                w[k].steps = steps;
                w[k].array = aligned_alloc(4096, ARRAY_BYTES);
                if (!w[k].array) {
                        r = -ENOMEM;
                        goto out;
                }
                /* Fault the pages in before the clock starts: the time is the traversal's, not page faults'. */
                memset(w[k].array, 0, ARRAY_BYTES);
        }
        t0 = now_s(CLOCK_MONOTONIC);
        c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
        if (nthreads == 1)
                walk(&w[0]);    /* no extra thread: the single-threaded job is exactly one task */
        else
                for (unsigned k = 0; k < nthreads; k++) {
                        r = -pthread_create(&w[k].thread, NULL, walk, &w[k]);
                        if (r < 0) {
                                for (unsigned j = 0; j < k; j++)
                                        pthread_join(w[j].thread, NULL);
                                goto out;
                        }
                }
        if (nthreads > 1)
                for (unsigned k = 0; k < nthreads; k++)
                        pthread_join(w[k].thread, NULL);
        *ret_wall = now_s(CLOCK_MONOTONIC) - t0;
        *ret_cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        *ret_sum = 0;
        for (unsigned k = 0; k < nthreads; k++)
                *ret_sum += w[k].checksum;
out:
        for (unsigned k = 0; k < nthreads; k++)
                free(w[k].array);
        free(w);
        return r;
}

static int parse_u64(const char *s, const char *what, uint64_t min, uint64_t max, uint64_t *ret) {
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min || v > max) {
                fprintf(stderr, "memwalk: %s must be an integer in %llu..%llu, got \"%s\"\n",
                        what, (unsigned long long) min, (unsigned long long) max, s);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'H' },
                {}
        };
        uint64_t steps = DEFAULT_STEPS, nthreads = 1, calibrate = 0;
        const char *out = NULL, *label = "";
        double wall, cpu;
        uint64_t sum;
        struct rusage ru;
        FILE *f = stdout;
        int c, r;

        while ((c = getopt_long(argc, argv, "n:t:c:o:l:h", opts, NULL)) >= 0)
                switch (c) {
                case 'n':
                        if (parse_u64(optarg, "-n STEPS", 1, UINT64_MAX / 2, &steps) < 0)
                                return 2;
                        break;
                case 't':
                        if (parse_u64(optarg, "-t THREADS", 1, 1024, &nthreads) < 0)
                                return 2;
                        break;
                case 'c':
                        if (parse_u64(optarg, "-c SECONDS", 1, 3600, &calibrate) < 0)
                                return 2;
                        break;
                case 'o':
                        out = optarg;
                        break;
                case 'l':
                        if (strpbrk(optarg, "\"\\") || strlen(optarg) > 200) {
                                fprintf(stderr, "memwalk: -l LABEL must be at most 200 characters without quotes or backslashes\n");
                                return 2;
                        }
                        label = optarg;
                        break;
                case 'h':
                case 'H':
                        help();
                        return 0;
                default:
                        return 2;
                }
        if (optind < argc) {
                fprintf(stderr, "memwalk: unexpected argument \"%s\" (see --help)\n", argv[optind]);
                return 2;
        }

        if (calibrate > 0) {
                /* A short probe, then scale: the walk's cost per step is flat once the array is in cache. */
                uint64_t probe = 100000000ull;

                r = run(1, probe, &wall, &cpu, &sum);
                if (r < 0)
                        goto fail;
                printf("%llu\n", (unsigned long long) ((double) probe * (double) calibrate / wall));
                return 0;
        }

        r = run((unsigned) nthreads, steps, &wall, &cpu, &sum);
        if (r < 0)
                goto fail;
        if (getrusage(RUSAGE_SELF, &ru) < 0) {
                r = -errno;
                goto fail;
        }
        if (out) {
                f = fopen(out, "ae");
                if (!f) {
                        fprintf(stderr, "memwalk: cannot open -o %s: %s\n", out, strerror(errno));
                        return 1;
                }
        }
        /* The label was checked to be quote-free above, so it is printed as is. */
        fprintf(f, "{\"label\":\"%s\",\"threads\":%llu,\"steps\":%llu,\"seconds\":%.6f,\"cpu_seconds\":%.6f,"
                "\"voluntary_ctxt\":%ld,\"involuntary_ctxt\":%ld,\"checksum\":%llu}\n",
                label, (unsigned long long) nthreads, (unsigned long long) steps, wall, cpu,
                ru.ru_nvcsw, ru.ru_nivcsw, (unsigned long long) sum);
        if (f != stdout && fclose(f) != 0) {
                fprintf(stderr, "memwalk: cannot write %s: %s\n", out, strerror(errno));
                return 1;
        }
        return 0;
fail:
        fprintf(stderr, "memwalk: %s\n", strerror(-r));
        return 1;
}
