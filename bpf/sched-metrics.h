/* SPDX-License-Identifier: MIT */
/* Structures shared by sched-metrics.bpf.c and daemon/metrics/bpf-metrics.c: per-CPU counters, per-job
 * counters, task marks and the intrusion attribution keys. Only fixed-width types: the BPF side sees
 * vmlinux.h, user space <linux/types.h>. */
#pragma once

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define RTD_HIST_SLOTS 28               /* slot k: (2^(k-1), 2^k] µs, k = 0..26; slot 27: > 2^26 µs */
#define RTD_NR_SOFTIRQS 10              /* HI, TIMER, NET_TX, NET_RX, BLOCK, IRQ_POLL, TASKLET, SCHED, HRTIMER, RCU */
#define RTD_MAX_CPUS 1024               /* reserved_cpus[] size; CPUs beyond it are never "reserved" */
#define RTD_IRQ_NAME 32

/* What a task is to rtd: set by user space (metrics_track_task) and inherited on fork. */
enum {
        RTD_TASK_OTHER = 0,
        RTD_TASK_WORKER = 1,
        RTD_TASK_JOB = 2,
        RTD_TASK_DAEMON = 3,            /* rtd's own threads: intruders on a reserved CPU, of kind "rtd" */
};

/* What an intruder is (rtd_intruder.kind). */
enum {
        RTD_INTRUDER_USER = 0,
        RTD_INTRUDER_KERNEL = 1,        /* PF_KTHREAD */
        RTD_INTRUDER_RTD = 2,
};

/* Architecture interrupt vectors (x86 irq_vectors tracepoints), named as /proc/interrupts' rows. */
enum {
        RTD_VEC_LOC = 0,                /* local_timer: the tick and hrtimers */
        RTD_VEC_RES,                    /* reschedule */
        RTD_VEC_CAL,                    /* call_function + call_function_single */
        RTD_VEC_IWI,                    /* irq_work */
        RTD_VEC_PLT,                    /* x86_platform_ipi */
        RTD_VEC_TRM,                    /* thermal_apic */
        RTD_VEC_SPU,                    /* spurious_apic */
        RTD_VEC_ERR,                    /* error_apic */
        RTD_NR_VECTORS,
};
#define RTD_VEC_NAMES { "LOC", "RES", "CAL", "IWI", "PLT", "TRM", "SPU", "ERR" }
#define RTD_MAX_LISTED 64               /* reserved_list[]: CPUs whose intruder names exec refreshes */

/* Per-task state (task local storage on tp_btf, a pid-keyed hash on raw_tp). */
struct rtd_task {
        __u64 job_id;                   /* RTD_TASK_JOB only */
        __u64 wake_ns;                  /* stamp_wakeups only: when it became runnable, 0 = not waiting */
        __u32 kind;
        __u32 seen;                     /* jobs: the last_* figures below are valid (zeros = since creation) */
        __u32 synced;                   /* tp_btf: copied into the tid-keyed `marks` backstop */
        __u32 pad;
        /* jobs: the kernel's own per-task counters at the last switch-out the program saw */
        __u64 last_pcount;              /* sched_info.pcount */
        __u64 last_run_delay;           /* sched_info.run_delay */
        __u64 last_runtime;             /* se.sum_exec_runtime */
        __u64 last_nvcsw;
        __u64 last_nivcsw;
};

#define RTD_BLIND_SLOTS 32
#define RTD_ARRIVAL_SLOTS 16
#define RTD_ARRIVAL_BUSY 0xffffffffu    /* arr_pid of a slot being written */

