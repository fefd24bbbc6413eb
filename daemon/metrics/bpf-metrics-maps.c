/* SPDX-License-Identifier: MIT */
/* The BPF collector's hash maps copied into a Sample: per-IRQ counts, the intruder table, IPI senders.
 * Map fds only, no skeleton (bpf-metrics.c owns it). */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpf-metrics-maps.h"
#include "sched-metrics.h"
#include "shared/macro.h"

int bpf_maps_read_irqs(int fd, int nfd, unsigned n_possible, Sample *s) {
        _cleanup_free_ struct rtd_irq *vals = calloc(n_possible, sizeof(struct rtd_irq));
        uint32_t key, *prev = NULL;

        if (!vals)
                return -ENOMEM;
        while (bpf_map_get_next_key(fd, prev, &key) == 0) {
                IrqCounters *n, *q;
                struct rtd_irq_name name = {};

                prev = &key;
                if (bpf_map_lookup_elem(fd, &key, vals) < 0)
                        continue;
                n = reallocarray(s->irqs, s->n_irqs + 1, sizeof *s->irqs);
                if (!n)
                        return -ENOMEM;
                s->irqs = n;
                q = &s->irqs[s->n_irqs];
                *q = (IrqCounters) { .irq = key };
                q->count = calloc(s->n_cpus, sizeof(uint64_t));
                q->ns = calloc(s->n_cpus, sizeof(uint64_t));
                s->n_irqs++;
                if (!q->count || !q->ns)
                        return -ENOMEM;
                for (unsigned i = 0; i < s->n_cpus && i < n_possible; i++) {
                        q->count[i] = vals[i].count;
                        q->ns[i] = vals[i].ns;
                }
                if (bpf_map_lookup_elem(nfd, &key, &name) == 0)
                        (void) snprintf(q->name, sizeof q->name, "%.*s", RTD_IRQ_NAME, name.name);
        }
        return 0;
}

/* Every entry of the table; the running intruder's time is in it up to its last tick (intruder_fold()). */
int bpf_maps_read_intruders(int fd, Sample *s) {
        struct rtd_intruder_key key, *prev = NULL;

        while (bpf_map_get_next_key(fd, prev, &key) == 0) {
                struct rtd_intruder v;
                IntruderCounters *n;

                prev = &key;
                /* An entry made for a task already there when the reservation began, not run since. */
                if (bpf_map_lookup_elem(fd, &key, &v) < 0 || (v.count == 0 && v.ns == 0))
                        continue;
                n = reallocarray(s->intruders, s->n_intruders + 1, sizeof *n);
                if (!n)
                        return -ENOMEM;
                s->intruders = n;
                n[s->n_intruders] = (IntruderCounters) {
                        .cpu = key.cpu, .pid = key.pid, .tgid = v.tgid, .start_time = key.start_time,
                        .kind = v.kind, .ns = v.ns, .count = v.count,
                };
                (void) snprintf(n[s->n_intruders].comm, sizeof n->comm, "%.*s", (int) sizeof v.comm, v.comm);
                s->n_intruders++;
        }
        return 0;
}

int bpf_maps_read_ipis(int fd, Sample *s) {
        struct rtd_ipi_key key, *prev = NULL;

        while (bpf_map_get_next_key(fd, prev, &key) == 0) {
                struct rtd_ipi v;
                IpiCounters *n;

                prev = &key;
                if (bpf_map_lookup_elem(fd, &key, &v) < 0)
                        continue;
                n = reallocarray(s->ipis, s->n_ipis + 1, sizeof *n);
                if (!n)
                        return -ENOMEM;
                s->ipis = n;
                n[s->n_ipis] = (IpiCounters) {
                        .cpu = key.cpu, .callsite = key.callsite, .callback = key.callback, .count = v.count,
                        .sender_cpu = v.sender_cpu, .sender_pid = v.sender_pid,
                };
                (void) snprintf(n[s->n_ipis].sender_comm, sizeof n->sender_comm, "%.*s",
                                (int) sizeof v.sender_comm, v.sender_comm);
                s->n_ipis++;
        }
        return 0;
}

int bpf_maps_run_iter(struct bpf_program *p) {
        struct bpf_link *l = bpf_program__attach_iter(p, NULL);
        char buf[64];
        ssize_t n;
        int fd, r = 0;

        if (!l)
                return -errno;
        fd = bpf_iter_create(bpf_link__fd(l));
        if (fd < 0)
                r = -errno;
        else {
                /* The program prints nothing: reading to the end runs it over every task. */
                while ((n = read(fd, buf, sizeof buf)) > 0)
                        ;
                if (n < 0)
                        r = -errno;
                close(fd);
        }
        bpf_link__destroy(l);
        return r;
}

bool bpf_kernel_has_func(const struct btf *vmlinux, const char *name) {
        return vmlinux && btf__find_by_name_kind(vmlinux, name, BTF_KIND_FUNC) >= 0;
}

/* One program's run-time statistics (kernel.bpf_stats_enabled) by section name, per loaded program. */
int bpf_maps_read_progs(const struct bpf_object *obj, Sample *s) {
        struct bpf_program *p;

        bpf_object__for_each_program(p, obj) {
                struct bpf_prog_info info = {};
                uint32_t len = sizeof info;
                const char *sec;
                ProgCounters *n;
                int fd = bpf_program__fd(p);

                if (fd < 0 || !bpf_program__autoload(p))
                        continue;
                if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
                        continue;
                n = reallocarray(s->progs, s->n_progs + 1, sizeof *n);
                if (!n)
                        return -ENOMEM;
                s->progs = n;
                /* By hook ("sched_switch"), but iterators by name: both task iterators' hook is "task". */
                sec = bpf_program__section_name(p);
                sec = strchr(sec, '/') && !startswith(sec, "iter/") ? strchr(sec, '/') + 1 : bpf_program__name(p);
                s->progs[s->n_progs] = (ProgCounters) { .run_ns = info.run_time_ns, .run_count = info.run_cnt,
                                                        .misses = info.recursion_misses };
                (void) snprintf(s->progs[s->n_progs].name, sizeof s->progs[s->n_progs].name, "%s", sec);
                s->n_progs++;
        }
        return 0;
}
