/* SPDX-License-Identifier: MIT */
/* Quieting leased CPUs with the reservation's own tools (backend-affinity.c, irq.c, tune.c) through one
 * restore journal for all leases, the drift check, and the leases' metrics. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/manager.h"
#include "host/backend.h"
#include "host/topology.h"
#include "host/tune.h"
#include "lease-internal.h"
#include "metrics/prometheus.h"
#include "shared/fileio.h"
#include "shared/log.h"

/* As reserve.c's: one pass over /proc may hold the loop this long. A pass cut short goes on at the next turn
 * of the loop (requests are served in between), not at the next drift check. */
#define LEASE_WALK_BUDGET_USEC (250 * 1000)

uint64_t leases_walk_budget(void) {
        /* For tests and diagnosis (docs/leases.md): a smaller budget makes every walk a chain of passes. */
        const char *e = getenv("RTD_LEASE_WALK_BUDGET_USEC");
        unsigned long long v;
        char *end;

        if (!e || !*e)
                return LEASE_WALK_BUDGET_USEC;
        errno = 0;
        v = strtoull(e, &end, 10);
        if (errno || *end || v == 0 || v > LEASE_WALK_BUDGET_USEC) {
                log_warning("RTD_LEASE_WALK_BUDGET_USEC=%s: not 1 to %d, using %d", e, LEASE_WALK_BUDGET_USEC,
                            LEASE_WALK_BUDGET_USEC);
                return LEASE_WALK_BUDGET_USEC;
        }
        return v;
}

void lease_walk_begin(Leases *l, Lease *x) {
        x->quieted = false;
        x->walk_start = l->walk_resume;
}

/* Whether a pass that went from after pid a to pid b (in pid order, wrapping round) went past pid s. */
static bool pass_went_past(pid_t a, pid_t b, pid_t s) {
        return a < b ? a < s && s <= b : s > a || s <= b;
}

/* A whole pass, or passes that came round to where a lease's walk began, quieted that lease. */
static void walk_progress(Leases *l, pid_t from, pid_t to, bool cut_short) {
        for (size_t i = 0; i < l->n_active; i++) {
                Lease *x = l->active[i];
                if (!x->quieted && (!cut_short || pass_went_past(from, to, x->walk_start))) {
                        x->quieted = true;
                        /* Its figures count from here: what ran on the CPUs while rtd was still moving it off is
                         * not an intrusion into the job, which does not start before (a slow walk took 4 s of
                         * an emulated guest's CPU). */
                        lease_metrics_baseline(l, x);
                }
        }
}

static int on_walk_more(sd_event_source *s, uint64_t usec, void *userdata) {
        Leases *l = userdata;

        (void) s;
        (void) usec;
        (void) leases_quiet(l, l->walk_drift);
        return 0;
}

/*
 * The next pass at the next loop turn (a zero-delay timer: one dispatch per turn, so requests that came meanwhile
 * are served first). A pass that got nowhere (listing /proc alone took its budget: a crowded node) tries again
 * only after a second, so such a node costs rtd a fraction of its CPU rather than all of it.
 */
static void walk_more(Leases *l, bool drift, bool progress) {
        /* From now, not from the loop turn's start (sd-event's relative times): the pass itself may be long. */
        uint64_t when = progress ? 1 : now_usec(CLOCK_MONOTONIC) + 1000 * 1000;

        l->walk_drift = drift;
        if (l->walk_more) {
                (void) sd_event_source_set_time(l->walk_more, when);
                (void) sd_event_source_set_enabled(l->walk_more, SD_EVENT_ONESHOT);
                return;
        }
        if (sd_event_add_time(l->manager->event, &l->walk_more, CLOCK_MONOTONIC, when, 0, on_walk_more, l) < 0)
                log_warning("Leases: could not continue a walk over /proc cut short; the drift check resumes it");
}

