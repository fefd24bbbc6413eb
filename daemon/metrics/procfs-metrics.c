/* SPDX-License-Identifier: MIT */
/* The procfs collector, used when BPF is unavailable: /proc/schedstat (per-CPU timeslices and run-queue
 * wait, when the kernel has it), /proc/interrupts, /proc/softirqs, and /proc/PID/{status,schedstat} of
 * the tasks rtd tracks for per-job figures. Everything is read through proc_fd (tests use fixtures). */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collector.h"
#include "shared/fileio.h"
#include "shared/macro.h"

typedef struct TrackedPid {
        pid_t pid;
        uint64_t job_id;
        JobCounters last;               /* last figures read; kept after the process is gone */
} TrackedPid;

typedef struct ProcfsCollector {
        Collector base;
        TrackedPid *tracked;
        size_t n_tracked;
} ProcfsCollector;

static const char *const softirq_names[METRICS_NR_SOFTIRQS] = {
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
};

unsigned collector_possible_cpus(void) {
        long n = sysconf(_SC_NPROCESSORS_CONF);
        return n > 0 ? (unsigned) n : 1;
}

void sample_done(Sample *s) {
        if (!s)
                return;
        for (size_t i = 0; i < s->n_irqs; i++) {
                free(s->irqs[i].count);
                free(s->irqs[i].ns);
        }
        free(s->irqs);
        free(s->cpus);
        free(s->intruders);
        free(s->progs);
        free(s->ipis);
        *s = (Sample) {};
}

/* "cpuN yld 0 sched goidle ttwu ttwu_local run_ns wait_ns timeslices" (Documentation/scheduler/sched-stats.rst) */
static void read_schedstat(int proc_fd, Sample *s) {
        _cleanup_free_ char *text = NULL;
        char *save = NULL;

        if (read_full_file_at(proc_fd, "schedstat", &text, NULL) < 0)
                return;         /* CONFIG_SCHEDSTATS off: no per-CPU switch figures */
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                unsigned cpu;
                uint64_t f[9];

                if (sscanf(l, "cpu%u %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                           " %" SCNu64 " %" SCNu64 " %" SCNu64,
                           &cpu, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8]) != 10)
                        continue;
                if (cpu >= s->n_cpus)
                        continue;
                s->cpus[cpu].switches_total = f[8];
                s->cpus[cpu].runq_sum_ns = f[7];
                s->cpus[cpu].runq_count = f[8];
        }
}

/* A row of /proc/interrupts or /proc/softirqs: "  LABEL:  n0  n1 ...  rest". Cuts the label off (without
 * its blanks) and returns where the per-CPU counts start, or NULL for a line with no label. */
static char *row_label(char *line, char **ret_label) {
        char *colon = strchr(line, ':');

        if (!colon)
                return NULL;
        *colon = 0;
        line += strspn(line, " ");
        *ret_label = line;
        return colon + 1;
}

/* Reads up to n per-CPU counts from *p into counts[] and moves *p past them; returns how many it read. */
static unsigned row_counts(char **p, uint64_t *counts, unsigned n) {
        unsigned cpu;

        for (cpu = 0; cpu < n; cpu++) {
                char *end;
                uint64_t v = strtoull(*p, &end, 10);
                if (end == *p)
                        break;
                counts[cpu] = v;
                *p = end;
        }
        return cpu;
}

/* A numbered row ("36:"), the ones irq_handler events stand for; not the header or LOC, RES, ... */
static bool numbered_irq(const char *label, unsigned long *ret_irq) {
        char *end;

        *ret_irq = strtoul(label, &end, 10);
        return end != label && *end == 0;
}

static int read_interrupts(int proc_fd, Sample *s) {
        _cleanup_free_ char *text = NULL;
        char *save = NULL;
        int r;

        r = read_full_file_at(proc_fd, "interrupts", &text, NULL);
        if (r < 0)
                return r;
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                char *label, *p = row_label(l, &label), *end;
                unsigned long irq;
                IrqCounters *n, *q;

                if (!p || !numbered_irq(label, &irq))
                        continue;
                n = reallocarray(s->irqs, s->n_irqs + 1, sizeof *n);
                if (!n)
                        return -ENOMEM;
                s->irqs = n;
                q = &s->irqs[s->n_irqs++];
                *q = (IrqCounters) { .irq = irq, .count = calloc(s->n_cpus, sizeof(uint64_t)) };
                if (!q->count)
                        return -ENOMEM;
                unsigned got = row_counts(&p, q->count, s->n_cpus);
                for (unsigned cpu = 0; cpu < got; cpu++)
                        s->cpus[cpu].hardirq_count += q->count[cpu];
                /* The handler name is the last word ("virtio0-input.0"). */
                end = p + strlen(p);
                while (end > p && end[-1] == ' ')
                        *--end = 0;
                char *last = strrchr(p, ' ');
                (void) snprintf(q->name, sizeof q->name, "%s", last ? last + 1 : p);
        }
        return 0;
}

