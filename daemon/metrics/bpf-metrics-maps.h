/* SPDX-License-Identifier: MIT */
/* The BPF collector's hash maps and program statistics copied into a Sample, and the task iterator run
 * (bpf-metrics-maps.c). Each returns 0 or -errno. */
#pragma once

#include <stdbool.h>

#include "collector.h"

/* The per-CPU `irqs` map and the handler names of `irq_names`: n_possible slots a value. */
int bpf_maps_read_irqs(int fd, int names_fd, unsigned n_possible, Sample *s);
/* Every entry of the `intruders` table. */
int bpf_maps_read_intruders(int fd, Sample *s);
/* The IPIs sent to reserved CPUs, by call site (named later: kallsyms). */
int bpf_maps_read_ipis(int fd, Sample *s);
/* The run-time statistics of every loaded program of obj, appended to s->progs. */
struct bpf_object;
int bpf_maps_read_progs(const struct bpf_object *obj, Sample *s);
/* Run a task iterator program once over every task, for what it writes into maps. */
struct bpf_program;
int bpf_maps_run_iter(struct bpf_program *p);
/* Whether the kernel's BTF (parsed once by the caller) has this function (a kfunc the kernel offers). */
struct btf;
bool bpf_kernel_has_func(const struct btf *vmlinux, const char *name);
