/* SPDX-License-Identifier: MIT */
/*
 * The machine's own limit for bench/dispatch: pinned to one CPU under SCHED_FIFO, vfork+exec a program
 * (default /bin/true) N times and wait for each, like a perfect dispatcher with nothing in between.
 * Usage: dispatch-loop CPU PRIORITY N [PROGRAM]. Prints "N SECONDS RATE/s".
 */

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
        struct sched_param sp;
        struct timespec a, b;
        cpu_set_t mask;
        char *prog = argc > 4 ? argv[4] : "/bin/true";
        char *args[] = { prog, NULL }, *env[] = { NULL };
        int cpu, n;

        if (argc < 4) {
                fprintf(stderr, "usage: %s CPU PRIORITY N [PROGRAM]\n", argv[0]);
                return 2;
        }
        cpu = atoi(argv[1]);
        sp.sched_priority = atoi(argv[2]);
        n = atoi(argv[3]);
        CPU_ZERO(&mask);
        CPU_SET(cpu, &mask);
        if (sched_setaffinity(0, sizeof mask, &mask) < 0 || sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
                perror("pin/SCHED_FIFO");
                return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < n; i++) {
                int status;
                pid_t pid = vfork();
                if (pid == 0) {
                        execve(prog, args, env);
                        _exit(127);
                }
                if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                        fprintf(stderr, "run %d failed\n", i);
                        return 1;
                }
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = (double) (b.tv_sec - a.tv_sec) + (double) (b.tv_nsec - a.tv_nsec) / 1e9;
        printf("%d %.6f %.1f\n", n, s, n / s);
        return 0;
}
