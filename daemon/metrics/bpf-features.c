/* SPDX-License-Identifier: MIT */
/*
 * Kernel feature detection for the BPF collector, the libbpf way: look in the kernel's BTF before load.
 *
 * Missing tracepoints are handled per program (bpf-metrics.c turns their autoload off). A missing kfunc
 * cannot be: libbpf resolves every extern of the object, and libbpf 1.1 (Debian 12's) searches module
 * BTFs for one that vmlinux lacks, which needs CAP_SYS_ADMIN (BPF_BTF_GET_NEXT_ID); rtd.service does not
 * have it, so the whole load failed with EINVAL on Debian 12's 6.1 kernel. Kernels without the kfuncs get
 * sched-metrics-nokf instead: the same source built without them (bpf/meson.build, RTD_NO_KFUNCS).
 */
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>

#include "bpf-features.h"
#include "sched-metrics-nokf.skel.h"
#include "sched-metrics.skel.h"

/* One source, the same maps, programs and globals: one skeleton type opens both objects. */
_Static_assert(sizeof(struct sched_metrics) == sizeof(struct sched_metrics_nokf),
               "sched-metrics and sched-metrics-nokf must differ only in their kfunc calls");

bool bpf_features_kfuncs(void) {
        struct btf *vmlinux = btf__load_vmlinux_btf();
        bool r;

        if (!vmlinux)
                return false;   /* no BTF: bpf-metrics.c gave up before */
        r = btf__find_by_name_kind(vmlinux, "bpf_task_from_pid", BTF_KIND_FUNC) > 0 &&
            btf__find_by_name_kind(vmlinux, "bpf_task_release", BTF_KIND_FUNC) > 0;
        btf__free(vmlinux);
        return r;
}

struct sched_metrics *bpf_features_open(bool kfuncs) {
        struct sched_metrics *obj;
        int r;

        if (kfuncs)
                return sched_metrics__open();
        /* sched_metrics__open() with the other object's bytes. */
        obj = calloc(1, sizeof *obj);
        if (!obj) {
                errno = ENOMEM;
                return NULL;
        }
        r = sched_metrics__create_skeleton(obj);
        if (r >= 0) {
                obj->skeleton->data = (void *) sched_metrics_nokf__elf_bytes(&obj->skeleton->data_sz);
                r = bpf_object__open_skeleton(obj->skeleton, NULL);
        }
        if (r < 0) {
                sched_metrics__destroy(obj);
                errno = -r;
                return NULL;
        }
        return obj;
}
