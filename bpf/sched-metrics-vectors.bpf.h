/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/* Part of sched-metrics.bpf.c (included at its end, sharing its maps and helpers): architecture vectors
 * (x86 irq_vectors) counted and timed per CPU and job, the tick's fold of a running intruder, exec renames,
 * IPI senders. All optional: user space does not load what the kernel lacks. */

/*
 * An architecture vector (x86 irq_vectors) begins: IRQs are off in its handler, so one start slot. A start
 * still there is a handler whose exit never reached us (the programs miss a few tracepoint hits): its time is
 * left out and counted, never stretched to a later exit (session 8: a RES whose entry was missed took 33 µs
 * from an older start).
 */
static __always_inline void vec_unpaired(struct rtd_cpu *c) {
        if (c->vec_start_ns) {
                c->vec_unpaired[c->vec_start_vec & (RTD_NR_VECTORS - 1)]++;
                c->vec_start_ns = 0;
        }
}

static __always_inline int on_vec_entry(__u32 vec) {
        struct rtd_cpu *c = cpu_get(bpf_get_smp_processor_id());

        if (c && vec < RTD_NR_VECTORS) {
                vec_unpaired(c);
                c->vec_start_vec = vec;
                c->vec_start_ns = bpf_ktime_get_ns();
                c->vec_count[vec]++;
        }
        return 0;
}

static __always_inline struct rtd_cpu *on_vec_exit(__u32 vec) {
        __u32 cpu = bpf_get_smp_processor_id();
        struct rtd_cpu *c = cpu_get(cpu);
        __u64 now = bpf_ktime_get_ns(), d = 0;

        if (!c || vec >= RTD_NR_VECTORS)
                return NULL;
        /* Only its own entry: one of another vector is a handler whose exit we missed, and this one's
         * entry was missed (its count shows it). */
        if (c->vec_start_ns && c->vec_start_vec == vec && now > c->vec_start_ns)
                d = now - c->vec_start_ns;
        else
                vec_unpaired(c);
        c->vec_start_ns = 0;
        c->vec_ns[vec] += d;
        if (c->cur_job_id) {
                struct rtd_job *j = bpf_map_lookup_elem(&jobs, &c->cur_job_id);

                if (j) {
                        __sync_fetch_and_add(&j->vec_count[vec], 1);
                        __sync_fetch_and_add(&j->vec_ns[vec], d);
                }
        }
        return c;
}

/*
 * The tick on a reserved CPU: the scheduler tick has just brought current's se.sum_exec_runtime up to
 * date (update_curr() in task_tick), so fold a running intruder's time now. A current task other than the
 * one the CPU names means a switch never reached us: counted, and the CPU takes up current from here.
 * Checked before the vector is attributed, so the tick itself goes to the job it interrupted.
 */
static __always_inline int on_tick_exit(bool btf) {
        __u32 cpu = bpf_get_smp_processor_id();
        struct rtd_cpu *c = cpu_get(cpu);

        kernel_hz = CONFIG_HZ;
        if (c && c->primed && cpu_reserved(cpu))
                cur_check(btf, c, cpu);
        on_vec_exit(RTD_VEC_LOC);
        return 0;
}

/* exec renames a task: refresh its name in the intruder entries it has on reserved CPUs. */
static __always_inline int on_exec(bool btf, struct task_struct *p) {
        struct rtd_intruder_key k = { .pid = TREAD(btf, p, pid), .start_time = TREAD(btf, p, start_time) };

        for (__u32 i = 0; i < RTD_MAX_LISTED; i++) {
                struct rtd_intruder *v;

                if (i >= n_listed)
                        break;
                k.cpu = reserved_list[i];
                v = bpf_map_lookup_elem(&intruders, &k);
                if (v)
                        (void) bpf_core_read_str(v->comm, sizeof(v->comm), &p->comm);
        }
        return 0;
}

/* An IPI to a reserved CPU: who sent it and from where (the call site and callback, kernel >= 6.3). */
static __always_inline void ipi_note(__u32 cpu, __u64 callsite, __u64 callback) {
        struct rtd_ipi_key k = { .cpu = cpu, .callsite = callsite, .callback = callback };
        struct rtd_ipi *v = bpf_map_lookup_elem(&ipis, &k);

        if (!v) {
                struct rtd_ipi n = {};

                (void) bpf_map_update_elem(&ipis, &k, &n, BPF_NOEXIST);
                v = bpf_map_lookup_elem(&ipis, &k);
                if (!v)
                        return;
        }
        __sync_fetch_and_add(&v->count, 1);
        v->sender_cpu = bpf_get_smp_processor_id();
        v->sender_pid = (__u32) bpf_get_current_pid_tgid();
        (void) bpf_get_current_comm(v->sender_comm, sizeof(v->sender_comm));
}

