// SPDX-License-Identifier: (MIT OR GPL-2.0)
/* Scheduling metrics for rtd: per-CPU context switches, migrations, run-queue latency, hard/soft IRQ
 * counts and time, intrusions on reserved CPUs, per-job counters. One program per hook (each attached
 * program pays its own dispatch); every hook has a tp_btf and a raw_tp twin, user space picks one set
 * before load (libbpf-tools' runqlat pattern). Counters are read by daemon/metrics/bpf-metrics.c on a timer. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "sched-metrics.h"

/* GPL-compatible licence: tracing helpers (probe_read, task storage) are GPL-only. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Set before load: no CONFIG_SCHED_INFO, so run-queue latency needs wakeup timestamps (and the
 * sched_wakeup programs are loaded). */
const volatile bool stamp_wakeups = false;

/* The maps and globals the every-thread baseline's object shares (reserved_cpus, reserve_epoch, ...). */
#include "sched-metrics-common.bpf.h"

/* Written by user space through the mmapped .bss: the first RTD_MAX_LISTED reserved CPUs as a list, for the
 * loops of exec and IPI attribution (the mask is reserved_cpus). */
__u32 reserved_list[RTD_MAX_LISTED];
__u32 n_listed;

/* raw_tp: task_store's stand-in, keyed by tid (raw tracepoint arguments are not trusted task pointers). */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 65536);
        __type(key, __u32);
        __type(value, struct rtd_task);
} task_hash SEC(".maps");

/* The kernel's tick rate, for user space (the tick is the floor of a core that cannot stop it). */
extern unsigned int CONFIG_HZ __kconfig __weak;
__u32 kernel_hz;

/* Written by user space: the starvation guard is on (waiters below are kept), and rtd's PID namespace
 * (its level and inode number) to name waiters by the tids rtd can act on. */
__u8 guard_on;
__u32 guard_ns_level;
__u32 guard_ns_inum;

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 4096);
        __type(key, __u64);
        __type(value, struct rtd_job);
} jobs SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 1024);
        __type(key, struct rtd_ipi_key);
        __type(value, struct rtd_ipi);
} ipis SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_HASH);
        __uint(max_entries, 2048);
        __type(key, __u32);
        __type(value, struct rtd_irq);
} irqs SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 2048);
        __type(key, __u32);
        __type(value, struct rtd_irq_name);
} irq_names SEC(".maps");

/* Runnable tasks waiting on reserved CPUs (starvation guard). LRU: a flood of waiters evicts the oldest
 * entries rather than failing, and a few stale ones cannot fill it. */
struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, 4096);
        __type(key, __u32);
        __type(value, struct rtd_waiter);
} waiters SEC(".maps");

#define TASK_RUNNING 0
/* Policies of the fair class (uapi sched.h; vmlinux.h has no macros). */
#define SCHED_NORMAL 0
#define SCHED_BATCH 3
#define SCHED_IDLE 5
/* prev_state is TASK_REPORT_MAX for a preempted task, never 0 for a blocked one. */

