/* SPDX-License-Identifier: MIT */
/* Rendering of the metrics snapshot: Prometheus text (GET /metrics) and JSON (GET /v1/metrics, rtctl).
 * Reads only the last two samples and in-memory figures of the other modules, never BPF maps. Labels
 * never carry pids or job ids (per-job figures live in the job object); JSON may name intruders. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/manager.h"
#include "metrics-internal.h"
#include "prometheus.h"
#include "shared/macro.h"

static const char *const softirq_names[METRICS_NR_SOFTIRQS] = {
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
};

static const char *const vector_names[METRICS_NR_VECTORS] = METRICS_VECTOR_NAMES;
static const char *const vector_help[METRICS_NR_VECTORS] = {
        "Local timer interrupts", "Rescheduling interrupts", "Function call interrupts", "IRQ work interrupts",
        "Platform interrupts", "Thermal event interrupts", "Spurious interrupts", "Error interrupts",
};
static const char *const kind_names[] = { "user", "kernel", "rtd" };

#define TOP_INTRUDERS 5                 /* per CPU in the last interval (JSON) */
#define PROM_INTRUDERS 8                /* per CPU in /metrics, by cumulative time; the rest is comm="other" */

static bool has(const Metrics *x, unsigned cap) {
        return x->collector->ops->caps & cap;
}

static bool have_schedstat(const Metrics *x) {
        for (unsigned i = 0; i < x->cur.n_cpus; i++)
                if (x->cur.cpus[i].switches_total)
                        return true;
        return false;
}

static double interval_seconds(const Metrics *x) {
        if (!x->prev.cpus || x->cur.time_usec <= x->prev.time_usec)
                return 0;
        return (x->cur.time_usec - x->prev.time_usec) / 1e6;
}

static const CpuCounters *prev_cpu(const Metrics *x, unsigned cpu) {
        return x->prev.cpus && cpu < x->prev.n_cpus ? &x->prev.cpus[cpu] : NULL;
}

static uint64_t delta(uint64_t now, uint64_t before) {
        return now >= before ? now - before : now;     /* a reset (LRU eviction, reload) restarts from 0 */
}

