/* SPDX-License-Identifier: MIT */
/*
 * Leases: CPUs rtd quiets for a process tree it did not start (a Slurm step). A line in rtctl status, the
 * table of rtctl leases and one lease in detail (rtctl leases ID, rtctl show lease:ID).
 */
#include <string.h>

#include "view.h"

static void figures(View *v, json_t *m, char *buf, size_t size) {
        char d[32];

        snprintf(buf, size, "%s intrusion, %lld switches, %lld hard IRQs",
                 view_duration(view_jnum(m, "intrusion_seconds"), d, sizeof d), view_jint(m, "context_switches"),
                 view_jint(m, "hardirqs"));
}

/* status: one line per active lease under the headline. */
void view_leases_status(View *v, json_t *leases) {
        json_t *x;
        size_t i;
        bool first = true;

        json_array_foreach(leases, i, x) {
                char cpus[64], f[160], age[32];
                if (!streq(view_jstr(v, x, "state", ""), "active"))
                        continue;
                figures(v, json_object_get(x, "metrics"), f, sizeof f);
                view_field(v, first ? "Leases" : "", "%s%s%s for %s (lease %lld, pid %lld, %s): %s",
                           view_on(v, VC_BOLD), view_cpus(view_jstr(v, x, "cpus", NULL), cpus, sizeof cpus),
                           view_off(v), view_jstr(v, x, "owner", "?"), view_jint(x, "id"), view_jint(x, "pid"),
                           view_duration((double) view_jint(x, "age_sec"), age, sizeof age), f);
                first = false;
        }
}

/* rtctl leases: a table, active first, then recently ended. */
void view_leases(View *v, json_t *list) {
        json_t *a = json_object_get(list, "leases"), *x;
        size_t i;

        if (json_array_size(a) == 0) {
                fprintf(v->out, "No leases. A lease quiets CPUs for a process tree rtd did not start "
                                "(POST /v1/leases; the Slurm plugin).\n");
                return;
        }
        fprintf(v->out, "%s%5s  %-9s %-8s %-20s %8s %8s  %s%s\n", view_on(v, VC_BOLD), "ID", "STATE", "CPUS", "OWNER",
                "PID", "AGE", "INTRUSION", view_off(v));
        json_array_foreach(a, i, x) {
                const char *state = view_jstr(v, x, "state", "?");
                char age[32], intr[32];
                fprintf(v->out, "%5lld  %s", view_jint(x, "id"), view_on(v, streq(state, "active") ? VC_GOOD : VC_DIM));
                view_pad(v, state, 9);
                fprintf(v->out, "%s ", view_off(v));
                view_pad(v, view_jstr(v, x, "cpus", "-"), 8);
                fputc(' ', v->out);
                view_pad(v, view_jstr(v, x, "owner", "?"), 20);
                fprintf(v->out, " %8lld %8s  %s\n", view_jint(x, "pid"),
                        view_duration((double) view_jint(x, "age_sec"), age, sizeof age),
                        view_duration(view_jnum(json_object_get(x, "metrics"), "intrusion_seconds"), intr, sizeof intr));
        }
        fprintf(v->out, "\n%lld active (at most %lld).\n", view_jint(list, "active"), view_jint(list, "max"));
}

/* One lease. */
void view_lease(View *v, json_t *x) {
        json_t *m = json_object_get(x, "metrics"), *per = json_object_get(m, "cpus"), *c;
        const char *state = view_jstr(v, x, "state", "?"), *cpu;
        char b[64], t[96], f[160];

        fprintf(v->out, "%s●%s lease %lld: %s%s%s\n", view_on(v, streq(state, "active") ? VC_GOOD : VC_DIM),
                view_off(v), view_jint(x, "id"), view_on(v, streq(state, "active") ? VC_GOOD : VC_NONE), state,
                view_off(v));
        view_field(v, "CPUs", "%s", view_cpus(view_jstr(v, x, "cpus", NULL), b, sizeof b));
        view_field(v, "Owner", "%s", view_jstr(v, x, "owner", "?"));
        view_field(v, "Process", "pid %lld (the lease ends when it exits)", view_jint(x, "pid"));
        view_field(v, "By", "%s (uid %lld)", view_jstr(v, x, "user", "?"), view_jint(x, "uid"));
        if (json_is_integer(json_object_get(x, "priority")))
                view_field(v, "Policy", "%s priority %lld (MaxPriority=%lld)", view_jstr(v, x, "policy", "fifo"),
                           view_jint(x, "priority"), view_jint(x, "max_priority"));
        else
                view_field(v, "Policy", "none asked (quiet CPUs only)");
        if (view_time(v, view_jstr(v, x, "created", NULL), t, sizeof t))
                view_field(v, "Created", "%s%s", t, json_is_true(json_object_get(x, "adopted")) ?
                           ", adopted after an rtd restart" : "");
        if (!streq(state, "active")) {
                if (view_time(v, view_jstr(v, x, "ended", NULL), t, sizeof t))
                        view_field(v, "Ended", "%s", t);
                view_field(v, "Why", "%s", view_jstr(v, x, "end_reason", "-"));
        }
        figures(v, m, f, sizeof f);
        view_field(v, "Disturbed", "%s%s", f, streq(state, "active") ? " so far" : "");
        if (json_object_size(per) > 1)
                json_object_foreach(per, cpu, c) {
                        figures(v, c, f, sizeof f);
                        view_more(v, "CPU %s: %s", view_s(v, cpu, "?"), f);
                }
        json_t *tree = json_object_get(m, "tree");
        if (json_is_object(tree)) {
                char on[32];
                view_field(v, "Its tree", "%s on CPU, %lld context switches, %lld hard IRQs",
                           view_duration(view_jnum(tree, "on_cpu_seconds"), on, sizeof on),
                           view_jint(tree, "voluntary_switches") + view_jint(tree, "involuntary_switches"),
                           view_jint(tree, "hardirqs"));
        }
}
