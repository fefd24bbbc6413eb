/* SPDX-License-Identifier: MIT */
/* The reservation: validation, the backend that keeps tasks off, IRQs, tuning, the drift check, the dry-run
 * plan, and putting everything back from the restore journal. What it is, for readers: reserve-json.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/manager.h"
#include "host/backend.h"
#include "host/irq.h"
#include "host/residual.h"
#include "host/restore.h"
#include "host/topology.h"
#include "host/tune.h"
#include "lease/lease.h"
#include "reserve-internal.h"
#include "reserve.h"
#include "shared/log.h"
#include "shared/messages.h"



static int restore_journal(Journal *j, int proc_fd, int sys_fd, json_t **ret_report) {
        ReplayReport rep = {};
        int q;

        q = journal_replay(j, proc_fd, sys_fd, &rep);
        log_struct(q < 0 ? LOG_WARNING : LOG_NOTICE, RTD_MSG_RESTORED, NULL,
                   "Restore journal replayed: %u restored, %u skipped (tasks gone or changed since), %u failed",
                   rep.restored, rep.skipped, rep.failed);
        if (ret_report)
                *ret_report = replay_report_to_json(&rep);
        replay_report_done(&rep);
        /* A journal with failures stays for `rtd --restore` (its restored entries are idempotent). */
        if (q >= 0) {
                int k = journal_remove(j);
                if (k < 0)
                        log_warning_errno(k, "Could not remove the restore journal: %m");
        }
        return q;
}

static int reservation_restore_journal_only(int proc_fd, int sys_fd, int runtime_fd) {
        _cleanup_(journal_freep) Journal *j = NULL;
        _cleanup_free_ char *problem = NULL;
        int r;

        r = journal_load(runtime_fd, &j, &problem);
        if (r < 0)
                return log_error_errno(r, "Could not read the restore journal: %m");
        if (problem)
                log_warning("%s", problem);
        if (r == 0) {
                log_info("No restore journal: nothing to restore");
                return 0;
        }
        return restore_journal(j, proc_fd, sys_fd, NULL);
}

int reservation_restore_only(int proc_fd, int sys_fd, int runtime_fd) {
        int q = reservation_restore_journal_only(proc_fd, sys_fd, runtime_fd);
        /* Leases' knobs too (lease.c): `rtd --restore` puts the whole machine back. */
        int k = leases_restore_only(proc_fd, sys_fd, runtime_fd);
        return q < 0 ? q : k;
}