static __always_inline int on_ipi_cpu(__u32 cpu, __u64 callsite, __u64 callback) {
        if (cpu_reserved(cpu))
                ipi_note(cpu, callsite, callback);
        return 0;
}

static __always_inline int on_ipi_mask(const struct cpumask *mask, __u64 callsite, __u64 callback) {
        for (__u32 i = 0; i < RTD_MAX_LISTED; i++) {
                __u32 cpu;
                unsigned long word = 0;

                if (i >= n_listed)
                        break;
                cpu = reserved_list[i] & (RTD_MAX_CPUS - 1);
                if (bpf_probe_read_kernel(&word, sizeof(word), &mask->bits[cpu / 64]) == 0 &&
                    (word >> (cpu % 64)) & 1)
                        ipi_note(cpu, callsite, callback);
        }
        return 0;
}

/* ---- tp_btf programs ---- */

SEC("tp_btf/local_timer_entry")
int BPF_PROG(tp_local_timer_entry, int vector) {
        return on_vec_entry(RTD_VEC_LOC);
}

SEC("tp_btf/local_timer_exit")
int BPF_PROG(tp_local_timer_exit, int vector) {
        return on_tick_exit(true);
}

SEC("tp_btf/reschedule_entry")
int BPF_PROG(tp_reschedule_entry, int vector) {
        return on_vec_entry(RTD_VEC_RES);
}

SEC("tp_btf/reschedule_exit")
int BPF_PROG(tp_reschedule_exit, int vector) {
        on_vec_exit(RTD_VEC_RES);
        return 0;
}

SEC("tp_btf/call_function_entry")
int BPF_PROG(tp_call_function_entry, int vector) {
        return on_vec_entry(RTD_VEC_CAL);
}

SEC("tp_btf/call_function_exit")
int BPF_PROG(tp_call_function_exit, int vector) {
        on_vec_exit(RTD_VEC_CAL);
        return 0;
}

SEC("tp_btf/call_function_single_entry")
int BPF_PROG(tp_call_function_single_entry, int vector) {
        return on_vec_entry(RTD_VEC_CAL);
}

SEC("tp_btf/call_function_single_exit")
int BPF_PROG(tp_call_function_single_exit, int vector) {
        on_vec_exit(RTD_VEC_CAL);
        return 0;
}

SEC("tp_btf/irq_work_entry")
int BPF_PROG(tp_irq_work_entry, int vector) {
        return on_vec_entry(RTD_VEC_IWI);
}

SEC("tp_btf/irq_work_exit")
int BPF_PROG(tp_irq_work_exit, int vector) {
        on_vec_exit(RTD_VEC_IWI);
        return 0;
}

SEC("tp_btf/x86_platform_ipi_entry")
int BPF_PROG(tp_x86_platform_ipi_entry, int vector) {
        return on_vec_entry(RTD_VEC_PLT);
}

SEC("tp_btf/x86_platform_ipi_exit")
int BPF_PROG(tp_x86_platform_ipi_exit, int vector) {
        on_vec_exit(RTD_VEC_PLT);
        return 0;
}

SEC("tp_btf/thermal_apic_entry")
int BPF_PROG(tp_thermal_apic_entry, int vector) {
        return on_vec_entry(RTD_VEC_TRM);
}

SEC("tp_btf/thermal_apic_exit")
int BPF_PROG(tp_thermal_apic_exit, int vector) {
        on_vec_exit(RTD_VEC_TRM);
        return 0;
}

SEC("tp_btf/spurious_apic_entry")
int BPF_PROG(tp_spurious_apic_entry, int vector) {
        return on_vec_entry(RTD_VEC_SPU);
}

SEC("tp_btf/spurious_apic_exit")
int BPF_PROG(tp_spurious_apic_exit, int vector) {
        on_vec_exit(RTD_VEC_SPU);
        return 0;
}

SEC("tp_btf/error_apic_entry")
int BPF_PROG(tp_error_apic_entry, int vector) {
        return on_vec_entry(RTD_VEC_ERR);
}

