/* SPDX-License-Identifier: MIT */
/*
 * rtctl status and the reservation view (also printed by rtctl reserve): the headline first (is rtd up,
 * what is reserved, are jobs running, is it quiet), then the reservation in detail, then where rtd came
 * from (machine, config). Absent values are left out, never printed as null.
 */
#include <string.h>

#include "view.h"

static long long state_count(json_t *by_state, const char *state) {
        return json_integer_value(json_object_get(by_state, state));
}

/* "2 running, 1 queued, 40 finished (3 failed)" */
static void jobs_line(View *v, json_t *jobs) {
        json_t *st = json_object_get(jobs, "jobs");
        long long running = state_count(st, "running"), starting = state_count(st, "starting");
        long long queued = state_count(st, "queued");
        long long failed = state_count(st, "failed") + state_count(st, "timed_out") + state_count(st, "lost");
        long long finished = failed + state_count(st, "succeeded") + state_count(st, "cancelled");

        fprintf(v->out, "%*s: %s%lld running%s, ", v->key_width, "Jobs", view_on(v, running ? VC_INFO : VC_NONE),
                running, view_off(v));
        if (starting)
                fprintf(v->out, "%lld starting, ", starting);
        fprintf(v->out, "%lld queued, %lld finished", queued, finished);
        if (failed)
                fprintf(v->out, " (%s%lld failed%s)", view_on(v, VC_BAD), failed, view_off(v));
        fprintf(v->out, "; queue %s\n", view_jstr(v, jobs, "policy", "fifo"));
}

static void workers_line(View *v, json_t *jobs) {
        json_t *ws = json_object_get(jobs, "workers"), *w;
        size_t i;

        if (json_array_size(ws) == 0)
                return;
        fprintf(v->out, "%*s: ", v->key_width, "Workers");
        json_array_foreach(ws, i, w) {
                const char *state = view_jstr(v, w, "state", "?");
                fprintf(v->out, "%sCPU %lld %s%s%s", i ? ", " : "", view_jint(w, "cpu"),
                        view_on(v, view_state_color(state)), state, view_off(v));
                if (streq(state, "busy") && view_jint(w, "job") > 0)
                        fprintf(v->out, " (job %lld)", view_jint(w, "job"));
        }
        if (view_jint(jobs, "worker_restarts") > 0)
                fprintf(v->out, "; %lld restarts", view_jint(jobs, "worker_restarts"));
        fputc('\n', v->out);
}

/* What holds a job on its CPUs: a cpuset (the kernel), or only the starting affinity and rtd's drift check. */
static void containment_line(View *v, json_t *jobs) {
        const char *how = view_jstr(v, jobs, "cpu_enforcement", NULL);
        long long back = view_jint(jobs, "tasks_put_back");

        if (!how)
                return;
        view_field_color(v, "Job CPUs", strstr(how, "cpuset") ? VC_NONE : VC_WARN, "enforced by %s", how);
        if (back)
                view_more(v, "%lld job task%s found off their CPUs and put back", back, back == 1 ? "" : "s");
        if (json_is_string(json_object_get(jobs, "cpu_enforcement_note")))
                view_more(v, "%s", view_jstr(v, jobs, "cpu_enforcement_note", ""));
}

/* How this rtd's reservation began: adopted from a dead rtd's journal (nothing written again), or not. */
static void start_line(View *v, json_t *r) {
        json_t *st = json_object_get(r, "start");
        const char *mode = view_jstr(v, st, "mode", "new");

        if (streq(mode, "new"))
                return;
        if (streq(mode, "adopted"))
                view_field(v, "Started", "adopted from the journal of pid %lld: %lld knob%s written, %lld task%s moved "
                           "(only what drifted)", view_jint(st, "previous_pid"), view_jint(st, "knob_writes"),
                           view_jint(st, "knob_writes") == 1 ? "" : "s", view_jint(st, "tasks_moved"),
                           view_jint(st, "tasks_moved") == 1 ? "" : "s");
        else
                view_field(v, "Started", "%s (a dead rtd's journal for another reservation was restored first)", mode);
}

