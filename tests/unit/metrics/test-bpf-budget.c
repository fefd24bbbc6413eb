/* SPDX-License-Identifier: MIT */
/*
 * The kernel's verifier gives up on a program after 1,000,000 processed instructions, and then rtd falls
 * back to the procfs collector: no per-intruder time, no IRQ vectors. sched_switch once processed 878,665
 * (0.75 s of every start) because of inlined loops over per-CPU note slots. Each program here must stay
 * under half the limit on the running kernel, so a change that drifts towards it fails here, not in a user's
 * journal; and each must pass the verifier alone (a program rtd loads only on older kernels, the task
 * iterator of kernels < 6.7, was rejected there and took the whole object with it). Needs root and BPF
 * (skipped, exit 77, where it cannot load programs at all).
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched-metrics.skel.h"

#define VERIFIER_LIMIT 1000000L
#define BUDGET (VERIFIER_LIMIT / 2)

static char verifier_log[16 << 20];

/* Load one program alone (with its maps); its verifier's count of processed instructions, or -errno. */
static long processed_insns(const char *name, bool stamp_wakeups) {
        struct sched_metrics *skel = sched_metrics__open();
        struct bpf_program *p;
        const char *s;
        long n = -ENOENT;

        if (!skel)
                return -errno;
        skel->rodata->stamp_wakeups = stamp_wakeups;
        bpf_object__for_each_program(p, skel->obj) {
                bool want = strcmp(bpf_program__name(p), name) == 0;

                (void) bpf_program__set_autoload(p, want);
                if (want) {
                        verifier_log[0] = 0;
                        (void) bpf_program__set_log_buf(p, verifier_log, sizeof verifier_log);
                        (void) bpf_program__set_log_level(p, 4);        /* statistics only */
                }
        }
        if (sched_metrics__load(skel) < 0)
                n = -errno;
        else if ((s = strstr(verifier_log, "processed ")))
                n = strtol(s + strlen("processed "), NULL, 10);
        sched_metrics__destroy(skel);
        return n;
}

static int silent(enum libbpf_print_level level, const char *fmt, va_list ap) {
        return 0;
}

int main(void) {
        struct sched_metrics *skel;
        struct bpf_program *p;
        int failed = 0, checked = 0;

        if (geteuid() != 0) {
                printf("SKIP: needs root to load BPF programs\n");
                return 77;
        }
        libbpf_set_print(silent);
        skel = sched_metrics__open();
        if (!skel) {
                printf("SKIP: cannot open the BPF object\n");
                return 77;
        }
        bpf_object__for_each_program(p, skel->obj) {
                const char *name = bpf_program__name(p);
                bool is_switch = strstr(name, "sched_switch") != NULL;

                for (int stamp = 0; stamp <= (is_switch ? 1 : 0); stamp++) {
                        long n = processed_insns(name, stamp);

                        if (n == -E2BIG || n == -EACCES) {
                                /* The verifier gave up ("BPF program is too large") or rejected it: rtd
                                 * would then lose the whole object and fall back to procfs. */
                                printf("%-28s %s  FAIL\n", name, n == -E2BIG ? "over the verifier's limit" :
                                                                                "rejected by the verifier");
                                failed++;
                                continue;
                        }
                        if (n < 0) {
                                /* A tracepoint or kfunc this kernel lacks, or a variant rtd loads only with
                                 * another (the two task iterators): rtd does not load it here either. */
                                printf("%-28s not loadable alone here (%s)\n", name, strerror((int) -n));
                                continue;
                        }
                        checked++;
                        printf("%-28s%s %7ld processed instructions (budget %ld)%s\n", name,
                               stamp ? " +stamps" : "        ", n, BUDGET, n < BUDGET ? "" : "  FAIL");
                        failed += n >= BUDGET;
                }
        }
        sched_metrics__destroy(skel);
        if (!checked) {
                /* Not one program loads: the object itself fails here (an extern this kernel lacks, say),
                 * and so would rtd's whole collector. */
                printf("FAIL: no program of the object loads on this kernel\n");
                return 1;
        }
        printf("%d programs checked, %d failed\n", checked, failed);
        return failed ? 1 : 0;
}