static int cmp_intruder(const void *a, const void *b) {
        const IntruderCounters *x = a, *y = b;
        return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

/* ---- Prometheus ---- */

/* One CPU's intruders summed by name, most time first; the caller frees. */
static size_t intruders_by_comm(const Sample *s, unsigned cpu, IntruderCounters **ret) {
        IntruderCounters *a = NULL;
        size_t n = 0;

        for (size_t i = 0; i < s->n_intruders; i++) {
                const IntruderCounters *c = &s->intruders[i];
                size_t j;

                if (c->cpu != cpu)
                        continue;
                for (j = 0; j < n && !streq(a[j].comm, c->comm); j++)
                        ;
                if (j == n) {
                        IntruderCounters *t = reallocarray(a, n + 1, sizeof *a);
                        if (!t)
                                break;
                        a = t;
                        a[n++] = (IntruderCounters) { .cpu = cpu };
                        memcpy(a[j].comm, c->comm, sizeof a[j].comm);
                }
                a[j].ns += c->ns;
                a[j].count += c->count;
        }
        if (n)
                qsort(a, n, sizeof *a, cmp_intruder);
        *ret = a;
        return n;
}

/*
 * The top PROM_INTRUDERS names per reserved CPU by cumulative time, and comm="other" for the rest (names
 * past the top, and the table's own overflow): at most PROM_INTRUDERS + 1 series per reserved CPU, and
 * the series of a CPU sum to rtd_cpu_intrusion_seconds_total. A name that drops out of the top moves
 * into "other".
 */
static void render_intruders(Metrics *x, FILE *f) {
        const Sample *s = &x->cur;
        char lb[128], esc[64];

        for (int pass = 0; pass < 2; pass++) {
                const char *name = pass ? "rtd_cpu_intruder_runs_total" : "rtd_cpu_intruder_seconds_total";

                prom_family(f, name, "counter", pass ? "Runs (switch-ins) of the top intruders of each reserved CPU." :
                            "CPU time of the top intruders of each reserved CPU, by name; the rest is comm=\"other\".");
                CPUSET_FOREACH(cpu, &x->reserved) {
                        _cleanup_free_ IntruderCounters *a = NULL;
                        size_t n;
                        uint64_t ons, oruns, tns = 0, truns = 0;

                        if ((unsigned) cpu >= s->n_cpus)
                                continue;
                        n = intruders_by_comm(s, cpu, &a);
                        for (size_t i = 0; i < n && i < PROM_INTRUDERS; i++) {
                                (void) snprintf(lb, sizeof lb, "cpu=\"%d\",comm=\"%s\"", cpu,
                                                prom_label_escape(a[i].comm, esc, sizeof esc));
                                if (pass)
                                        prom_uint(f, name, lb, a[i].count);
                                else
                                        prom_double(f, name, lb, a[i].ns / 1e9);
                                tns += a[i].ns;
                                truns += a[i].count;
                        }
                        /* The total is read after the table: never below the parts shown. */
                        ons = s->cpus[cpu].intrusion_ns - MIN(tns, s->cpus[cpu].intrusion_ns);
                        oruns = s->cpus[cpu].intrusions - MIN(truns, s->cpus[cpu].intrusions);
                        (void) snprintf(lb, sizeof lb, "cpu=\"%d\",comm=\"other\"", cpu);
                        if (pass)
                                prom_uint(f, name, lb, oruns);
                        else
                                prom_double(f, name, lb, ons / 1e9);
                }
        }
}

static void render_cpus(Metrics *x, FILE *f) {
        const Sample *s = &x->cur;
        char lb[128];

        prom_family(f, "rtd_cpu_reserved", "gauge", "Whether the CPU is reserved by rtd (1) or housekeeping (0).");
        for (unsigned i = 0; i < s->n_cpus; i++) {
                (void) snprintf(lb, sizeof lb, "cpu=\"%u\"", i);
                prom_uint(f, "rtd_cpu_reserved", lb, cpuset_isset(&x->reserved, i));
        }

        if (has(x, CAP_SWITCH_KIND) || have_schedstat(x)) {
                prom_family(f, "rtd_cpu_context_switches_total", "counter",
                            "Context switches away from non-idle tasks, by kind (voluntary: the task blocked; "
                            "involuntary: it was preempted; all: kind unknown without BPF).");
                for (unsigned i = 0; i < s->n_cpus; i++) {
                        const CpuCounters *c = &s->cpus[i];
                        if (has(x, CAP_SWITCH_KIND)) {
                                (void) snprintf(lb, sizeof lb, "cpu=\"%u\",kind=\"voluntary\"", i);
                                prom_uint(f, "rtd_cpu_context_switches_total", lb, c->switches_voluntary);
                                (void) snprintf(lb, sizeof lb, "cpu=\"%u\",kind=\"involuntary\"", i);
                                prom_uint(f, "rtd_cpu_context_switches_total", lb, c->switches_involuntary);
                        } else {
                                (void) snprintf(lb, sizeof lb, "cpu=\"%u\",kind=\"all\"", i);
                                prom_uint(f, "rtd_cpu_context_switches_total", lb, c->switches_total);
                        }
                }
        }

        if (has(x, CAP_MIGRATIONS)) {
                prom_family(f, "rtd_cpu_migrations_total", "counter", "Tasks migrated onto (in) or off (out) the CPU.");
                for (unsigned i = 0; i < s->n_cpus; i++) {
                        (void) snprintf(lb, sizeof lb, "cpu=\"%u\",direction=\"in\"", i);
                        prom_uint(f, "rtd_cpu_migrations_total", lb, s->cpus[i].migrations_in);
                        (void) snprintf(lb, sizeof lb, "cpu=\"%u\",direction=\"out\"", i);
                        prom_uint(f, "rtd_cpu_migrations_total", lb, s->cpus[i].migrations_out);
                }
        }

        prom_family(f, "rtd_cpu_irqs_total", "counter", "Hard (numbered IRQ handlers) and soft interrupts handled by the CPU.");
        for (unsigned i = 0; i < s->n_cpus; i++) {
                uint64_t soft = 0;
                for (unsigned v = 0; v < METRICS_NR_SOFTIRQS; v++)
                        soft += s->cpus[i].softirq_count[v];
                (void) snprintf(lb, sizeof lb, "cpu=\"%u\",kind=\"hard\"", i);
                prom_uint(f, "rtd_cpu_irqs_total", lb, s->cpus[i].hardirq_count);
                (void) snprintf(lb, sizeof lb, "cpu=\"%u\",kind=\"soft\"", i);
                prom_uint(f, "rtd_cpu_irqs_total", lb, soft);
        }
        if (has(x, CAP_IRQ_TIME)) {
                prom_family(f, "rtd_cpu_irq_seconds_total", "counter", "Time spent in hard and soft interrupt handlers.");
                for (unsigned i = 0; i < s->n_cpus; i++) {
                        uint64_t soft = 0;
                        for (unsigned v = 0; v < METRICS_NR_SOFTIRQS; v++)
                                soft += s->cpus[i].softirq_ns[v];
                        (void) snprintf(lb, sizeof lb, "cpu=\"%u\",kind=\"hard\"", i);
                        prom_double(f, "rtd_cpu_irq_seconds_total", lb, s->cpus[i].hardirq_ns / 1e9);
                        (void) snprintf(lb, sizeof lb, "cpu=\"%u\",kind=\"soft\"", i);
                        prom_double(f, "rtd_cpu_irq_seconds_total", lb, soft / 1e9);
                }
        }

        prom_family(f, "rtd_cpu_softirqs_total", "counter", "Soft interrupts handled, by vector.");
        for (unsigned i = 0; i < s->n_cpus; i++)
                for (unsigned v = 0; v < METRICS_NR_SOFTIRQS; v++) {
                        (void) snprintf(lb, sizeof lb, "cpu=\"%u\",vector=\"%s\"", i, softirq_names[v]);
                        prom_uint(f, "rtd_cpu_softirqs_total", lb, s->cpus[i].softirq_count[v]);
                }
        if (has(x, CAP_IRQ_TIME)) {
                prom_family(f, "rtd_cpu_softirq_seconds_total", "counter", "Time spent in soft interrupts, by vector.");
                for (unsigned i = 0; i < s->n_cpus; i++)
                        for (unsigned v = 0; v < METRICS_NR_SOFTIRQS; v++) {
                                (void) snprintf(lb, sizeof lb, "cpu=\"%u\",vector=\"%s\"", i, softirq_names[v]);
                                prom_double(f, "rtd_cpu_softirq_seconds_total", lb, s->cpus[i].softirq_ns[v] / 1e9);
                        }
        }

        /* Per-IRQ series only for reserved CPUs: that is where an IRQ is news, and it bounds cardinality. */
        prom_family(f, "rtd_cpu_hardirqs_total", "counter", "Hard interrupts per IRQ line on reserved CPUs.");
        for (size_t k = 0; k < s->n_irqs; k++) {
                char name[96];
                CPUSET_FOREACH(cpu, &x->reserved) {
                        if ((unsigned) cpu >= s->n_cpus || s->irqs[k].count[cpu] == 0)
                                continue;
                        (void) snprintf(lb, sizeof lb, "cpu=\"%d\",irq=\"%u\",name=\"%s\"", cpu, s->irqs[k].irq,
                                        prom_label_escape(s->irqs[k].name, name, sizeof name));
                        prom_uint(f, "rtd_cpu_hardirqs_total", lb, s->irqs[k].count[cpu]);
                }
        }
        /* Architecture vectors, named as /proc/interrupts' rows and counted by the kernel's own counters
         * (exact: the programs' counts, which carry the time, can fall short). TLB shootdowns arrive as CAL
         * and are a row of their own there too: remote flush requests handled, several per CAL at times. */
        CPUSET_FOREACH(cpu, &x->reserved) {
                if ((unsigned) cpu >= s->n_cpus)
                        continue;
                for (unsigned v = 0; v < METRICS_NR_VECTORS; v++) {
                        (void) snprintf(lb, sizeof lb, "cpu=\"%d\",irq=\"%s\",name=\"%s\"", cpu, vector_names[v],
                                        vector_help[v]);
                        prom_uint(f, "rtd_cpu_hardirqs_total", lb, s->cpus[cpu].vec_kernel[v]);
                }
                (void) snprintf(lb, sizeof lb, "cpu=\"%d\",irq=\"TLB\",name=\"TLB shootdowns\"", cpu);
                prom_uint(f, "rtd_cpu_hardirqs_total", lb, s->cpus[cpu].tlb_shootdowns);
        }
        if (s->vectors_traced) {
                prom_family(f, "rtd_cpu_vector_seconds_total", "counter",
                            "Time in architecture interrupt handlers (irq_vectors tracepoints) on reserved CPUs.");
                CPUSET_FOREACH(cpu, &x->reserved)
                        for (unsigned v = 0; (unsigned) cpu < s->n_cpus && v < METRICS_NR_VECTORS; v++) {
                                (void) snprintf(lb, sizeof lb, "cpu=\"%d\",irq=\"%s\"", cpu, vector_names[v]);
                                prom_double(f, "rtd_cpu_vector_seconds_total", lb, s->cpus[cpu].vec_ns[v] / 1e9);
                        }
        }

        if (has(x, CAP_INTRUSIONS)) {
                prom_family(f, "rtd_cpu_intrusions_total", "counter",
                            "Times a task that is neither a job nor an rtd worker was switched in on a reserved CPU.");
                CPUSET_FOREACH(cpu, &x->reserved)
                        if ((unsigned) cpu < s->n_cpus) {
                                (void) snprintf(lb, sizeof lb, "cpu=\"%d\"", cpu);
                                prom_uint(f, "rtd_cpu_intrusions_total", lb, s->cpus[cpu].intrusions);
                        }
                prom_family(f, "rtd_cpu_intrusion_seconds_total", "counter",
                            "On-CPU time of tasks that are neither jobs nor rtd workers on a reserved CPU.");
                CPUSET_FOREACH(cpu, &x->reserved)
                        if ((unsigned) cpu < s->n_cpus) {
                                (void) snprintf(lb, sizeof lb, "cpu=\"%d\"", cpu);
                                prom_double(f, "rtd_cpu_intrusion_seconds_total", lb, s->cpus[cpu].intrusion_ns / 1e9);
                        }
                render_intruders(x, f);
                prom_family(f, "rtd_bpf_missed_events_total", "counter",
                            "sched_switch events that never reached rtd's program: their time is not in the figures.");
                for (unsigned i = 0; i < s->n_cpus; i++) {
                        (void) snprintf(lb, sizeof lb, "cpu=\"%u\"", i);
                        prom_uint(f, "rtd_bpf_missed_events_total", lb, s->cpus[i].missed_events);
                }
        }
}

static void render_runq(Metrics *x, FILE *f) {
        const Sample *s = &x->cur;
        double le[METRICS_HIST_SLOTS];

        if (!has(x, CAP_RUNQ_HIST) && !have_schedstat(x))
                return;
        for (unsigned k = 0; k < METRICS_HIST_SLOTS; k++)
                le[k] = metrics_hist_le(k);
        prom_family(f, "rtd_runqueue_latency_seconds", "histogram",
                    "Time tasks waited runnable before running (wakeup or preemption to switch-in), by CPU set.");
        for (int reserved = 1; reserved >= 0; reserved--) {
                uint64_t slots[METRICS_HIST_SLOTS] = {}, count = 0, sum = 0;

                for (unsigned i = 0; i < s->n_cpus; i++) {
                        if (cpuset_isset(&x->reserved, i) != reserved)
                                continue;
                        for (unsigned k = 0; k < METRICS_HIST_SLOTS; k++)
                                slots[k] += s->cpus[i].runq_hist[k];
                        count += s->cpus[i].runq_count;
                        sum += s->cpus[i].runq_sum_ns;
                }
                const char *lb = reserved ? "cpuset=\"reserved\"" : "cpuset=\"housekeeping\"";
                if (has(x, CAP_RUNQ_HIST))
                        prom_histogram(f, "rtd_runqueue_latency_seconds", lb, slots, le, METRICS_HIST_SLOTS, sum / 1e9);
                else    /* procfs: only the sum and count are known; a single +Inf bucket */
                        prom_histogram(f, "rtd_runqueue_latency_seconds", lb, &count, le, 1, sum / 1e9);
        }
}

static void render_bpf(Metrics *x, FILE *f) {
        const Sample *s = &x->cur;
        char lb[96];

        if (s->hz) {
                prom_family(f, "rtd_kernel_tick_hz", "gauge",
                            "The kernel's CONFIG_HZ: the tick rate of a CPU that runs a task, the floor of a quiet core without nohz_full.");
                prom_uint(f, "rtd_kernel_tick_hz", NULL, s->hz);
        }

        prom_family(f, "rtd_bpf_enabled", "gauge", "1 when the eBPF collector is attached, 0 when rtd fell back to procfs.");
        prom_uint(f, "rtd_bpf_enabled", NULL, metrics_bpf_enabled(x));
        if (s->n_progs) {
                prom_family(f, "rtd_bpf_program_misses_total", "counter",
                            "Runs of rtd's BPF programs the kernel skipped (recursion): their events are not counted.");
                for (size_t i = 0; i < s->n_progs; i++) {
                        (void) snprintf(lb, sizeof lb, "prog=\"%s\"", s->progs[i].name);
                        prom_uint(f, "rtd_bpf_program_misses_total", lb, s->progs[i].misses);
                }
        }
        if (!has(x, CAP_PROG_STATS))
                return;
        prom_family(f, "rtd_bpf_stats_enabled", "gauge", "1 when kernel BPF run-time statistics are on (rtd holds them on).");
        prom_uint(f, "rtd_bpf_stats_enabled", NULL, s->prog_stats_enabled);
        prom_family(f, "rtd_bpf_run_seconds_total", "counter", "Time spent in rtd's BPF programs (kernel BPF statistics).");
        for (size_t i = 0; i < s->n_progs; i++) {
                (void) snprintf(lb, sizeof lb, "prog=\"%s\"", s->progs[i].name);
                prom_double(f, "rtd_bpf_run_seconds_total", lb, s->progs[i].run_ns / 1e9);
        }
        prom_family(f, "rtd_bpf_runs_total", "counter", "Runs of rtd's BPF programs (kernel BPF statistics).");
        for (size_t i = 0; i < s->n_progs; i++) {
                (void) snprintf(lb, sizeof lb, "prog=\"%s\"", s->progs[i].name);
                prom_uint(f, "rtd_bpf_runs_total", lb, s->progs[i].run_count);
        }
}

static void render_daemon(Metrics *x, FILE *f) {
        Manager *m = x->manager;
        double le[METRICS_HIST_SLOTS];

        prom_family(f, "rtd_reserved_cpus", "gauge", "Number of reserved CPUs.");
        prom_uint(f, "rtd_reserved_cpus", NULL, cpuset_count(&x->reserved));

        if (m && x->exporters.jobs_prometheus)
                x->exporters.jobs_prometheus(m, f);

        for (unsigned k = 0; k < METRICS_HIST_SLOTS; k++)
                le[k] = metrics_hist_le(k);
        prom_family(f, "rtd_job_dispatch_latency_seconds", "histogram", "Time from a job's acceptance to its exec on a worker.");
        prom_histogram(f, "rtd_job_dispatch_latency_seconds", NULL, x->dispatch_hist, le, METRICS_HIST_SLOTS,
                       x->dispatch_sum_usec / 1e6);

        if (m && x->exporters.reservation_prometheus)
                x->exporters.reservation_prometheus(m, f);

        prom_family(f, "rtd_metrics_collections_total", "counter", "Successful reads of the metrics collector.");
        prom_uint(f, "rtd_metrics_collections_total", NULL, x->collections);
        prom_family(f, "rtd_metrics_collection_errors_total", "counter", "Failed reads of the metrics collector.");
        prom_uint(f, "rtd_metrics_collection_errors_total", NULL, x->collection_errors);
}

int metrics_render_prometheus(Metrics *x, char **ret, size_t *ret_size) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return -errno;
        render_bpf(x, f);
        render_cpus(x, f);
        render_runq(x, f);
        render_daemon(x, f);
        if (x->guard)
                guard_render_prometheus(x->guard, f);
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        *ret_size = size;
        return 0;
}