int reservation_new(Manager *m, Reservation **ret) {
        _cleanup_(reservation_freep) Reservation *r = NULL;
        Journal *old = NULL;
        int q;

        r = calloc(1, sizeof *r);
        if (!r)
                return -ENOMEM;
        r->manager = m;
        r->proc_fd = m->proc_fd;
        r->sys_fd = m->sys_fd;
        r->runtime_fd = m->runtime_fd;

        /* A journal left behind means the last run died (or re-executed): reservation_start() either adopts
         * it, when it describes the very reservation this run is configured for, or restores it first. */
        q = journal_load(r->runtime_fd, &old, &r->journal_problem);
        if (q < 0)
                return log_error_errno(q, "Could not read the restore journal: %m");
        if (r->journal_problem)
                log_warning("%s", r->journal_problem);
        if (q > 0)
                r->left_behind = old;
        else {
                r->journal = journal_new(r->runtime_fd);
                if (!r->journal)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(r);
        return 0;
}

/* Whether a dead run's journal describes this reservation: same CPUs both ways, same backend. */
static bool journal_describes(Journal *j, const CpuSet *reserved, const CpuSet *hk, BackendKind b) {
        _cleanup_free_ char *a = NULL, *h = NULL;
        const char *ja = json_string_value(json_object_get(j->meta, "reserved")),
                   *jh = json_string_value(json_object_get(j->meta, "housekeeping")),
                   *jb = json_string_value(json_object_get(j->meta, "backend"));

        if (cpuset_format(reserved, &a) < 0 || cpuset_format(hk, &h) < 0)
                return false;
        return ja && jh && jb && streq(ja, a) && streq(jh, h) && streq(jb, backend_kind_to_string(b));
}

static bool adoptable(Reservation *r, Journal *old, const CpuSet *cpus) {
        _cleanup_free_ char *reason = NULL;
        CpuSet hk;
        BackendKind b;

        if (cpuset_is_empty(cpus) || backend_detect(r->proc_fd, r->sys_fd, config_of(r)->backend, &b, &reason) < 0)
                return false;
        cpuset_andnot(&hk, &r->manager->topology->online, cpus);
        return journal_describes(old, cpus, &hk, b);
}

int reservation_start(Reservation *r, const CpuSet *cpus) {
        json_t *prev_pid = NULL;
        uint64_t writes0 = knob_writes();
        const char *mode = "new";
        int q;

        if (r->left_behind) {
                Journal *old = TAKE_PTR(r->left_behind);

                prev_pid = json_incref(json_object_get(old->meta, "pid"));
                if (adoptable(r, old, cpus)) {
                        /* Nothing is put back: applying the same reservation over the old journal writes only
                         * what drifted while no rtd watched (knob_set() skips a knob already at its value, a
                         * confined task is not moved), and the originals stay the ones first recorded. */
                        log_notice("Found the restore journal of a previous run for this same reservation: "
                                   "adopting it");
                        mode = "adopted";
                } else {
                        log_notice("Found a restore journal from a previous run: restoring it first");
                        (void) restore_journal(old, r->proc_fd, r->sys_fd, &r->last_restore);
                        mode = "restored first";
                }
                r->journal = old;       /* keeps whatever could not be restored */
                r->journal->dirty = true;
        }
        q = cpuset_is_empty(cpus) ? 0 : reservation_apply(r, cpus);
        json_decref(r->start);
        r->start = json_pack("{s:s, s:o*, s:I, s:I}", "mode", mode, "previous_pid", prev_pid,
                             "knob_writes", (json_int_t) (knob_writes() - writes0),
                             "tasks_moved", (json_int_t) r->tasks.moved);
        return q;
}

int reservation_validate(Reservation *r, const CpuSet *cpus, char **ret_error) {
        const Topology *t = r->manager->topology;
        _cleanup_free_ char *a = NULL, *b = NULL;
        CpuSet bad, hk;
        int q = 0;

        *ret_error = NULL;
        if (cpuset_is_empty(cpus))
                q = asprintf(ret_error, "cpus: the list is empty; to give every CPU back, release the "
                                        "reservation (DELETE /v1/reservation, rtctl release)");
        else if (cpuset_andnot(&bad, cpus, &t->online), !cpuset_is_empty(&bad)) {
                (void) cpuset_format(&bad, &a);
                (void) cpuset_format(&t->online, &b);
                q = asprintf(ret_error, "cpus: CPU %s is not online; online CPUs are %s", strempty(a),
                             strempty(b));
        } else if (cpuset_andnot(&hk, &t->online, cpus), cpuset_is_empty(&hk)) {
                (void) cpuset_format(&t->online, &b);
                q = asprintf(ret_error, "cpus: reserving every online CPU (%s) leaves no housekeeping CPU for "
                                        "the system and rtd; keep at least one out of the list",
                             strempty(b));
        } else if (leases_overlap(r->manager->leases, cpus)) {
                const Lease *x = leases_overlap(r->manager->leases, cpus);
                q = asprintf(ret_error, "cpus: they overlap lease %" PRIu64 " of %s, CPUs a job outside rtd runs "
                                        "on (GET /v1/leases, rtctl leases); reserve other CPUs or wait for the "
                                        "lease to end", lease_id(x), lease_owner(x));
        } else if (leases_active(r->manager->leases) > 0 && (leases_cpus(r->manager->leases, &bad),
                                                             cpuset_is_subset(&hk, &bad))) {
                (void) cpuset_format(&bad, &b);
                q = asprintf(ret_error, "cpus: with CPUs %s leased, reserving these leaves no housekeeping CPU for "
                                        "the system and rtd; keep at least one CPU out of the list and the leases",
                             strempty(b));
        } else if (config_of(r)->smt == SMT_EXCLUSIVE) {
                /* A reserved CPU must not share its core with a housekeeping CPU; that also leaves the
                 * housekeeping CPUs whole cores, siblings included. */
                CPUSET_FOREACH(cpu, cpus) {
                        const TopologyCpu *tc = topology_cpu(t, (unsigned) cpu);
                        if (!tc || !cpuset_intersects(&tc->siblings, &hk))
                                continue;
                        CpuSet core, out;
                        cpuset_and(&core, &tc->siblings, &t->online);
                        cpuset_andnot(&out, &core, cpus);
                        (void) cpuset_format(&core, &a);
                        (void) cpuset_format(&out, &b);
                        q = asprintf(ret_error, "cpus: CPU %d shares its core with CPU %s, which would stay a "
                                                "housekeeping CPU; with [Reserve] SMT=exclusive reserve whole "
                                                "cores (here %s) or set SMT=shared",
                                     cpu, strempty(b), strempty(a));
                        break;
                }
        }
        if (q < 0)
                return -ENOMEM;
        return *ret_error ? -EINVAL : 0;
}

/*
 * How long one walk over /proc (all its passes) may keep rtd's loop busy. A few thousand tasks take a few
 * milliseconds; the bound is for a fork storm or a slow /proc, where passes alone would not end in time and
 * rtd, real-time on the housekeeping CPUs, would hold a CPU and leave its clients unanswered. What a walk
 * cut short did not reach, the next drift check reaches: it resumes where this one stopped.
 */
#define TASK_WALK_BUDGET_USEC (250 * 1000)

static void knob_ctx(Reservation *r, KnobCtx *k, json_t *plan) {
        *k = (KnobCtx){ .proc_fd = r->proc_fd, .sys_fd = r->sys_fd, .journal = r->journal, .plan = plan,
                        .deadline_usec = now_usec(CLOCK_MONOTONIC) + TASK_WALK_BUDGET_USEC,
                        .resume_pid = r->walk_resume, .exempt = r->lease_pids };
        k->n_exempt = leases_pids(r->manager->leases, r->lease_pids, ELEMENTSOF(r->lease_pids));
}

/* Housekeeping minus leased CPUs: what is moved off the reservation must not land on a lease either. */
static void effective_hk(Reservation *r, const CpuSet *hk, CpuSet *ret) {
        CpuSet leased;

        leases_cpus(r->manager->leases, &leased);
        cpuset_andnot(ret, hk, &leased);
        if (cpuset_is_empty(ret))
                *ret = *hk;
}

/* After a walk: remember where it stopped; say so once, when it first happens. */
static void walk_done(Reservation *r, const KnobCtx *k, const TaskStats *ts) {
        r->walk_resume = k->resume_pid;
        if (!ts->cut_short)
                return;
        if (r->walks_cut_short++ == 0)
                log_notice("A walk over /proc took longer than %u ms and was cut short after %u tasks; the "
                           "drift check continues from there", TASK_WALK_BUDGET_USEC / 1000, ts->seen);
        else
                log_debug("Walk over /proc cut short after %u tasks", ts->seen);
}

static int apply_backend(KnobCtx *k, BackendKind b, const CpuSet *hk, const CpuSet *reserved, bool drift,
                         CgroupState *cg, TaskStats *ts) {
        int q = 0;

        if (!drift && b == BACKEND_SYSTEMD)
                q = systemd_backend_apply(k, hk, reserved, cg);
        else if (!drift && b == BACKEND_CGROUP)
                q = cgroup_backend_apply(k, hk, reserved, cg);
        if (q < 0)
                return q;
        /* Under the cgroup backends, kthreads and root-cgroup tasks still need their affinity. */
        TaskScope scope = b == BACKEND_AFFINITY ? TASKS_ALL : TASKS_UNCONFINED;
        q = tasks_apply(k, hk, scope, drift, getpid(), ts);
        /*
         * A task forked while a pass moved others, by a parent not yet moved, has the old mask. So passes
         * repeat while they move something (a fork loop converges once its parent is moved), a few times at
         * most; whatever is still left is the drift check's. A pass that moved nothing ends it.
         */
        for (unsigned pass = 0, moved = ts->moved; q >= 0 && !k->plan && moved > 0 && pass < 4 && !ts->cut_short;
             pass++) {
                TaskStats more;

                q = tasks_apply(k, hk, scope, drift, getpid(), &more);
                ts->cut_short = more.cut_short;
                ts->moved += more.moved;
                ts->drifted += more.drifted;
                ts->inherited += more.inherited;
                moved = more.moved;
        }
        return q < 0 ? q : 0;
}

static void apply_irqs(Reservation *r, KnobCtx *k, const CpuSet *hk, const CpuSet *reserved, bool drift,
                       IrqState *st) {
        const Topology *t = r->manager->topology;
        int q;

        q = irq_apply(k, hk, reserved, t->nr_cpu_ids, drift, st);
        if (q < 0)
                log_warning_errno(q, "Could not steer IRQs: %m");
        if (drift)
                return;
        free(st->irqbalance_note);
        st->irqbalance_note = NULL;
        st->irqbalance_pid = proc_is_procfs(r->proc_fd) ? irqbalance_find(r->proc_fd) : 0;
        if (st->irqbalance_pid > 0) {
                q = irqbalance_ban(k, st->irqbalance_pid, reserved, &st->irqbalance_note);
                if (q < 0)
                        log_warning("%s", strempty(st->irqbalance_note));
        }
}

static int on_drift_check(sd_event_source *s, uint64_t usec, void *userdata);

static void drift_timer_arm(Reservation *r) {
        unsigned sec = config_of(r)->check_interval_sec;
        int q;

        if (sec == 0 || !r->active)
                return;
        if (!r->drift_timer) {
                q = sd_event_add_time_relative(r->manager->event, &r->drift_timer, CLOCK_MONOTONIC,
                                               (uint64_t) sec * 1000000, 100 * 1000, on_drift_check, r);
                if (q < 0)
                        log_warning_errno(q, "Could not start the drift check, continuing without: %m");
                return;
        }
        (void) sd_event_source_set_time_relative(r->drift_timer, (uint64_t) sec * 1000000);
        (void) sd_event_source_set_enabled(r->drift_timer, SD_EVENT_ONESHOT);
}

/* One drift check: re-apply what someone undid, count it. */
int reservation_check_drift(Reservation *r) {
        KnobCtx k;
        TaskStats ts;
        int q;

        if (!r->active)
                return 0;
        CpuSet hk;
        effective_hk(r, &r->housekeeping, &hk);
        knob_ctx(r, &k, NULL);
        q = apply_backend(&k, r->backend, &hk, &r->reserved, true, &r->cgroup, &ts);
        walk_done(r, &k, &ts);
        if (q < 0)
                log_warning_errno(q, "Drift check: could not re-apply task affinities: %m");
        r->tasks_drifted += ts.drifted;
        r->tasks.own = ts.own;          /* workers and jobs come and go */
        r->tasks.inherited += ts.inherited;
        if (!r->irqs_kept)
                apply_irqs(r, &k, &hk, &r->reserved, true, &r->irq);
        r->drift_checks++;
        r->last_check_realtime = (uint64_t) time(NULL);
        if (ts.drifted > 0)
                log_notice("Drift check: %u task%s found on reserved CPUs again, moved back", ts.drifted,
                           ts.drifted == 1 ? "" : "s");
        return 0;
}

static int on_drift_check(sd_event_source *s, uint64_t usec, void *userdata) {
        Reservation *r = userdata;

        (void) reservation_check_drift(r);
        drift_timer_arm(r);
        return 0;
}

static void write_meta(Reservation *r, const CpuSet *reserved, const CpuSet *hk, BackendKind b) {
        _cleanup_free_ char *a = NULL, *h = NULL;

        (void) cpuset_format(reserved, &a);
        (void) cpuset_format(hk, &h);
        json_object_set_new(r->journal->meta, "reserved", json_string(strempty(a)));
        json_object_set_new(r->journal->meta, "housekeeping", json_string(strempty(h)));
        json_object_set_new(r->journal->meta, "backend", json_string(backend_kind_to_string(b)));
        json_object_set_new(r->journal->meta, "pid", json_integer(getpid()));
        json_object_set_new(r->journal->meta, "written_at", json_integer((json_int_t) time(NULL)));
        r->journal->dirty = true;
}

int reservation_apply(Reservation *r, const CpuSet *cpus) {
        const RtdConfig *c = config_of(r);
        _cleanup_free_ char *error = NULL, *reason = NULL, *list = NULL;
        CpuSet hk;
        BackendKind b;
        KnobCtx k;
        int q;

        q = reservation_validate(r, cpus, &error);
        if (q < 0)
                return log_error_errno(q, "Cannot reserve: %s", strempty(error));
        q = backend_detect(r->proc_fd, r->sys_fd, c->backend, &b, &reason);
        if (q < 0)
                return log_error_errno(q, "Cannot reserve: %s; or use [Reserve] Backend=auto",
                                       reason ?: "the configured backend is not available here");
        cpuset_andnot(&hk, &r->manager->topology->online, cpus);

        write_meta(r, cpus, &hk, b);
        q = journal_flush(r->journal);
        if (q < 0)
                return log_error_errno(q, "Cannot reserve: the restore journal cannot be written: %m");

        CpuSet ehk;
        effective_hk(r, &hk, &ehk);
        knob_ctx(r, &k, NULL);
        q = apply_backend(&k, b, &ehk, cpus, false, &r->cgroup, &r->tasks);
        walk_done(r, &k, &r->tasks);
        if (q < 0) {
                log_error_errno(q, "Could not keep tasks off the reserved CPUs (%s backend): %m",
                                backend_kind_to_string(b));
                if (!r->active) {
                        /* Nothing was reserved before: leave the machine as it was. */
                        (void) restore_journal(r->journal, r->proc_fd, r->sys_fd, NULL);
                        return q;
                }
                return q;
        }
        r->irqs_kept = c->irqs == IRQ_KEEP;
        if (!r->irqs_kept)
                apply_irqs(r, &k, &ehk, cpus, false, &r->irq);
        else {
                /* IRQs=keep after a reload: masks rtd changed before go back now. */
                for (size_t i = r->journal->n_entries; i-- > 0;) {
                        JournalEntry *e = &r->journal->entries[i];
                        if (e->kind == JOURNAL_KNOB && e->root == KNOB_PROC && startswith(e->key, "irq/")) {
                                _cleanup_free_ char *p = strdup(e->key);
                                if (p)
                                        (void) knob_reset(&k, KNOB_PROC, p);
                        }
                }
                irq_state_done(&r->irq);
        }
        (void) tune_apply(&k, c, &ehk, cpus, r->manager->topology->nr_cpu_ids, &r->tune);

        free(r->backend_reason);
        r->backend_reason = TAKE_PTR(reason);
        r->backend = b;
        r->reserved = *cpus;
        r->housekeeping = hk;
        r->active = true;
        drift_timer_arm(r);

        (void) cpuset_format(cpus, &list);
        log_struct(LOG_NOTICE, RTD_MSG_RESERVED, NULL,
                   "Reserved CPUs %s (%s backend): %u tasks moved, %u refused; %u IRQs moved, %zu unmovable",
                   strempty(list), backend_kind_to_string(b), r->tasks.moved, r->tasks.refused, r->irq.moved,
                   r->irq.n_unmovable);
        return 0;
}

int reservation_release(Reservation *r) {
        int q;

        r->drift_timer = sd_event_source_disable_unref(r->drift_timer);
        if (r->active) {
                /* Catch tasks born since the last check, so they get their ancestors' masks back too. */
                TaskStats ts;
                KnobCtx k;
                CpuSet hk;
                effective_hk(r, &r->housekeeping, &hk);
                knob_ctx(r, &k, NULL);
                (void) tasks_apply(&k, &hk, r->backend == BACKEND_AFFINITY ? TASKS_ALL
                                                                                          : TASKS_UNCONFINED,
                                   true, getpid(), &ts);
                walk_done(r, &k, &ts);
        }
        json_decref(r->last_restore);
        r->last_restore = NULL;
        if (!r->journal) {
                /* Stopped before reservation_start() decided on a dead run's journal: restore that one. */
                r->journal = TAKE_PTR(r->left_behind);
                if (!r->journal)
                        return 0;
        }
        q = r->journal->n_entries > 0 || r->journal->on_disk
                    ? restore_journal(r->journal, r->proc_fd, r->sys_fd, &r->last_restore)
                    : 0;
        if (r->active)
                log_struct(LOG_NOTICE, RTD_MSG_RELEASED, NULL, "Reservation released%s",
                           q < 0 ? "; some knobs could not be restored" : ", every knob restored");
        r->active = false;
        cpuset_zero(&r->reserved);
        cpuset_zero(&r->housekeeping);
        r->tasks = (TaskStats){};
        irq_state_done(&r->irq);
        tune_state_done(&r->tune);
        cgroup_state_done(&r->cgroup);
        return q;
}

void reservation_cpus(Reservation *r, CpuSet *ret_reserved, CpuSet *ret_housekeeping) {
        if (ret_reserved)
                *ret_reserved = r->reserved;
        if (ret_housekeeping)
                *ret_housekeeping = r->housekeeping;
}

const char *reservation_cgroup(Reservation *r) {
        if (!r->active || r->backend != BACKEND_CGROUP)
                return NULL;
        return r->cgroup.reserved_cgroup;
}

int reservation_place(Reservation *r, pid_t pid) {
        if (!r->active)
                return 0;
        if (r->backend == BACKEND_CGROUP && r->cgroup.reserved_cgroup)
                return cgroup_backend_place(r->sys_fd, r->cgroup.reserved_cgroup, pid);
        return 0;
}

int reservation_plan(Reservation *r, const CpuSet *cpus, json_t **ret, char **ret_error) {
        const RtdConfig *c = config_of(r);
        _cleanup_free_ char *reason = NULL, *fair = NULL;
        json_t *writes, *cannot, *o;
        IrqState irq = {};
        TuneState tune = {};
        CgroupState cg = {};
        TaskStats ts = {};
        CpuSet hk;
        BackendKind b;
        KnobCtx k;
        int q;

        q = reservation_validate(r, cpus, ret_error);
        if (q < 0)
                return q;
        q = backend_detect(r->proc_fd, r->sys_fd, c->backend, &b, &reason);
        if (q < 0) {
                if (asprintf(ret_error, "%s; or use [Reserve] Backend=auto",
                             reason ?: "the configured backend is not available here") < 0)
                        *ret_error = NULL;
                return -EINVAL;
        }
        cpuset_andnot(&hk, &r->manager->topology->online, cpus);
        writes = json_array();
        cannot = json_array();
        knob_ctx(r, &k, writes);
        q = apply_backend(&k, b, &hk, cpus, false, &cg, &ts);
        if (q < 0)
                json_array_append_new(cannot, json_pack("{s:s, s:s}", "what", "backend", "why", strerror(-q)));
        if (ts.refused > 0)
                json_array_append_new(cannot, json_pack("{s:s, s:I, s:s}", "what", "per-CPU kernel threads",
                                                        "count", (json_int_t) ts.refused, "why",
                                                        "pinned to their CPU by the kernel (PF_NO_SETAFFINITY); "
                                                        "they run only when there is work for that CPU"));
        if (c->irqs == IRQ_KEEP)
                json_array_append_new(cannot, json_pack("{s:s, s:s}", "what", "IRQs", "why",
                                                        "left alone: [Reserve] IRQs=keep"));
        else {
                (void) irq_apply(&k, &hk, cpus, r->manager->topology->nr_cpu_ids, false, &irq);
                /* A dry run cannot know which writes the kernel will refuse; the last pass can. */
                for (size_t i = 0; i < r->irq.n_unmovable; i++) {
                        const IrqUnmovable *u = &r->irq.unmovable[i];
                        _cleanup_free_ char *remedy = irq_remedy(u->remedy, cpus);
                        json_array_append_new(cannot, json_pack("{s:s, s:i, s:s?, s:s, s:s}", "what", "IRQ",
                                                                "irq", (int) u->irq, "name", u->name, "why",
                                                                u->reason, "remedy", remedy ?: u->remedy));
                }
                pid_t ib = proc_is_procfs(r->proc_fd) ? irqbalance_find(r->proc_fd) : 0;
                if (ib > 0) {
                        _cleanup_free_ char *note = NULL;
                        (void) irqbalance_ban(&k, ib, cpus, &note);
                }
        }
        (void) tune_apply(&k, c, &hk, cpus, r->manager->topology->nr_cpu_ids, &tune);
        for (size_t i = 0; i < tune.n_knobs; i++)
                if (tune.knobs[i].outcome == KNOB_UNAVAILABLE || tune.knobs[i].outcome == KNOB_FAILED)
                        json_array_append_new(cannot, json_pack("{s:s, s:s?}", "what", tune.knobs[i].name, "why",
                                                                tune.knobs[i].why));
        if (cg.partition_note)
                json_array_append_new(cannot, json_pack("{s:s, s:s}", "what", "isolated cpuset partition", "why",
                                                        cg.partition_note));
        if (r->cgroup.partition_note && b != BACKEND_AFFINITY)
                json_array_append_new(cannot, json_pack("{s:s, s:s}", "what", "isolated cpuset partition",
                                                        "why", r->cgroup.partition_note));

        o = json_pack("{s:o, s:o, s:s, s:s?, s:o, s:{s:I, s:I, s:I}, s:o, s:o}",
                      "cpus", reserve_cpus_json(cpus), "housekeeping", reserve_cpus_json(&hk),
                      "backend", backend_kind_to_string(b), "backend_reason", reason,
                      "writes", writes,
                      "tasks", "would_move", (json_int_t) ts.moved, "refused", (json_int_t) ts.refused, "own",
                      (json_int_t) ts.own,
                      "cannot", cannot,
                      "boot_parameters", reserve_boot_hints(r, cpus));
        if (o)
                json_object_set_new(o, "residual", residual_sources(r->proc_fd, r->sys_fd, cpus, &tune));
        irq_state_done(&irq);
        tune_state_done(&tune);
        cgroup_state_done(&cg);
        if (!o)
                return -ENOMEM;
        *ret = o;
        return 0;
}

Reservation *reservation_free(Reservation *r) {
        if (!r)
                return NULL;
        sd_event_source_disable_unref(r->drift_timer);
        journal_free(r->journal);
        journal_free(r->left_behind);
        json_decref(r->start);
        free(r->backend_reason);
        irq_state_done(&r->irq);
        tune_state_done(&r->tune);
        cgroup_state_done(&r->cgroup);
        json_decref(r->last_restore);
        free(r->journal_problem);
        free(r);
        return NULL;
}
