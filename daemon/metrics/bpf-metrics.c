/* SPDX-License-Identifier: MIT */
/* The eBPF collector: the only file that touches the sched-metrics skeleton. Loads and attaches the
 * programs (tp_btf, or the raw_tp twins), holds the BPF run-time statistics fd, and copies the maps into
 * a Sample when metrics.c's timer asks. */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "collector.h"
#include "bpf-baseline-all.h"
#include "bpf-metrics-maps.h"
#include "kallsyms.h"
#include "kernel-counters.h"
#include "sched-metrics.h"
#include "sched-metrics.skel.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "shared/macro.h"

typedef struct BpfCollector {
        Collector base;
        struct sched_metrics *skel;
        bool btf;                       /* tp_btf programs + task storage; else raw_tp + task_hash */
        bool stamp;                     /* sched_wakeup programs needed for run-queue latency */
        bool guard;                     /* starvation guard on: sched_wakeup programs attached for it */
        int stats_fd;                   /* BPF_ENABLE_STATS: run-time stats stay on while it is open */
        unsigned n_possible;            /* libbpf's view: per-CPU map values have this many slots */
        bool vectors_traced;            /* the irq_vectors programs are loaded */
        char *fallbacks;                /* what this kernel cannot trace, and what stands in */
        Symbols syms;                   /* kernel symbols of IPI call sites seen so far */
        KernelCounters kernel;          /* the kernel's own counters, from when the programs were attached */
        unsigned sample_errors;         /* sample_cpu runs that failed (logged once) */
        BaselineAll *all;               /* the every-thread baseline's object (kernel >= 6.7), or NULL */
        bool all_pending;               /* ... to be loaded at the first reservation */
        unsigned table_size;            /* [Metrics] IntruderTableSize= */
        uint32_t ns_level;              /* rtd's PID namespace's depth (0: the initial one) */
} BpfCollector;

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap) {
        char buf[512];

        /* libbpf's messages are verbose and mostly debug; the load failure itself is logged by metrics.c. */
        if (level == LIBBPF_DEBUG && log_get_max_level() < LOG_DEBUG)
                return 0;
        (void) vsnprintf(buf, sizeof buf, fmt, ap);
        buf[strcspn(buf, "\n")] = 0;
        log_debug("%s", buf);
        return 0;
}

static uint64_t monotonic_ns(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);     /* the clock bpf_ktime_get_ns() reads */
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/*
 * Does the kernel's BTF have this tracepoint (its btf_trace_NAME typedef, what libbpf attaches tp_btf by)?
 * One parsed copy of the kernel's BTF for every question: libbpf_find_vmlinux_btf_id() parses all of
 * /sys/kernel/btf/vmlinux on each call, 13 ms here, and rtd asks some twenty times at every start.
 */
static bool tracepoint_in_btf(const struct btf *vmlinux, const char *name) {
        char type[128];

        if (!vmlinux || snprintf(type, sizeof type, "btf_trace_%s", name) >= (int) sizeof type)
                return false;
        return btf__find_by_name_kind(vmlinux, type, BTF_KIND_TYPEDEF) >= 0;
}

static bool tp_btf_usable(const struct btf *vmlinux) {
        /* Same probe as libbpf-tools' probe_tp_btf(): the BTF id of the tracepoint's btf_trace_ type. */
        if (!tracepoint_in_btf(vmlinux, "sched_switch"))
                return false;
        return libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) == 1;
}

/* A tracepoint this kernel has (its BTF type), for the optional programs. */
static bool tracepoint_known(const struct btf *vmlinux, const char *sec) {
        const char *tp = strchr(sec, '/');
        return tp && tracepoint_in_btf(vmlinux, tp + 1);
}

