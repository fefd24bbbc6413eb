/* SPDX-License-Identifier: MIT */
/* What of the BPF collector the running kernel supports, found before load from its BTF, and the
 * sched-metrics object built for it. */
#pragma once

#include <stdbool.h>

struct sched_metrics;

/* The kfuncs the programs call (bpf_task_from_pid, bpf_task_release: kernel >= 6.2) are in vmlinux BTF. */
bool bpf_features_kfuncs(void);
/* The sched-metrics skeleton, opened on the object with kfunc calls or on its twin without (kernel < 6.2).
 * NULL with errno on failure; sched_metrics__destroy() frees it either way. */
struct sched_metrics *bpf_features_open(bool kfuncs);
