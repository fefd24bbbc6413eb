/* SPDX-License-Identifier: MIT */
/*
 * The kernel's verifier gives up on a program after 1,000,000 processed instructions, and then rtd falls
 * back to the procfs collector: no per-intruder time, no IRQ vectors. sched_switch once processed 878,665
 * (0.75 s of every start) because of inlined loops over per-CPU note slots. Each program here must stay
 * under half the limit on the running kernel, so a change that drifts towards it fails here, not in a user's
 * journal; and each must pass the verifier alone (a program rtd loads only on older kernels, the task
 * iterator of kernels < 6.7, was rejected there and took the whole object with it). Needs root and BPF
 * (skipped, exit 77, where it cannot load programs at all). The every-thread baseline's object
 * (bpf/sched-metrics-all.bpf.c) is checked too where rtd loads it: kernels with bpf_iter_task_new (6.7).
 */
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched-metrics.skel.h"
#include "sched-metrics-all.skel.h"

#define VERIFIER_LIMIT 1000000L
#define BUDGET (VERIFIER_LIMIT / 2)

static char verifier_log[16 << 20];

/* Load the one program `name` of obj alone (with its maps); its verifier's count of processed instructions,
 * or -errno. */
static long load_alone(struct bpf_object *obj, const char *name) {
        struct bpf_program *p;
        const char *s;

        bpf_object__for_each_program(p, obj) {
                bool want = strcmp(bpf_program__name(p), name) == 0;

                (void) bpf_program__set_autoload(p, want);
                if (want) {
                        verifier_log[0] = 0;
                        (void) bpf_program__set_log_buf(p, verifier_log, sizeof verifier_log);
                        (void) bpf_program__set_log_level(p, 4);        /* statistics only */
                }
        }
        if (bpf_object__load(obj) < 0)
                return -errno;
        if (!(s = strstr(verifier_log, "processed ")))
                return -ENOENT;
        return strtol(s + strlen("processed "), NULL, 10);
}

/* The main object, with or without wakeup stamps (the twin of sched_switch each makes). */
static long main_insns(const char *name, bool stamp_wakeups) {
        struct sched_metrics *skel = sched_metrics__open();
        long n;

        if (!skel)
                return -errno;
        skel->rodata->stamp_wakeups = stamp_wakeups;
        n = load_alone(skel->obj, name);
        sched_metrics__destroy(skel);
        return n;
}

/* The every-thread baseline's object (maps of its own here: rtd gives it the main object's, same types). */
static long all_insns(const char *name, bool stamp_wakeups) {
        struct sched_metrics_all *skel = sched_metrics_all__open();
        long n;

        if (!skel)
                return -errno;
        n = load_alone(skel->obj, name);
        sched_metrics_all__destroy(skel);
        return n;
}

static int silent(enum libbpf_print_level level, const char *fmt, va_list ap) {
        return 0;
}

/* Each program of obj, loaded alone by insns(); counts into *checked and *failed. */
static void check_object(struct bpf_object *obj, long (*insns)(const char *, bool), int *checked, int *failed) {
        struct bpf_program *p;

        bpf_object__for_each_program(p, obj) {
                const char *name = bpf_program__name(p);
                bool is_switch = strstr(name, "sched_switch") != NULL;

                for (int stamp = 0; stamp <= (is_switch ? 1 : 0); stamp++) {
                        long n = insns(name, stamp);

                        if (n == -E2BIG || n == -EACCES) {
                                /* The verifier gave up ("BPF program is too large") or rejected it: rtd
                                 * would then lose the whole object (the main one: the collector falls back
                                 * to procfs). */
                                printf("%-28s %s  FAIL\n", name, n == -E2BIG ? "over the verifier's limit" :
                                                                                "rejected by the verifier");
                                (*failed)++;
                                continue;
                        }
                        if (n < 0) {
                                /* A tracepoint this kernel lacks, or a variant rtd loads only with another:
                                 * rtd does not load it here either. */
                                printf("%-28s not loadable alone here (%s)\n", name, strerror((int) -n));
                                continue;
                        }
                        (*checked)++;
                        printf("%-28s%s %7ld processed instructions (budget %ld)%s\n", name,
                               stamp ? " +stamps" : "        ", n, BUDGET, n < BUDGET ? "" : "  FAIL");
                        *failed += n >= BUDGET;
                }
        }
}

int main(void) {
        struct sched_metrics *skel;
        struct sched_metrics_all *all;
        struct btf *vmlinux;
        bool open_coded;
        int failed = 0, checked = 0, main_checked;

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
        check_object(skel->obj, main_insns, &checked, &failed);
        sched_metrics__destroy(skel);
        if (!checked) {
                /* Not one program loads: the object itself fails here (an extern this kernel lacks, say),
                 * and so would rtd's whole collector. */
                printf("FAIL: no program of the object loads on this kernel\n");
                return 1;
        }
        main_checked = checked;

        /* The every-thread baseline: rtd opens its object only where the kernel has the open-coded task
         * iterator's kfuncs (bpf-baseline-all.c); there each of its programs must load, under budget. */
        vmlinux = btf__load_vmlinux_btf();
        open_coded = vmlinux && btf__find_by_name_kind(vmlinux, "bpf_iter_task_new", BTF_KIND_FUNC) >= 0;
        btf__free(vmlinux);
        all = sched_metrics_all__open();
        if (!all) {
                printf("FAIL: cannot open the every-thread baseline's BPF object\n");
                return 1;
        }
        if (open_coded) {
                check_object(all->obj, all_insns, &checked, &failed);
                if (checked == main_checked) {
                        printf("FAIL: the every-thread baseline's object loads nothing on this kernel, which "
                               "has its kfuncs\n");
                        failed++;
                }
        } else
                printf("%-28s not loaded by rtd here (no bpf_iter_task_new: kernel < 6.7)\n",
                       bpf_program__name(bpf_object__next_program(all->obj, NULL)));
        sched_metrics_all__destroy(all);
        printf("%d programs checked, %d failed\n", checked, failed);
        return failed ? 1 : 0;
}