static int restore_all(Leases *l) {
        ReplayReport rep = {};
        int q;

        q = journal_replay(l->journal, l->proc_fd, l->sys_fd, &rep);
        log_notice("Leases: restore journal replayed: %u restored, %u skipped (tasks gone or changed since), "
                   "%u failed", rep.restored, rep.skipped, rep.failed);
        json_decref(l->last_restore);
        l->last_restore = replay_report_to_json(&rep);
        replay_report_done(&rep);
        /* A journal with failures stays for `rtd --restore`. */
        if (q >= 0)
                (void) journal_remove(l->journal);
        irq_state_done(&l->irq);
        l->tasks_moved = l->tasks_refused = 0;
        return q;
}

int leases_quiet(Leases *l, bool drift) {
        Manager *m = l->manager;
        pid_t exempt[LEASES_MAX];
        CpuSet leased, reserved, hk;
        TaskStats ts = {};
        KnobCtx k;
        int q;

        if (l->n_active == 0) {
                l->drift_timer = sd_event_source_disable_unref(l->drift_timer);
                l->walk_more = sd_event_source_disable_unref(l->walk_more);
                if (l->journal->n_entries == 0 && !l->journal->on_disk)
                        return 0;
                return restore_all(l);
        }
        leases_cpus(l, &leased);
        manager_reserved_cpus(m, &reserved);
        cpuset_andnot(&hk, &m->topology->online, &reserved);
        cpuset_andnot(&hk, &hk, &leased);
        for (size_t i = 0; i < l->n_active; i++)
                exempt[i] = l->active[i]->pid;
        /* The targets are (original ∩ hk): CPUs a lease gave back return to the tasks that had them. */
        k = (KnobCtx){ .proc_fd = l->proc_fd, .sys_fd = l->sys_fd, .journal = l->journal,
                       .deadline_usec = now_usec(CLOCK_MONOTONIC) + l->walk_budget_usec,
                       .resume_pid = l->walk_resume, .exempt = exempt, .n_exempt = l->n_active };
        q = tasks_apply(&k, &hk, TASKS_ALL, drift, getpid(), &ts);
        if (q < 0)
                return q;
        /* A pass cut before its first task (the list alone took the budget) keeps its place. */
        bool progress = !ts.cut_short || ts.seen > 0;
        if (progress) {
                walk_progress(l, l->walk_resume, k.resume_pid, ts.cut_short);
                l->walk_resume = k.resume_pid;
        }
        if (ts.cut_short) {
                l->walks_cut_short++;
                walk_more(l, drift, progress);
        } else
                (void) sd_event_source_set_enabled(l->walk_more, SD_EVENT_OFF);
        if (drift) {
                l->tasks_drifted += ts.drifted;
                /* One check is one round, however many passes it takes. */
                if (!ts.cut_short)
                        l->drift_checks++;
                if (ts.drifted > 0)
                        log_notice("Leases: drift check: %u task%s found on leased CPUs again, moved back",
                                   ts.drifted, ts.drifted == 1 ? "" : "s");
        } else {
                l->tasks_moved += ts.moved;
                l->tasks_refused = ts.refused;
        }
        q = irq_apply(&k, &hk, &leased, m->topology->nr_cpu_ids, drift, &l->irq);
        if (q < 0)
                log_warning_errno(q, "Leases: could not steer IRQs: %m");
        tune_apply_workqueues(&k, &hk, m->topology->nr_cpu_ids);
        q = journal_flush(l->journal);
        /* Waiters last, with the IRQs and workqueues of this pass applied too. A waiter may end its lease. */
        for (size_t i = l->n_active; i-- > 0;)
                if (i < l->n_active && l->active[i]->quieted)
                        lease_quiet_notify(l->active[i]);
        return q;
}

static int on_drift(sd_event_source *s, uint64_t usec, void *userdata) {
        Leases *l = userdata;

        (void) s;
        (void) usec;
        (void) leases_quiet(l, true);
        leases_drift_timer_arm(l);
        return 0;
}