/* The optional hooks by tracepoint prefix and what stands in when the kernel lacks them. */
static const struct {
        const char *tp, *what, *instead;
} optional_tps[] = {
        { "/local_timer_", "irq_vectors", "LOC/RES/CAL/IWI counts from /proc/interrupts, no time" },
        { "/reschedule_", "irq_vectors", NULL },
        { "/call_function", "irq_vectors", NULL },
        { "/irq_work_", "irq_vectors", NULL },
        { "/x86_platform_ipi_", "irq_vectors", NULL },
        { "/thermal_apic_", "irq_vectors", NULL },
        { "/spurious_apic_", "irq_vectors", NULL },
        { "/error_apic_", "irq_vectors", NULL },
        { "/sched_process_exec", "sched_process_exec", "intruder names refreshed at their next run only" },
        { "/ipi_send_cpu", "ipi_send_cpu", "IPI senders not attributed (kernel < 6.3)" },
};

static void note_fallback(BpfCollector *b, const char *what, const char *instead) {
        char *n = NULL;

        if (!instead || (b->fallbacks && strstr(b->fallbacks, what)))
                return;
        if (asprintf(&n, "%s%s%s: not traced (%s)", strempty(b->fallbacks), b->fallbacks ? "; " : "", what,
                     instead) < 0)
                return;
        free(b->fallbacks);
        b->fallbacks = n;
}

static void choose_programs(BpfCollector *b, const struct btf *vmlinux) {
        struct bpf_program *p;
        /* /proc/PID/schedstat exists iff CONFIG_SCHED_INFO: then sched_switch reads the kernel's own
         * run-queue delay and the (hot) sched_wakeup programs are not needed at all. */
        bool stamp = access("/proc/self/schedstat", F_OK) < 0 || getenv("RTD_BPF_WAKEUP_STAMPS");

        b->skel->rodata->stamp_wakeups = stamp;
        b->stamp = stamp;
        /* The sched_wakeup programs are loaded anyway: the starvation guard attaches them when it is on. */
        bpf_object__for_each_program(p, b->skel->obj) {
                const char *sec = bpf_program__section_name(p);
                bool is_btf = startswith(sec, "tp_btf/");
                /* The wakeup programs feed the starvation guard as well as run-queue latency: always loaded. */
                bool load = is_btf == b->btf || p == b->skel->progs.sample_cpu;

                /* The baseline of tasks on a CPU as it is reserved: a task iterator (kernel >= 5.8, BTF),
                 * over rtd's PID namespace (the one the iterator walks). */
                if (p == b->skel->progs.baseline_tasks)
                        /* The task iterator's target, as libbpf finds it for SEC("iter/task"). */
                        load = b->btf && bpf_kernel_has_func(vmlinux, "bpf_iter_task");

                for (size_t i = 0; load && i < ELEMENTSOF(optional_tps); i++)
                        if (strstr(sec, optional_tps[i].tp) && !tracepoint_known(vmlinux, sec)) {
                                load = false;
                                note_fallback(b, optional_tps[i].what, optional_tps[i].instead);
                        }
                (void) bpf_program__set_autoload(p, load);
        }
        b->vectors_traced = !b->fallbacks || !strstr(b->fallbacks, "irq_vectors");
        if (b->btf)
                (void) bpf_map__set_max_entries(b->skel->maps.task_hash, 1);     /* unused: keep it tiny */
        else {
                (void) bpf_map__set_max_entries(b->skel->maps.marks, 1);
                (void) bpf_map__set_autocreate(b->skel->maps.task_store, false);
        }
}

static void every_thread_fallback(BpfCollector *b, const char *why) {
        _cleanup_free_ char *instead = baseline_all_instead(why, b->ns_level);

        if (instead)
                note_fallback(b, "every-thread baseline", instead);
}

/* On the loaded main object's maps. Never fatal: the main object is unaffected, and the fallback is named. */
static void every_thread_load(BpfCollector *b) {
        char why[128];
        int r;

        b->all_pending = false;
        r = baseline_all_new(b->skel->obj, b->table_size, &b->all);
        if (r >= 0)
                return;
        log_warning_errno(r, "Cannot load the every-thread baseline's BPF object, the tasks already on a reserved "
                          "CPU are noted from rtd's PID namespace only: %m");
        (void) snprintf(why, sizeof why, "cannot load its object: %s", strerror(-r));
        every_thread_fallback(b, why);
}

static const char *attach_mode(Collector *c) {
        return ((BpfCollector *) c)->btf ? "tp_btf" : "raw_tp";
}