/* ---- JSON ---- */

/* Intruders of the last interval on one CPU, most time first. */
static json_t *interval_intruders(const Metrics *x, unsigned cpu) {
        _cleanup_free_ IntruderCounters *d = NULL;
        size_t n = 0;
        json_t *a = json_array();

        if (!a)
                return NULL;
        for (size_t i = 0; i < x->cur.n_intruders; i++) {
                const IntruderCounters *c = &x->cur.intruders[i];
                uint64_t before = 0;

                if (c->cpu != cpu)
                        continue;
                for (size_t j = 0; j < x->prev.n_intruders; j++)
                        if (x->prev.intruders[j].cpu == cpu && x->prev.intruders[j].pid == c->pid &&
                            x->prev.intruders[j].start_time == c->start_time)
                                before = x->prev.intruders[j].ns;
                if (delta(c->ns, before) == 0)
                        continue;
                IntruderCounters *t = reallocarray(d, n + 1, sizeof *d);
                if (!t)
                        break;
                d = t;
                d[n] = *c;
                d[n++].ns = delta(c->ns, before);
        }
        qsort(d, n, sizeof *d, cmp_intruder);
        for (size_t i = 0; i < n && i < TOP_INTRUDERS; i++)
                (void) json_array_append_new(a, json_pack("{s:s, s:i, s:f}", "comm", d[i].comm, "pid", (int) d[i].pid,
                                                          "seconds", d[i].ns / 1e9));
        return a;
}