void leases_drift_timer_arm(Leases *l) {
        unsigned sec = l->manager->config->check_interval_sec;
        uint64_t usec = (uint64_t) sec * 1000000;

        if (sec == 0 || l->n_active == 0)
                return;
        if (!l->drift_timer) {
                if (sd_event_add_time_relative(l->manager->event, &l->drift_timer, CLOCK_MONOTONIC, usec,
                                               100 * 1000, on_drift, l) < 0)
                        log_warning("Leases: could not start the drift check, continuing without");
                return;
        }
        (void) sd_event_source_set_time_relative(l->drift_timer, usec);
        (void) sd_event_source_set_enabled(l->drift_timer, SD_EVENT_ONESHOT);
}

/* The root and every descendant now (later forks inherit the mark): /proc/PID/task/TID/children. */
void lease_track(Leases *l, Lease *x) {
        pid_t todo[1024];
        size_t n = 0, done = 0;
        uint64_t job = LEASE_JOB_ID_BASE + x->id;

        todo[n++] = x->pid;
        while (done < n) {
                pid_t p = todo[done++];
                _cleanup_closedir_ DIR *d = NULL;
                char path[300];
                struct dirent *de;

                (void) metrics_track_task(l->manager->metrics, p, job, 0);
                snprintf(path, sizeof path, "%d/task", (int) p);
                d = opendir_at(l->proc_fd, path);
                if (!d)
                        continue;
                while ((de = readdir(d))) {
                        _cleanup_free_ char *kids = NULL;
                        if (de->d_name[0] == '.')
                                continue;
                        snprintf(path, sizeof path, "%d/task/%s/children", (int) p, de->d_name);
                        if (read_full_file_at(l->proc_fd, path, &kids, NULL) < 0)
                                continue;
                        for (char *s = kids, *end; *s && n < ELEMENTSOF(todo); s = end) {
                                long kid = strtol(s, &end, 10);
                                if (end == s)
                                        break;
                                if (kid > 0)
                                        todo[n++] = (pid_t) kid;
                        }
                }
        }
}

void lease_metrics_baseline(Leases *l, Lease *x) {
        unsigned n = cpuset_count(&x->cpus), i = 0;

        metrics_refresh(l->manager->metrics);
        free(x->base);
        x->base = calloc(MAX(n, 1u), sizeof *x->base);
        if (!x->base)
                return;
        CPUSET_FOREACH(cpu, &x->cpus)
                (void) metrics_cpu_figures(l->manager->metrics, (unsigned) cpu, &x->base[i++]);
}

/* Figures of one leased CPU since its CPUs were quiet (the lease's first walk came round). */
static void cpu_delta(Leases *l, const Lease *x, unsigned idx, unsigned cpu, MetricsCpuFigures *ret) {
        MetricsCpuFigures now, base = x->base ? x->base[idx] : (MetricsCpuFigures){};

        (void) metrics_cpu_figures(l->manager->metrics, cpu, &now);
        *ret = (MetricsCpuFigures){
                .intrusion_ns = now.intrusion_ns - MIN(now.intrusion_ns, base.intrusion_ns),
                .intrusions = now.intrusions - MIN(now.intrusions, base.intrusions),
                .switches = now.switches - MIN(now.switches, base.switches),
                .hardirqs = now.hardirqs - MIN(now.hardirqs, base.hardirqs),
        };
}

json_t *lease_metrics_json(Leases *l, const Lease *x) {
        MetricsCpuFigures sum = {};
        json_t *per = json_object(), *o;
        unsigned i = 0;

        if (!x->active)
                return x->final_metrics ? json_incref(x->final_metrics) : json_object();
        CPUSET_FOREACH(cpu, &x->cpus) {
                MetricsCpuFigures d;
                char key[16];
                cpu_delta(l, x, i++, (unsigned) cpu, &d);
                sum.intrusion_ns += d.intrusion_ns;
                sum.intrusions += d.intrusions;
                sum.switches += d.switches;
                sum.hardirqs += d.hardirqs;
                snprintf(key, sizeof key, "%d", cpu);
                json_object_set_new(per, key, json_pack("{s:f, s:I, s:I, s:I}", "intrusion_seconds",
                                                        d.intrusion_ns / 1e9, "intrusions",
                                                        (json_int_t) d.intrusions, "context_switches",
                                                        (json_int_t) d.switches, "hardirqs",
                                                        (json_int_t) d.hardirqs));
        }
        o = json_pack("{s:f, s:I, s:I, s:I, s:o, s:b}", "intrusion_seconds", sum.intrusion_ns / 1e9, "intrusions",
                      (json_int_t) sum.intrusions, "context_switches", (json_int_t) sum.switches, "hardirqs",
                      (json_int_t) sum.hardirqs, "cpus", per, "bpf", metrics_bpf_enabled(l->manager->metrics));
        return o;
}