static void metrics_line(View *v, json_t *m) {
        const char *fb = json_string_value(json_object_get(m, "fallbacks"));

        if (json_is_true(json_object_get(m, "bpf_enabled"))) {
                view_field(v, "Metrics", "eBPF (%s), %lld collection%s%s", view_jstr(v, m, "attach", "attached"),
                           view_jint(m, "collections"), view_jint(m, "collections") == 1 ? "" : "s",
                           view_jint(m, "collection_errors") ? ", with errors" : "");
                /* What this kernel cannot trace, one line each ("what: not traced (what stands in)"). */
                for (const char *e; fb && *fb; fb = e ? e + 2 : NULL) {
                        e = strstr(fb, "; ");
                        view_field(v, "Missing", "%.*s", e ? (int) (e - fb) : (int) strlen(fb), fb);
                }
        } else if (json_object_get(m, "collector"))
                view_field(v, "Metrics", "%s (eBPF unavailable%s%s), %lld collections",
                           view_jstr(v, m, "collector", "procfs"), json_is_string(json_object_get(m, "reason")) ? ": " : "",
                           view_jstr(v, m, "reason", ""), view_jint(m, "collections"));
        else
                view_field(v, "Metrics", "off");
}

void view_status(View *v, json_t *j) {
        json_t *t = json_object_get(j, "topology"), *caller = json_object_get(j, "caller");
        json_t *jobs = json_object_get(j, "jobs"), *res = json_object_get(j, "reservation");
        json_t *cfg = json_object_get(j, "config");
        char b1[32], b2[64], b3[64];
        long long up = view_jint(j, "uptime_sec");

        fprintf(v->out, "%s●%s rtd %s: %srunning%s, pid %lld, up %s%s\n", view_on(v, VC_GOOD), view_off(v),
                view_jstr(v, j, "version", "?"), view_on(v, VC_GOOD), view_off(v), view_jint(j, "pid"),
                up > 0 ? view_duration((double) up, b1, sizeof b1) : "0s", json_is_true(json_object_get(j, "socket_activated"))
                                                                  ? " (socket-activated)" : "");
        view_field(v, "Reserved", "%s%s%s, housekeeping %s", view_on(v, VC_BOLD),
                   view_cpus(view_jstr(v, j, "reserved_cpus", NULL), b2, sizeof b2), view_off(v),
                   view_cpus(view_jstr(v, j, "housekeeping_cpus", NULL), b3, sizeof b3));
        if (jobs) {
                jobs_line(v, jobs);
                workers_line(v, jobs);
                containment_line(v, jobs);
                if (json_is_true(json_object_get(jobs, "rt_group_sched_trap")) ||
                    json_is_string(json_object_get(jobs, "cgroups_note")))
                        view_more(v, "%s%s%s", view_on(v, VC_WARN), view_jstr(v, jobs, "cgroups_note",
                                  "job cgroups: real-time group scheduling is in the way"), view_off(v));
        }
        view_leases_status(v, json_object_get(j, "leases"));
        metrics_line(v, json_object_get(j, "metrics"));
        view_field(v, "You", "%s (uid %lld), %s", view_jstr(v, caller, "user", "?"), view_jint(caller, "uid"),
                   view_jstr(v, caller, "role", "?"));

        view_reservation(v, res);

        view_section(v, "Machine");
        view_field(v, "CPUs", "%lld online (%s), SMT %s", view_jint(t, "cpus"), view_jstr(v, t, "online", "-"),
                   json_is_true(json_object_get(t, "smt")) ? "on" : "off");
        view_field(v, "Layout", "%lld package%s, %lld core%s, %lld NUMA node%s", view_jint(t, "packages"),
                   view_jint(t, "packages") == 1 ? "" : "s", view_jint(t, "cores"),
                   view_jint(t, "cores") == 1 ? "" : "s", view_jint(t, "nodes"), view_jint(t, "nodes") == 1 ? "" : "s");
        if (cfg) {
                view_field(v, "Config", "%s", view_jstr(v, cfg, "path", "-"));
                view_field(v, "Socket", "%s", view_jstr(v, cfg, "socket", "-"));
                view_field(v, "Prometheus", "%s", streq(view_jstr(v, cfg, "metrics_listen", "no"), "no")
                                                          ? "off" : view_jstr(v, cfg, "metrics_listen", "-"));
                view_field(v, "Log level", "%s", view_jstr(v, cfg, "log_level", "-"));
        }
}

