/* SPDX-License-Identifier: MIT */
/* The every-thread baseline (bpf/sched-metrics-all.bpf.c), a BPF object of its own beside the main one, whose
 * maps it shares: loaded only where the kernel has the open-coded task iterator (6.7). Each returns 0 or
 * -errno. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct btf;
struct bpf_object;
typedef struct BaselineAll BaselineAll;

/* Why the object cannot be used here (btf: the collector runs its tp_btf programs; vmlinux parsed once by
 * the caller), or NULL when it can. RTD_BPF_EVERY_THREAD=0 leaves it out (a test switch). */
const char *baseline_all_unusable(bool btf, const struct btf *vmlinux);
/* The named fallback's text: what stands in for it, given why and rtd's PID namespace depth (0: initial). */
char *baseline_all_instead(const char *why, uint32_t ns_level);
/* Open and load it on the loaded main object's maps. */
int baseline_all_new(const struct bpf_object *main, uint32_t intruder_table_size, BaselineAll **ret);
/* Note every thread now on a reserved CPU (the mask and epoch as the main object has them). */
int baseline_all_run(BaselineAll *a, const uint8_t *reserved_cpus, size_t n, uint32_t epoch,
                     uint32_t *ret_noted, uint32_t *ret_full);
/* Its program, for the cost figures (bpf-metrics.c reads every loaded program's run time). */
const struct bpf_object *baseline_all_object(BaselineAll *a);
BaselineAll *baseline_all_free(BaselineAll *a);
