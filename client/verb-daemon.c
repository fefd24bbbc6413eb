/* SPDX-License-Identifier: MIT */
/* rtctl reexec: replace the running rtd by its (upgraded) binary in place, and wait until it answers. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rtctl.h"
#include "shared/macro.h"

static long long jint(json_t *o, const char *key) {
        return json_integer_value(json_object_get(o, key));
}

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int verb_reexec(Ctl *c, int argc, char **argv) {
        CtlResponse resp;
        long long count, failures;
        double t0;
        int r;

        if (argc > 1) {
                printf("rtctl reexec\nRe-execute rtd in place (admins): the binary rtd was started from, checked\n"
                       "first with rtd --check-upgrade; running jobs, queued jobs and the reservation stay.\n"
                       "Waits until the new rtd answers.\n");
                return streq(argv[1], "--help") || streq(argv[1], "-h") ? RTCTL_EXIT_OK : RTCTL_EXIT_USAGE;
        }
        t0 = now_ms();
        r = ctl_request(c, "POST", "/v1/daemon/reexec", NULL, &resp);
        if (r != 0)
                return r;
        if (resp.status != 202) {
                r = ctl_fail(c, &resp);
                ctl_response_done(&resp);
                return r;
        }
        count = jint(resp.json, "count");
        failures = jint(resp.json, "failures");
        if (!c->quiet && !c->json)
                printf("rtd (pid %lld) re-executing %s\n", jint(resp.json, "pid"), ctl_jstr(resp.json, "binary", "?"));
        ctl_response_done(&resp);

        /* The old image answers until it hands over; a request made after that waits in the socket's backlog
         * for the new one. Wait past the hand-over, then ask until the new image says it is there. */
        usleep(300000);
        for (unsigned tries = 0;; tries++) {
                json_t *st = NULL, *rx, *start;

                r = ctl_get_json(c, "/v1/status", &st);
                if (r != 0 && tries >= 120)
                        return r;
                if (r != 0) {
                        usleep(500000);
                        continue;
                }
                rx = json_object_get(st, "reexec");
                if (jint(rx, "failures") > failures) {
                        fprintf(stderr, "rtctl: re-exec failed: %s\n", ctl_jstr(rx, "last_failure", "?"));
                        json_decref(st);
                        return RTCTL_EXIT_REFUSED;
                }
                if (jint(rx, "count") > count) {
                        start = json_object_get(json_object_get(st, "reservation"), "start");
                        if (c->json)
                                ctl_dump_json(st);
                        else if (!c->quiet)
                                printf("rtd %s (pid %lld) answers after %.0f ms (ready after %lld ms); reservation "
                                       "%s with %lld knob writes\n",
                                       ctl_jstr(st, "version", "?"), jint(st, "pid"), now_ms() - t0,
                                       jint(rx, "last_exec_msec"), ctl_jstr(start, "mode", "none"),
                                       jint(start, "knob_writes"));
                        json_decref(st);
                        return RTCTL_EXIT_OK;
                }
                json_decref(st);
                usleep(50000);
        }
}
