// SPDX-License-Identifier: (MIT OR GPL-2.0)
/* Reference programs for bench/bpf-overhead: what an empty tp_btf/sched_switch program, and one that only
 * reads the clock, cost on this machine. rtd's own program is judged against this floor. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

__u64 sink;

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_empty) {
        return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_clock) {
        sink = bpf_ktime_get_ns();
        return 0;
}