/* Every named intruder of one CPU since rtd started, most time first, and what the table had no room for. */
static json_t *cumulative_intruders(const Metrics *x, unsigned cpu) {
        const Sample *s = &x->cur;
        _cleanup_free_ IntruderCounters *d = NULL;
        size_t n = 0;
        json_t *a = json_array();

        for (size_t i = 0; a && i < s->n_intruders; i++) {
                if (s->intruders[i].cpu != cpu)
                        continue;
                IntruderCounters *t = reallocarray(d, n + 1, sizeof *d);
                if (!t)
                        break;
                d = t;
                d[n++] = s->intruders[i];
        }
        if (n)
                qsort(d, n, sizeof *d, cmp_intruder);
        for (size_t i = 0; a && i < n; i++)
                (void) json_array_append_new(a, json_pack("{s:s, s:i, s:i, s:I, s:s, s:I, s:f}", "comm", d[i].comm,
                                                          "pid", (int) d[i].pid, "tgid", (int) d[i].tgid,
                                                          "start_time_ns", (json_int_t) d[i].start_time,
                                                          "kind", kind_names[d[i].kind < 3 ? d[i].kind : 0],
                                                          "runs", (json_int_t) d[i].count, "seconds", d[i].ns / 1e9));
        return a;
}

static json_t *vectors_json(const CpuCounters *c, const CpuCounters *p, double secs) {
        json_t *o = json_object();

        for (unsigned v = 0; o && v < METRICS_NR_VECTORS; v++) {
                json_t *e = json_pack("{s:I, s:I, s:f, s:I}", "count", (json_int_t) c->vec_count[v],
                                      "kernel_count", (json_int_t) c->vec_kernel[v], "seconds", c->vec_ns[v] / 1e9,
                                      "unpaired", (json_int_t) c->vec_unpaired[v]);
                if (e && p && secs > 0)
                        (void) json_object_set_new(e, "per_second", json_real(delta(c->vec_kernel[v], p->vec_kernel[v]) / secs));
                (void) json_object_set_new(o, vector_names[v], e);
        }
        if (o)
                /* No tracepoint counts them exactly (tlb_flush misses the handler's early returns): the
                 * kernel's counter alone, as both. */
                (void) json_object_set_new(o, "TLB", json_pack("{s:I, s:I}", "count", (json_int_t) c->tlb_shootdowns,
                                                               "kernel_count", (json_int_t) c->tlb_shootdowns));
        return o;
}

