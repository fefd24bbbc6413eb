/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "rtctl.h"

int verb_submit(Ctl *c, int argc, char **argv) {
        (void) c;
        (void) argc;
        (void) argv;
        fprintf(stderr, "rtctl: submit is not available yet\n");
        return RTCTL_EXIT_USAGE;
}

int verb_list(Ctl *c, int argc, char **argv) {
        (void) c;
        (void) argc;
        (void) argv;
        fprintf(stderr, "rtctl: list is not available yet\n");
        return RTCTL_EXIT_USAGE;
}

int verb_show(Ctl *c, int argc, char **argv) {
        (void) c;
        (void) argc;
        (void) argv;
        fprintf(stderr, "rtctl: show is not available yet\n");
        return RTCTL_EXIT_USAGE;
}

int verb_cancel(Ctl *c, int argc, char **argv) {
        (void) c;
        (void) argc;
        (void) argv;
        fprintf(stderr, "rtctl: cancel is not available yet\n");
        return RTCTL_EXIT_USAGE;
}

int verb_wait(Ctl *c, int argc, char **argv) {
        (void) c;
        (void) argc;
        (void) argv;
        fprintf(stderr, "rtctl: wait is not available yet\n");
        return RTCTL_EXIT_USAGE;
}

int verb_logs(Ctl *c, int argc, char **argv) {
        (void) c;
        (void) argc;
        (void) argv;
        fprintf(stderr, "rtctl: logs is not available yet\n");
        return RTCTL_EXIT_USAGE;
}

