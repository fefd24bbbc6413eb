/* SPDX-License-Identifier: MIT */
/* Tuning knobs written through the restore journal. On kernels >= 6.12 RT throttling is done by the
 * per-CPU fair deadline server, so sched_rt_runtime_us alone no longer gives a FIFO job its whole core. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "irq.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "tune.h"

#define WQ_DIR "devices/virtual/workqueue"

void tune_state_done(TuneState *s) {
        for (size_t i = 0; i < s->n_knobs; i++) {
                TuneKnob *t = &s->knobs[i];
                free(t->name);
                free(t->path);
                free(t->original);
                free(t->configured);
                free(t->why);
                free(t->known);
        }
        free(s->knobs);
        *s = (TuneState){};
}

static TuneKnob *knob_new(TuneState *st, const char *name, KnobRoot root, const char *path) {
        TuneKnob *p = realloc(st->knobs, (st->n_knobs + 1) * sizeof *p);

        if (!p)
                return NULL;
        st->knobs = p;
        TuneKnob *t = &p[st->n_knobs];
        *t = (TuneKnob){ .name = strdup(name), .root = root, .path = strdup(path) };
        if (!t->name || !t->path) {
                free(t->name);
                free(t->path);
                return NULL;
        }
        st->n_knobs++;
        return t;
}

static void knob_why(TuneKnob *t, KnobOutcome o, const char *fmt, ...) _printf_(3, 4);
static void knob_why(TuneKnob *t, KnobOutcome o, const char *fmt, ...) {
        va_list ap;

        t->outcome = o;
        free(t->why);
        t->why = NULL;
        va_start(ap, fmt);
        if (vasprintf(&t->why, fmt, ap) < 0)
                t->why = NULL;
        va_end(ap);
}

/* The original as the journal knows it (first original wins), else the live value. */
static char *original_of(KnobCtx *k, KnobRoot root, const char *path) {
        JournalEntry *e = k->journal ? journal_find(k->journal, JOURNAL_KNOB, root, path) : NULL;
        char *s = NULL;

        if (e && e->original)
                return strdup(e->original);
        if (read_one_line_at(knob_root_fd(k, root), path, &s) < 0)
                return NULL;
        return s;
}

static void set_numeric(KnobCtx *k, TuneState *st, const char *name, const char *path, int64_t want,
                        const char *key) {
        TuneKnob *t = knob_new(st, name, KNOB_PROC, path);
        char value[32];
        int r;

        if (!t)
                return;
        t->original = original_of(k, KNOB_PROC, path);
        if (!t->original) {
                knob_why(t, KNOB_UNAVAILABLE, "/proc/%s does not exist on this kernel", path);
                return;
        }
        if (want == TUNE_KEEP) {
                /* Set by an earlier configuration (before a reload): put it back. */
                r = knob_reset(k, KNOB_PROC, path);
                if (r < 0)
                        log_warning_errno(r, "Could not restore %s: %m", name);
                knob_why(t, KNOB_LEFT_ALONE, "%s=keep", key);
                t->known = strdup(t->original);
                return;
        }
        snprintf(value, sizeof value, "%" PRIi64, want);
        t->configured = strdup(value);
        r = knob_set(k, KNOB_PROC, path, value, NULL);
        if (r < 0) {
                knob_why(t, KNOB_FAILED, "writing %s failed: %s", value, strerror(-r));
                log_warning_errno(r, "Could not set %s to %s: %m", name, value);
                return;
        }
        t->outcome = KNOB_SET;
        t->known = strdup(value);
}

/* "6.12.0-1-amd64" >= 6.12 */
static bool release_has_fair_server(const char *release) {
        unsigned major = 0, minor = 0;

        return release && sscanf(release, "%u.%u", &major, &minor) == 2 && (major > 6 || (major == 6 && minor >= 12));
}

