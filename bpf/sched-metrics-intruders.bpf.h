/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/* Part of sched-metrics.bpf.c (included where these are first needed, sharing its maps and helpers): an
 * intruder's runs and exact CPU time on a reserved CPU, and recovering a slice whose switch-out never reached
 * the programs. */

/* A run of an intruder begins on a reserved CPU: count it, note where its CPU time starts, (re)take its
 * name (exec may have changed it). Its entry is made now; a full table sends it to "other". */
static __always_inline void intruder_begin(bool btf, struct rtd_cpu *c, __u32 cpu, struct task_struct *t,
                                           __u32 pid, struct rtd_task *mark, __u64 start_runtime) {
        struct rtd_intruder_key k = { .cpu = cpu, .pid = pid, .start_time = TREAD(btf, t, start_time) };
        struct rtd_intruder *v;

        c->cur_intruder = 1;
        c->cur_start_time = k.start_time;
        c->cur_migrations = TREAD(btf, t, se.nr_migrations);
        c->cur_start_runtime = start_runtime;
        c->intrusions++;
        v = bpf_map_lookup_elem(&intruders, &k);
        if (!v && c->table_used < intruder_table_size) {
                struct rtd_intruder n = {
                        .kind = mark && mark->kind == RTD_TASK_DAEMON ? RTD_INTRUDER_RTD :
                                TREAD(btf, t, flags) & PF_KTHREAD ? RTD_INTRUDER_KERNEL : RTD_INTRUDER_USER,
                        .tgid = TREAD(btf, t, tgid),
                };
                if (bpf_map_update_elem(&intruders, &k, &n, BPF_NOEXIST) == 0)
                        c->table_used++;
                v = bpf_map_lookup_elem(&intruders, &k);
        }
        if (!v) {
                c->other_runs++;
                return;
        }
        v->count++;
        (void) bpf_core_read_str(v->comm, sizeof(v->comm), &t->comm);
}

/*
 * Add the current intruder's CPU time since its switch-in (or the last fold) to the CPU's total and its
 * entry: a delta of the kernel's own se.sum_exec_runtime, so no wall time, no IRQ time the kernel does not
 * charge it, no steal. Called at its switch-out and at each tick while it runs (local_timer_exit, on the
 * CPU itself: no race with sched_switch), so a running hog's figure is at most one tick old and every
 * counter only ever adds exact deltas.
 */
static __always_inline void intruder_fold(struct rtd_cpu *c, __u32 cpu, __u32 pid, __u64 runtime) {
        struct rtd_intruder_key k = { .cpu = cpu, .pid = pid, .start_time = c->cur_start_time };
        struct rtd_intruder *v;
        __u64 d;

        if (runtime <= c->cur_start_runtime)
                return;
        d = runtime - c->cur_start_runtime;
        c->cur_start_runtime = runtime;
        c->intrusion_ns += d;
        v = bpf_map_lookup_elem(&intruders, &k);
        if (v)
                v->ns += d;
        else
                c->other_ns += d;
}

/*
 * The intruder the CPU names left without a sched_switch event reaching us (the tracepoint stays silent for
 * some switches, and rtd's program misses a few more around idle: docs/metrics.md). Its CPU time since the
 * last fold is still exact if it has not been switched in anywhere since (sched_info.pcount unchanged) or has
 * not migrated (se.nr_migrations unchanged): then all of its sum_exec_runtime growth happened here. Otherwise
 * that slice is lost, and counted.
 */
static __always_inline void recover(struct rtd_cpu *c, __u32 cpu) {
        struct task_struct *x;

        if (!c->cur_intruder || !c->cur_pid || !bpf_task_from_pid) {
                c->unrecovered += c->cur_intruder;
                return;
        }
        x = bpf_task_from_pid(c->cur_pid);
        if (!x) {
                c->unrecovered++;
                return;
        }
        if (x->start_time == c->cur_start_time &&
            ((c->cur_arrivals && x->sched_info.pcount == c->cur_arrivals) ||
             x->se.nr_migrations == c->cur_migrations))
                intruder_fold(c, cpu, c->cur_pid, x->se.sum_exec_runtime);
        else
                c->unrecovered++;
        bpf_task_release(x);
}