static json_t *ipis_json(const Metrics *x, unsigned cpu) {
        json_t *a = json_array();

        for (size_t i = 0; a && i < x->cur.n_ipis; i++) {
                const IpiCounters *q = &x->cur.ipis[i];
                if (q->cpu != cpu)
                        continue;
                (void) json_array_append_new(a, json_pack("{s:s, s:I, s:i, s:i, s:s}", "site", q->site,
                                                          "count", (json_int_t) q->count, "sender_cpu", (int) q->sender_cpu,
                                                          "sender_pid", (int) q->sender_pid, "sender_comm", q->sender_comm));
        }
        return a;
}

static json_t *interval_irqs(const Metrics *x, unsigned cpu) {
        json_t *a = json_array();

        for (size_t i = 0; a && i < x->cur.n_irqs; i++) {
                const IrqCounters *q = &x->cur.irqs[i];
                uint64_t before = 0;

                for (size_t j = 0; j < x->prev.n_irqs; j++)
                        if (x->prev.irqs[j].irq == q->irq && cpu < x->prev.n_cpus)
                                before = x->prev.irqs[j].count[cpu];
                if (cpu >= x->cur.n_cpus || delta(q->count[cpu], before) == 0)
                        continue;
                (void) json_array_append_new(a, json_pack("{s:i, s:s, s:I}", "irq", (int) q->irq, "name", q->name,
                                                          "count", (json_int_t) delta(q->count[cpu], before)));
        }
        return a;
}