int tune_fair_server_probe(int sys_fd, const char *release, char **ret_why) {
        _cleanup_free_ char *s = NULL;
        struct stat sb;
        const char *why;
        int r;

        *ret_why = NULL;
        r = read_one_line_at(sys_fd, "kernel/debug/sched/fair_server/cpu0/runtime", &s);
        if (r >= 0)
                return 0;
        /* Without debugfs the kernel's release says whether there is a fair server at all. */
        if (r == -ENOENT && (fstatat(sys_fd, "kernel/debug/sched", &sb, 0) == 0 || !release_has_fair_server(release))) {
                why = "this kernel has no fair deadline server (it came with Linux 6.12)";
                r = -EOPNOTSUPP;
        } else if (r == -ENOENT)
                why = "debugfs is not mounted at /sys/kernel/debug (mount -t debugfs none /sys/kernel/debug, "
                      "then reload rtd)";
        else if (r == -EPERM)
                why = "kernel lockdown restricts debugfs (kernel_lockdown(7)): the fair server runtime cannot be "
                      "read or changed on this boot";
        else {
                if (asprintf(ret_why, "cannot read /sys/kernel/debug/sched/fair_server: %s", strerror(-r)) < 0)
                        *ret_why = NULL;
                return r;
        }
        *ret_why = strdup(why);
        return r;
}

static void set_fair_server(KnobCtx *k, const RtdConfig *c, const CpuSet *reserved, TuneState *st) {
        _cleanup_free_ char *unavailable = NULL;
        struct utsname u;
        int avail = tune_fair_server_probe(k->sys_fd, uname(&u) == 0 ? u.release : NULL, &unavailable);

        /* CPUs no longer reserved, or FairServerRuntimeUSec=keep after a reload: give them back. */
        if (k->journal)
                for (size_t i = k->journal->n_entries; i-- > 0;) {
                        JournalEntry *e = &k->journal->entries[i];
                        const char *cpu = e->kind == JOURNAL_KNOB && e->root == KNOB_SYS
                                                  ? startswith(e->key, "kernel/debug/sched/fair_server/cpu")
                                                  : NULL;
                        if (cpu && (c->fair_server_runtime_usec == TUNE_KEEP ||
                                    !cpuset_isset(reserved, (unsigned) atoi(cpu)))) {
                                _cleanup_free_ char *p = strdup(e->key);
                                int r = p ? knob_reset(k, KNOB_SYS, p) : -ENOMEM;
                                if (r < 0)      /* kept in the journal: the stop or rtd --restore retries */
                                        log_warning_errno(r, "Could not give /sys/%s back its original yet: %m",
                                                          p ? p : "?");
                        }
                }
        if (avail < 0 || c->fair_server_runtime_usec == TUNE_KEEP) {
                TuneKnob *t = knob_new(st, "fair_server.runtime", KNOB_SYS, "kernel/debug/sched/fair_server");
                if (!t)
                        return;
                if (c->fair_server_runtime_usec == TUNE_KEEP)
                        knob_why(t, KNOB_LEFT_ALONE, "FairServerRuntimeUSec=keep%s%s",
                                 unavailable ? "; and " : "", strempty(unavailable));
                else if (avail == -EOPNOTSUPP)
                        knob_why(t, KNOB_UNAVAILABLE, "%s", strempty(unavailable));     /* nothing to turn off */
                else {
                        /* Asked for and not done: a failure, named in status and the log, never a silent
                         * "unavailable" (CFS tasks keep up to 5% of each reserved CPU). */
                        knob_why(t, KNOB_FAILED, "FairServerRuntimeUSec=%" PRIi64 " not applied: %s",
                                 c->fair_server_runtime_usec, strempty(unavailable));
                        if (!k->plan)
                                log_warning_errno(avail, "[Tuning] FairServerRuntimeUSec=%" PRIi64 " cannot be applied "
                                                  "to the reserved CPUs, CFS tasks keep up to 5%% of each: %s",
                                                  c->fair_server_runtime_usec, strempty(unavailable));
                }
                return;
        }
        /* Only the reserved CPUs: housekeeping CPUs keep their starvation protection. */
        CPUSET_FOREACH(cpu, reserved) {
                char path[96], name[64], value[32];
                int r;

                snprintf(path, sizeof path, "kernel/debug/sched/fair_server/cpu%d/runtime", cpu);
                snprintf(name, sizeof name, "fair_server.cpu%d.runtime_ns", cpu);
                TuneKnob *t = knob_new(st, name, KNOB_SYS, path);
                if (!t)
                        return;
                t->original = original_of(k, KNOB_SYS, path);
                snprintf(value, sizeof value, "%" PRIi64, c->fair_server_runtime_usec * 1000);
                t->configured = strdup(value);
                r = knob_set(k, KNOB_SYS, path, value, NULL);
                if (r == -EBUSY) {
                        /* The kernel's bookkeeping, not a busy CPU (see tune_apply()). */
                        knob_why(t, KNOB_FAILED, "writing %s failed: %s: the kernel's deadline bandwidth "
                                 "accounting no longer holds the fair servers' share (on 6.12 each read of "
                                 "kernel.sched_rt_runtime_us rebuilds the root domains and drops it); only a "
                                 "reboot restores it", value, strerror(-r));
                        log_warning_errno(r, "Could not set %s to %s (the kernel lost the fair servers' deadline "
                                          "bandwidth accounting, a 6.12 bug; a reboot restores it): %m", name, value);
                } else if (r < 0) {
                        knob_why(t, KNOB_FAILED, "writing %s failed: %s", value, strerror(-r));
                        log_warning_errno(r, "Could not set %s to %s: %m", name, value);
                } else
                        t->outcome = KNOB_SET;
        }
}