void leases_render_prometheus(Leases *l, FILE *f) {
        uint64_t now = (uint64_t) time(NULL);
        char lb[256], owner[2 * LEASE_OWNER_MAX + 8];

        prom_family(f, "rtd_leases_active", "gauge", "Leases active now (CPUs quiet for a process tree rtd did not start).");
        prom_uint(f, "rtd_leases_active", NULL, leases_active(l));
        if (!l || l->n_active == 0)
                return;
        prom_family(f, "rtd_lease_active", "gauge", "1 for each active lease, by owner and leased CPUs.");
        for (size_t i = 0; i < l->n_active; i++) {
                _cleanup_free_ char *cpus = NULL;
                (void) cpuset_format(&l->active[i]->cpus, &cpus);
                snprintf(lb, sizeof lb, "owner=\"%s\",cpus=\"%s\"",
                         prom_label_escape(l->active[i]->owner, owner, sizeof owner), strempty(cpus));
                prom_uint(f, "rtd_lease_active", lb, 1);
        }
        static const struct {
                const char *name, *type, *help;
        } fam[] = {
                { "rtd_lease_intrusion_seconds_total", "counter",
                  "CPU time of tasks outside the leased tree on each leased CPU since its CPUs were quiet." },
                { "rtd_lease_context_switches_total", "counter", "Context switches on each leased CPU since its CPUs were quiet." },
                { "rtd_lease_hardirqs_total", "counter",
                  "Numbered IRQs and architecture vectors on each leased CPU since its CPUs were quiet." },
        };
        for (size_t k = 0; k < ELEMENTSOF(fam); k++) {
                prom_family(f, fam[k].name, fam[k].type, fam[k].help);
                for (size_t i = 0; i < l->n_active; i++) {
                        const Lease *x = l->active[i];
                        unsigned idx = 0;
                        CPUSET_FOREACH(cpu, &x->cpus) {
                                MetricsCpuFigures d;
                                cpu_delta(l, x, idx++, (unsigned) cpu, &d);
                                snprintf(lb, sizeof lb, "owner=\"%s\",cpu=\"%d\"",
                                         prom_label_escape(x->owner, owner, sizeof owner), cpu);
                                if (k == 0)
                                        prom_double(f, fam[k].name, lb, d.intrusion_ns / 1e9);
                                else
                                        prom_uint(f, fam[k].name, lb, k == 1 ? d.switches : d.hardirqs);
                        }
                }
        }
        prom_family(f, "rtd_lease_age_seconds", "gauge", "Seconds since the lease began.");
        for (size_t i = 0; i < l->n_active; i++) {
                snprintf(lb, sizeof lb, "owner=\"%s\"", prom_label_escape(l->active[i]->owner, owner, sizeof owner));
                prom_uint(f, "rtd_lease_age_seconds", lb, now - MIN(now, l->active[i]->created));
        }
        /* 0 while the lease is active means rtd missed its job's end: the alert "a lease outliving its job". */
        prom_family(f, "rtd_lease_pid_alive", "gauge", "Whether the root process of an active lease still runs.");
        for (size_t i = 0; i < l->n_active; i++) {
                uint64_t st;
                bool alive = lease_pid_starttime(l->proc_fd, l->active[i]->pid, &st) >= 0 &&
                             st == l->active[i]->starttime;
                snprintf(lb, sizeof lb, "owner=\"%s\"", prom_label_escape(l->active[i]->owner, owner, sizeof owner));
                prom_uint(f, "rtd_lease_pid_alive", lb, alive);
        }
}