static json_t *cpu_json(Metrics *x, unsigned i) {
        const CpuCounters *c = &x->cur.cpus[i], *p = prev_cpu(x, i);
        double secs = interval_seconds(x);
        uint64_t soft = 0, psoft = 0, dslots[METRICS_HIST_SLOTS];
        json_t *j, *softirqs, *rates, *hist;
        bool reserved = cpuset_isset(&x->reserved, i);

        softirqs = json_object();
        for (unsigned v = 0; v < METRICS_NR_SOFTIRQS; v++) {
                soft += c->softirq_count[v];
                psoft += p ? p->softirq_count[v] : 0;
                (void) json_object_set_new(softirqs, softirq_names[v],
                                           json_pack("{s:I, s:I, s:f}", "count", (json_int_t) c->softirq_count[v],
                                                     "kernel_count", (json_int_t) c->softirq_kernel[v],
                                                     "seconds", c->softirq_ns[v] / 1e9));
        }
        hist = json_array();
        for (unsigned k = 0; k < METRICS_HIST_SLOTS; k++) {
                dslots[k] = p ? delta(c->runq_hist[k], p->runq_hist[k]) : c->runq_hist[k];
                if (c->runq_hist[k])
                        (void) json_array_append_new(hist, json_pack("{s:f, s:I}", "le_seconds",
                                                                     k + 1 < METRICS_HIST_SLOTS ? metrics_hist_le(k) : -1.0,
                                                                     "count", (json_int_t) c->runq_hist[k]));
        }

        j = json_pack("{s:i, s:b, s:{s:I, s:I, s:I}, s:{s:I, s:I}, s:{s:I, s:f, s:o}, s:I, s:f, s:o, s:I, s:f}",
                      "cpu", (int) i, "reserved", reserved,
                      "context_switches", "voluntary", (json_int_t) c->switches_voluntary,
                      "involuntary", (json_int_t) c->switches_involuntary, "total", (json_int_t) c->switches_total,
                      "migrations", "in", (json_int_t) c->migrations_in, "out", (json_int_t) c->migrations_out,
                      "runqueue_latency", "count", (json_int_t) c->runq_count, "sum_seconds", c->runq_sum_ns / 1e9,
                      "buckets", hist,
                      "hardirqs", (json_int_t) c->hardirq_count, "hardirq_seconds", c->hardirq_ns / 1e9,
                      "softirqs", softirqs,
                      "intrusions", (json_int_t) c->intrusions, "intrusion_seconds", c->intrusion_ns / 1e9);
        if (!j)
                return NULL;
        (void) json_object_set_new(j, "current_job", c->current_job ? json_integer(c->current_job) : json_null());
        (void) json_object_set_new(j, "hardirqs_kernel", json_integer(c->hardirq_kernel));
        (void) json_object_set_new(j, "missed_events", json_integer(c->missed_events));
        (void) json_object_set_new(j, "missed_unrecovered", json_integer(c->unrecovered));
        (void) json_object_set_new(j, "sampled_on_cpu", json_integer(c->cpu_samples));
        (void) json_object_set_new(j, "vectors", vectors_json(c, p, secs));
        if (reserved) {
                (void) json_object_set_new(j, "intruders", cumulative_intruders(x, i));
                (void) json_object_set_new(j, "intruders_other", json_pack("{s:f, s:I}", "seconds", c->other_ns / 1e9,
                                                                           "runs", (json_int_t) c->other_runs));
                (void) json_object_set_new(j, "ipis", ipis_json(x, i));
        }

        if (p && secs > 0) {
                double q = metrics_hist_quantile(dslots, 0.99);
                rates = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}",
                                  "context_switches_per_second", delta(c->switches_total, p->switches_total) / secs,
                                  "involuntary_switches_per_second",
                                  delta(c->switches_involuntary, p->switches_involuntary) / secs,
                                  "migrations_per_second",
                                  (delta(c->migrations_in, p->migrations_in) + delta(c->migrations_out, p->migrations_out)) / secs,
                                  "hardirqs_per_second", delta(c->hardirq_count, p->hardirq_count) / secs,
                                  "softirqs_per_second", delta(soft, psoft) / secs,
                                  "intrusion_ratio", delta(c->intrusion_ns, p->intrusion_ns) / 1e9 / secs);
                (void) json_object_set_new(rates, "runqueue_latency_p99_seconds", q < 0 ? json_null() : json_real(q));
                (void) json_object_set_new(j, "last_interval", rates);
                if (reserved) {
                        (void) json_object_set_new(rates, "top_intruders", interval_intruders(x, i));
                        (void) json_object_set_new(rates, "irqs", interval_irqs(x, i));
                }
        }
        return j;
}