/* Per-CPU counters (one ARRAY slot per possible CPU). Counters only grow; state fields at the end. */
struct rtd_cpu {
        __u64 switches_voluntary;
        __u64 switches_involuntary;
        __u64 migrations_in;            /* updated from other CPUs: atomic */
        __u64 migrations_out;
        __u64 runq_hist[RTD_HIST_SLOTS];
        __u64 runq_sum_ns;
        __u64 hardirq_count;
        __u64 hardirq_ns;
        __u64 softirq_count[RTD_NR_SOFTIRQS];
        __u64 softirq_ns[RTD_NR_SOFTIRQS];
        __u64 intrusions;               /* times a non-rtd task was switched in on this (reserved) CPU */
        __u64 intrusion_ns;             /* CPU time (sum_exec_runtime deltas) of those tasks */
        __u64 other_ns;                 /* the part of intrusion_ns of intruders the table had no room for */
        __u64 other_runs;
        __u64 missed_events;            /* sched_switch events that never reached the program (see on_switch) */
        __u64 unrecovered;              /* ... of which an intruder's slice could not be recovered exactly */
        __u64 vec_count[RTD_NR_VECTORS];
        __u64 vec_ns[RTD_NR_VECTORS];
        /* state of the current task */
        __u64 cur_start_time;           /* intruders: task->start_time (with the pid, the table key) */
        __u64 cur_start_runtime;        /* se.sum_exec_runtime at switch-in or at the last fold */
        __u64 cur_migrations;           /* intruders: se.nr_migrations at switch-in */
        __u32 table_used;               /* intruder table entries of this CPU */
        __u32 primed;                   /* a switch was seen: cur_pid is known */
        __u64 vec_start_ns;             /* the vector being handled began (0: none) */
        __u64 vec_start_vec;            /* ... and which one it is */
        __u64 vec_unpaired[RTD_NR_VECTORS];     /* handlers whose exit never reached us: time left out */
        __u64 cur_pcount;               /* its sched_info.pcount and run_delay at switch-in */
        __u64 cur_run_delay;
        __u64 cur_job_id;               /* job of the current task, 0 if none */
        __u32 cur_pid;
        __u32 cur_intruder;             /* current task is an intruder on a reserved CPU */
        __u64 hardirq_start_ns;
        __u64 softirq_start_ns;
        __u64 cur_arrivals;             /* intruders: its sched_info.pcount once its switch-in is done */
        __u64 cur_task;                 /* intruders: its task_struct (read fault-safe, checked by pid and start) */
        /* The current intruder left unseen and was moved to another CPU (sched_migrate_task, on any CPU):
         * its se.sum_exec_runtime then, which ends its slice here. Written by other CPUs, left_pid last. */
        __u64 left_start_time;
        __u64 left_runtime;
        __u32 left_pid;
        /* Intruders whose switch-out here was never reported (recover()): a later run of theirs here may be
         * wholly unseen, its time added by blind_sweep() at the next recover() or rtd's next sample. */
        __u32 blind_n;
        __u64 blind_task[RTD_BLIND_SLOTS];
        __u64 blind_start_time[RTD_BLIND_SLOTS];
        __u32 blind_pid[RTD_BLIND_SLOTS];
        __u32 blind_next;
        __u32 blind_pad;
        __u64 snapshots;                /* runs of rtd's sampling program here (one call-function IPI each) */
        /* Intruders moved onto this CPU (sched_migrate_task, on any CPU; arr_pid written last, 0 when free,
         * RTD_ARRIVAL_BUSY while written; a pending note keeps its slot, arrival_slot()):
         * their runtime and nr_migrations then, where their time here begins (intruder_arrived()). */
        __u64 arr_task[RTD_ARRIVAL_SLOTS];
        __u64 arr_start_time[RTD_ARRIVAL_SLOTS];
        __u64 arr_runtime[RTD_ARRIVAL_SLOTS];
        __u64 arr_migrations[RTD_ARRIVAL_SLOTS];
        __u32 arr_pid[RTD_ARRIVAL_SLOTS];
        __u32 arr_next;
        __u32 arr_pad;
};

/* Per-job counters, summed over the job's tasks on every CPU (atomic updates). */
struct rtd_job {
        __u64 switches_voluntary;
        __u64 switches_involuntary;
        __u64 preemptions;              /* involuntary switches to a task outside the job */
        __u64 migrations;
        __u64 on_cpu_ns;
        __u64 runq_count;
        __u64 runq_sum_ns;
        __u64 runq_max_ns;
        __u64 hardirq_count;            /* IRQs on its CPU while one of its tasks ran */
        __u64 hardirq_ns;
        __u64 softirq_count;
        __u64 softirq_ns;
        __u64 tasks;                    /* tasks that belonged to it (marked or forked) */
        __u64 vec_count[RTD_NR_VECTORS];        /* vectors on its CPU while one of its tasks ran */
        __u64 vec_ns[RTD_NR_VECTORS];
};

/* Intrusion attribution: cumulative CPU time per (CPU, task) on reserved CPUs. A task is its kernel pid
 * (init namespace) and start time, so a reused pid is a new entry. Entries are never deleted: at most
 * intruder_table_size per CPU, the rest is summed in rtd_cpu.other_*. */
struct rtd_intruder_key {
        __u32 cpu;
        __u32 pid;
        __u64 start_time;
};
struct rtd_intruder {
        __u64 ns;
        __u64 count;                    /* runs: switch-ins */
        __u32 kind;                     /* RTD_INTRUDER_* */
        __u32 tgid;
        char comm[16];                  /* at its last switch-in, or its last exec */
        __u64 end_runtime;              /* its se.sum_exec_runtime where its time here was last added */
        __u64 end_migrations;           /* ... and its se.nr_migrations then */
        __u64 end_epoch;                /* ... and the reservation then (reserve_epoch) */
};

/* A task already on a reserved CPU when the reservation began (keyed like an intruder, whose entry holds
 * where its time there begins): kept until it runs there or moves (sched-metrics-baseline.bpf.h). */
struct rtd_baseline {
        __u64 task;                     /* its task_struct, read fault-safe and checked by pid and start time */
        __u64 migrations;               /* its se.nr_migrations then */
        __u32 epoch;                    /* the reservation (reserve_epoch) */
        __u32 pad;
};

/* IPIs sent to reserved CPUs, by call site (ipi_send_cpu/ipi_send_cpumask, kernel >= 6.3). */
struct rtd_ipi_key {
        __u32 cpu;                      /* target */
        __u32 pad;
        __u64 callsite;
        __u64 callback;
};
struct rtd_ipi {
        __u64 count;
        __u32 sender_cpu;               /* of the last one */
        __u32 sender_pid;
        char sender_comm[16];
};

/* Hard IRQs: per-CPU (PERCPU_HASH keyed by IRQ number) count and time. */
struct rtd_irq {
        __u64 count;
        __u64 ns;
};
struct rtd_irq_name {
        char name[RTD_IRQ_NAME];
};

/* Starvation guard (daemon/metrics/guard.c): a task waiting on a reserved CPU's run queue, keyed by its global tid.
 * Noted at wakeup (or preemption) there, forgotten when it is switched in anywhere or exits. */
struct rtd_waiter {
        __u64 since_ns;                 /* bpf_ktime_get_ns() when it became runnable there */
        __u32 cpu;
        __u32 ns_pid;                   /* its tid in rtd's PID namespace, 0 when not visible there */
        __u32 kthread;                  /* 1: a kernel thread (PF_KTHREAD) */
        __u32 _pad;
        char comm[16];
};
