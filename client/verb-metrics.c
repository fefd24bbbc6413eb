/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "rtctl.h"

int verb_metrics(Ctl *c, int argc, char **argv) {
        (void) c;
        (void) argc;
        (void) argv;
        fprintf(stderr, "rtctl: metrics is not available yet\n");
        return RTCTL_EXIT_USAGE;
}

int verb_top(Ctl *c, int argc, char **argv) {
        (void) c;
        (void) argc;
        (void) argv;
        fprintf(stderr, "rtctl: top is not available yet\n");
        return RTCTL_EXIT_USAGE;
}