json_t *metrics_render_json(Metrics *x) {
        const Sample *s = &x->cur;
        _cleanup_free_ char *reserved = NULL;
        json_t *j, *cpus, *irqs, *progs;
        (void) cpuset_format(&x->reserved, &reserved);
        cpus = json_array();
        for (unsigned i = 0; i < s->n_cpus; i++)
                (void) json_array_append_new(cpus, cpu_json(x, i));

        irqs = json_array();
        for (size_t k = 0; k < s->n_irqs; k++) {
                json_t *counts = json_array(), *secs = json_array();
                for (unsigned i = 0; i < s->n_cpus; i++) {
                        (void) json_array_append_new(counts, json_integer(s->irqs[k].count[i]));
                        if (s->irqs[k].ns)
                                (void) json_array_append_new(secs, json_real(s->irqs[k].ns[i] / 1e9));
                }
                (void) json_array_append_new(irqs, json_pack("{s:i, s:s, s:o, s:o}", "irq", (int) s->irqs[k].irq,
                                                             "name", s->irqs[k].name, "per_cpu", counts,
                                                             "seconds_per_cpu", secs));
        }

        progs = json_array();
        for (size_t i = 0; i < s->n_progs; i++)
                (void) json_array_append_new(progs, json_pack("{s:s, s:I, s:I, s:f, s:f}", "name", s->progs[i].name,
                                                              "runs", (json_int_t) s->progs[i].run_count,
                                                              "missed", (json_int_t) s->progs[i].misses,
                                                              "run_seconds", s->progs[i].run_ns / 1e9,
                                                              "ns_per_run", s->progs[i].run_count ?
                                                              (double) s->progs[i].run_ns / s->progs[i].run_count : 0.0));

        j = json_pack("{s:o, s:s, s:f, s:o, s:o, s:o, s:b, s:{s:I, s:f}}",
                      "collector", metrics_to_json(x),
                      "reserved_cpus", strempty(reserved),
                      "interval_seconds", interval_seconds(x),
                      "cpus", cpus, "irqs", irqs, "bpf_programs", progs,
                      "bpf_stats_enabled", s->prog_stats_enabled,
                      "dispatch_latency", "count", (json_int_t) x->dispatch_count,
                      "sum_seconds", x->dispatch_sum_usec / 1e6);
        if (j) {
                (void) json_object_set_new(j, "hz", s->hz ? json_integer(s->hz) : json_null());
                /* CLOCK_MONOTONIC bounds of the reading, for audits that line a trace up with it. */
                (void) json_object_set_new(j, "sample_monotonic", json_pack("{s:f, s:f}", "start", s->time_usec / 1e6,
                                                                            "end", MAX(s->end_usec, s->time_usec) / 1e6));
                (void) json_object_set_new(j, "vectors_source", json_string(s->vectors_traced ? "irq_vectors tracepoints" :
                                                                            "/proc/interrupts (counts only)"));
        }
        if (j && x->manager && x->exporters.jobs_json)
                (void) json_object_set_new(j, "jobs", x->exporters.jobs_json(x->manager));
        if (j && x->manager && x->exporters.reservation_json)
                (void) json_object_set_new(j, "reservation", x->exporters.reservation_json(x->manager));
        if (j && x->guard)
                (void) json_object_set_new(j, "starvation_guard", guard_to_json(x->guard));
        return j;
}
