/* SPDX-License-Identifier: MIT */
/* The interface between metrics.c and its two collectors: bpf-metrics.c (eBPF, or a stub when built
 * without BPF) and procfs-metrics.c (the fallback). A collector fills a Sample of cumulative counters. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "shared/cpuset.h"

#define METRICS_HIST_SLOTS 28           /* slot k: (2^(k-1), 2^k] µs; the last one is the overflow */
#define METRICS_NR_SOFTIRQS 10
#define METRICS_NR_VECTORS 8            /* LOC RES CAL IWI PLT TRM SPU ERR, as bpf/sched-metrics.h */
#define METRICS_VECTOR_NAMES { "LOC", "RES", "CAL", "IWI", "PLT", "TRM", "SPU", "ERR" }

/* What an intruder is. */
typedef enum IntruderKind {
        INTRUDER_USER = 0,
        INTRUDER_KERNEL = 1,
        INTRUDER_RTD = 2,
} IntruderKind;

typedef struct CpuCounters {
        uint64_t switches_voluntary;
        uint64_t switches_involuntary;
        uint64_t switches_total;        /* non-idle tasks switched out (procfs: timeslices) */
        uint64_t migrations_in;
        uint64_t migrations_out;
        uint64_t runq_hist[METRICS_HIST_SLOTS];
        uint64_t runq_count;
        uint64_t runq_sum_ns;
        uint64_t hardirq_count;
        uint64_t hardirq_ns;
        uint64_t softirq_count[METRICS_NR_SOFTIRQS];
        uint64_t softirq_ns[METRICS_NR_SOFTIRQS];
        uint64_t intrusions;
        uint64_t intrusion_ns;          /* sum of exact sum_exec_runtime deltas (a running one: to its last tick) */
        uint64_t other_ns;              /* intrusion time of intruders the table had no room for */
        uint64_t other_runs;
        uint64_t missed_events;         /* sched_switch events that never reached the BPF program */
        uint64_t unrecovered;           /* ... where an intruder's slice is not in the figures */
        uint64_t cpu_samples;           /* rtd's sampling program run on the CPU (one IPI each) */
        uint64_t vec_count[METRICS_NR_VECTORS];
        uint64_t vec_ns[METRICS_NR_VECTORS];    /* 0 when counted from /proc/interrupts */
        uint64_t vec_kernel[METRICS_NR_VECTORS];        /* the same rows of /proc/interrupts (BPF: since attach) */
        uint64_t vec_unpaired[METRICS_NR_VECTORS];      /* handlers whose exit the programs missed (no time) */
        uint64_t tlb_shootdowns;        /* /proc/interrupts' TLB row */
        /* The kernel's own counts (BPF: since attach): the numbered rows of /proc/interrupts summed, and
         * /proc/softirqs. Exact; the programs' counts above can fall short of them (docs/metrics.md). */
        uint64_t hardirq_kernel;
        uint64_t softirq_kernel[METRICS_NR_SOFTIRQS];
        uint64_t current_job;           /* job running now, 0 = none */
} CpuCounters;

typedef struct IrqCounters {
        unsigned irq;
        char name[32];
        uint64_t *count;                /* n_cpus entries */
        uint64_t *ns;                   /* n_cpus entries, NULL when unknown */
} IrqCounters;

typedef struct IntruderCounters {
        unsigned cpu;
        pid_t pid;                      /* the kernel's (initial PID namespace) */
        pid_t tgid;
        uint64_t start_time;            /* with pid, the task's identity (pids are reused) */
        IntruderKind kind;
        char comm[16];
        uint64_t ns;                    /* cumulative CPU time on that CPU */
        uint64_t count;                 /* runs */
} IntruderCounters;

typedef struct IpiCounters {
        unsigned cpu;                   /* target (reserved) */
        uint64_t callsite, callback;
        char site[64];                  /* callsite and callback as symbols, "?" if unknown */
        uint64_t count;
        unsigned sender_cpu;
        pid_t sender_pid;
        char sender_comm[16];
} IpiCounters;

typedef struct ProgCounters {
        char name[40];
        uint64_t run_ns;
        uint64_t run_count;
        uint64_t misses;                /* runs the kernel skipped (recursion_misses): events not counted */
} ProgCounters;

/* Which fields a collector can fill. */
typedef enum CollectorCaps {
        CAP_SWITCH_KIND = 1 << 0,       /* voluntary vs involuntary */
        CAP_MIGRATIONS = 1 << 1,
        CAP_RUNQ_HIST = 1 << 2,
        CAP_IRQ_TIME = 1 << 3,
        CAP_INTRUSIONS = 1 << 4,
        CAP_PROG_STATS = 1 << 5,
} CollectorCaps;

