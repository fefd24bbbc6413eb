/* SPDX-License-Identifier: MIT */
/* Built with -Dbpf=disabled (or without libbpf/clang/bpftool): no eBPF collector, metrics.c uses procfs. */
#include <errno.h>
#include <string.h>

#include "collector.h"

int bpf_collector_new(int proc_fd, unsigned intruder_table_size, Collector **ret, char **ret_reason) {
        (void) proc_fd;
        (void) intruder_table_size;
        (void) ret;
        *ret_reason = strdup("rtd was built without BPF support (-Dbpf=disabled or libbpf/clang/bpftool missing)");
        return -EOPNOTSUPP;
}

const char *bpf_collector_fallbacks(Collector *c) {
        (void) c;
        return NULL;
}