static void bpf_set_reserved(Collector *c, const CpuSet *reserved) {
        BpfCollector *b = (BpfCollector *) c;

        /* Before the mask changes: the walk then follows it at once (loading takes tens of ms). */
        if (b->all_pending && !cpuset_is_empty(reserved))
                every_thread_load(b);

        /* .bss is mmapped: the programs see the new mask on their next run. */
        unsigned n = 0;

        /* The list first: a CPU newly in the mask is then listed already. */
        CPUSET_FOREACH(cpu, reserved)
                if (n < RTD_MAX_LISTED && cpu < RTD_MAX_CPUS)
                        b->skel->bss->reserved_list[n++] = cpu;
        b->skel->bss->n_listed = n;
        for (unsigned i = 0; i < RTD_MAX_CPUS; i++)
                b->skel->bss->reserved_cpus[i] = cpuset_isset(reserved, i);
        /* Time a task ran on a CPU while it was not reserved is no intrusion (intruder_begin()). */
        b->skel->bss->reserve_epoch++;
        /* Where the tasks already there stand now: their time from here is exact even if rtd never sees
         * them arrive (bpf/sched-metrics-baseline.bpf.h). Every thread where the kernel lets rtd walk them
         * all, else rtd's PID namespace's (named in the fallbacks). */
        struct bpf_program *it = b->skel->progs.baseline_tasks;
        if (b->all) {
                uint32_t noted = 0, full = 0;
                int r = baseline_all_run(b->all, b->skel->bss->reserved_cpus, sizeof b->skel->bss->reserved_cpus,
                                         b->skel->bss->reserve_epoch, &noted, &full);

                if (r >= 0) {
                        log_debug("Noted %u threads already on the reserved CPUs (%u found the table full)",
                                  noted, full);
                        return;
                }
                log_warning_errno(r, "Cannot note every thread already on the reserved CPUs, noting those of "
                                  "rtd's PID namespace instead: %m");
        }
        if (bpf_program__fd(it) >= 0) {
                int r;

                b->skel->bss->baseline_noted = b->skel->bss->baseline_full = 0;
                r = bpf_maps_run_iter(it);
                if (r < 0)
                        log_warning_errno(r, "Cannot note the tasks already on the reserved CPUs, runs of them "
                                          "no event shows before rtd first sees them are not counted: %m");
                else
                        log_debug("Noted %u tasks already on the reserved CPUs (%u found the table full)",
                                  b->skel->bss->baseline_noted, b->skel->bss->baseline_full);
        }
}

/* The sched_wakeup programs' links, tp_btf or raw_tp as loaded. */
static struct bpf_link **wakeup_link(BpfCollector *b, bool new, struct bpf_program **ret_prog) {
        struct sched_metrics *k = b->skel;

        if (b->btf) {
                *ret_prog = new ? k->progs.tp_sched_wakeup_new : k->progs.tp_sched_wakeup;
                return new ? &k->links.tp_sched_wakeup_new : &k->links.tp_sched_wakeup;
        }
        *ret_prog = new ? k->progs.raw_sched_wakeup_new : k->progs.raw_sched_wakeup;
        return new ? &k->links.raw_sched_wakeup_new : &k->links.raw_sched_wakeup;
}

/* Attach or detach them: every wakeup on the machine runs them, so only while someone needs them. */
static int wakeups_attach(BpfCollector *b, bool on) {
        for (int i = 0; i < 2; i++) {
                struct bpf_program *p;
                struct bpf_link **l = wakeup_link(b, i, &p);

                if (on && !*l) {
                        *l = bpf_program__attach(p);
                        if (!*l) {
                                int r = -errno;
                                *l = NULL;
                                return r;
                        }
                } else if (!on && *l) {
                        bpf_link__destroy(*l);
                        *l = NULL;
                }
        }
        return 0;
}