/* One workqueue cpumask file: (original ∩ housekeeping) or housekeeping, as a hex mask. */
static void set_wq_mask(KnobCtx *k, TuneState *st, const char *path, const char *requested_path,
                        const CpuSet *hk, unsigned nr_cpu_ids) {
        _cleanup_free_ char *cur_s = NULL, *orig_s = NULL, *value = NULL;
        JournalEntry *e = k->journal ? journal_find(k->journal, JOURNAL_KNOB, KNOB_SYS, path) : NULL;
        CpuSet cur, orig, target;
        bool added = false;
        int r;

        char name[256];
        snprintf(name, sizeof name, "workqueue/%s", path + strlen(WQ_DIR) + 1);
        TuneKnob *t = knob_new(st, name, KNOB_SYS, path);
        if (!t)
                return;
        if (read_one_line_at(k->sys_fd, path, &cur_s) < 0 || cpuset_parse_mask(cur_s, &cur) < 0) {
                knob_why(t, KNOB_UNAVAILABLE, "/sys/%s cannot be read", path);
                return;
        }
        /* Newer kernels show the effective mask in cpumask (minus isolated partitions) and what was
         * asked for in cpumask_requested: the latter is the original to put back. */
        if (e)
                orig_s = strdup(e->original);
        else if (!requested_path || read_one_line_at(k->sys_fd, requested_path, &orig_s) < 0)
                orig_s = strdup(cur_s);
        if (!orig_s || cpuset_parse_mask(orig_s, &orig) < 0) {
                knob_why(t, KNOB_FAILED, "cannot parse %s", strempty(orig_s));
                return;
        }
        t->original = strdup(orig_s);
        irq_target_mask(&orig, hk, &target);    /* the same rule as IRQs */
        if (cpuset_format_mask(&target, nr_cpu_ids, &value) < 0)
                return;
        t->configured = strdup(value);
        t->outcome = KNOB_SET;
        if (cpuset_equal(&cur, &target))
                return;
        if (k->plan) {
                (void) knob_plan(k, KNOB_SYS, path, cur_s, value);
                return;
        }
        r = journal_add(k->journal, JOURNAL_KNOB, KNOB_SYS, path, orig_s, &e, &added);
        if (r >= 0)
                r = journal_entry_set_applied(k->journal, e, value);
        if (r >= 0)
                r = journal_flush(k->journal);
        if (r >= 0)
                r = knob_write_fn(k)(k->sys_fd, path, value);
        if (r < 0) {
                if (added && (e = journal_find(k->journal, JOURNAL_KNOB, KNOB_SYS, path))) {
                        journal_forget(k->journal, e);
                        (void) journal_flush(k->journal);
                }
                knob_why(t, KNOB_FAILED, "writing %s failed: %s", value, strerror(-r));
                log_warning_errno(r, "Could not set /sys/%s: %m", path);
        }
}

static void set_workqueues(KnobCtx *k, TuneState *st, const CpuSet *hk, unsigned nr_cpu_ids) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;

        set_wq_mask(k, st, WQ_DIR "/cpumask", WQ_DIR "/cpumask_requested", hk, nr_cpu_ids);
        /* Unbound workqueues with WQ_SYSFS (writeback, ...) have their own mask. */
        d = opendir_at(k->sys_fd, WQ_DIR);
        if (!d)
                return;
        while ((de = readdir(d))) {
                char path[512];
                struct stat sb;

                if (de->d_name[0] == '.' || streq(de->d_name, "power"))
                        continue;
                snprintf(path, sizeof path, WQ_DIR "/%s/cpumask", de->d_name);
                if (fstatat(k->sys_fd, path, &sb, 0) == 0 && S_ISREG(sb.st_mode))
                        set_wq_mask(k, st, path, NULL, hk, nr_cpu_ids);
        }
}

