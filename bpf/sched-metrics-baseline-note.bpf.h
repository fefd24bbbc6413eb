/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/* The note of one task already on a reserved CPU as its reservation begins: shared by the main object's
 * task iterator over rtd's PID namespace (sched-metrics-baseline.bpf.h) and the every-thread walk of
 * sched-metrics-all.bpf.c. Needs sched-metrics-common.bpf.h. */
#ifndef RTD_SCHED_METRICS_BASELINE_NOTE_BPF_H
#define RTD_SCHED_METRICS_BASELINE_NOTE_BPF_H

/*
 * Run by user space (a task iterator) right after each change of the reserved CPUs: every task whose CPU
 * is reserved and whose affinity allows it to stay there, except rtd's workers and jobs, gets its intruder
 * entry now (no run yet, not exported until it has one) with its runtime and migrations as where its time
 * there begins: intruder_begin() and blind_sweep() add from there, as for an arrival. A sleeping task rtd
 * moved keeps its old CPU until it wakes: its affinity leaves it out.
 */
static __always_inline void baseline_note(struct task_struct *t) {
        struct rtd_intruder_key k = {};
        struct rtd_baseline b = {};
        struct rtd_intruder *v;
        struct rtd_task *mark;
        struct rtd_cpu *c;
        unsigned long word = 0;
        __u32 cpu;

        k.pid = t->pid;
        cpu = t->thread_info.cpu;
        if (!k.pid || !cpu_reserved(cpu))
                return;
        cpu &= RTD_MAX_CPUS - 1;
        if (bpf_probe_read_kernel(&word, sizeof word, &t->cpus_ptr->bits[cpu / 64]) < 0 || !((word >> (cpu % 64)) & 1))
                return;
        mark = bpf_task_storage_get(&task_store, t, NULL, 0);
        if (!mark)
                mark = bpf_map_lookup_elem(&marks, &k.pid);
        c = cpu_get(cpu);
        if (exempt(mark) || !c)
                return;
        k.cpu = cpu;
        k.start_time = t->start_time;
        v = bpf_map_lookup_elem(&intruders, &k);
        /* At most half the table: the intruders that do run keep room (a task that finds no room is not
         * noted, and its runs go to other as usual). */
        if (!v && c->table_used < intruder_table_size / 2) {
                struct rtd_intruder n = {
                        .kind = mark && mark->kind == RTD_TASK_DAEMON ? RTD_INTRUDER_RTD :
                                t->flags & PF_KTHREAD ? RTD_INTRUDER_KERNEL : RTD_INTRUDER_USER,
                        .tgid = t->tgid,
                };

                (void) bpf_probe_read_kernel_str(n.comm, sizeof n.comm, t->comm);
                if (bpf_map_update_elem(&intruders, &k, &n, BPF_NOEXIST) == 0)
                        __sync_fetch_and_add(&c->table_used, 1);
                v = bpf_map_lookup_elem(&intruders, &k);
        }
        if (!v) {
                baseline_full++;
                return;
        }
        b.task = (__u64) t;
        b.migrations = t->se.nr_migrations;
        b.epoch = reserve_epoch;
        if (v->end_epoch != reserve_epoch) {
                v->end_runtime = t->se.sum_exec_runtime;
                v->end_migrations = b.migrations;
                v->end_epoch = reserve_epoch;
        }
        if (bpf_map_update_elem(&baseline, &k, &b, BPF_ANY) == 0)
                baseline_noted++;
        else
                baseline_full++;
}

#endif