static int bpf_set_guard(Collector *c, bool on) {
        BpfCollector *b = (BpfCollector *) c;
        int fd = bpf_map__fd(b->skel->maps.waiters);
        uint32_t key, next;
        int r;

        if (on == b->guard)
                return 0;
        if (on) {
                r = wakeups_attach(b, true);
                if (r < 0)
                        return r;
        }
        b->skel->bss->guard_on = on;
        b->guard = on;
        if (on)
                return 0;
        if (!b->stamp)
                (void) wakeups_attach(b, false);
        /* Entries left now would look old when the guard comes back. */
        while (bpf_map_get_next_key(fd, NULL, &next) == 0) {
                key = next;
                if (bpf_map_delete_elem(fd, &key) < 0)
                        break;
        }
        return 0;
}

static int bpf_read_waiters(Collector *c, StarveWaiter **ret, size_t *ret_n) {
        BpfCollector *b = (BpfCollector *) c;
        int fd = bpf_map__fd(b->skel->maps.waiters);
        _cleanup_free_ StarveWaiter *v = NULL;
        size_t n = 0;
        uint32_t key, *prev = NULL;

        /* Bounded: the map holds at most max_entries, and a walk that restarts (a key deleted under it)
         * is cut off rather than looping. */
        for (unsigned i = 0; i < bpf_map__max_entries(b->skel->maps.waiters) &&
                             bpf_map_get_next_key(fd, prev, &key) == 0; i++) {
                struct rtd_waiter w;

                prev = &key;
                if (bpf_map_lookup_elem(fd, &key, &w) < 0)
                        continue;
                StarveWaiter *t = reallocarray(v, n + 1, sizeof *v);
                if (!t)
                        return -ENOMEM;
                v = t;
                v[n] = (StarveWaiter){ .tid = (pid_t) key, .ns_tid = (pid_t) w.ns_pid, .cpu = w.cpu,
                                       .since_usec = w.since_ns / 1000, .kthread = w.kthread != 0 };
                memcpy(v[n].comm, w.comm, sizeof v[n].comm);
                v[n].comm[sizeof v[n].comm - 1] = 0;
                n++;
        }
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

static int pidfd_open_(pid_t pid) {
        return (int) syscall(SYS_pidfd_open, pid, 0);
}

/* pid's mark now (task storage by pidfd, or the raw_tp hash), -errno if none. */
static int mark_get(BpfCollector *b, pid_t pid, struct rtd_task *ret) {
        if (b->btf) {
                _cleanup_close_ int fd = pidfd_open_(pid);
                if (fd < 0)
                        return -errno;
                return bpf_map_lookup_elem(bpf_map__fd(b->skel->maps.task_store), &fd, ret) < 0 ? -errno : 0;
        }
        uint32_t key = pid;
        return bpf_map_lookup_elem(bpf_map__fd(b->skel->maps.task_hash), &key, ret) < 0 ? -errno : 0;
}

static int mark_set(BpfCollector *b, pid_t pid, const struct rtd_task *v) {
        int r;

        if (b->btf) {
                /* Task storage is keyed by a pidfd from user space. */
                _cleanup_close_ int fd = pidfd_open_(pid);
                if (fd < 0)
                        return -errno;
                /* Not into the tid-keyed `marks` backstop: inside a PID namespace `pid` is not the kernel's
                 * tid and could name another task. The programs copy the mark there when they first see
                 * the task (rtd_task.synced). */
                r = bpf_map_update_elem(bpf_map__fd(b->skel->maps.task_store), &fd, v, BPF_ANY);
        } else {
                uint32_t key = pid;
                r = bpf_map_update_elem(bpf_map__fd(b->skel->maps.task_hash), &key, v, BPF_ANY);
        }
        return r < 0 ? -errno : 0;
}

/* The job's entry, made before its first task can add to it. */
static int job_entry(BpfCollector *b, uint64_t job_id, bool count_task) {
        struct rtd_job zero = { .tasks = count_task };
        int jfd = bpf_map__fd(b->skel->maps.jobs);

        if (bpf_map_update_elem(jfd, &job_id, &zero, BPF_NOEXIST) < 0) {
                struct rtd_job cur;
                if (errno != EEXIST)
                        return -errno;
                if (count_task && bpf_map_lookup_elem(jfd, &job_id, &cur) == 0) {
                        cur.tasks++;
                        (void) bpf_map_update_elem(jfd, &job_id, &cur, BPF_EXIST);
                }
        }
        return 0;
}

/* The worker's mark names the job it forks next: the fork program makes the child that job's from birth. */
static int bpf_worker_job(Collector *c, pid_t worker, uint64_t job_id) {
        BpfCollector *b = (BpfCollector *) c;
        struct rtd_task v = { .kind = RTD_TASK_WORKER, .job_id = job_id };
        int r;

        r = job_entry(b, job_id, false);
        return r < 0 ? r : mark_set(b, worker, &v);
}

static int bpf_track_task(Collector *c, pid_t pid, uint64_t job_id, uint64_t cgroup_id) {
        BpfCollector *b = (BpfCollector *) c;
        struct rtd_task v = {
                .job_id = job_id,
                .kind = job_id ? RTD_TASK_JOB : RTD_TASK_WORKER,
        };

        /* rtd itself: its threads are intruders of kind "rtd" on a reserved CPU, the processes it forks
         * (workers) are not intruders (the fork program gives them the worker mark). */
        if (!job_id && pid == getpid())
                v.kind = RTD_TASK_DAEMON;
        int r;

        /* Jobs are keyed by their process tree (fork inherits the mark); cgroup_id is informational. */
        (void) cgroup_id;
        /* A job's process was forked for it: its figures count from its creation, as /proc/PID/status
         * does, however late this mark lands (after exec, on a busy housekeeping CPU). The programs add
         * the deltas of the kernel's per-task counters from these zeros at each switch-out they see. */
        v.seen = job_id != 0;
        if (job_id) {
                struct rtd_task cur;

                /* Forked by a worker that knew its job (bpf_worker_job): marked since birth, counted. */
                if (mark_get(b, pid, &cur) == 0 && cur.kind == RTD_TASK_JOB && cur.job_id == job_id)
                        return 0;
                r = job_entry(b, job_id, true);
                if (r < 0)
                        return r;
        }
        return mark_set(b, pid, &v);
}

static int bpf_job_read(Collector *c, uint64_t job_id, bool forget, JobCounters *ret) {
        BpfCollector *b = (BpfCollector *) c;
        int fd = bpf_map__fd(b->skel->maps.jobs);
        struct rtd_job v;

        if (bpf_map_lookup_elem(fd, &job_id, &v) < 0)
                return -errno;
        if (forget)
                (void) bpf_map_delete_elem(fd, &job_id);
        *ret = (JobCounters) {
                .switches_voluntary = v.switches_voluntary,
                .switches_involuntary = v.switches_involuntary,
                .preemptions = v.preemptions,
                .migrations = v.migrations,
                .on_cpu_ns = v.on_cpu_ns,
                .runq_count = v.runq_count,
                .runq_sum_ns = v.runq_sum_ns,
                .runq_max_ns = v.runq_max_ns,
                .hardirq_count = v.hardirq_count,
                .hardirq_ns = v.hardirq_ns,
                .softirq_count = v.softirq_count,
                .softirq_ns = v.softirq_ns,
                .tasks = v.tasks,
        };
        memcpy(ret->vec_count, v.vec_count, sizeof ret->vec_count);
        memcpy(ret->vec_ns, v.vec_ns, sizeof ret->vec_ns);
        return 0;
}

/* rtd's PID namespace: its depth below the initial one (NS_GET_PARENT until EPERM) and inode number. */
static void pid_namespace_of_self(uint32_t *ret_level, uint32_t *ret_inum) {
        _cleanup_close_ int fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
        struct stat st;
        uint32_t level = 0;

        if (fd < 0 || fstat(fd, &st) < 0)
                return;
        *ret_inum = (uint32_t) st.st_ino;
        for (int cur = fcntl(fd, F_DUPFD_CLOEXEC, 3); cur >= 0 && level < 32; level++) {
                int parent = ioctl(cur, NS_GET_PARENT);
                safe_close(cur);
                cur = parent;
                if (cur < 0)
                        break;
        }
        *ret_level = level;
}

static int read_cpus(BpfCollector *b, Sample *s) {
        int fd = bpf_map__fd(b->skel->maps.cpus);

        for (unsigned i = 0; i < s->n_cpus; i++) {
                CpuCounters *o = &s->cpus[i];
                struct rtd_cpu v;
                uint32_t key = i;

                if (bpf_map_lookup_elem(fd, &key, &v) < 0)
                        return -errno;
                o->switches_voluntary = v.switches_voluntary;
                o->switches_involuntary = v.switches_involuntary;
                o->switches_total = v.switches_voluntary + v.switches_involuntary;
                o->migrations_in = v.migrations_in;
                o->migrations_out = v.migrations_out;
                for (unsigned k = 0; k < METRICS_HIST_SLOTS; k++) {
                        o->runq_hist[k] = v.runq_hist[k];
                        o->runq_count += v.runq_hist[k];
                }
                o->runq_sum_ns = v.runq_sum_ns;
                o->hardirq_count = v.hardirq_count;
                o->hardirq_ns = v.hardirq_ns;
                memcpy(o->softirq_count, v.softirq_count, sizeof o->softirq_count);
                memcpy(o->softirq_ns, v.softirq_ns, sizeof o->softirq_ns);
                o->intrusions = v.intrusions;
                o->intrusion_ns = v.intrusion_ns;
                o->other_ns = v.other_ns;
                o->other_runs = v.other_runs;
                o->missed_events = v.missed_events;
                o->unrecovered = v.unrecovered;
                o->cpu_samples = v.snapshots;
                o->current_job = v.cur_job_id;
                if (b->vectors_traced) {
                        memcpy(o->vec_count, v.vec_count, sizeof o->vec_count);
                        memcpy(o->vec_ns, v.vec_ns, sizeof o->vec_ns);
                        memcpy(o->vec_unpaired, v.vec_unpaired, sizeof o->vec_unpaired);
                }
        }
        return 0;
}

/* After the reading: a new call site costs a scan of /proc/kallsyms, which must not stretch the sample. */
static void name_ipis(BpfCollector *b, Sample *s) {
        _cleanup_free_ uint64_t *addrs = reallocarray(NULL, s->n_ipis ?: 1, 2 * sizeof *addrs);

        /* Every new address of the sample in one scan (a scan each held rtd's loop 50 ms, and a sample
         * with a few new call sites stalled job dispatch for half a second). */
        if (addrs) {
                for (size_t i = 0; i < s->n_ipis; i++) {
                        addrs[2 * i] = s->ipis[i].callsite;
                        addrs[2 * i + 1] = s->ipis[i].callback;
                }
                symbols_resolve(&b->syms, addrs, 2 * s->n_ipis);
        }
        for (size_t i = 0; i < s->n_ipis; i++) {
                char site[sizeof s->ipis[i].site / 2];          /* "callsite/callback": half each at most */

                /* Copied first: the second lookup may grow (move) the cache the first name points into. */
                (void) snprintf(site, sizeof site, "%s", symbols_name(&b->syms, s->ipis[i].callsite));
                (void) snprintf(s->ipis[i].site, sizeof s->ipis[i].site, "%s/%s", site,
                                symbols_name(&b->syms, s->ipis[i].callback));
        }
}

/*
 * Before the reading, on each reserved CPU where a switch-out went unreported (this kernel's blind spot for
 * PID 1's threads, bpf/sched-metrics-intruders.bpf.h): run sample_cpu there, so that runs no event showed
 * are in this sample, not a later one. One call-function IPI per such CPU and sample (in its CAL row); none
 * on a kernel that reports every switch.
 */
static void sample_blind_cpus(BpfCollector *b) {
        int fd = bpf_map__fd(b->skel->maps.cpus), pfd = bpf_program__fd(b->skel->progs.sample_cpu);
        unsigned n = MIN(b->skel->bss->n_listed, (unsigned) RTD_MAX_LISTED);

        for (unsigned i = 0; i < n && pfd >= 0; i++) {
                uint32_t cpu = b->skel->bss->reserved_list[i];
                uint64_t args[1] = {};
                LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = args, .ctx_size_in = sizeof args,
                            .flags = BPF_F_TEST_RUN_ON_CPU, .cpu = cpu);
                struct rtd_cpu v;

                if (bpf_map_lookup_elem(fd, &cpu, &v) < 0 || v.blind_n == 0)
                        continue;
                if (bpf_prog_test_run_opts(pfd, &o) < 0 && b->sample_errors++ == 0)
                        log_warning_errno(errno, "Cannot run the sampling program on CPU %u, runs no event "
                                          "showed are added at the task's next switch-in there: %m", cpu);
        }
}

