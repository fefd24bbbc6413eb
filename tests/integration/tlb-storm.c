/* SPDX-License-Identifier: MIT */
/* TLB shootdowns on demand, for the audit tier (test-audit.py):
 *   tlb-storm SECONDS CPU_A CPU_B
 * Two threads of one process: one spins on CPU_B (the mm stays loaded there), the other maps, touches and
 * unmaps a few pages in a loop on CPU_A, so every unmap flushes CPU_B's TLB by IPI (CAL) and counts as a
 * remote shootdown there (TLB in /proc/interrupts). Prints the number of unmaps. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define PAGES 4

static volatile int stop;
static int spin_cpu;

static double now(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pin(int cpu) {
        cpu_set_t s;

        CPU_ZERO(&s);
        CPU_SET(cpu, &s);
        if (sched_setaffinity(0, sizeof s, &s) < 0) {
                perror("tlb-storm: sched_setaffinity");
                exit(1);
        }
}

static void *spinner(void *arg) {
        volatile unsigned long x = 0;

        (void) arg;
        pin(spin_cpu);
        while (!stop)
                x++;
        return NULL;
}

int main(int argc, char **argv) {
        pthread_t t;
        double end;
        long n = 0;

        if (argc != 4) {
                fprintf(stderr, "usage: tlb-storm SECONDS CPU_A CPU_B\n");
                return 2;
        }
        end = now() + atof(argv[1]);
        pin(atoi(argv[2]));
        spin_cpu = atoi(argv[3]);
        if (pthread_create(&t, NULL, spinner, NULL) != 0) {
                fprintf(stderr, "tlb-storm: cannot start the spinner\n");
                return 1;
        }
        while (now() < end) {
                char *p = mmap(NULL, 4096 * PAGES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

                if (p == MAP_FAILED) {
                        perror("tlb-storm: mmap");
                        return 1;
                }
                for (int i = 0; i < PAGES; i++)
                        p[i * 4096] = 1;
                (void) munmap(p, 4096 * PAGES);
                n++;
        }
        stop = 1;
        (void) pthread_join(t, NULL);
        printf("%ld\n", n);
        return 0;
}
