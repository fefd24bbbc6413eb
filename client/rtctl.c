/* SPDX-License-Identifier: MIT */
/* rtctl: the command-line client of rtd. A verb table; global options; status and topology. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtctl.h"
#include "view.h"
#include "shared/macro.h"

#define DEFAULT_SOCKET "/run/rtd/rtd.sock"

typedef struct Verb {
        const char *name;
        VerbFn fn;
        const char *summary;
} Verb;

static const Verb verbs[] = {
        { "status", verb_status, "show the daemon, the reservation, jobs and metrics state" },
        { "topology", verb_topology, "show the CPUs, cores, packages, NUMA nodes and caches rtd sees" },
        { "submit", verb_submit, "run a command on reserved CPUs: submit [OPTIONS] -- CMD [ARGS...]" },
        { "list", verb_list, "list jobs" },
        { "show", verb_show, "show one job with its scheduling figures: show ID" },
        { "cancel", verb_cancel, "cancel a job: cancel ID" },
        { "wait", verb_wait, "wait for a job to end and exit with its status: wait ID" },
        { "logs", verb_logs, "print a job's output: logs ID [-f] [--stderr]" },
        { "reserve", verb_reserve, "reserve CPUs now (admins): reserve CPULIST [--force]" },
        { "release", verb_release, "give every reserved CPU back (admins): release [--force]" },
        { "plan", verb_plan, "print what reserving would change, changing nothing: plan [CPULIST]" },
        { "metrics", verb_metrics, "per-CPU scheduling metrics summary" },
        { "reexec", verb_reexec, "re-execute rtd in place, jobs and reservation kept (admins)" },
        { "top", verb_top, "live view of the reserved CPUs (q quits)" },
        { "leases", verb_leases, "CPUs quieted for process trees rtd did not start: leases [ID] [--release ID]" },
        {},
};

static void help(void) {
        printf("Usage: rtctl [--socket PATH] [--json] VERB [ARGS...]\n"
               "\n"
               "Talk to rtd, the daemon that reserves quiet CPU cores and runs jobs on them under SCHED_FIFO.\n"
               "\nVerbs:\n");
        for (const Verb *v = verbs; v->name; v++)
                printf("  %-10s %s\n", v->name, v->summary);
        printf("\nOptions (anywhere before '--'):\n"
               "  -s, --socket PATH  rtd's control socket (default $RTD_SOCKET, else %s)\n"
               "  -j, --json         print the daemon's JSON instead of tables\n"
               "  -h, --help         this help; 'rtctl VERB --help' for a verb's options\n"
               "      --version      rtctl's version\n"
               "\nExit codes: 0 ok, 1 rtd refused (its reason is printed), 2 usage error,\n"
               "69 rtd unreachable (socket missing, permission denied, no answer within $RTCTL_TIMEOUT s),\n"
               "76 rtd's answer malformed; job verbs add theirs (rtctl(1)).\n"
               "\nExamples:\n"
               "  rtctl status\n"
               "  rtctl submit --wait -- ./simulate --steps 1000\n"
               "  rtctl reserve 2-3\n",
               DEFAULT_SOCKET);
}

/*
 * Take the global options out of argv, wherever they are before a "--", so `rtctl status --json` works
 * like `rtctl --json status`. Returns the new argc, or -1 after printing a usage error.
 */
static int strip_global_options(Ctl *c, int argc, char **argv, bool *want_help, bool *want_version) {
        int out = 1;
        bool after_dashdash = false, seen_verb = false;

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];

                if (after_dashdash || streq(a, "--")) {
                        after_dashdash = true;
                        argv[out++] = argv[i];
                        continue;
                }
                if (streq(a, "--json") || streq(a, "-j"))
                        c->json = true;
                else if (streq(a, "--socket") || streq(a, "-s")) {
                        if (i + 1 >= argc) {
                                fprintf(stderr, "rtctl: %s needs a path, e.g. --socket /run/rtd/rtd.sock\n", a);
                                return -1;
                        }
                        c->socket_path = argv[++i];
                } else if (startswith(a, "--socket="))
                        c->socket_path = a + strlen("--socket=");
                else if (!seen_verb && (streq(a, "--help") || streq(a, "-h")))
                        *want_help = true;
                else if (!seen_verb && streq(a, "--version"))
                        *want_version = true;
                else {
                        if (a[0] != '-')
                                seen_verb = true;
                        argv[out++] = argv[i];
                }
        }
        argv[out] = NULL;
        return out;
}

