/* SPDX-License-Identifier: MIT */
/* The only file that touches the sched-metrics-all skeleton: the every-thread baseline, on the main object's
 * maps (bpf/sched-metrics-all.bpf.c says why it is an object of its own). */
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpf-baseline-all.h"
#include "bpf-metrics-maps.h"
#include "sched-metrics-all.skel.h"
#include "shared/macro.h"

struct BaselineAll {
        struct sched_metrics_all *skel;
};

static bool kernel_has_kfuncs(const struct btf *vmlinux) {
        return bpf_kernel_has_func(vmlinux, "bpf_iter_task_new") &&
               bpf_kernel_has_func(vmlinux, "bpf_iter_task_next") &&
               bpf_kernel_has_func(vmlinux, "bpf_iter_task_destroy") &&
               bpf_kernel_has_func(vmlinux, "bpf_iter_task");   /* the iter/task target it runs from */
}

const char *baseline_all_unusable(bool btf, const struct btf *vmlinux) {
        const char *e = getenv("RTD_BPF_EVERY_THREAD");

        if (!btf)
                return "no BTF task iterator";
        if (!kernel_has_kfuncs(vmlinux))
                return "no bpf_iter_task_new, kernel < 6.7";
        if (e && streq(e, "0"))
                return "left out by RTD_BPF_EVERY_THREAD=0";
        return NULL;
}

char *baseline_all_instead(const char *why, uint32_t ns_level) {
        char *s = NULL;

        /* No "; ": rtctl status splits the fallbacks there. */
        if (asprintf(&s, "%s: tasks already on a reserved CPU are noted from rtd's PID namespace only%s", why,
                     ns_level == 0 ? ", which is every thread while rtd runs in the initial one" : "") < 0)
                return NULL;
        return s;
}

/* Every map of its own but .bss/.rodata is the main object's, by name: its notes land in the same tables. */
static int share_maps(struct sched_metrics_all *skel, const struct bpf_object *main) {
        struct bpf_map *m;

        bpf_object__for_each_map(m, skel->obj) {
                struct bpf_map *theirs;

                if (bpf_map__is_internal(m))
                        continue;
                theirs = bpf_object__find_map_by_name(main, bpf_map__name(m));
                if (!theirs || bpf_map__fd(theirs) < 0)
                        return -ENOENT;
                if (bpf_map__reuse_fd(m, bpf_map__fd(theirs)) < 0)
                        return -errno;
        }
        return 0;
}

int baseline_all_new(const struct bpf_object *main, uint32_t intruder_table_size, BaselineAll **ret) {
        BaselineAll *a = calloc(1, sizeof *a);
        int r;

        if (!a)
                return -ENOMEM;
        a->skel = sched_metrics_all__open();
        if (!a->skel) {
                r = -errno;
                goto fail;
        }
        a->skel->rodata->intruder_table_size = intruder_table_size;
        r = share_maps(a->skel, main);
        if (r >= 0)
                r = sched_metrics_all__load(a->skel);
        if (r < 0)
                goto fail;
        *ret = a;
        return 0;
fail:
        baseline_all_free(a);
        return r;
}

int baseline_all_run(BaselineAll *a, const uint8_t *reserved_cpus, size_t n, uint32_t epoch,
                     uint32_t *ret_noted, uint32_t *ret_full) {
        int r;

        /* Its own .bss: the main object's mask and epoch, as they are now. */
        memcpy(a->skel->bss->reserved_cpus, reserved_cpus, MIN(n, sizeof a->skel->bss->reserved_cpus));
        a->skel->bss->reserve_epoch = epoch;
        a->skel->bss->baseline_noted = a->skel->bss->baseline_full = 0;
        r = bpf_maps_run_iter(a->skel->progs.baseline_all);
        if (r < 0)
                return r;
        *ret_noted = a->skel->bss->baseline_noted;
        *ret_full = a->skel->bss->baseline_full;
        return 0;
}

const struct bpf_object *baseline_all_object(BaselineAll *a) {
        return a ? a->skel->obj : NULL;
}

BaselineAll *baseline_all_free(BaselineAll *a) {
        if (a) {
                sched_metrics_all__destroy(a->skel);
                free(a);
        }
        return NULL;
}