SEC("tp_btf/error_apic_exit")
int BPF_PROG(tp_error_apic_exit, int vector) {
        on_vec_exit(RTD_VEC_ERR);
        return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(tp_sched_process_exec, struct task_struct *p) {
        return on_exec(true, p);
}

SEC("tp_btf/ipi_send_cpu")
int BPF_PROG(tp_ipi_send_cpu, unsigned int cpu, unsigned long callsite, void *callback) {
        return on_ipi_cpu(cpu, callsite, (__u64) callback);
}

SEC("tp_btf/ipi_send_cpumask")
int BPF_PROG(tp_ipi_send_cpumask, const struct cpumask *mask, unsigned long callsite, void *callback) {
        return on_ipi_mask(mask, callsite, (__u64) callback);
}

/* ---- raw_tp twins ---- */

SEC("raw_tp/local_timer_entry")
int BPF_PROG(raw_local_timer_entry, int vector) {
        return on_vec_entry(RTD_VEC_LOC);
}

SEC("raw_tp/local_timer_exit")
int BPF_PROG(raw_local_timer_exit, int vector) {
        return on_tick_exit(false);
}

SEC("raw_tp/reschedule_entry")
int BPF_PROG(raw_reschedule_entry, int vector) {
        return on_vec_entry(RTD_VEC_RES);
}

SEC("raw_tp/reschedule_exit")
int BPF_PROG(raw_reschedule_exit, int vector) {
        on_vec_exit(RTD_VEC_RES);
        return 0;
}

SEC("raw_tp/call_function_entry")
int BPF_PROG(raw_call_function_entry, int vector) {
        return on_vec_entry(RTD_VEC_CAL);
}

SEC("raw_tp/call_function_exit")
int BPF_PROG(raw_call_function_exit, int vector) {
        on_vec_exit(RTD_VEC_CAL);
        return 0;
}

SEC("raw_tp/call_function_single_entry")
int BPF_PROG(raw_call_function_single_entry, int vector) {
        return on_vec_entry(RTD_VEC_CAL);
}

SEC("raw_tp/call_function_single_exit")
int BPF_PROG(raw_call_function_single_exit, int vector) {
        on_vec_exit(RTD_VEC_CAL);
        return 0;
}

SEC("raw_tp/irq_work_entry")
int BPF_PROG(raw_irq_work_entry, int vector) {
        return on_vec_entry(RTD_VEC_IWI);
}

SEC("raw_tp/irq_work_exit")
int BPF_PROG(raw_irq_work_exit, int vector) {
        on_vec_exit(RTD_VEC_IWI);
        return 0;
}

SEC("raw_tp/x86_platform_ipi_entry")
int BPF_PROG(raw_x86_platform_ipi_entry, int vector) {
        return on_vec_entry(RTD_VEC_PLT);
}

SEC("raw_tp/x86_platform_ipi_exit")
int BPF_PROG(raw_x86_platform_ipi_exit, int vector) {
        on_vec_exit(RTD_VEC_PLT);
        return 0;
}

SEC("raw_tp/thermal_apic_entry")
int BPF_PROG(raw_thermal_apic_entry, int vector) {
        return on_vec_entry(RTD_VEC_TRM);
}

SEC("raw_tp/thermal_apic_exit")
int BPF_PROG(raw_thermal_apic_exit, int vector) {
        on_vec_exit(RTD_VEC_TRM);
        return 0;
}

SEC("raw_tp/spurious_apic_entry")
int BPF_PROG(raw_spurious_apic_entry, int vector) {
        return on_vec_entry(RTD_VEC_SPU);
}

SEC("raw_tp/spurious_apic_exit")
int BPF_PROG(raw_spurious_apic_exit, int vector) {
        on_vec_exit(RTD_VEC_SPU);
        return 0;
}

SEC("raw_tp/error_apic_entry")
int BPF_PROG(raw_error_apic_entry, int vector) {
        return on_vec_entry(RTD_VEC_ERR);
}

SEC("raw_tp/error_apic_exit")
int BPF_PROG(raw_error_apic_exit, int vector) {
        on_vec_exit(RTD_VEC_ERR);
        return 0;
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(raw_sched_process_exec, struct task_struct *p) {
        return on_exec(false, p);
}

SEC("raw_tp/ipi_send_cpu")
int BPF_PROG(raw_ipi_send_cpu, unsigned int cpu, unsigned long callsite, void *callback) {
        return on_ipi_cpu(cpu, callsite, (__u64) callback);
}

SEC("raw_tp/ipi_send_cpumask")
int BPF_PROG(raw_ipi_send_cpumask, const struct cpumask *mask, unsigned long callsite, void *callback) {
        return on_ipi_mask(mask, callsite, (__u64) callback);
}