int main(int argc, char **argv) {
        Ctl c = { .socket_path = getenv("RTD_SOCKET") ?: DEFAULT_SOCKET };
        bool want_help = false, want_version = false;
        int n;

        n = strip_global_options(&c, argc, argv, &want_help, &want_version);
        if (n < 0)
                return RTCTL_EXIT_USAGE;
        if (want_version) {
                printf("rtctl %s\n", RTD_VERSION);
                return 0;
        }
        if (want_help || n < 2) {
                help();
                return want_help ? 0 : RTCTL_EXIT_USAGE;
        }
        if (argv[1][0] == '-') {
                fprintf(stderr, "rtctl: unknown option '%s'. Try 'rtctl --help'.\n", argv[1]);
                return RTCTL_EXIT_USAGE;
        }
        for (const Verb *v = verbs; v->name; v++)
                if (streq(v->name, argv[1])) {
                        optind = 0;     /* glibc: full getopt reset for the verb's own options */
                        return v->fn(&c, n - 1, argv + 1);
                }
        fprintf(stderr, "rtctl: unknown verb '%s'. Try 'rtctl --help' for the list.\n", argv[1]);
        return RTCTL_EXIT_USAGE;
}

/* A verb that takes no arguments but --help. Returns -1 to go on, or an exit code. */
static int no_arguments(int argc, char **argv, const char *usage) {
        if (argc > 1 && (streq(argv[1], "--help") || streq(argv[1], "-h"))) {
                printf("%s", usage);
                return 0;
        }
        if (argc > 1) {
                fprintf(stderr, "rtctl %s: unexpected argument '%s'\n", argv[0], argv[1]);
                return RTCTL_EXIT_USAGE;
        }
        return -1;
}

static const char *str(json_t *o, const char *key) {
        const char *s = json_string_value(json_object_get(o, key));
        return s && *s ? s : "-";
}

int verb_status(Ctl *c, int argc, char **argv) {
        json_t *j = NULL;
        int r;

        r = no_arguments(argc, argv, "Usage: rtctl status [--json]\nShow the daemon, reservation, jobs and "
                                     "metrics state.\n");
        if (r >= 0)
                return r;
        r = ctl_get_json(c, "/v1/status", &j);
        if (r != 0)
                return r;
        if (c->json) {
                ctl_dump_json(j);
                json_decref(j);
                return 0;
        }
        View v;
        view_init(&v, stdout);
        view_status(&v, j);
        view_done(&v);
        json_decref(j);
        return 0;
}

int verb_topology(Ctl *c, int argc, char **argv) {
        json_t *j = NULL;
        int r;

        r = no_arguments(argc, argv, "Usage: rtctl topology [--json]\nShow the machine as rtd sees it.\n");
        if (r >= 0)
                return r;
        r = ctl_get_json(c, "/v1/topology", &j);
        if (r != 0)
                return r;
        if (c->json) {
                ctl_dump_json(j);
        } else {
                json_t *cpus = json_object_get(j, "cpus"), *cpu;
                size_t i;

                printf("%-5s %-7s %-8s %-5s %-5s %-4s %s\n", "CPU", "ONLINE", "PACKAGE", "CORE", "NODE", "LLC",
                       "SIBLINGS");
                json_array_foreach(cpus, i, cpu) {
                        bool online = json_is_true(json_object_get(cpu, "online"));
                        printf("%-5lld %-7s", json_integer_value(json_object_get(cpu, "cpu")), online ? "yes" : "no");
                        if (online)
                                printf(" %-8lld %-5lld %-5lld %-4lld %s", json_integer_value(json_object_get(cpu, "package")),
                                       json_integer_value(json_object_get(cpu, "core")),
                                       json_integer_value(json_object_get(cpu, "node")),
                                       json_integer_value(json_object_get(cpu, "llc")), str(cpu, "siblings"));
                        printf("\n");
                }
        }
        json_decref(j);
        return 0;
}
