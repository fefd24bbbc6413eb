// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The every-thread baseline, an object of its own: at each change of the reserved CPUs, every thread of the
 * machine already on one of them gets its baseline (sched-metrics-baseline-note.bpf.h), whatever rtd's PID
 * namespace. The main object's task iterator walks only rtd's namespace, so PID 1's threads, which rtd
 * cannot move from a namespace of its own, were taken up only at their next tick there.
 *
 * Why not in sched-metrics.bpf.c: the open-coded task iterator's kfuncs (kernel 6.7) are externs libbpf must
 * resolve for the whole object. On an older kernel libbpf 1.1 fails the load ("not found") or, for weak
 * externs, searches the modules' BTF, which needs CAP_SYS_ADMIN (rtd.service has CAP_BPF and CAP_PERFMON):
 * the whole collector was lost on Debian 12's 6.1. rtd opens this object only where vmlinux's BTF has the
 * kfuncs, and makes its maps the main object's (bpf_map__reuse_fd()): the notes land in the same tables.
 * daemon/metrics/bpf-baseline-all.c loads and runs it.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "sched-metrics.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#include "sched-metrics-common.bpf.h"
#include "sched-metrics-baseline-note.bpf.h"

extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task__nullable,
                             unsigned int flags) __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __ksym;

/* Run once per reservation change through a task iterator (an iter link user space reads): at its first
 * visit, whichever task of rtd's namespace that is, walk every thread of the machine. */
SEC("iter/task")
int baseline_all(struct bpf_iter__task *ctx) {
        struct task_struct *t = ctx->task;      /* one load, as baseline_tasks */
        struct bpf_iter_task it;

        barrier_var(t);
        if (!t || ctx->meta->seq_num != 0)
                return 0;
        bpf_iter_task_new(&it, NULL, BPF_TASK_ITER_ALL_THREADS);
        while ((t = bpf_iter_task_next(&it)))
                baseline_note(t);
        bpf_iter_task_destroy(&it);
        return 0;
}
