/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/* Part of sched-metrics.bpf.c (included where these are first needed, sharing its maps and helpers): an
 * intruder's runs and exact CPU time on a reserved CPU, and recovering a slice whose switch-out never reached
 * the programs. */

/*
 * A slot for a note: a free one first, so a pending note (a task that arrived and has not yet run where rtd
 * saw it) outlives later arrivals; notes of tasks that did run are used up at once. Only when every slot is
 * pending does the oldest go (a ring, as before). Claimed by compare-and-swap: moves onto one CPU are noted on
 * any CPU at once.
 */
static __always_inline __u32 arrival_slot(struct rtd_cpu *c) {
        __u32 i;

        for (i = 0; i < RTD_ARRIVAL_SLOTS; i++)
                if (c->arr_pid[i] == 0 && __sync_val_compare_and_swap(&c->arr_pid[i], 0, RTD_ARRIVAL_BUSY) == 0)
                        return i;
        i = __sync_fetch_and_add(&c->arr_next, 1) & (RTD_ARRIVAL_SLOTS - 1);
        c->arr_pid[i] = RTD_ARRIVAL_BUSY;
        return i;
}

/*
 * p is moved onto reserved CPU dest (sched_migrate_task, on whichever CPU moves it; before the kernel bumps
 * its nr_migrations). Its runtime now is where its time on dest begins: noted for dest, which alone adds to
 * its figures (intruder_arrived()). A thread switched in there only by one whose switch-outs go unreported
 * (PID 1's) may run there without any event, before rtd ever saw it there.
 */
static __always_inline void arrival_note(bool btf, struct task_struct *p, __u32 pid, __u32 dest) {
        struct rtd_cpu *c = cpu_get(dest);
        __u32 i;

        if (!c)
                return;
        i = arrival_slot(c);
        barrier();
        c->arr_task[i] = (__u64) p;
        c->arr_start_time[i] = TREAD(btf, p, start_time);
        c->arr_runtime[i] = TREAD(btf, p, se.sum_exec_runtime);
        c->arr_migrations[i] = TREAD(btf, p, se.nr_migrations) + 1;
        barrier();
        c->arr_pid[i] = pid;
}

/* The task of entry v arrived here since its time here was last added (or was never here): its time here
 * begins at its runtime on arrival. The note is used up; entries already past it keep theirs. */
__noinline int intruder_arrived(struct rtd_cpu *c, struct rtd_intruder *v, __u32 pid, __u64 start_time,
                                __u64 migrations) {
        if (!c || !v)
                return 0;
        for (__u32 i = 0; i < RTD_ARRIVAL_SLOTS; i++) {
                __u64 rt, m;

                if (c->arr_pid[i] != pid)
                        continue;
                barrier();
                rt = c->arr_runtime[i];
                m = c->arr_migrations[i];
                if (c->arr_start_time[i] != start_time || c->arr_pid[i] != pid)
                        continue;
                c->arr_pid[i] = 0;
                if (m == migrations && !(v->end_epoch == reserve_epoch && v->end_migrations == m)) {
                        v->end_runtime = rt;
                        v->end_migrations = m;
                        v->end_epoch = reserve_epoch;
                }
        }
        return 0;
}

/* A run of an intruder begins on a reserved CPU: count it, note where its CPU time starts, (re)take its
 * name (exec may have changed it). Its entry is made now; a full table sends it to "other". Returns true
 * when it added time of runs here that no event showed (below): its CPU time up to start_runtime is in. */
