/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "rtctl.h"

int verb_reserve(Ctl *c, int argc, char **argv) {
        (void) c;
        (void) argc;
        (void) argv;
        fprintf(stderr, "rtctl: reserve is not available yet\n");
        return RTCTL_EXIT_USAGE;
}

int verb_release(Ctl *c, int argc, char **argv) {
        (void) c;
        (void) argc;
        (void) argv;
        fprintf(stderr, "rtctl: release is not available yet\n");
        return RTCTL_EXIT_USAGE;
}

int verb_plan(Ctl *c, int argc, char **argv) {
        (void) c;
        (void) argc;
        (void) argv;
        fprintf(stderr, "rtctl: plan is not available yet\n");
        return RTCTL_EXIT_USAGE;
}

