/* SPDX-License-Identifier: MIT */
/* rtctl reserve, release, plan; and the reservation part of rtctl status. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtctl.h"
#include "view.h"
#include "shared/macro.h"

/* Every string shown from rtd goes through here: escaped for the terminal (escape.c). */
static const char *jstr(json_t *o, const char *key, const char *dflt) {
        return ctl_jstr(o, key, dflt);
}

static long long jint(json_t *o, const char *key) {
        return json_integer_value(json_object_get(o, key));
}

/* Parse [--force] [--help] plus at most max_args positional arguments. Returns -1 to go on. */
static int parse(int argc, char **argv, const char *usage, bool *force, int max_args, char **args) {
        static const struct option options[] = {
                { "force", no_argument, NULL, 'f' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int o, n = 0;

        while ((o = getopt_long(argc, argv, "+fh", options, NULL)) >= 0)
                switch (o) {
                case 'f':
                        if (!force) {
                                fprintf(stderr, "rtctl %s: unknown option --force\n", argv[0]);
                                return RTCTL_EXIT_USAGE;
                        }
                        *force = true;
                        break;
                case 'h':
                        printf("%s", usage);
                        return RTCTL_EXIT_OK;
                default:
                        fprintf(stderr, "%s", usage);
                        return RTCTL_EXIT_USAGE;
                }
        for (int i = optind; i < argc; i++) {
                if (n >= max_args) {
                        fprintf(stderr, "rtctl %s: unexpected argument '%s'\n", argv[0], argv[i]);
                        return RTCTL_EXIT_USAGE;
                }
                args[n++] = argv[i];
        }
        return -1;
}

int verb_reserve(Ctl *c, int argc, char **argv) {
        static const char usage[] =
                "Usage: rtctl reserve CPULIST [--force]\n"
                "Reserve exactly these CPUs (e.g. 2-3): other tasks, kernel work and IRQs are moved off them.\n"
                "  --force   also when CPUs leaving the reservation run jobs (those jobs are cancelled)\n";
        char *args[1] = {};
        bool force = false;
        CtlResponse resp;
        int r;

        r = parse(argc, argv, usage, &force, 1, args);
        if (r >= 0)
                return r;
        if (!args[0]) {
                fprintf(stderr, "rtctl reserve: which CPUs? e.g. 'rtctl reserve 2-3'\n");
                return RTCTL_EXIT_USAGE;
        }
        json_t *body = json_pack("{s:s, s:b}", "cpus", args[0], "force", force);
        r = ctl_request(c, "PUT", "/v1/reservation", body, &resp);
        json_decref(body);
        if (r != 0)
                return r;
        if (resp.status < 200 || resp.status >= 300)
                r = ctl_fail(c, &resp);
        else if (c->json)
                r = ctl_print_json(&resp);
        else if (!c->quiet) {
                View v;
                view_init(&v, stdout);
                view_reservation(&v, resp.json);
                view_done(&v);
        }
        ctl_response_done(&resp);
        return r;
}

int verb_release(Ctl *c, int argc, char **argv) {
        static const char usage[] =
                "Usage: rtctl release [--force]\n"
                "Give every reserved CPU back and restore every knob rtd changed.\n"
                "  --force   also when jobs run on reserved CPUs (they are cancelled)\n";
        bool force = false;
        CtlResponse resp;
        int r;

        r = parse(argc, argv, usage, &force, 0, NULL);
        if (r >= 0)
                return r;
        r = ctl_request(c, "DELETE", force ? "/v1/reservation?force=1" : "/v1/reservation", NULL, &resp);
        if (r != 0)
                return r;
        if (resp.status < 200 || resp.status >= 300)
                r = ctl_fail(c, &resp);
        else if (c->json)
                r = ctl_print_json(&resp);
        else if (!c->quiet) {
                json_t *rs = json_object_get(resp.json, "restore");
                if (json_is_object(rs))
                        printf("Released: %lld knobs restored, %lld skipped (tasks gone or changed since), %lld "
                               "failed\n", jint(rs, "restored"), jint(rs, "skipped"), jint(rs, "failed"));
                else
                        printf("Released: nothing was reserved\n");
        }
        ctl_response_done(&resp);
        return r;
}

static void print_plan(json_t *p) {
        json_t *v;
        size_t i;

        printf("Plan: reserve CPUs %s, housekeeping %s, backend %s (%s)\n", jstr(p, "cpus", "-"),
               jstr(p, "housekeeping", "-"), jstr(p, "backend", "-"), jstr(p, "backend_reason", "-"));
        printf("Writes (nothing is changed by plan):\n");
        json_array_foreach(json_object_get(p, "writes"), i, v) {
                if (json_object_get(v, "task"))
                        printf("  affinity of task %lld (%s): %s → %s\n", jint(v, "task"), jstr(v, "comm", "?"),
                               jstr(v, "from", "?"), jstr(v, "to", "?"));
                else if (json_object_get(v, "unit"))
                        printf("  %s %s=%s (was %s), runtime\n", jstr(v, "unit", "?"),
                               jstr(v, "property", "?"), jstr(v, "to", ""), jstr(v, "from", "unset"));
                else if (json_object_get(v, "irqbalance"))
                        printf("  irqbalance %s: %s\n", jstr(v, "irqbalance", "?"), jstr(v, "send", ""));
                else if (json_object_get(v, "mkdir"))
                        printf("  mkdir /sys/%s\n", jstr(v, "mkdir", "?"));
                else
                        printf("  %s: %s → %s\n", jstr(v, "path", "?"), jstr(v, "from", "?"), jstr(v, "to", "?"));
        }
        if (json_array_size(json_object_get(p, "writes")) == 0)
                printf("  (none: everything is already as it would be)\n");
        v = json_object_get(p, "tasks");
        printf("Tasks: %lld would move, %lld refuse (per-CPU kthreads), %lld are rtd's own\n",
               jint(v, "would_move"), jint(v, "refused"), jint(v, "own"));
        printf("Cannot do at run time:\n");
        json_array_foreach(json_object_get(p, "cannot"), i, v) {
                if (json_object_get(v, "irq"))
                        printf("  IRQ %lld (%s): %s; remedy: %s\n", jint(v, "irq"), jstr(v, "name", "?"),
                               jstr(v, "why", ""), jstr(v, "remedy", ""));
                else
                        printf("  %s: %s\n", jstr(v, "what", "?"), jstr(v, "why", ""));
        }
        json_array_foreach(json_object_get(p, "residual"), i, v)
                if (json_is_true(json_object_get(v, "reaches")))
                        printf("  still reaches the CPUs: %s (%s); remedy: %s\n", jstr(v, "source", "?"),
                               jstr(v, "evidence", ""), jstr(v, "remedy", "-"));
        json_array_foreach(json_object_get(p, "boot_parameters"), i, v)
                printf("  boot parameter %s: %s (%s)\n", jstr(v, "parameter", "?"), jstr(v, "why", ""),
                       json_is_true(json_object_get(v, "present")) ? "present on this boot" : "needs a reboot");
}

int verb_plan(Ctl *c, int argc, char **argv) {
        static const char usage[] =
                "Usage: rtctl plan [CPULIST]\n"
                "Dry run: print every write a reservation of CPULIST (default: the current or configured one)\n"
                "would make and what it cannot do at run time. Changes nothing.\n";
        _cleanup_free_ char *path = NULL;
        char *args[1] = {};
        json_t *p = NULL;
        int r;

        r = parse(argc, argv, usage, NULL, 1, args);
        if (r >= 0)
                return r;
        if (args[0] && strspn(args[0], "0123456789,-") != strlen(args[0])) {
                fprintf(stderr, "rtctl plan: '%s' is not a CPU list such as 2-3\n", args[0]);
                return RTCTL_EXIT_USAGE;
        }
        if (asprintf(&path, "/v1/reservation/plan%s%s", args[0] ? "?cpus=" : "", args[0] ?: "") < 0)
                return RTCTL_EXIT_REFUSED;
        r = ctl_get_json(c, path, &p);
        if (r != 0)
                return r;
        if (c->json) {
                ctl_dump_json(p);
        } else
                print_plan(p);
        json_decref(p);
        return RTCTL_EXIT_OK;
}
