/* SPDX-License-Identifier: MIT */
/*
 * Process start-up as it is, without a harness's own cost: bench/dispatch timed `rtctl --version` from a
 * bash loop, whose fork of a large shell is most of the figure. This starts each command with posix_spawn
 * (glibc's is clone(CLONE_VM|CLONE_VFORK): no page tables copied), stdout to /dev/null, waits for it, and
 * times spawn → reaped with CLOCK_MONOTONIC. The commands take turns run by run, so load that comes and
 * goes on a shared machine falls on all of them alike.
 *
 * Usage: spawn-time N 'CMD ARGS' ['CMD ARGS' ...]   (each command split on spaces; no quoting)
 * Prints, per command: "median_us p10_us p90_us min_us CMD".
 */

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { MAX_CMDS = 8, MAX_ARGS = 16 };

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return (x > y) - (x < y);
}

static double now_us(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double) t.tv_sec * 1e6 + (double) t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
        char *args[MAX_CMDS][MAX_ARGS + 1], *copies[MAX_CMDS] = {};
        posix_spawn_file_actions_t fa;
        int n, ncmd = argc - 2;

        if (argc < 3 || ncmd > MAX_CMDS || (n = atoi(argv[1])) <= 0) {
                fprintf(stderr, "usage: %s N 'CMD ARGS' ['CMD ARGS' ...] (at most %d commands)\n", argv[0],
                        MAX_CMDS);
                return 2;
        }
        for (int c = 0; c < ncmd; c++) {
                char *copy = copies[c] = strdup(argv[c + 2]), *save = NULL;
                int k = 0;
                if (!copy)
                        return 1;
                for (char *w = strtok_r(copy, " ", &save); w && k < MAX_ARGS; w = strtok_r(NULL, " ", &save))
                        args[c][k++] = w;
                args[c][k] = NULL;
                if (k == 0) {
                        fprintf(stderr, "empty command %d\n", c + 1);
                        return 2;
                }
        }
        double *t = calloc((size_t) ncmd * (size_t) n, sizeof *t);
        if (!t || posix_spawn_file_actions_init(&fa) != 0 ||
            posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 01 /* O_WRONLY */, 0) != 0)
                return 1;
        /* One untimed run each first: the binaries' pages in the page cache, as for every later run. */
        for (int i = -1; i < n; i++)
                for (int c = 0; c < ncmd; c++) {
                        pid_t pid;
                        int status;
                        double a = now_us();
                        if (posix_spawn(&pid, args[c][0], &fa, NULL, args[c], environ) != 0 ||
                            waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                                fprintf(stderr, "%s: failed\n", argv[c + 2]);
                                return 1;
                        }
                        if (i >= 0)
                                t[c * n + i] = now_us() - a;
                }
        for (int c = 0; c < ncmd; c++) {
                double *v = t + c * n;
                qsort(v, (size_t) n, sizeof *v, cmp_double);
                printf("%.1f %.1f %.1f %.1f %s\n", v[n / 2], v[n / 10], v[n * 9 / 10], v[0], argv[c + 2]);
        }
        posix_spawn_file_actions_destroy(&fa);
        free(t);
        for (int c = 0; c < ncmd; c++)
                free(copies[c]);        /* args[] points into them: freed only now */
        return 0;
}