void tune_apply_workqueues(KnobCtx *k, const CpuSet *hk, unsigned nr_cpu_ids) {
        TuneState st = {};

        set_workqueues(k, &st, hk, nr_cpu_ids);
        tune_state_done(&st);
}

int tune_apply(KnobCtx *k, const RtdConfig *c, const CpuSet *hk, const CpuSet *reserved, unsigned nr_cpu_ids,
               TuneState *st) {
        tune_state_done(st);
        /*
         * The fair server before kernel.sched_rt_runtime_us: on 6.12 (Debian's 6.12.95, the VM tier) even a
         * read of that sysctl runs rebuild_sched_domains() (sched_rt_handler), and the rebuild drops the fair
         * servers' share from the root domain's deadline bandwidth (dl_bw->total_bw 209712 -> 0 on 4 CPUs):
         * from then on every write that lowers a fair server's runtime fails with EBUSY (the total minus the
         * server's old share wraps below zero) until the next boot. Raising it (the restore) still works.
         */
        set_fair_server(k, c, reserved, st);
        set_numeric(k, st, "kernel.sched_rt_runtime_us", "sys/kernel/sched_rt_runtime_us", c->rt_runtime_usec,
                    "RTRuntimeUSec");
        /*
         * kernel.timer_migration, decided by measuring both with bench/floor-run on 6.18 (HZ=250, no NO_HZ_FULL):
         * a busy reserved CPU took 252.7 and 254.9 LOC/s with 1 against 254.3 and 257.7 with 0 (idle and loaded
         * housekeeping CPU), and its TIMER softirq time was 96 and 53 us/s against 100 and 47: no difference
         * beyond noise, because the tick runs at HZ anyway and its softirq expires whatever timers are due. So
         * rtd keeps the kernel's 1 by default (TimerMigration=keep): with it, a reserved CPU that idles between
         * jobs hands its global timers to a housekeeping CPU instead of waking for them. With nohz_full, where a
         * pulled-in timer would be an interrupt of its own, residual.c names it and TimerMigration=0 removes it.
         */
        set_numeric(k, st, "kernel.timer_migration", "sys/kernel/timer_migration", c->timer_migration,
                    "TimerMigration");
        set_numeric(k, st, "vm.stat_interval", "sys/vm/stat_interval", c->stat_interval_sec, "StatIntervalSec");
        set_workqueues(k, st, hk, nr_cpu_ids);
        return 0;
}

static const char *const outcome_table[_KNOB_OUTCOME_MAX] = {
        [KNOB_SET] = "set",
        [KNOB_LEFT_ALONE] = "left alone",
        [KNOB_UNAVAILABLE] = "unavailable",
        [KNOB_FAILED] = "failed",
};

/* A knob whose read is not a plain read: on 6.12 (Debian's bookworm-backports kernel) sched_rt_handler()
 * rebuilds the scheduler's root domains on every read of kernel.sched_rt_runtime_us, which walks every CPU,
 * the reserved ones too. rtd reads it once, at the reservation. */
static bool read_disturbs(const TuneKnob *t) {
        return t->root == KNOB_PROC && streq(t->path, "sys/kernel/sched_rt_runtime_us");
}

const char *tune_known_value(const TuneState *st, const char *name) {
        for (size_t i = 0; i < st->n_knobs; i++)
                if (streq(st->knobs[i].name, name))
                        return st->knobs[i].known;
        return NULL;
}

json_t *tune_state_to_json(const TuneState *st, int proc_fd, int sys_fd) {
        json_t *a = json_array();

        for (size_t i = 0; i < st->n_knobs; i++) {
                const TuneKnob *t = &st->knobs[i];
                _cleanup_free_ char *cur = NULL, *path = NULL;
                if (asprintf(&path, "%s%s", knob_root_prefix(t->root), t->path) < 0)
                        path = NULL;
                if (read_disturbs(t))
                        cur = t->known ? strdup(t->known) : NULL;
                else
                        (void) read_one_line_at(t->root == KNOB_PROC ? proc_fd : sys_fd, t->path, &cur);
                json_array_append_new(a, json_pack("{s:s, s:s?, s:s?, s:s?, s:s?, s:s, s:s?}", "name", t->name,
                                                   "path", path, "original", t->original, "current", cur,
                                                   "configured", t->configured, "state",
                                                   outcome_table[t->outcome], "why", t->why));
        }
        return a;
}
