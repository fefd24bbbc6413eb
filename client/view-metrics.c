/* SPDX-License-Identifier: MIT */
/*
 * rtctl metrics: is it quiet? The verdict per reserved CPU for the last interval first (who intruded, which
 * IRQs fired), then the counters since rtd started for every CPU, then what measuring cost.
 */
#include <string.h>

#include "view.h"

static void cost(View *v, json_t *j) {
        json_t *progs = json_object_get(j, "bpf_programs"), *p;
        double secs = 0;
        long long runs = 0;
        char b[32];
        size_t i;

        if (json_array_size(progs) == 0)
                return;
        json_array_foreach(progs, i, p) {
                secs += view_jnum(p, "run_seconds");
                runs += view_jint(p, "runs");
        }
        if (runs == 0 && !json_is_true(json_object_get(j, "bpf_stats_enabled"))) {
                view_field(v, "BPF cost", "not measured ([Metrics] ProgramStats=yes turns the kernel's counting on)");
                return;
        }
        fprintf(v->out, "%*s: %s in %lld runs", v->key_width, "BPF cost", view_duration(secs, b, sizeof b), runs);
        json_array_foreach(progs, i, p)
                if (streq(view_jstr(v, p, "name", ""), "sched_switch"))
                        fprintf(v->out, ", sched_switch %.0f ns/run", view_jnum(p, "ns_per_run"));
        fputc('\n', v->out);
}

static long long softirqs(json_t *cpu) {
        json_t *x;
        const char *k;
        long long n = 0;

        json_object_foreach(json_object_get(cpu, "softirqs"), k, x)
                n += view_jint(x, "count");
        return n;
}

/* The last interval of one reserved CPU: quiet, or who and what disturbed it. */
static void verdict(View *v, json_t *j, json_t *cpu) {
        json_t *li = json_object_get(cpu, "last_interval"), *t, *q;
        json_t *who = json_object_get(li, "top_intruders"), *irqs = json_object_get(li, "irqs");
        double ratio = view_jnum(li, "intrusion_ratio");
        bool quiet = json_array_size(who) == 0 && json_array_size(irqs) == 0;
        char key[32], b[32];
        size_t i;

        snprintf(key, sizeof key, "CPU %lld", view_jint(cpu, "cpu"));
        if (!li) {
                view_field(v, key, "no interval measured yet");
                return;
        }
        fprintf(v->out, "%*s: %s%s%s", v->key_width, key, view_on(v, quiet ? VC_GOOD : VC_WARN),
                quiet ? "quiet" : "disturbed", view_off(v));
        if (!quiet)
                fprintf(v->out, " %.3f%% of the time", 100 * ratio);
        if (json_is_integer(json_object_get(cpu, "current_job")))
                fprintf(v->out, ", running job %lld", view_jint(cpu, "current_job"));
        if (json_is_number(json_object_get(li, "runqueue_latency_p99_seconds")))
                fprintf(v->out, ", run-queue p99 %s",
                        view_duration(view_jnum(li, "runqueue_latency_p99_seconds"), b, sizeof b));
        fputc('\n', v->out);
        json_array_foreach(who, i, t)
                view_more(v, "task %s (pid %lld) ran %s", view_jstr(v, t, "comm", "?"), view_jint(t, "pid"),
                          view_duration(view_jnum(t, "seconds"), b, sizeof b));
        json_array_foreach(irqs, i, q)
                view_more(v, "IRQ %lld %s fired %lld time%s", view_jint(q, "irq"), view_jstr(v, q, "name", "?"),
                          view_jint(q, "count"), view_jint(q, "count") == 1 ? "" : "s");
}

void view_metrics(View *v, json_t *j) {
        json_t *col = json_object_get(j, "collector"), *cpus = json_object_get(j, "cpus"), *cpu;
        const char *reserved = view_jstr(v, j, "reserved_cpus", NULL);
        char b[32], b2[32];
        size_t i;

        if (json_is_true(json_object_get(col, "bpf_enabled")))
                view_field(v, "Collector", "eBPF (%s)", view_jstr(v, col, "attach", "attached"));
        else
                view_field(v, "Collector", "%s (BPF unavailable: %s)", view_jstr(v, col, "collector", "procfs"),
                           view_jstr(v, col, "reason", "no reason given"));
        view_field(v, "Reserved", "%s", view_cpus(reserved, b, sizeof b));
        cost(v, j);

        if (reserved) {
                view_section(v, "Last interval");
                view_field(v, "Length", "%s", view_duration(view_jnum(j, "interval_seconds"), b, sizeof b));
                json_array_foreach(cpus, i, cpu)
                        if (json_is_true(json_object_get(cpu, "reserved")))
                                verdict(v, j, cpu);
        }

        view_section(v, "Since rtd started");
        fprintf(v->out, "%s%-4s %-5s %10s %10s %8s %8s %10s %10s %10s %10s%s\n", view_on(v, VC_BOLD), "CPU", "RSVD",
                "VOLUNTARY", "INVOLUNT", "MIG-IN", "MIG-OUT", "HARDIRQ", "SOFTIRQ", "INTRUSIONS", "INTRUDED",
                view_off(v));
        json_array_foreach(cpus, i, cpu) {
                json_t *cs = json_object_get(cpu, "context_switches"), *mig = json_object_get(cpu, "migrations");
                fprintf(v->out, "%-4lld %-5s %10lld %10lld %8lld %8lld %10lld %10lld %10lld ", view_jint(cpu, "cpu"),
                        json_is_true(json_object_get(cpu, "reserved")) ? "yes" : "-", view_jint(cs, "voluntary"),
                        view_jint(cs, "involuntary"), view_jint(mig, "in"), view_jint(mig, "out"),
                        view_jint(cpu, "hardirqs"), softirqs(cpu), view_jint(cpu, "intrusions"));
                view_duration(view_jnum(cpu, "intrusion_seconds"), b2, sizeof b2);
                fprintf(v->out, "%*s%s\n", (int) (10 - MIN(strlen(b2) - (strstr(b2, "µ") ? 1 : 0), 10)), "", b2);
        }
        if (json_is_object(json_object_get(j, "dispatch_latency"))) {
                json_t *d = json_object_get(j, "dispatch_latency");
                long long n = view_jint(d, "count");
                if (n > 0)
                        fprintf(v->out, "\n%*s: %s on average over %lld jobs (accepted to exec)\n", v->key_width,
                                "Dispatch", view_duration(view_jnum(d, "sum_seconds") / (double) n, b, sizeof b), n);
        }
}