typedef struct Sample {
        uint64_t time_usec;             /* CLOCK_MONOTONIC, when reading began */
        uint64_t end_usec;              /* ... and ended: an event in between may or may not be in the sample */
        unsigned n_cpus;
        CpuCounters *cpus;
        IrqCounters *irqs;
        size_t n_irqs;
        IntruderCounters *intruders;
        size_t n_intruders;
        ProgCounters *progs;
        size_t n_progs;
        IpiCounters *ipis;
        size_t n_ipis;
        bool prog_stats_enabled;
        bool vectors_traced;            /* vec_* from irq_vectors tracepoints (count and time), else /proc/interrupts */
        unsigned hz;                    /* the kernel's CONFIG_HZ, 0 if unknown */
} Sample;

/* procfs-metrics.c: the architecture rows of /proc/interrupts (LOC, RES, ...) into s->cpus[].vec_kernel, TLB
 * into tlb_shootdowns. */
int procfs_read_vectors(int proc_fd, Sample *s);
/* ... and the numbered rows summed into hardirq_kernel, /proc/softirqs into softirq_kernel. */
int procfs_read_kernel_irqs(int proc_fd, Sample *s);

void sample_done(Sample *s);

typedef struct JobCounters {
        uint64_t switches_voluntary;
        uint64_t switches_involuntary;
        uint64_t preemptions;
        uint64_t migrations;
        uint64_t on_cpu_ns;
        uint64_t runq_count;
        uint64_t runq_sum_ns;
        uint64_t runq_max_ns;
        uint64_t hardirq_count;
        uint64_t hardirq_ns;
        uint64_t softirq_count;
        uint64_t softirq_ns;
        uint64_t tasks;
        uint64_t vec_count[METRICS_NR_VECTORS];
        uint64_t vec_ns[METRICS_NR_VECTORS];
} JobCounters;

/* A task waiting on a reserved CPU's run queue since since_usec (the starvation guard's input). */
typedef struct StarveWaiter {
        pid_t tid;                      /* as the kernel (BPF) names it */
        pid_t ns_tid;                   /* in rtd's PID namespace; 0 when it is not visible there */
        unsigned cpu;
        uint64_t since_usec;            /* CLOCK_MONOTONIC */
        bool kthread;
        char comm[16];
} StarveWaiter;

typedef struct Collector Collector;
typedef struct CollectorOps {
        const char *name;               /* "bpf" or "procfs" */
        unsigned caps;
        int (*read)(Collector *c, Sample *ret);
        void (*set_reserved)(Collector *c, const CpuSet *reserved);
        int (*track_task)(Collector *c, pid_t pid, uint64_t job_id, uint64_t cgroup_id);
        /* Optional: the worker pid is about to fork the process of job_id (its child is the job from birth). */
        int (*worker_job)(Collector *c, pid_t worker, uint64_t job_id);
        /* The job's counters; forget = drop them afterwards. -ENOENT if unknown. */
        int (*job_read)(Collector *c, uint64_t job_id, bool forget, JobCounters *ret);
        const char *(*attach_mode)(Collector *c);       /* "tp_btf", "raw_tp", or NULL */
        void (*set_program_stats)(Collector *c, bool on);       /* NULL: no programs to time */
        /* Starvation guard: note waiters on reserved CPUs or stop; NULL when the collector cannot. */
        int (*set_guard)(Collector *c, bool on);
        int (*read_waiters)(Collector *c, StarveWaiter **ret, size_t *ret_n);
        void (*free)(Collector *c);
} CollectorOps;

struct Collector {
        const CollectorOps *ops;
        unsigned n_cpus;
        int proc_fd;
};

/* bpf-metrics.c (or bpf-metrics-stub.c). On failure *ret_reason says why, for status. */
int bpf_collector_new(int proc_fd, unsigned intruder_table_size, Collector **ret, char **ret_reason);
/* What the eBPF collector could not trace on this kernel and what stands in ("irq_vectors: ..."); NULL = all. */
const char *bpf_collector_fallbacks(Collector *c);
/* procfs-metrics.c: always available where /proc is. */
int procfs_collector_new(int proc_fd, Collector **ret);

/* Shared by the collectors: the number of possible CPUs (the kernel's nr_cpu_ids). */
unsigned collector_possible_cpus(void);
