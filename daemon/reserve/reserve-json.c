/* SPDX-License-Identifier: MIT */
/* What the reservation is, for readers: its JSON (/v1/reservation, /v1/status), its figures in /metrics and
 * /v1/metrics, and the boot parameters that would make its CPUs quieter still. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/manager.h"
#include "host/residual.h"
#include "metrics/prometheus.h"
#include "reserve-internal.h"
#include "reserve.h"
#include "shared/fileio.h"
#include "shared/log.h"

void reservation_stats(Reservation *r, ReservationStats *ret) {
        *ret = (ReservationStats){
                .drift_checks = r->drift_checks,
                .irqs_drifted = r->irq.drifted,
                .tasks_drifted = r->tasks_drifted,
                .irqs_moved = r->irq.moved,
                .irqs_unmovable = (unsigned) r->irq.n_unmovable,
                .tasks_moved = r->tasks.moved,
                .tasks_refused = r->tasks.refused,
        };
}

/* The reservation's families in /metrics (handed to metrics by the Manager: metrics includes nothing of reserve/). */
void reservation_render_prometheus(Reservation *r, FILE *f) {
        ReservationStats rs = {};
        reservation_stats(r, &rs);
        prom_family(f, "rtd_reservation_drift_checks_total", "counter", "Drift checks of the reservation.");
        prom_uint(f, "rtd_reservation_drift_checks_total", NULL, rs.drift_checks);
        prom_family(f, "rtd_reservation_irqs_drifted_total", "counter", "IRQ masks re-applied after someone else changed them.");
        prom_uint(f, "rtd_reservation_irqs_drifted_total", NULL, rs.irqs_drifted);
        prom_family(f, "rtd_reservation_tasks_drifted_total", "counter", "Task affinities re-applied after drift.");
        prom_uint(f, "rtd_reservation_tasks_drifted_total", NULL, rs.tasks_drifted);
        prom_family(f, "rtd_reservation_irqs", "gauge", "IRQs moved off the reserved CPUs, and those that refused (unmovable).");
        prom_uint(f, "rtd_reservation_irqs", "state=\"moved\"", rs.irqs_moved);
        prom_uint(f, "rtd_reservation_irqs", "state=\"unmovable\"", rs.irqs_unmovable);
        prom_family(f, "rtd_reservation_tasks", "gauge", "Tasks moved off the reserved CPUs, and those that refused.");
        prom_uint(f, "rtd_reservation_tasks", "state=\"moved\"", rs.tasks_moved);
        prom_uint(f, "rtd_reservation_tasks", "state=\"refused\"", rs.tasks_refused);
}

/* "reservation" in /v1/metrics. */
json_t *reservation_stats_json(Reservation *r) {
        ReservationStats rs = {};

        reservation_stats(r, &rs);
        return json_pack("{s:I, s:I, s:I, s:i, s:i, s:i, s:i}",
                         "drift_checks", (json_int_t) rs.drift_checks,
                         "irqs_drifted", (json_int_t) rs.irqs_drifted,
                         "tasks_drifted", (json_int_t) rs.tasks_drifted,
                         "irqs_moved", (int) rs.irqs_moved, "irqs_unmovable", (int) rs.irqs_unmovable,
                         "tasks_moved", (int) rs.tasks_moved, "tasks_refused", (int) rs.tasks_refused);
}

json_t *reserve_cpus_json(const CpuSet *s) {
        _cleanup_free_ char *l = NULL;
        return json_string(cpuset_format(s, &l) >= 0 ? l : "");
}