static int bpf_read(Collector *c, Sample *s) {
        BpfCollector *b = (BpfCollector *) c;
        uint64_t now = monotonic_ns();
        int r;

        s->time_usec = now / 1000;
        s->n_cpus = c->n_cpus;
        s->cpus = calloc(s->n_cpus, sizeof *s->cpus);
        if (!s->cpus)
                return -ENOMEM;
        s->vectors_traced = b->vectors_traced;
        s->hz = b->skel->bss->kernel_hz;
        sample_blind_cpus(b);
        /* The table before the totals: a total read later is never below the sum of its parts. */
        r = bpf_maps_read_intruders(bpf_map__fd(b->skel->maps.intruders), s);
        if (r >= 0)
                r = read_cpus(b, s);
        /* The kernel's own counters beside the programs' (vectors: in their place when untraced): the
         * programs' counts fall short of them by events whose tracepoint never ran rtd's program, with
         * recursion_misses 0 (measured on 6.18: 0.3% of LOC with a lone program attached). */
        if (r >= 0 && kernel_counters_read(&b->kernel, b->base.proc_fd, s) >= 0 && !b->vectors_traced)
                for (unsigned i = 0; i < s->n_cpus; i++)
                        memcpy(s->cpus[i].vec_count, s->cpus[i].vec_kernel, sizeof s->cpus[i].vec_count);
        if (r >= 0)
                r = bpf_maps_read_irqs(bpf_map__fd(b->skel->maps.irqs), bpf_map__fd(b->skel->maps.irq_names),
                                       b->n_possible, s);
        if (r >= 0)
                r = bpf_maps_read_ipis(bpf_map__fd(b->skel->maps.ipis), s);
        s->prog_stats_enabled = b->stats_fd >= 0;
        if (r >= 0)
                r = bpf_maps_read_progs(b->skel->obj, s);
        if (r >= 0 && b->all)
                r = bpf_maps_read_progs(baseline_all_object(b->all), s);
        s->end_usec = monotonic_ns() / 1000;
        if (r >= 0)
                name_ipis(b, s);
        return r;
}