static __always_inline bool intruder_begin(bool btf, struct rtd_cpu *c, __u32 cpu, struct task_struct *t,
                                           __u32 pid, struct rtd_task *mark, __u64 start_runtime) {
        struct rtd_intruder_key k = { .cpu = cpu, .pid = pid, .start_time = TREAD(btf, t, start_time) };
        struct rtd_intruder *v;

        c->cur_intruder = 1;
        c->cur_task = (__u64) t;
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
                return false;
        }
        v->count++;
        (void) bpf_core_read_str(v->comm, sizeof(v->comm), &t->comm);
        intruder_arrived(c, v, pid, k.start_time, c->cur_migrations);
        /*
         * A whole run here can go unseen: switched in by a thread whose switch-outs are never reported (PID
         * 1's, docs/metrics.md) and out again before any event here. Its CPU time is still the kernel's: if
         * the task has not migrated since its time here was last added, all its sum_exec_runtime growth
         * since then happened on this CPU (while it was reserved: the same reservation).
         */
        if (v->end_runtime && start_runtime > v->end_runtime && c->cur_migrations == v->end_migrations &&
            v->end_epoch == reserve_epoch) {
                __u64 d = start_runtime - v->end_runtime;

                c->intrusion_ns += d;
                v->ns += d;
                v->end_runtime = start_runtime;
                return true;
        }
        return false;
}

/*
 * Add the current intruder's CPU time since its switch-in (or the last fold) to the CPU's total and its
 * entry: a delta of the kernel's own se.sum_exec_runtime, so no wall time, no IRQ time the kernel does not
 * charge it, no steal. Called at its switch-out and at each tick while it runs (local_timer_exit, on the
 * CPU itself: no race with sched_switch), so a running hog's figure is at most one tick old and every
 * counter only ever adds exact deltas.
 */
__noinline int intruder_fold(struct rtd_cpu *c, __u32 cpu, __u32 pid, __u64 runtime) {
        struct rtd_intruder_key k = { .cpu = cpu, .pid = pid };
        struct rtd_intruder *v;
        __u64 d, from;

        if (!c)
                return 0;
        k.start_time = c->cur_start_time;
        v = bpf_map_lookup_elem(&intruders, &k);
        from = c->cur_start_runtime;

        /* Not migrated since its time here was last added (by blind_sweep() meanwhile): added up to there. */
        if (v && v->end_epoch == reserve_epoch && v->end_migrations == c->cur_migrations && v->end_runtime > from)
                from = v->end_runtime;
        if (runtime <= from)
                return 0;
        d = runtime - from;
        c->cur_start_runtime = runtime;
        c->intrusion_ns += d;
        if (v) {
                v->ns += d;
                v->end_runtime = runtime;
                v->end_migrations = c->cur_migrations;  /* a running task does not migrate */
                v->end_epoch = reserve_epoch;
        } else
                c->other_ns += d;
        return 0;
}

/*
 * The intruder the CPU names left without a sched_switch event reaching us. On this kernel (6.18, a
 * Firecracker guest) that is every switch away from a thread of the VM's PID 1: the tracepoint never fires
 * for them, for ftrace and BPF alike, though the runqueue's nr_switches counts them (docs/metrics.md). Its
 * CPU time since the last fold is still exact if it has not been switched in anywhere since
 * (sched_info.pcount unchanged) or has not migrated (se.nr_migrations unchanged): then all of its
 * sum_exec_runtime growth happened here. Else it was moved away before it ran elsewhere, and
 * intruder_left() noted its runtime at that moment. Only when neither holds is the slice lost, and counted.
 */
/* Note a task whose runs here may go unseen, so that they are swept (below). */
static __always_inline void blind_add(struct rtd_cpu *c, __u64 task, __u32 pid, __u64 start_time) {
        __u32 i, n = c->blind_n;

        for (i = 0; i < RTD_BLIND_SLOTS; i++)
                if (i < n && c->blind_pid[i] == pid && c->blind_start_time[i] == start_time)
                        return;
        /* Full: the oldest slot goes (a sweep then misses that task's unseen runs until it is noted again). */
        i = (n < RTD_BLIND_SLOTS ? n : c->blind_next++) & (RTD_BLIND_SLOTS - 1);
        c->blind_task[i] = task;
        c->blind_start_time[i] = start_time;
        c->blind_pid[i] = pid;
        if (n < RTD_BLIND_SLOTS)
                c->blind_n = n + 1;
}

