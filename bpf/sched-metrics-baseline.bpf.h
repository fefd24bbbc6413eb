/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/* Part of sched-metrics.bpf.c (included at its end, sharing its maps and helpers): the tasks already on a
 * reserved CPU when its reservation began. A task rtd cannot move (PID 1's threads when rtd runs in a PID
 * namespace) may run there without any event (docs/metrics.md) before rtd first sees it: with no arrival
 * (sched_migrate_task) to note where its time there began, those runs were lost. */

#include "sched-metrics-baseline-note.bpf.h"

/* Each task the iterator visits: those of rtd's PID namespace only (the kernel's task iterator walks the
 * reader's namespace), so all of them where rtd runs in the initial one. */
SEC("iter/task")
int baseline_tasks(struct bpf_iter__task *ctx) {
        /* One load: checked and used as the same register (clang read ctx->task twice, and the verifier
         * rejected the second read as maybe NULL: the whole object then failed to load on kernels < 6.7). */
        struct task_struct *t = ctx->task;

        barrier_var(t);
        if (t)
                baseline_note(t);
        return 0;
}

/* The walk over every thread of the machine (the open-coded task iterator of kernel 6.7), which also sees PID
 * 1's threads when rtd runs in a PID namespace of its own, is an object of its own: sched-metrics-all.bpf.c. */

/*
 * One baseline, at rtd's sample on its CPU (sample_cpu): a task that ran there since without moving and
 * without rtd seeing it joins the swept tasks now (blind_sweep() adds its time from its entry's start). One
 * that rtd saw (its entry moved on), gone, moved, or of an older reservation is dropped.
 */
static long baseline_visit(struct bpf_map *map, struct rtd_intruder_key *k, struct rtd_baseline *b, __u32 *cpup) {
        __u32 cpu = *cpup;
        struct rtd_cpu *c = cpu_get(cpu);
        struct task_struct *x = (struct task_struct *) b->task;
        struct rtd_intruder_key key = *k;
        struct rtd_intruder *v;

        if (!c || key.cpu != cpu)
                return 0;
        v = bpf_map_lookup_elem(&intruders, &key);
        if (!v || v->count || b->epoch != reserve_epoch || v->end_epoch != reserve_epoch ||
            v->end_migrations != b->migrations || !x || BPF_CORE_READ(x, pid) != key.pid ||
            BPF_CORE_READ(x, start_time) != key.start_time || BPF_CORE_READ(x, se.nr_migrations) != b->migrations) {
                (void) bpf_map_delete_elem(&baseline, &key);
                return 0;
        }
        if (BPF_CORE_READ(x, se.sum_exec_runtime) <= v->end_runtime)
                return 0;               /* not run here since: kept */
        blind_add(c, b->task, key.pid, key.start_time);
        (void) bpf_map_delete_elem(&baseline, &key);
        return 0;
}

static __always_inline void baseline_sweep(__u32 cpu) {
        (void) bpf_for_each_map_elem(&baseline, baseline_visit, &cpu, 0);
}