static void bpf_free(Collector *c) {
        BpfCollector *b = (BpfCollector *) c;

        if (!b)
                return;
        baseline_all_free(b->all);
        sched_metrics__destroy(b->skel);
        safe_close(b->stats_fd);
        free(b->fallbacks);
        kernel_counters_done(&b->kernel);
        symbols_done(&b->syms);
        free(b);
}

/*
 * Run-time stats are how rtd reports its own BPF cost. They are machine-wide and cost two sched_clock()
 * reads per run of every BPF program (bench/bpf-overhead measures them), so they are on
 * only when [Metrics] ProgramStats= asks; closing the fd turns them off again.
 */
static void bpf_set_program_stats(Collector *c, bool on) {
        BpfCollector *b = (BpfCollector *) c;

        if (!on) {
                b->stats_fd = safe_close(b->stats_fd);
                return;
        }
        if (b->stats_fd >= 0)
                return;
        b->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
        if (b->stats_fd < 0)
                log_warning_errno(errno, "Cannot enable BPF run-time statistics (needs CAP_SYS_ADMIN), "
                                  "cost figures grow only with kernel.bpf_stats_enabled=1: %m");
}

static const CollectorOps bpf_ops = {
        .name = "bpf",
        .caps = CAP_SWITCH_KIND | CAP_MIGRATIONS | CAP_RUNQ_HIST | CAP_IRQ_TIME | CAP_INTRUSIONS |
                CAP_PROG_STATS,
        .read = bpf_read,
        .set_reserved = bpf_set_reserved,
        .track_task = bpf_track_task,
        .worker_job = bpf_worker_job,
        .job_read = bpf_job_read,
        .attach_mode = attach_mode,
        .set_program_stats = bpf_set_program_stats,
        .set_guard = bpf_set_guard,
        .read_waiters = bpf_read_waiters,
        .free = bpf_free,
};