/* Boot parameters a run-time reservation cannot replace, and whether this boot has them. */
json_t *reserve_boot_hints(Reservation *r, const CpuSet *reserved) {
        _cleanup_free_ char *cmdline = NULL, *list = NULL, *nohz = NULL;
        json_t *a = json_array();
        CpuSet nohz_set = {};

        (void) read_one_line_at(r->proc_fd, "cmdline", &cmdline);
        (void) cpuset_format(reserved, &list);
        if (read_one_line_at(r->sys_fd, "devices/system/cpu/nohz_full", &nohz) >= 0)
                (void) cpuset_parse(nohz, &nohz_set, NULL);
        struct {
                const char *key, *fmt, *why;
                bool have;
        } hints[] = {
                { "nohz_full", "nohz_full=%s", "stops the scheduler tick on the reserved CPUs while one task runs",
                  cpuset_is_subset(reserved, &nohz_set) && !cpuset_is_empty(reserved) },
                { "rcu_nocbs", "rcu_nocbs=%s", "moves RCU callbacks off the reserved CPUs",
                  cmdline && strstr(cmdline, "rcu_nocbs=") },
                { "isolcpus", "isolcpus=managed_irq,%s",
                  "keeps kernel-managed (per-queue) IRQs off the reserved CPUs where the device allows it",
                  cmdline && strstr(cmdline, "managed_irq") },
        };
        for (size_t i = 0; i < ELEMENTSOF(hints); i++) {
                _cleanup_free_ char *p = NULL;
                if (asprintf(&p, hints[i].fmt, strempty(list)) < 0)
                        continue;
                json_array_append_new(a, json_pack("{s:s, s:s, s:b}", "parameter", p, "why", hints[i].why,
                                                   "present", hints[i].have));
        }
        return a;
}

json_t *reservation_to_json(Reservation *r) {
        const RtdConfig *c = config_of(r);
        json_t *o;

        if (!r->active) {
                o = json_pack("{s:s, s:o*}", "state", "none", "last_restore", json_incref(r->last_restore));
                if (o && r->journal_problem)
                        json_object_set_new(o, "journal_problem", json_string(r->journal_problem));
                return o;
        }
        o = json_pack("{s:s, s:O?, s:s, s:s?, s:o, s:o, s:s, s:{s:I, s:I, s:I, s:I, s:I}}",
                      "state", "active",
                      "start", r->start,
                      "backend", backend_kind_to_string(r->backend),
                      "backend_reason", r->backend_reason,
                      "reserved", reserve_cpus_json(&r->reserved),
                      "housekeeping", reserve_cpus_json(&r->housekeeping),
                      "smt", smt_mode_to_string(c->smt),
                      "tasks", "moved", (json_int_t) r->tasks.moved, "refused", (json_int_t) r->tasks.refused,
                      "own", (json_int_t) r->tasks.own, "inherited", (json_int_t) r->tasks.inherited, "seen",
                      (json_int_t) r->tasks.seen);
        if (!o)
                return NULL;
        if (r->backend != BACKEND_AFFINITY)
                json_object_set_new(o, "cgroup", json_pack("{s:s?, s:s?, s:s?, s:O?}", "reserved_cgroup",
                                                           r->cgroup.reserved_cgroup, "partition",
                                                           r->cgroup.partition, "partition_note",
                                                           r->cgroup.partition_note, "shrunk", r->cgroup.shrunk));
        if (r->irqs_kept)
                json_object_set_new(o, "irqs", json_pack("{s:s}", "state", "left alone (IRQs=keep)"));
        else {
                json_t *i = irq_state_to_json(&r->irq);
                if (i && !r->irq.irqbalance_note)
                        json_object_set_new(i, "irqbalance",
                                            json_pack("{s:s}", "note", "irqbalance is not running"));
                json_object_set_new(o, "irqs", i);
        }
        json_object_set_new(o, "knobs", tune_state_to_json(&r->tune, r->proc_fd, r->sys_fd));
        json_object_set_new(o, "drift", json_pack("{s:I, s:I, s:I, s:I, s:I}", "interval_sec",
                                                  (json_int_t) c->check_interval_sec, "checks",
                                                  (json_int_t) r->drift_checks, "irqs", (json_int_t) r->irq.drifted,
                                                  "tasks", (json_int_t) r->tasks_drifted, "last_check",
                                                  (json_int_t) r->last_check_realtime));
        json_object_set_new(json_object_get(o, "drift"), "walks_cut_short", json_integer((json_int_t) r->walks_cut_short));
        json_object_set_new(o, "boot_parameters", reserve_boot_hints(r, &r->reserved));
        json_object_set_new(o, "residual", residual_sources(r->proc_fd, r->sys_fd, &r->reserved, &r->tune));
        json_object_set_new(o, "journal", json_pack("{s:s, s:I}", "file", JOURNAL_FILE, "entries",
                                                    (json_int_t) r->journal->n_entries));
        if (r->last_restore)
                json_object_set_new(o, "last_restore", json_incref(r->last_restore));
        if (r->journal_problem)
                json_object_set_new(o, "journal_problem", json_string(r->journal_problem));
        return o;
}

json_t *reservation_last_restore(Reservation *r) {
        return r->last_restore;
}
