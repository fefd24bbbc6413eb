/* SPDX-License-Identifier: MIT */
/*
 * The floor for `rtctl --version` in bench/dispatch: a static PIE that prints one line and exits, like rtctl
 * --version does, with nothing else in it. What rtctl takes beyond it is rtctl's own start-up; the rest is
 * fork, exec and exit of any static program on this machine.
 */
#include <stdio.h>

int main(void) {
        fputs("rtctl 0.0.0\n", stdout);
        return 0;
}
