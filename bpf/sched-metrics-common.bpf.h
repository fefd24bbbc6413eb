/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/* What sched-metrics.bpf.c and sched-metrics-all.bpf.c (the every-thread baseline, an object of its own) both
 * define: the maps the second object takes over from the first (bpf_map__reuse_fd(), so its entries land in
 * the same tables), the globals user space sets in each, and the helpers the baseline needs. */
#ifndef RTD_SCHED_METRICS_COMMON_BPF_H
#define RTD_SCHED_METRICS_COMMON_BPF_H

/* Set before load ([Metrics] IntruderTableSize=): intruder table entries per reserved CPU. */
const volatile __u32 intruder_table_size = 64;

/* Written by user space through the mmapped .bss (in each object): which CPUs are reserved. */
__u8 reserved_cpus[RTD_MAX_CPUS];
__u32 reserve_epoch;                    /* bumped at each change of the mask */

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);                 /* set to the number of possible CPUs before load */
        __type(key, __u32);
        __type(value, struct rtd_cpu);
} cpus SEC(".maps");

/* tp_btf: task local storage (freed with the task, no capacity limit, cheap lookups). */
struct {
        __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
        __uint(map_flags, BPF_F_NO_PREALLOC);
        __type(key, int);
        __type(value, struct rtd_task);
} task_store SEC(".maps");

/*
 * tp_btf: rtd's own tasks (jobs, workers) again by tid. bpf_task_storage_get() in a tracing program gives
 * up (NULL) while a task-storage syscall on the same CPU was preempted halfway (a per-CPU busy count):
 * then the mark is looked up here instead, so no slice of a job is lost. Deleted at exit.
 */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 16384);
        __type(key, __u32);
        __type(value, struct rtd_task);
} marks SEC(".maps");

/* Not an LRU: an evicted entry would take its time with it. Sized intruder_table_size x CPUs at load. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 4096);
        __type(key, struct rtd_intruder_key);
        __type(value, struct rtd_intruder);
} intruders SEC(".maps");

/* Tasks already on a reserved CPU when its reservation began, until they run there or move
 * (sched-metrics-baseline.bpf.h). */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(map_flags, BPF_F_NO_PREALLOC);
        __uint(max_entries, 1024);
        __type(key, struct rtd_intruder_key);
        __type(value, struct rtd_baseline);
} baseline SEC(".maps");
__u32 baseline_noted;                   /* by the last reservation change */
__u32 baseline_full;                    /* ... and how many found the map full */

#define PF_KTHREAD 0x00200000

static __always_inline struct rtd_cpu *cpu_get(__u32 cpu) {
        return bpf_map_lookup_elem(&cpus, &cpu);
}

static __always_inline bool cpu_reserved(__u32 cpu) {
        __u32 idx = cpu & (RTD_MAX_CPUS - 1);

        /* Keep the mask: clang drops it after the bounds check, which it may test on another register
         * copy than the one indexing (an int CPU from sched_migrate_task), and the verifier refuses that. */
        barrier_var(idx);
        return cpu < RTD_MAX_CPUS && reserved_cpus[idx];
}

static __always_inline bool exempt(struct rtd_task *t) {
        return t && (t->kind == RTD_TASK_WORKER || t->kind == RTD_TASK_JOB);
}

#endif