/* Pre-5.14 kernels call it task_struct::state (CO-RE flavour, as libbpf-tools' core_fixes.bpf.h). */
struct task_struct___o {
        volatile long int state;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_state_core(struct task_struct *t) {
        if (bpf_core_field_exists(t->__state))
                return BPF_CORE_READ(t, __state);
        return BPF_CORE_READ((struct task_struct___o *) t, state);
}

/* btf is a compile-time constant at every call site, so each twin keeps only its own branch. */
#define TREAD(btf, t, field) ((btf) ? (t)->field : BPF_CORE_READ((t), field))

static __always_inline struct rtd_task *task_get(bool btf, struct task_struct *t, __u32 pid, bool create) {
        struct rtd_task *v;

        if (btf) {
                /* Most tasks have no BPF storage at all: one load spares the helper call on the hot path. */
                if (!create && bpf_core_field_exists(t->bpf_storage) && !t->bpf_storage)
                        return NULL;
                v = bpf_task_storage_get(&task_store, t, NULL, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
                if (!v && !create)
                        return bpf_map_lookup_elem(&marks, &pid);
                /* User space marks by pidfd and cannot key the backstop by the kernel's tid from inside a
                 * PID namespace: copy a new mark (from user space: synced 0) there once, keyed by t->pid. */
                if (v && v->kind != RTD_TASK_OTHER && !v->synced) {
                        v->synced = 1;
                        (void) bpf_map_update_elem(&marks, &pid, v, BPF_ANY);
                }
                return v;
        }

        v = bpf_map_lookup_elem(&task_hash, &pid);
        if (v || !create)
                return v;
        struct rtd_task zero = {};
        (void) bpf_map_update_elem(&task_hash, &pid, &zero, BPF_NOEXIST);
        return bpf_map_lookup_elem(&task_hash, &pid);
}

/* ceil(log2(us)): slot k holds (2^(k-1), 2^k] µs so Prometheus' inclusive `le` is exact. */
static __always_inline __u32 hist_slot(__u64 ns) {
        __u64 us = (ns + 999) / 1000, v;       /* round up: a value never exceeds its bucket bound */
        __u32 r = 0, shift;

        if (us <= 1)
                return 0;
        v = us - 1;
        shift = (v > 0xFFFFFFFF) << 5; v >>= shift; r = shift;
        shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
        shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
        shift = (v > 0xF) << 2; v >>= shift; r |= shift;
        shift = (v > 0x3) << 1; v >>= shift; r |= shift;
        r |= (v >> 1);
        r += 1;
        return r < RTD_HIST_SLOTS - 1 ? r : RTD_HIST_SLOTS - 1;
}

/* t's tid in rtd's PID namespace (struct pid's numbers[level]), 0 when t is not visible there. */
static __always_inline __u32 ns_tid(struct task_struct *t) {
        struct pid *tp = BPF_CORE_READ(t, thread_pid);
        __u32 level = guard_ns_level;
        struct upid up = {};

        if (!tp || level > 31 || BPF_CORE_READ(tp, level) < level)
                return 0;
        if (bpf_probe_read_kernel(&up, sizeof up, &tp->numbers[level & 31]) < 0 || !up.ns)
                return 0;
        return BPF_CORE_READ(up.ns, ns.inum) == guard_ns_inum ? (__u32) up.nr : 0;
}

/*
 * t became runnable on cpu (woken, preempted, or moved there queued): if that is a reserved CPU, note since
 * when. Each of these events means t was not waiting before, so an older entry (its switch-in missed) is
 * stale and replaced.
 */
static __always_inline void waiter_note(struct task_struct *t, __u32 pid, __u32 cpu) {
        struct rtd_waiter w = {};

        if (!guard_on || !pid || !cpu_reserved(cpu))
                return;
        w.since_ns = bpf_ktime_get_ns();
        w.cpu = cpu;
        w.ns_pid = ns_tid(t);
        w.kthread = (BPF_CORE_READ(t, flags) & 0x00200000 /* PF_KTHREAD */) != 0;
        (void) BPF_CORE_READ_STR_INTO(&w.comm, t, comm);
        (void) bpf_map_update_elem(&waiters, &pid, &w, BPF_ANY);
}

static __always_inline struct rtd_job *job_get(struct rtd_task *t) {
        if (!t || t->kind != RTD_TASK_JOB)
                return NULL;
        return bpf_map_lookup_elem(&jobs, &t->job_id);
}

#include "sched-metrics-intruders.bpf.h"

/* The CPU's current task becomes next: an intruder (reserved CPU, not rtd's worker or job) starts a run. */
static __always_inline bool cur_begin(bool btf, struct rtd_cpu *c, __u32 cpu, struct task_struct *next,
                                      __u32 next_pid, struct rtd_task *nt) {
        c->primed = 1;
        c->cur_pid = next_pid;
        c->cur_intruder = 0;
        c->cur_job_id = 0;
        c->cur_pcount = 0;
        c->cur_arrivals = 0;
        if (!next_pid)
                return false;
        if (nt && nt->kind == RTD_TASK_JOB) {
                c->cur_job_id = nt->job_id;
                c->cur_start_runtime = TREAD(btf, next, se.sum_exec_runtime);
        } else if (!exempt(nt) && cpu_reserved(cpu))
                return intruder_begin(btf, c, cpu, next, next_pid, nt, TREAD(btf, next, se.sum_exec_runtime));
        return false;
}

static __always_inline void runq_record(struct rtd_cpu *c, struct rtd_job *j, __u64 d) {
        __u32 slot = hist_slot(d);

        if (slot < RTD_HIST_SLOTS)
                c->runq_hist[slot]++;
        c->runq_sum_ns += d;
        if (j) {
                __sync_fetch_and_add(&j->runq_count, 1);
                __sync_fetch_and_add(&j->runq_sum_ns, d);
                if (d > j->runq_max_ns)
                        j->runq_max_ns = d;     /* racy max: good enough for a figure */
        }
}

/*
 * The hot path, kept to one task lookup and no clock read for ordinary tasks. Run-queue latency comes
 * from the kernel's own sched_info: run_delay grows by each wait only after this tracepoint (in
 * sched_info_arrive()), so the value noted at switch-in subtracted from the value at switch-out is the
 * wait before that slice. Kernels without CONFIG_SCHED_INFO get wakeup stamps instead (stamp_wakeups).
 */
static __always_inline int on_switch(bool btf, bool preempt, struct task_struct *prev,
                                     struct task_struct *next, __u32 prev_state) {
        __u32 cpu = bpf_get_smp_processor_id();
        struct rtd_cpu *c = cpu_get(cpu);
        struct rtd_task *nt = NULL;
        struct rtd_job *j = NULL;
        __u32 prev_pid, next_pid;
        __u64 now = 0;
        bool involuntary;

        if (!c)
                return 0;
        prev_pid = TREAD(btf, prev, pid);
        next_pid = TREAD(btf, next, pid);
        /*
         * The CPU names the task switched in last; a switch away from another one means events never
         * reached this program (measured on 6.18 under a parallel build: 0.5-1.3% fewer runs than /proc/stat
         * ctxt). Counted and shown, never filled in: the figures below add only what the kernel's own
         * per-task clocks say.
         */
        if (c->primed && c->cur_pid != prev_pid) {
                c->missed_events++;
                recover(c, cpu);
        }
        /* The kernel counts nvcsw only for a non-preempted switch of a task that is not running. */
        involuntary = preempt || prev_state == TASK_RUNNING;
        if (stamp_wakeups)
                now = bpf_ktime_get_ns();

        if (next_pid)
                nt = task_get(btf, next, next_pid, false);
        if (guard_on) {
                /* It runs: no longer waiting. A preempted prev waits on from now on. */
                if (next_pid)
                        (void) bpf_map_delete_elem(&waiters, &next_pid);
                if (involuntary)
                        waiter_note(prev, prev_pid, cpu);
        }

        /* Idle (pid 0, one per CPU) is never counted: it is always "running" and would inflate ivcsw. */
        if (prev_pid) {
                /* What prev was (job, intruder) was noted when it was switched in: no lookup of prev. */
                bool was_cur = c->cur_pid == prev_pid;
                __u64 prev_job = was_cur ? c->cur_job_id : 0;
                struct rtd_task *pt = NULL;
                bool prev_rtd = false;          /* prev is rtd's (worker, job), looked up when !was_cur */

                /*
                 * Counting events is not enough for jobs: on a busy machine some context switches never
                 * reach this program (measured on 6.18 under a parallel build: 0.5-1.3% fewer program runs
                 * than /proc/stat ctxt, recursion_misses 0, tp_btf and raw_tp alike; on a reserved CPU up to
                 * 10% of a job's switches). A missed switch-in left the CPU naming the task before, so the
                 * job's next switch-out went uncounted. So a job's switch-out (and any switch-out the CPU
                 * does not expect) looks up prev's own mark, and the job's figures are the deltas of the
                 * kernel's own per-task counters (nvcsw/nivcsw, sched_info, sum_exec_runtime) since its
                 * last switch-out that ran here: exact even when events in between were missed.
                 * Ordinary tasks, the hot path, still need no lookup of prev.
                 */
                if (!was_cur || prev_job) {
                        pt = task_get(btf, prev, prev_pid, false);
                        prev_rtd = exempt(pt);
                        if (pt && pt->kind == RTD_TASK_JOB)
                                prev_job = pt->job_id;
                        else
                                pt = NULL;
                }

                if (involuntary)
                        c->switches_involuntary++;
                else
                        c->switches_voluntary++;
                if (prev_job)
                        j = bpf_map_lookup_elem(&jobs, &prev_job);

                if (stamp_wakeups && j && pt && pt->seen && pt->wake_ns) {
                        /* Switch-in missed (it clears wake_ns): the slice began about its CPU time ago. */
                        __u64 rt = TREAD(btf, prev, se.sum_exec_runtime);
                        __u64 ran = rt > pt->last_runtime ? rt - pt->last_runtime : 0;

                        if (now > ran && now - ran > pt->wake_ns)
                                runq_record(c, j, now - ran - pt->wake_ns);
                        pt->wake_ns = 0;
                }
                if (!stamp_wakeups && j && pt) {
                        __u64 pcount = TREAD(btf, prev, sched_info.pcount);
                        __u64 delay = TREAD(btf, prev, sched_info.run_delay);

                        /* Every arrival since the last switch-out seen is one run-queue wait. */
                        if (pt->seen && pcount > pt->last_pcount && delay >= pt->last_run_delay) {
                                __u64 n = pcount - pt->last_pcount, d = delay - pt->last_run_delay;

                                if (n == 1)
                                        runq_record(c, j, d);
                                else {          /* several waits, sum known: job totals only */
                                        __sync_fetch_and_add(&j->runq_count, n);
                                        __sync_fetch_and_add(&j->runq_sum_ns, d);
                                }
                        } else if (!pt->seen && was_cur && c->cur_pcount && pcount == c->cur_pcount + 1 &&
                                   delay >= c->cur_run_delay)
                                runq_record(c, j, delay - c->cur_run_delay);
                        pt->last_pcount = pcount;
                        pt->last_run_delay = delay;
                } else if (!stamp_wakeups && was_cur && c->cur_pcount) {
                        __u64 pcount = TREAD(btf, prev, sched_info.pcount);
                        __u64 delay = TREAD(btf, prev, sched_info.run_delay);

                        /* Exactly one arrival since switch-in; anything else (first sight) is skipped. */
                        if (pcount == c->cur_pcount + 1 && delay >= c->cur_run_delay)
                                runq_record(c, j, delay - c->cur_run_delay);
                } else if (stamp_wakeups && involuntary) {
                        /* A preempted task stays runnable: its run-queue wait starts now. */
                        struct rtd_task *wt = task_get(btf, prev, prev_pid, true);
                        if (wt)
                                wt->wake_ns = now;
                }

                if (was_cur && c->cur_intruder) {
                        intruder_fold(c, cpu, prev_pid, TREAD(btf, prev, se.sum_exec_runtime));
                } else if (!was_cur && !prev_rtd && cpu_reserved(cpu)) {
                        /*
                         * An intruder whose switch-in never reached us. CFS notes a task's runtime when it
                         * picks it (se.prev_sum_exec_runtime), so this slice is the kernel's figure all the
                         * same. Other classes have no such note: their slice is lost (missed_events).
                         */
                        __u32 policy = TREAD(btf, prev, policy);
                        __u64 picked = TREAD(btf, prev, se.prev_sum_exec_runtime);

                        __u64 rt = TREAD(btf, prev, se.sum_exec_runtime);
                        bool fair = policy == SCHED_NORMAL || policy == SCHED_BATCH || policy == SCHED_IDLE;

                        /* The run is counted either way; a non-fair slice is lost (unrecovered) unless
                         * its task has not migrated since its time here was last added: then all of its
                         * runtime since ran here, and intruder_begin() added it (a per-CPU kernel thread
                         * switched in unseen by one of PID 1's threads, e.g. migration/1). */
                        bool caught_up = intruder_begin(btf, c, cpu, prev, prev_pid, pt, fair ? picked : rt);

                        intruder_fold(c, cpu, prev_pid, rt);
                        c->unrecovered += !fair && !caught_up;
                }
                if (j) {
                        __u64 rt = TREAD(btf, prev, se.sum_exec_runtime);
                        __u64 dv = !involuntary, di = involuntary;     /* first sight: this switch only */

                        if (pt && pt->seen) {
                                __u64 nv = TREAD(btf, prev, nvcsw), ni = TREAD(btf, prev, nivcsw);

                                /* The kernel bumps nvcsw/nivcsw before this tracepoint. */
                                dv = nv >= pt->last_nvcsw ? nv - pt->last_nvcsw : dv;
                                di = ni >= pt->last_nivcsw ? ni - pt->last_nivcsw : di;
                                if (rt > pt->last_runtime)
                                        __sync_fetch_and_add(&j->on_cpu_ns, rt - pt->last_runtime);
                        } else if (was_cur && rt > c->cur_start_runtime)
                                __sync_fetch_and_add(&j->on_cpu_ns, rt - c->cur_start_runtime);
                        if (pt) {
                                pt->last_nvcsw = TREAD(btf, prev, nvcsw);
                                pt->last_nivcsw = TREAD(btf, prev, nivcsw);
                                pt->last_runtime = rt;
                                pt->seen = 1;
                        }
                        if (dv)
                                __sync_fetch_and_add(&j->switches_voluntary, dv);
                        if (di)
                                __sync_fetch_and_add(&j->switches_involuntary, di);
                        if (involuntary && (!nt || nt->kind != RTD_TASK_JOB || nt->job_id != prev_job))
                                __sync_fetch_and_add(&j->preemptions, 1);
                }
        }

        cur_begin(btf, c, cpu, next, next_pid, nt);
        if (!next_pid)
                return 0;

        if (stamp_wakeups) {
                if (nt && nt->wake_ns) {
                        if (now > nt->wake_ns)
                                runq_record(c, job_get(nt), now - nt->wake_ns);
                        nt->wake_ns = 0;
                }
        } else {
                c->cur_pcount = TREAD(btf, next, sched_info.pcount);
                c->cur_arrivals = c->cur_pcount + 1;    /* sched_info_arrive() runs after the tracepoint */
                c->cur_run_delay = TREAD(btf, next, sched_info.run_delay);
        }
        return 0;
}

static __always_inline int on_wakeup(bool btf, struct task_struct *p) {
        __u32 pid = TREAD(btf, p, pid);
        struct rtd_task *t;

        if (!pid)
                return 0;
        waiter_note(p, pid, TREAD(btf, p, thread_info.cpu));
        if (!stamp_wakeups)
                return 0;       /* loaded for the starvation guard only */
        t = task_get(btf, p, pid, true);
        if (t)
                t->wake_ns = bpf_ktime_get_ns();
        return 0;
}

static __always_inline int on_migrate(bool btf, struct task_struct *p, int dest) {
        __u32 pid = TREAD(btf, p, pid);
        __u32 orig = TREAD(btf, p, thread_info.cpu);
        struct rtd_cpu *c;

        if (!pid || orig == (__u32) dest)
                return 0;
        intruder_left(btf, p, pid, orig);
        if (guard_on) {
                /* A waiter moved by the load balancer waits on the new CPU (a waking task is noted at
                 * sched_wakeup, after this: only queued tasks, TASK_RUNNING, are noted here). */
                struct rtd_waiter *w = bpf_map_lookup_elem(&waiters, &pid);

                if (w && cpu_reserved(dest))
                        w->cpu = dest;
                else if (w)
                        (void) bpf_map_delete_elem(&waiters, &pid);
                else if (task_state_core(p) == TASK_RUNNING)
                        waiter_note(p, pid, dest);
        }
        c = cpu_get(orig);
        if (c)
                __sync_fetch_and_add(&c->migrations_out, 1);
        c = cpu_get(dest);
        if (c)
                __sync_fetch_and_add(&c->migrations_in, 1);

        struct rtd_task *mark = task_get(btf, p, pid, false);
        struct rtd_job *j = job_get(mark);

        if (cpu_reserved(dest) && !exempt(mark))
                arrival_note(btf, p, pid, dest);
        if (j)
                __sync_fetch_and_add(&j->migrations, 1);
        return 0;
}

/* A job task's figures since its last switch-out seen, taken as it exits: its last switch may be missed. */
static __always_inline void job_exit(bool btf, struct task_struct *p, __u32 pid) {
        struct rtd_task *pt = task_get(btf, p, pid, false);
        struct rtd_job *j = job_get(pt);
        __u64 nv, ni, rt;

        if (!j || !pt->seen)
                return;
        nv = TREAD(btf, p, nvcsw);
        ni = TREAD(btf, p, nivcsw);
        rt = TREAD(btf, p, se.sum_exec_runtime);
        if (nv > pt->last_nvcsw)
                __sync_fetch_and_add(&j->switches_voluntary, nv - pt->last_nvcsw);
        if (ni > pt->last_nivcsw)
                __sync_fetch_and_add(&j->switches_involuntary, ni - pt->last_nivcsw);
        if (rt > pt->last_runtime)
                __sync_fetch_and_add(&j->on_cpu_ns, rt - pt->last_runtime);
        pt->last_nvcsw = nv;
        pt->last_nivcsw = ni;
        pt->last_runtime = rt;
}

/* Descendants of a job or worker belong to it: copy the mark to the child. */
static __always_inline int on_fork(bool btf, struct task_struct *parent, struct task_struct *child) {
        __u32 ppid = TREAD(btf, parent, pid), cpid = TREAD(btf, child, pid);
        struct rtd_task *pt, *ct;

        pt = task_get(btf, parent, ppid, false);
        if (!pt || pt->kind == RTD_TASK_OTHER)
                return 0;
        struct rtd_task mark = { .kind = pt->kind, .job_id = pt->job_id };
        struct rtd_job *j;

        /* rtd's threads stay its own (intruders of kind rtd); a process it forks is a worker. */
        if (mark.kind == RTD_TASK_DAEMON && cpid == TREAD(btf, child, tgid))
                mark.kind = RTD_TASK_WORKER;
        /* A process a worker forks is the job rtd handed it (bpf_worker_job): the job's from birth, so its
         * interrupts count before rtd's own mark lands. */
        else if (mark.kind == RTD_TASK_WORKER && mark.job_id && cpid == TREAD(btf, child, tgid))
                mark.kind = RTD_TASK_JOB;
        if (mark.kind != RTD_TASK_JOB)
                mark.job_id = 0;
        j = job_get(&mark);

        if (j)
                __sync_fetch_and_add(&j->tasks, 1);
        if (btf)
                (void) bpf_map_update_elem(&marks, &cpid, &mark, BPF_ANY);
        ct = task_get(btf, child, cpid, true);
        if (!ct)
                return 0;
        ct->kind = mark.kind;
        ct->job_id = mark.job_id;
        /* A new task's counters start at zero: a job's child counts from its creation (see on_switch()). */
        ct->seen = mark.kind == RTD_TASK_JOB;
        ct->last_nvcsw = ct->last_nivcsw = ct->last_runtime = ct->last_pcount = ct->last_run_delay = 0;
        return 0;
}

/*
 * At an interrupt's exit on a reserved CPU (the tick, a numbered IRQ, a softirq): the current task is the one
 * the CPU names, else a switch never reached us: counted, and the CPU takes up current from here, so what
 * follows is attributed to the task that really runs. At the tick the scheduler has just brought current's
 * se.sum_exec_runtime up to date (update_curr() in task_tick): a running intruder's time is folded.
 */
static __always_inline void cur_check(bool btf, struct rtd_cpu *c, __u32 cpu) {
        struct task_struct *t = btf ? bpf_get_current_task_btf() : (struct task_struct *) bpf_get_current_task();
        __u32 pid = TREAD(btf, t, pid);
        bool caught_up;

        if (pid == c->cur_pid) {
                if (c->cur_intruder)
                        intruder_fold(c, cpu, pid, TREAD(btf, t, se.sum_exec_runtime));
                else if (pid && !c->cur_job_id) {
                        /* rtd marks a job from another CPU after it started: a job that never leaves
                         * (a busy SCHED_FIFO loop) is attributed from its first tick after the mark. */
                        struct rtd_task *nt = task_get(btf, t, pid, false);

                        if (nt && nt->kind == RTD_TASK_JOB)
                                c->cur_job_id = nt->job_id;
                        /* Switched in before the CPU was reserved and running yet (a task rtd cannot
                         * move): an intruder from here, its time since the reservation began from its
                         * baseline (intruder_begin()). */
                        else if (!exempt(nt) && cpu_reserved(cpu))
                                intruder_begin(btf, c, cpu, t, pid, nt, TREAD(btf, t, se.sum_exec_runtime));
                }
                return;
        }
        c->missed_events++;
        recover(c, cpu);
        caught_up = cur_begin(btf, c, cpu, t, pid, pid ? task_get(btf, t, pid, false) : NULL);
        if (!stamp_wakeups)
                c->cur_arrivals = TREAD(btf, t, sched_info.pcount);
        if (c->cur_intruder && !caught_up) {
                /* Its switch-in never reached us: CFS noted its runtime when it picked it (on this CPU, after
                 * our last event here), so its slice since then is still the kernel's exact figure. */
                __u32 policy = TREAD(btf, t, policy);
                __u64 picked = TREAD(btf, t, se.prev_sum_exec_runtime);

                if ((policy == SCHED_NORMAL || policy == SCHED_BATCH || policy == SCHED_IDLE) &&
                    picked <= c->cur_start_runtime)
                        c->cur_start_runtime = picked;
                else
                        c->unrecovered++;
                intruder_fold(c, cpu, pid, TREAD(btf, t, se.sum_exec_runtime));
        }
}

static __always_inline int on_irq_entry(bool btf, int irq, struct irqaction *action) {
        struct rtd_cpu *c = cpu_get(bpf_get_smp_processor_id());

        /* Counted at entry: an event is counted once it began, whichever way its handler leaves. */
        if (c) {
                c->hardirq_start_ns = bpf_ktime_get_ns();
                c->hardirq_count++;
        }
        return 0;
}

static __always_inline int on_irq_exit(bool btf, int irq, struct irqaction *action) {
        __u32 cpu = bpf_get_smp_processor_id();
        struct rtd_cpu *c = cpu_get(cpu);
        __u64 now = bpf_ktime_get_ns(), d = 0;
        __u32 key = irq;
        struct rtd_irq *v;

        if (!c)
                return 0;
        if (c->primed && cpu_reserved(cpu))
                cur_check(btf, c, cpu);
        if (c->hardirq_start_ns && now > c->hardirq_start_ns)
                d = now - c->hardirq_start_ns;
        c->hardirq_start_ns = 0;
        c->hardirq_ns += d;

        v = bpf_map_lookup_elem(&irqs, &key);
        if (v) {
                v->count++;
                v->ns += d;
        } else {
                struct rtd_irq n = { .count = 1, .ns = d };
                struct rtd_irq_name name = {};

                (void) bpf_map_update_elem(&irqs, &key, &n, BPF_NOEXIST);
                /* First time on this CPU: remember the handler's name for attribution. */
                if (!bpf_map_lookup_elem(&irq_names, &key)) {
                        const char *s = btf ? action->name : BPF_CORE_READ(action, name);

                        (void) bpf_probe_read_kernel_str(name.name, sizeof(name.name), s);
                        (void) bpf_map_update_elem(&irq_names, &key, &name, BPF_NOEXIST);
                }
        }

        if (c->cur_job_id) {
                struct rtd_job *j = bpf_map_lookup_elem(&jobs, &c->cur_job_id);

                if (j) {
                        __sync_fetch_and_add(&j->hardirq_count, 1);
                        __sync_fetch_and_add(&j->hardirq_ns, d);
                }
        }
        return 0;
}

static __always_inline int on_softirq_entry(unsigned int vec) {
        struct rtd_cpu *c = cpu_get(bpf_get_smp_processor_id());

        if (c && vec < RTD_NR_SOFTIRQS) {
                c->softirq_start_ns = bpf_ktime_get_ns();
                c->softirq_count[vec]++;
        }
        return 0;
}

static __always_inline int on_softirq_exit(bool btf, unsigned int vec) {
        __u32 cpu = bpf_get_smp_processor_id();
        struct rtd_cpu *c = cpu_get(cpu);
        __u64 now = bpf_ktime_get_ns(), d = 0;

        if (!c || vec >= RTD_NR_SOFTIRQS)
                return 0;
        if (c->primed && cpu_reserved(cpu))
                cur_check(btf, c, cpu);
        if (c->softirq_start_ns && now > c->softirq_start_ns)
                d = now - c->softirq_start_ns;
        c->softirq_start_ns = 0;
        c->softirq_ns[vec] += d;

        if (c->cur_job_id) {
                struct rtd_job *j = bpf_map_lookup_elem(&jobs, &c->cur_job_id);

                if (j) {
                        __sync_fetch_and_add(&j->softirq_count, 1);
                        __sync_fetch_and_add(&j->softirq_ns, d);
                }
        }
        return 0;
}

/* ---- tp_btf programs (kernel >= 5.5 with BTF) ---- */

SEC("tp_btf/sched_switch")
int BPF_PROG(tp_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
             unsigned int prev_state) {
        return on_switch(true, preempt, prev, next, prev_state);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(tp_sched_wakeup, struct task_struct *p) {
        return on_wakeup(true, p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(tp_sched_wakeup_new, struct task_struct *p) {
        return on_wakeup(true, p);
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(tp_sched_migrate_task, struct task_struct *p, int dest_cpu) {
        return on_migrate(true, p, dest_cpu);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(tp_sched_process_fork, struct task_struct *parent, struct task_struct *child) {
        return on_fork(true, parent, child);
}

/* Tids are reused: forget the mark of a task that exits (its storage goes away by itself). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(tp_sched_process_exit, struct task_struct *p) {
        __u32 pid = p->pid;

        job_exit(true, p, pid);
        (void) bpf_map_delete_elem(&marks, &pid);
        (void) bpf_map_delete_elem(&waiters, &pid);
        return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(tp_irq_handler_entry, int irq, struct irqaction *action) {
        return on_irq_entry(true, irq, action);
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(tp_irq_handler_exit, int irq, struct irqaction *action) {
        return on_irq_exit(true, irq, action);
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(tp_softirq_entry, unsigned int vec) {
        return on_softirq_entry(vec);
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(tp_softirq_exit, unsigned int vec) {
        return on_softirq_exit(true, vec);
}

/* ---- raw_tp twins (no BTF-typed tracepoints); task marks live in task_hash ---- */

SEC("raw_tp/sched_switch")
int BPF_PROG(raw_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next) {
        /* prev_state became the 4th argument only in 5.18: read it from the task instead. */
        __u32 state = preempt ? 1 : task_state_core(prev);
        return on_switch(false, preempt, prev, next, state);
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(raw_sched_wakeup, struct task_struct *p) {
        return on_wakeup(false, p);
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(raw_sched_wakeup_new, struct task_struct *p) {
        return on_wakeup(false, p);
}

SEC("raw_tp/sched_migrate_task")
int BPF_PROG(raw_sched_migrate_task, struct task_struct *p, int dest_cpu) {
        return on_migrate(false, p, dest_cpu);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(raw_sched_process_fork, struct task_struct *parent, struct task_struct *child) {
        return on_fork(false, parent, child);
}

/* Only the hash needs cleaning: task storage goes away with the task. */
SEC("raw_tp/sched_process_exit")
int BPF_PROG(raw_sched_process_exit, struct task_struct *p) {
        __u32 pid = BPF_CORE_READ(p, pid);

        job_exit(false, p, pid);
        (void) bpf_map_delete_elem(&task_hash, &pid);
        (void) bpf_map_delete_elem(&waiters, &pid);
        return 0;
}

SEC("raw_tp/irq_handler_entry")
int BPF_PROG(raw_irq_handler_entry, int irq, struct irqaction *action) {
        return on_irq_entry(false, irq, action);
}

SEC("raw_tp/irq_handler_exit")
int BPF_PROG(raw_irq_handler_exit, int irq, struct irqaction *action) {
        return on_irq_exit(false, irq, action);
}

SEC("raw_tp/softirq_entry")
int BPF_PROG(raw_softirq_entry, unsigned int vec) {
        return on_softirq_entry(vec);
}

SEC("raw_tp/softirq_exit")
int BPF_PROG(raw_softirq_exit, unsigned int vec) {
        return on_softirq_exit(false, vec);
}

#include "sched-metrics-vectors.bpf.h"
#include "sched-metrics-baseline.bpf.h"

/*
 * rtd's sample of a reserved CPU, run there on demand just before rtd reads the maps (bpf-metrics.c runs it
 * with BPF_PROG_TEST_RUN on that CPU, only where a switch-out went unreported: see blind_sweep()). On the
 * CPU itself, between two of its events, like the tick: the running intruder's slice so far and the runs no
 * event showed are then in this sample, not the next. Not attached anywhere (SEC("raw_tp"), no name).
 */
SEC("raw_tp")
int sample_cpu(void *ctx) {
        __u32 cpu = bpf_get_smp_processor_id();
        struct rtd_cpu *c = cpu_get(cpu);
        struct task_struct *x;

        if (!c || !cpu_reserved(cpu))
                return 0;
        c->snapshots++;
        x = (struct task_struct *) c->cur_task;
        /* Running yet, or left unseen without migrating: either way its time since the last fold was here. */
        if (c->cur_intruder && c->cur_pid && x && BPF_CORE_READ(x, pid) == c->cur_pid &&
            BPF_CORE_READ(x, start_time) == c->cur_start_time &&
            BPF_CORE_READ(x, se.nr_migrations) == c->cur_migrations)
                intruder_fold(c, cpu, c->cur_pid, BPF_CORE_READ(x, se.sum_exec_runtime));
        baseline_sweep(cpu);
        blind_sweep(c, cpu);
        return 0;
}