/* The current intruder left unreported. */
static __always_inline void blind_note(struct rtd_cpu *c) {
        blind_add(c, c->cur_task, c->cur_pid, c->cur_start_time);
}

/*
 * Intruders that arrived here and ran without any event here yet (switched in and out by PID 1's threads):
 * their entry is made now, its time from their runtime on arrival, and they join the swept tasks.
 */
static __always_inline void arrivals_sweep(struct rtd_cpu *c, __u32 cpu) {
        for (__u32 i = 0; i < RTD_ARRIVAL_SLOTS; i++) {
                struct rtd_intruder_key k = { .cpu = cpu };
                struct task_struct *x;
                struct rtd_intruder *v;
                __u64 m;

                k.pid = c->arr_pid[i];
                if (!k.pid || k.pid == RTD_ARRIVAL_BUSY)
                        continue;
                barrier();
                x = (struct task_struct *) c->arr_task[i];
                k.start_time = c->arr_start_time[i];
                m = c->arr_migrations[i];
                if (c->arr_pid[i] != k.pid)
                        continue;
                /* Gone, or moved on since (its count only grows; the mover bumps it just after the note):
                 * the note can never be used, its slot is freed for the next arrival. */
                if (!x || BPF_CORE_READ(x, pid) != k.pid || BPF_CORE_READ(x, start_time) != k.start_time ||
                    BPF_CORE_READ(x, se.nr_migrations) > m) {
                        (void) __sync_val_compare_and_swap(&c->arr_pid[i], k.pid, 0);
                        continue;
                }
                if (BPF_CORE_READ(x, se.nr_migrations) != m ||
                    BPF_CORE_READ(x, se.sum_exec_runtime) <= c->arr_runtime[i])
                        continue;       /* not moved in yet, or not run here yet: kept for its switch-in */
                v = bpf_map_lookup_elem(&intruders, &k);
                if (!v && c->table_used < intruder_table_size) {
                        struct rtd_intruder n = {
                                .kind = BPF_CORE_READ(x, flags) & PF_KTHREAD ? RTD_INTRUDER_KERNEL : RTD_INTRUDER_USER,
                                .tgid = BPF_CORE_READ(x, tgid),
                        };
                        if (bpf_map_update_elem(&intruders, &k, &n, BPF_NOEXIST) == 0)
                                c->table_used++;
                        v = bpf_map_lookup_elem(&intruders, &k);
                        if (v)
                                (void) bpf_core_read_str(v->comm, sizeof(v->comm), &x->comm);
                }
                if (!v)
                        continue;       /* no room: its runs go to other at its switch-in */
                intruder_arrived(c, v, k.pid, k.start_time, m);
                blind_add(c, (__u64) x, k.pid, k.start_time);
        }
}

/*
 * Runs here that no event showed at all (a thread of PID 1 switched in by another one and out again, both
 * unreported: chains like 75->69->75) are otherwise added only at the task's next switch-in here, which may
 * be in a later sample. Each noted task that has not migrated since its time here was last added ran
 * only here meanwhile: its sum_exec_runtime growth is added now. Called on the CPU itself (recover(), and
 * rtd's sampling program), so nothing else changes these figures meanwhile. The current intruder is
 * intruder_fold()'s.
 */
