/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/* Part of sched-metrics.bpf.c (included at its end, sharing its maps and helpers): the tasks already on a
 * reserved CPU when its reservation began. A task rtd cannot move (PID 1's threads when rtd runs in a PID
 * namespace) may run there without any event (docs/metrics.md) before rtd first sees it: with no arrival
 * (sched_migrate_task) to note where its time there began, those runs were lost. */

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

/*
 * Not here: a walk over every thread of the machine with the open-coded task iterator (kernel 6.7), which would
 * also see PID 1's threads when rtd runs in a PID namespace of its own. Its kfuncs are externs libbpf must
 * resolve for the whole object, and on a kernel without them libbpf 1.1 looks in the modules' BTF, which
 * needs CAP_SYS_ADMIN: under rtd.service (CAP_BPF, CAP_PERFMON) on Debian 12's 6.1 the whole object failed
 * to load. It needs an object of its own.
 */

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
