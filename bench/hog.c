/* SPDX-License-Identifier: MIT */
/* hog: the background loads of the task-manager experiment (design.md §1), one process per CPU.
 *   hog cpu          load 1: integer and floating-point arithmetic in registers, a few bytes of memory
 *   hog mem -m SIZE  load 2: read-modify-write sweeps over a SIZE block (one cache line per step)
 * Prints "ready" once at full strength; runs until SIGTERM/SIGINT (or -d SECONDS), then exits 0.
 * Never pins itself or changes its policy: where it runs is the scheduler's (or rtd's) business. */

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
        (void) sig;
        stop = 1;
}

static int parse_size(const char *s, uint64_t *ret) {
        char *end;
        unsigned long long v;
        uint64_t mult = 1;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || end == s || s[0] == '-')
                return -EINVAL;
        switch (*end) {
        case 'G': case 'g': mult = 1ull << 30; end++; break;
        case 'M': case 'm': mult = 1ull << 20; end++; break;
        case 'K': case 'k': mult = 1ull << 10; end++; break;
        case '\0': break;
        default: return -EINVAL;
        }
        if (*end != '\0' || v == 0 || v > (64ull << 30) / mult)
                return -EINVAL;
        *ret = v * mult;
        return 0;
}

/* volatile sinks keep the compiler from deleting the work */
static volatile uint64_t sink_u;
static volatile double sink_d;

/* One line on stdout once the load is at full strength, so bench/run can wait for it instead of sleeping. */
static void announce_ready(void) {
        fputs("ready\n", stdout);
        fflush(stdout);
}

static void hog_cpu(void) {
        uint64_t x = 88172645463325252ull;
        double d = 1.0;

        announce_ready();
        while (!stop) {
                for (int k = 0; k < 1000000; k++) {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        d = d * 1.0000001 + (double) (x & 0xff) * 1e-9;
                }
                sink_u = x;
                sink_d = d;
        }
}

static int hog_mem(uint64_t bytes) {
        uint64_t *a, n = bytes / sizeof(uint64_t), sum = 0;

        a = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (a == MAP_FAILED)
                return -errno;
        /* Touch every page once so the whole block is resident for the run, not just what a sweep reached. */
        memset(a, 1, bytes);
        announce_ready();
        while (!stop)
                for (uint64_t i = 0; i < n && !stop; i += 8) {  /* 8 * 8 bytes = one cache line */
                        a[i] += i;
                        sum += a[i];
                }
        sink_u = sum;
        munmap(a, bytes);
        return 0;
}

int main(int argc, char **argv) {
        uint64_t bytes = 1ull << 30;
        unsigned duration = 0;
        const char *mode;
        int c, r = 0;

        if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
                printf("hog cpu|mem [-m SIZE] [-d SECONDS]\n"
                       "  cpu          arithmetic in registers (load 1)\n"
                       "  mem          sweep a SIZE block, one cache line per step (load 2), default 1G\n"
                       "  -m SIZE      block size for mem, with K/M/G suffix\n"
                       "  -d SECONDS   stop after SECONDS (default: run until SIGTERM)\n");
                return argc < 2 ? 2 : 0;
        }
        mode = argv[1];
        optind = 2;
        while ((c = getopt(argc, argv, "m:d:")) >= 0)
                switch (c) {
                case 'm':
                        if (parse_size(optarg, &bytes) < 0) {
                                fprintf(stderr, "hog: -m SIZE must be like 512M or 2G (at most 64G), got \"%s\"\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 'd':
                        duration = (unsigned) strtoul(optarg, NULL, 10);
                        if (duration == 0) {
                                fprintf(stderr, "hog: -d SECONDS must be a positive integer, got \"%s\"\n", optarg);
                                return 2;
                        }
                        break;
                default:
                        return 2;
                }

        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        signal(SIGALRM, on_signal);
        if (duration > 0)
                alarm(duration);

        if (strcmp(mode, "cpu") == 0)
                hog_cpu();
        else if (strcmp(mode, "mem") == 0)
                r = hog_mem(bytes);
        else {
                fprintf(stderr, "hog: mode must be \"cpu\" or \"mem\", got \"%s\"\n", mode);
                return 2;
        }
        if (r < 0) {
                fprintf(stderr, "hog: %s\n", strerror(-r));
                return 1;
        }
        return 0;
}