static __always_inline void blind_sweep(struct rtd_cpu *c, __u32 cpu) {
        arrivals_sweep(c, cpu);
        for (__u32 i = 0; i < RTD_BLIND_SLOTS; i++) {
                struct rtd_intruder_key k = { .cpu = cpu };
                struct task_struct *x;
                struct rtd_intruder *v;
                __u64 rt;

                if (i >= c->blind_n)
                        break;
                x = (struct task_struct *) c->blind_task[i];
                k.pid = c->blind_pid[i];
                k.start_time = c->blind_start_time[i];
                if (c->cur_intruder && k.pid == c->cur_pid && k.start_time == c->cur_start_time)
                        continue;
                if (!x || BPF_CORE_READ(x, pid) != k.pid || BPF_CORE_READ(x, start_time) != k.start_time)
                        continue;               /* gone (a freed task_struct reads as another task) */
                v = bpf_map_lookup_elem(&intruders, &k);
                if (!v || !v->end_runtime || v->end_epoch != reserve_epoch ||
                    BPF_CORE_READ(x, se.nr_migrations) != v->end_migrations)
                        continue;
                rt = BPF_CORE_READ(x, se.sum_exec_runtime);
                if (rt <= v->end_runtime)
                        continue;
                c->intrusion_ns += rt - v->end_runtime;
                v->ns += rt - v->end_runtime;
                v->end_runtime = rt;
        }
}

static __always_inline void recover_cur(struct rtd_cpu *c, __u32 cpu) {
        struct task_struct *x = (struct task_struct *) c->cur_task;
        __u32 left;

        /* Read through the pointer noted at its switch-in, not by pid: this kernel's pid lookup
         * (bpf_task_from_pid) does not find the very threads whose switch-outs go unreported (PID 1's).
         * Not a reference: the reads are fault-safe, and a task_struct freed and reused since is told
         * apart by its pid and start time. */
        if (x && BPF_CORE_READ(x, pid) == c->cur_pid && BPF_CORE_READ(x, start_time) == c->cur_start_time &&
            ((c->cur_arrivals && BPF_CORE_READ(x, sched_info.pcount) == c->cur_arrivals) ||
             BPF_CORE_READ(x, se.nr_migrations) == c->cur_migrations)) {
                intruder_fold(c, cpu, c->cur_pid, BPF_CORE_READ(x, se.sum_exec_runtime));
                return;
        }
        left = c->left_pid;
        barrier();              /* left_pid is written last (intruder_left): read it first */
        /* A note of an earlier slice of the same task (moved away after recover() was done) is at most
         * where this slice started. */
        if (left == c->cur_pid && c->left_start_time == c->cur_start_time &&
            c->left_runtime >= c->cur_start_runtime) {
                intruder_fold(c, cpu, c->cur_pid, c->left_runtime);
                c->left_pid = 0;
        } else
                c->unrecovered++;
}

__noinline int recover(struct rtd_cpu *c, __u32 cpu) {
        if (!c || !c->cur_intruder || !c->cur_pid)
                return 0;
        blind_note(c);
        recover_cur(c, cpu);
        blind_sweep(c, cpu);
        return 0;
}

/*
 * p leaves CPU orig for another (sched_migrate_task, on whichever CPU moves it). A task is never moved
 * while it runs, so if orig still names p as its running intruder, p's switch-out there was never
 * reported, and p has not run since (its pcount or migrations as at its switch-in there): its
 * sum_exec_runtime now is exactly where its slice on orig ended. Noted for recover() on orig, which
 * alone adds to orig's figures; p may run elsewhere before orig's next event.
 */
static __always_inline void intruder_left(bool btf, struct task_struct *p, __u32 pid, __u32 orig) {
        struct rtd_cpu *c;

        if (!cpu_reserved(orig))
                return;
        c = cpu_get(orig);
        if (!c || !c->cur_intruder || c->cur_pid != pid || c->cur_start_time != TREAD(btf, p, start_time))
                return;
        if (!((c->cur_arrivals && TREAD(btf, p, sched_info.pcount) == c->cur_arrivals) ||
              TREAD(btf, p, se.nr_migrations) == c->cur_migrations))
                return;
        c->left_start_time = c->cur_start_time;
        c->left_runtime = TREAD(btf, p, se.sum_exec_runtime);
        barrier();
        c->left_pid = pid;
}