/* The architecture rows: "LOC:  49308  47194   Local timer interrupts". TLB is a row of its own. */
int procfs_read_vectors(int proc_fd, Sample *s) {
        static const char *const names[METRICS_NR_VECTORS] = METRICS_VECTOR_NAMES;
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ uint64_t *counts = calloc(s->n_cpus, sizeof *counts);
        char *save = NULL;
        int r;

        if (!counts)
                return -ENOMEM;
        r = read_full_file_at(proc_fd, "interrupts", &text, NULL);
        if (r < 0)
                return r;
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                char *label, *p = row_label(l, &label);
                int v = -1;

                if (!p)
                        continue;
                for (unsigned k = 0; k < METRICS_NR_VECTORS; k++)
                        if (streq(label, names[k]))
                                v = (int) k;
                if (v < 0 && !streq(label, "TLB"))
                        continue;
                unsigned got = row_counts(&p, counts, s->n_cpus);
                for (unsigned cpu = 0; cpu < got; cpu++)
                        if (v >= 0)
                                s->cpus[cpu].vec_kernel[v] = counts[cpu];
                        else
                                s->cpus[cpu].tlb_shootdowns = counts[cpu];
        }
        return 0;
}

static void read_softirqs(int proc_fd, Sample *s, bool kernel);

int procfs_read_kernel_irqs(int proc_fd, Sample *s) {
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ uint64_t *counts = calloc(s->n_cpus, sizeof *counts);
        char *save = NULL;
        int r;

        if (!counts)
                return -ENOMEM;
        r = read_full_file_at(proc_fd, "interrupts", &text, NULL);
        if (r < 0)
                return r;
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                char *label, *p = row_label(l, &label);
                unsigned long irq;

                if (!p || !numbered_irq(label, &irq))
                        continue;
                unsigned got = row_counts(&p, counts, s->n_cpus);
                for (unsigned cpu = 0; cpu < got; cpu++)
                        s->cpus[cpu].hardirq_kernel += counts[cpu];
        }
        read_softirqs(proc_fd, s, true);
        return 0;
}

static void read_softirqs(int proc_fd, Sample *s, bool kernel) {
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ uint64_t *counts = calloc(s->n_cpus, sizeof *counts);
        char *save = NULL;

        if (!counts || read_full_file_at(proc_fd, "softirqs", &text, NULL) < 0)
                return;
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                char *label, *p = row_label(l, &label);

                if (!p)
                        continue;
                for (unsigned v = 0; v < METRICS_NR_SOFTIRQS; v++) {
                        if (!streq(label, softirq_names[v]))
                                continue;
                        unsigned got = row_counts(&p, counts, s->n_cpus);
                        for (unsigned cpu = 0; cpu < got; cpu++)
                                if (kernel)
                                        s->cpus[cpu].softirq_kernel[v] = counts[cpu];
                                else
                                        s->cpus[cpu].softirq_count[v] = counts[cpu];
                        break;
                }
        }
}

/* /proc/PID/status context switches and /proc/PID/schedstat (on-CPU ns, wait ns, timeslices). */
static int read_pid(int proc_fd, pid_t pid, JobCounters *ret) {
        _cleanup_free_ char *status = NULL, *sched = NULL;
        char path[64];
        const char *p;
        int r;

        (void) snprintf(path, sizeof path, "%d/status", pid);
        r = read_full_file_at(proc_fd, path, &status, NULL);
        if (r < 0)
                return r;
        p = strstr(status, "\nvoluntary_ctxt_switches:");
        if (p)
                ret->switches_voluntary = strtoull(strchr(p, ':') + 1, NULL, 10);
        p = strstr(status, "\nnonvoluntary_ctxt_switches:");
        if (p)
                ret->switches_involuntary = strtoull(strchr(p, ':') + 1, NULL, 10);

        (void) snprintf(path, sizeof path, "%d/schedstat", pid);
        if (read_full_file_at(proc_fd, path, &sched, NULL) >= 0) {
                uint64_t run, wait, slices;
                if (sscanf(sched, "%" SCNu64 " %" SCNu64 " %" SCNu64, &run, &wait, &slices) == 3) {
                        ret->on_cpu_ns = run;
                        ret->runq_sum_ns = wait;
                        ret->runq_count = slices;
                }
        }
        ret->tasks = 1;
        return 0;
}

