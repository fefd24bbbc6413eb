/* SPDX-License-Identifier: MIT */
/* rtctl leases [ID] [--release ID]: CPUs rtd quiets for process trees it did not start (GET/DELETE /v1/leases). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "rtctl.h"
#include "view.h"

static int parse_id(const char *s, uint64_t *ret) {
        char *end;

        if (startswith(s, "lease:"))
                s += 6;
        if (!*s || *s == '-' || *s == '+')
                return -1;
        *ret = strtoull(s, &end, 10);
        return *end ? -1 : 0;
}

int verb_leases(Ctl *c, int argc, char **argv) {
        static const struct option options[] = {
                { "release", required_argument, NULL, 'r' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *release = NULL;
        char path[64];
        json_t *j;
        uint64_t id = 0;
        int o, r;

        while ((o = getopt_long(argc, argv, "+r:h", options, NULL)) >= 0)
                switch (o) {
                case 'r': release = optarg; break;
                case 'h':
                        printf("rtctl leases [ID] [--release ID]\n"
                               "CPUs rtd quiets for a process tree it did not start (a Slurm step): all of them, one "
                               "(ID or lease:ID) with its figures, or release one (its owner, root or admins).\n");
                        return RTCTL_EXIT_OK;
                default:
                        return RTCTL_EXIT_USAGE;
                }
        if (optind < argc - 1 || (release && optind < argc)) {
                fprintf(stderr, "rtctl leases: too many arguments; give one lease id\n");
                return RTCTL_EXIT_USAGE;
        }
        const char *arg = release ?: (optind < argc ? argv[optind] : NULL);
        if (arg && parse_id(arg, &id) < 0) {
                fprintf(stderr, "rtctl leases: '%s' is not a lease id (a number, as 'rtctl leases' lists)\n", arg);
                return RTCTL_EXIT_USAGE;
        }
        if (arg)
                snprintf(path, sizeof path, "/v1/leases/%" PRIu64, id);
        if (release) {
                CtlResponse resp;
                r = ctl_request(c, "DELETE", path, NULL, &resp);
                if (r == 0 && resp.status != 200)
                        r = ctl_fail(c, &resp);
                else if (r == 0 && c->json)
                        r = ctl_print_json(&resp);
                else if (r == 0)
                        printf("Lease %" PRIu64 " released.\n", id);
                ctl_response_done(&resp);
                return r;
        }
        r = ctl_get_json(c, arg ? path : "/v1/leases", &j);
        if (r != 0)
                return r;
        if (c->json) {
                ctl_dump_json(j);
                json_decref(j);
                return RTCTL_EXIT_OK;
        }
        View v;
        view_init(&v, stdout);
        if (arg)
                view_lease(&v, j);
        else
                view_leases(&v, j);
        view_done(&v);
        json_decref(j);
        return RTCTL_EXIT_OK;
}