static void irqs_view(View *v, json_t *irqs) {
        json_t *u, *list = json_object_get(irqs, "unmovable");
        size_t i, n = json_array_size(list);

        if (!json_is_object(irqs))
                return;
        if (json_is_string(json_object_get(irqs, "state"))) {
                view_field(v, "IRQs", "%s", view_jstr(v, irqs, "state", ""));
                return;
        }
        fprintf(v->out, "%*s: %lld moved to housekeeping, %lld there already", v->key_width, "IRQs",
                view_jint(irqs, "moved"), view_jint(irqs, "already_housekeeping"));
        if (n)
                fprintf(v->out, ", %s%zu unmovable%s", view_on(v, VC_WARN), n, view_off(v));
        if (view_jint(irqs, "failed"))
                fprintf(v->out, ", %s%lld failed%s", view_on(v, VC_BAD), view_jint(irqs, "failed"), view_off(v));
        fprintf(v->out, " (of %lld)\n", view_jint(irqs, "total"));
        json_array_foreach(list, i, u) {
                view_more(v, "%s!%s IRQ %lld %s (%s) still hits %s: %s", view_on(v, VC_WARN), view_off(v),
                          view_jint(u, "irq"), view_jstr(v, u, "name", "?"), view_jstr(v, u, "chip", "?"),
                          view_cpus(view_jstr(v, u, "reserved_cpus_hit", NULL), (char[64]){}, 64),
                          view_jstr(v, u, "reason", "the kernel refused to move it"));
                if (json_is_string(json_object_get(u, "remedy")))
                        view_more(v, "  remedy: %s", view_jstr(v, u, "remedy", ""));
        }
        if (json_is_string(json_object_get(json_object_get(irqs, "irqbalance"), "note")))
                view_more(v, "irqbalance: %s", view_jstr(v, json_object_get(irqs, "irqbalance"), "note", ""));
}

static void knobs_view(View *v, json_t *knobs) {
        json_t *k;
        size_t i;
        bool first = true;

        json_array_foreach(knobs, i, k) {
                const char *state = view_jstr(v, k, "state", "");
                const char *key = first ? "Tuning" : "";
                first = false;
                if (streq(state, "set"))
                        view_field(v, key, "%s %s → %s", view_jstr(v, k, "name", "?"), view_jstr(v, k, "original", "?"),
                                   view_jstr(v, k, "current", "?"));
                else if (streq(state, "failed"))
                        /* Asked for and not done (the fair server under lockdown, a refused write): a warning. */
                        view_field(v, key, "%s!%s %s %s (%sfailed%s%s%s)", view_on(v, VC_WARN), view_off(v),
                                   view_jstr(v, k, "name", "?"), view_jstr(v, k, "current", "-"), view_on(v, VC_BAD),
                                   view_off(v), json_is_string(json_object_get(k, "why")) ? ": " : "",
                                   view_jstr(v, k, "why", ""));
                else
                        view_field(v, key, "%s %s (%s%s%s)", view_jstr(v, k, "name", "?"), view_jstr(v, k, "current", "-"),
                                   state, json_is_string(json_object_get(k, "why")) ? ": " : "",
                                   view_jstr(v, k, "why", ""));
        }
}

static void last_restore(View *v, json_t *r) {
        json_t *lr = json_object_get(r, "last_restore");

        if (json_is_object(lr))
                view_field_color(v, "Last release", view_jint(lr, "failed") ? VC_BAD : VC_NONE,
                                 "%lld restored, %lld skipped, %lld failed", view_jint(lr, "restored"),
                                 view_jint(lr, "skipped"), view_jint(lr, "failed"));
        if (json_is_string(json_object_get(r, "journal_problem")))
                view_field_color(v, "Journal", VC_BAD, "%s", view_jstr(v, r, "journal_problem", ""));
}