static int procfs_read(Collector *c, Sample *s) {
        ProcfsCollector *p = (ProcfsCollector *) c;
        struct timespec ts;
        int r;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        s->time_usec = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
        s->n_cpus = c->n_cpus;
        s->cpus = calloc(s->n_cpus, sizeof *s->cpus);
        if (!s->cpus)
                return -ENOMEM;
        read_schedstat(c->proc_fd, s);
        read_softirqs(c->proc_fd, s, false);
        (void) procfs_read_vectors(c->proc_fd, s);
        for (unsigned i = 0; i < s->n_cpus; i++)
                memcpy(s->cpus[i].vec_count, s->cpus[i].vec_kernel, sizeof s->cpus[i].vec_count);
        for (size_t i = 0; i < p->n_tracked; i++)
                (void) read_pid(c->proc_fd, p->tracked[i].pid, &p->tracked[i].last);
        r = read_interrupts(c->proc_fd, s);
        for (unsigned i = 0; i < s->n_cpus; i++) {
                s->cpus[i].hardirq_kernel = s->cpus[i].hardirq_count;
                memcpy(s->cpus[i].softirq_kernel, s->cpus[i].softirq_count, sizeof s->cpus[i].softirq_kernel);
        }
        return r;
}

static void procfs_set_reserved(Collector *c, const CpuSet *reserved) {
        (void) c;
        (void) reserved;
}

static int procfs_track_task(Collector *c, pid_t pid, uint64_t job_id, uint64_t cgroup_id) {
        ProcfsCollector *p = (ProcfsCollector *) c;
        TrackedPid *n;

        (void) cgroup_id;
        if (!job_id)
                return 0;       /* workers need no per-job figures here (no intrusion accounting) */
        n = reallocarray(p->tracked, p->n_tracked + 1, sizeof *n);
        if (!n)
                return -ENOMEM;
        p->tracked = n;
        p->tracked[p->n_tracked] = (TrackedPid) { .pid = pid, .job_id = job_id };
        (void) read_pid(c->proc_fd, pid, &p->tracked[p->n_tracked].last);
        p->n_tracked++;
        return 0;
}

static int procfs_job_read(Collector *c, uint64_t job_id, bool forget, JobCounters *ret) {
        ProcfsCollector *p = (ProcfsCollector *) c;
        bool found = false;

        *ret = (JobCounters) {};
        for (size_t i = 0; i < p->n_tracked;) {
                TrackedPid *t = &p->tracked[i];

                if (t->job_id != job_id) {
                        i++;
                        continue;
                }
                /* Read once more: a zombie still has its counters; a reaped one keeps the last read. */
                (void) read_pid(c->proc_fd, t->pid, &t->last);
                ret->switches_voluntary += t->last.switches_voluntary;
                ret->switches_involuntary += t->last.switches_involuntary;
                ret->on_cpu_ns += t->last.on_cpu_ns;
                ret->runq_sum_ns += t->last.runq_sum_ns;
                ret->runq_count += t->last.runq_count;
                ret->tasks += t->last.tasks;
                found = true;
                if (forget) {
                        *t = p->tracked[--p->n_tracked];
                        continue;
                }
                i++;
        }
        return found ? 0 : -ENOENT;
}

static const char *procfs_attach_mode(Collector *c) {
        (void) c;
        return NULL;
}

static void procfs_free(Collector *c) {
        ProcfsCollector *p = (ProcfsCollector *) c;

        if (!p)
                return;
        free(p->tracked);
        free(p);
}

static const CollectorOps procfs_ops = {
        .name = "procfs",
        .caps = 0,
        .read = procfs_read,
        .set_reserved = procfs_set_reserved,
        .track_task = procfs_track_task,
        .job_read = procfs_job_read,
        .attach_mode = procfs_attach_mode,
        .free = procfs_free,
};

int procfs_collector_new(int proc_fd, Collector **ret) {
        ProcfsCollector *p = calloc(1, sizeof *p);

        if (!p)
                return -ENOMEM;
        p->base.ops = &procfs_ops;
        p->base.n_cpus = collector_possible_cpus();
        p->base.proc_fd = proc_fd;
        *ret = &p->base;
        return 0;
}