static char *reason_for(const char *what, int r) {
        char *s = NULL;

        int k;

        if (r == -EPERM || r == -EACCES)
                k = asprintf(&s, "%s: permission denied (needs CAP_BPF and CAP_PERFMON, or root)", what);
        else
                k = asprintf(&s, "%s: %s", what, strerror(-r));
        return k < 0 ? NULL : s;
}

const char *bpf_collector_fallbacks(Collector *c) {
        if (!c || c->ops != &bpf_ops)
                return NULL;
        return ((BpfCollector *) c)->fallbacks;
}

int bpf_collector_new(int proc_fd, unsigned intruder_table_size, Collector **ret, char **ret_reason) {
        BpfCollector *b;
        const char *e, *force = getenv("RTD_BPF_ATTACH");
        struct btf *vmlinux;
        uint32_t ns_inum = 0;
        int n, r;

        /* Test and diagnostic switch: run the procfs collector on a BPF build. */
        e = getenv("RTD_BPF");
        if (e && (streq(e, "0") || streq(e, "no"))) {
                *ret_reason = strdup("disabled by RTD_BPF=0 in the environment");
                return -EOPNOTSUPP;
        }
        if (access("/sys/kernel/btf/vmlinux", R_OK) < 0) {
                *ret_reason = strdup("the kernel has no BTF (/sys/kernel/btf/vmlinux is missing)");
                return -EOPNOTSUPP;
        }

        (void) libbpf_set_print(libbpf_log);
        n = libbpf_num_possible_cpus();
        if (n <= 0) {
                *ret_reason = reason_for("cannot count possible CPUs", n < 0 ? n : -EINVAL);
                return n < 0 ? n : -EINVAL;
        }

        b = calloc(1, sizeof *b);
        if (!b)
                return -ENOMEM;
        b->base.ops = &bpf_ops;
        b->base.n_cpus = n;
        b->base.proc_fd = proc_fd;
        b->n_possible = n;
        b->stats_fd = -EBADF;
        b->syms.proc_fd = proc_fd;
        b->skel = sched_metrics__open();
        if (!b->skel) {
                r = -errno;
                *ret_reason = reason_for("cannot open the BPF object", r);
                goto fail;
        }
        vmlinux = btf__load_vmlinux_btf();
        b->btf = force ? streq(force, "tp_btf") : tp_btf_usable(vmlinux);
        choose_programs(b, vmlinux);
        pid_namespace_of_self(&b->ns_level, &ns_inum);
        /* Loaded at the first reservation (bpf_set_reserved()), where it can be. */
        const char *unusable = baseline_all_unusable(b->btf, vmlinux);
        if (unusable)
                every_thread_fallback(b, unusable);
        b->all_pending = !unusable;
        btf__free(vmlinux);
        (void) bpf_map__set_max_entries(b->skel->maps.cpus, n);
        /* Room for a full table on every CPU: inserts then fail only where the per-CPU bound says so. */
        b->skel->rodata->intruder_table_size = intruder_table_size;
        b->table_size = intruder_table_size;
        (void) bpf_map__set_max_entries(b->skel->maps.intruders, MAX(1u, intruder_table_size * (unsigned) n));

        r = sched_metrics__load(b->skel);
        if (r < 0) {
                *ret_reason = reason_for("cannot load the BPF programs", r);
                goto fail;
        }
        r = kernel_counters_start(&b->kernel, proc_fd, (unsigned) n);
        if (r < 0) {
                *ret_reason = reason_for("cannot read /proc/interrupts", r);
                goto fail;
        }
        r = sched_metrics__attach(b->skel);
        if (r < 0) {
                *ret_reason = reason_for("cannot attach the BPF programs", r);
                goto fail;
        }
        if (!b->stamp)
                (void) wakeups_attach(b, false);
        b->skel->bss->guard_ns_level = b->ns_level;
        b->skel->bss->guard_ns_inum = ns_inum;

        *ret = &b->base;
        return 0;
fail:
        bpf_free(&b->base);
        return r;
}