void view_reservation(View *v, json_t *r) {
        json_t *x, *b;
        const char *state = view_jstr(v, r, "state", "none");
        char c1[64], c2[64];
        size_t i;

        if (!json_is_object(r))
                return;
        if (!streq(state, "active")) {
                view_section(v, "Reservation: none");
                if (streq(state, "none"))
                        view_more(v, "nothing reserved: 'rtctl reserve CPULIST' (admins) or [Reserve] CPUs=");
                else
                        view_field(v, "State", "%s", state);
                last_restore(v, r);
                return;
        }
        view_section(v, "Reservation");
        view_field_color(v, "State", VC_GOOD, "active: %s reserved, %s housekeeping",
                         view_cpus(view_jstr(v, r, "reserved", NULL), c1, sizeof c1),
                         view_cpus(view_jstr(v, r, "housekeeping", NULL), c2, sizeof c2));
        start_line(v, r);
        view_field(v, "Backend", "%s%s%s%s", view_jstr(v, r, "backend", "?"),
                   json_is_string(json_object_get(r, "backend_reason")) ? " (" : "",
                   view_jstr(v, r, "backend_reason", ""), json_is_string(json_object_get(r, "backend_reason")) ? ")" : "");
        x = json_object_get(r, "tasks");
        view_field(v, "Tasks", "%lld moved off, %lld refused (per-CPU kernel threads), %lld born since",
                   view_jint(x, "moved"), view_jint(x, "refused"), view_jint(x, "inherited"));
        if (view_jint(x, "own"))
                view_more(v, "%lld of rtd's own (workers, jobs) stay", view_jint(x, "own"));
        x = json_object_get(r, "cgroup");
        if (json_is_object(x)) {
                view_field(v, "Cgroup", "%s, partition %s%s%s", view_jstr(v, x, "reserved_cgroup", "-"),
                           view_jstr(v, x, "partition", "-"), json_is_string(json_object_get(x, "partition_note")) ? ": " : "",
                           view_jstr(v, x, "partition_note", ""));
                json_array_foreach(json_object_get(x, "shrunk"), i, b)
                        view_more(v, "%s %s → %s%s%s", json_object_get(b, "unit") ? "unit" : "cgroup",
                                  view_jstr(v, b, "unit", view_jstr(v, b, "cgroup", "?")), view_jstr(v, b, "cpus", "?"),
                                  json_object_get(b, "error") ? ", refused: " : "", view_jstr(v, b, "error", ""));
        }
        irqs_view(v, json_object_get(r, "irqs"));
        knobs_view(v, json_object_get(r, "knobs"));
        x = json_object_get(r, "drift");
        if (view_jint(x, "interval_sec") > 0)
                view_field(v, "Drift check", "every %s, %lld checks, %lld IRQs and %lld tasks put back",
                           view_duration((double) view_jint(x, "interval_sec"), c1, sizeof c1), view_jint(x, "checks"),
                           view_jint(x, "irqs"), view_jint(x, "tasks"));
        else
                view_field(v, "Drift check", "off");
        bool first = true;
        /* What still reaches the reserved CPUs on this kernel, with its remedy (older daemons: boot hints). */
        json_array_foreach(json_object_get(r, "residual"), i, b)
                if (json_is_true(json_object_get(b, "reaches"))) {
                        view_field_color(v, first ? "Residual" : "", VC_WARN, "%s: %s",
                                         view_jstr(v, b, "source", "?"), view_jstr(v, b, "evidence", ""));
                        view_more(v, "  remedy: %s", view_jstr(v, b, "remedy", "-"));
                        first = false;
                }
        json_array_foreach(json_object_get(r, "boot_parameters"), i, b)
                if (!json_object_get(r, "residual") && !json_is_true(json_object_get(b, "present"))) {
                        view_field(v, first ? "Needs reboot" : "", "%s (%s)", view_jstr(v, b, "parameter", "?"),
                                   view_jstr(v, b, "why", ""));
                        first = false;
                }
        last_restore(v, r);
}
