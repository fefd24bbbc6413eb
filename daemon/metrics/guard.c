/* SPDX-License-Identifier: MIT */
/*
 * Starvation guard, after stalld: with RT throttling off (sched_rt_runtime_us=-1) a FIFO job that never
 * sleeps keeps everything of lower priority off its CPU: per-CPU kworkers, ksoftirqd, RT kthreads, and
 * with them machine-wide operations that wait on every CPU (workqueue flushes, lru_add_drain_all). The BPF
 * programs note when a task became runnable on a reserved CPU and forget it once it runs; a tick here
 * boosts each one still waiting after the threshold to SCHED_DEADLINE (runtime per period), which
 * preempts every FIFO task, for a while, then gives it its policy back. Since 6.12 the kernel's fair
 * server already runs starved CFS tasks 50 ms a second (late in the period); the guard acts sooner, and
 * also for RT tasks, which nothing else saves.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "core/manager.h"
#include "guard.h"
#include "prometheus.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/messages.h"

/* uapi linux/sched/types.h's struct sched_attr, which clashes with glibc's <sched.h> (struct sched_param),
 * under a name of its own (glibc 2.41 declares one too). */
struct rtd_sched_attr {
        uint32_t size;
        uint32_t sched_policy;
        uint64_t sched_flags;
        int32_t sched_nice;
        uint32_t sched_priority;
        uint64_t sched_runtime;
        uint64_t sched_deadline;
        uint64_t sched_period;
        uint32_t sched_util_min;
        uint32_t sched_util_max;
};
#define SCHED_ATTR_SIZE_VER0 48
#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif
#ifndef SCHED_FLAG_RESET_ON_FORK
#define SCHED_FLAG_RESET_ON_FORK 0x01
#endif

#define PIDFD_THREAD_ O_EXCL    /* linux/pidfd.h, 6.9+: a pidfd for a thread, not only a leader */
#define MAX_BOOSTS 256          /* tasks boosted at once; more wait for the next tick */
#define BOOSTS_FILE "starvation-boosts"

typedef struct Boost {
        pid_t tid;              /* in rtd's PID namespace */
        int pidfd;              /* tells whether tid still names the task boosted; -1 when unavailable */
        unsigned cpu;
        uint64_t until_usec;
        struct rtd_sched_attr orig;
        struct rtd_sched_attr boost;
} Boost;

typedef struct GuardCpu {
        uint64_t boosts;
        uint64_t failures;
        uint64_t unreachable;   /* starving tasks outside rtd's PID namespace, which it cannot name */
        char last_comm[16];
        pid_t last_tid;         /* as the kernel names it */
        uint64_t last_since;    /* when the task last boosted had begun to wait: never twice for one wait */
        pid_t last_unreachable;
} GuardCpu;

struct Guard {
        Manager *manager;
        Collector *collector;
        sd_event_source *timer;
        CpuSet reserved;
        bool on;
        char *unavailable;      /* why the guard cannot run, NULL when it can */
        int last_error;         /* the last sched_setattr() errno logged, to log each kind once */
        Boost boosts[MAX_BOOSTS];
        size_t n_boosts;
        GuardCpu cpus[CPUSET_MAX];
};

static int sched_setattr_(pid_t tid, const struct rtd_sched_attr *a) {
        return syscall(SYS_sched_setattr, tid, a, 0) < 0 ? -errno : 0;
}

static int sched_getattr_(pid_t tid, struct rtd_sched_attr *a) {
        *a = (struct rtd_sched_attr){};
        return syscall(SYS_sched_getattr, tid, a, (unsigned) sizeof *a, 0) < 0 ? -errno : 0;
}

static int pidfd_for(pid_t tid) {
        int fd = (int) syscall(SYS_pidfd_open, tid, PIDFD_THREAD_);
        if (fd < 0 && errno == EINVAL)
                fd = (int) syscall(SYS_pidfd_open, tid, 0);     /* before 6.9: thread-group leaders only */
        return fd < 0 ? -1 : fd;
}

/* The policy it had, minus what sched_getattr() reports but sched_setattr() would take as a request. */
static struct rtd_sched_attr restorable(const struct rtd_sched_attr *a) {
        return (struct rtd_sched_attr){
                .size = SCHED_ATTR_SIZE_VER0,
                .sched_policy = a->sched_policy,
                .sched_flags = a->sched_flags & SCHED_FLAG_RESET_ON_FORK,
                .sched_nice = a->sched_nice,
                .sched_priority = a->sched_priority,
                .sched_runtime = a->sched_runtime,
                .sched_deadline = a->sched_deadline,
                .sched_period = a->sched_period,
        };
}

/* Back to its own policy, unless someone else changed it meanwhile (the task itself, an admin). */
static void give_back(const Boost *b) {
        struct rtd_sched_attr cur;

        if (sched_getattr_(b->tid, &cur) < 0 || cur.sched_policy != SCHED_DEADLINE ||
            cur.sched_runtime != b->boost.sched_runtime || cur.sched_period != b->boost.sched_period)
                return;
        if (sched_setattr_(b->tid, &b->orig) < 0)
                log_warning_errno(errno, "Could not give task %d its scheduling policy back after a starvation "
                                  "boost: %m", (int) b->tid);
}

/*
 * What is boosted now, in RuntimeDirectory=: after a crash (kill -9) the next start gives it back, so no
 * kworker keeps a deadline budget of a few µs per period for good.
 */
static void boosts_save(Guard *g) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;

        if (!g->manager->event || g->manager->runtime_fd < 0)
                return;
        if (g->n_boosts == 0) {
                (void) unlinkat(g->manager->runtime_fd, BOOSTS_FILE, 0);
                return;
        }
        f = open_memstream(&buf, &size);
        if (!f)
                return;
        for (size_t i = 0; i < g->n_boosts; i++) {
                const Boost *b = &g->boosts[i];
                fprintf(f, "%d %u %d %u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
                        (int) b->tid, b->orig.sched_policy, b->orig.sched_nice, b->orig.sched_priority,
                        (uint64_t) b->orig.sched_flags, (uint64_t) b->orig.sched_runtime,
                        (uint64_t) b->orig.sched_deadline, (uint64_t) b->orig.sched_period,
                        (uint64_t) b->boost.sched_runtime, (uint64_t) b->boost.sched_period);
        }
        if (fclose(f) != 0)
                return;
        if (write_file_atomic_at(g->manager->runtime_fd, BOOSTS_FILE, buf, size, 0600) < 0)
                log_debug("Could not note the starvation boosts in %s", BOOSTS_FILE);
}

/* Boosts a crashed rtd left: the tasks still on exactly that deadline budget get their policy back. */
static void boosts_recover(Guard *g) {
        _cleanup_free_ char *text = NULL;
        unsigned n = 0;

        if (!g->manager->event || g->manager->runtime_fd < 0 ||
            read_full_file_at(g->manager->runtime_fd, BOOSTS_FILE, &text, NULL) < 0)
                return;
        for (char *line = text, *next; line && *line; line = next) {
                Boost b = { .orig.size = SCHED_ATTR_SIZE_VER0 };
                unsigned long long fl, rt, dl, pe, brt, bpe;
                int tid;

                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                if (sscanf(line, "%d %u %d %u %llu %llu %llu %llu %llu %llu", &tid, &b.orig.sched_policy,
                           &b.orig.sched_nice, &b.orig.sched_priority, &fl, &rt, &dl, &pe, &brt, &bpe) != 10 ||
                    tid <= 0 || b.orig.sched_policy == SCHED_DEADLINE)
                        continue;
                b.tid = tid;
                b.orig.sched_flags = fl & SCHED_FLAG_RESET_ON_FORK;
                b.orig.sched_runtime = rt;
                b.orig.sched_deadline = dl;
                b.orig.sched_period = pe;
                b.boost.sched_runtime = brt;
                b.boost.sched_period = bpe;
                give_back(&b);
                n++;
        }
        (void) unlinkat(g->manager->runtime_fd, BOOSTS_FILE, 0);
        if (n > 0)
                log_notice("Starvation guard: %u task(s) boosted before rtd last stopped without cleaning up were "
                           "given their policy back (those still on the boost's deadline budget)", n);
}

static void unboost(Guard *g, Boost *b) {
        /* Gone, or the tid names another task by now: nothing to give back. */
        if (b->pidfd < 0 || syscall(SYS_pidfd_send_signal, b->pidfd, 0, NULL, 0) >= 0)
                give_back(b);
        if (b->pidfd >= 0)
                close(b->pidfd);
        *b = g->boosts[--g->n_boosts];
}

static void unboost_due(Guard *g, uint64_t now, bool all) {
        size_t before = g->n_boosts;

        for (size_t i = 0; i < g->n_boosts;)
                if (all || g->boosts[i].until_usec <= now)
                        unboost(g, &g->boosts[i]);      /* moves the last one here */
                else
                        i++;
        if (g->n_boosts != before)
                boosts_save(g);
}

static bool is_boosted(const Guard *g, pid_t tid) {
        for (size_t i = 0; i < g->n_boosts; i++)
                if (g->boosts[i].tid == tid)
                        return true;
        return false;
}

static void note_failure(Guard *g, const StarveWaiter *w, int r) {
        g->cpus[w->cpu].failures++;
        if (r == g->last_error)
                return;
        g->last_error = r;
        if (r == -EPERM || r == -EBUSY)
                log_warning_errno(r, "Starvation guard: the kernel refused SCHED_DEADLINE for %s (%d) on CPU %u: "
                                  "deadline admission control only admits a task pinned to one CPU while RT "
                                  "throttling is off ([Tuning] RTRuntimeUSec=-1); with throttling on, RT jobs "
                                  "leave other tasks their share anyway: %m", w->comm, (int) w->ns_tid, w->cpu);
        else
                log_warning_errno(r, "Starvation guard: cannot boost %s (%d) on CPU %u: %m", w->comm,
                                  (int) w->ns_tid, w->cpu);
}

/*
 * Still runnable ('R')? A missed sched_switch can leave a task noted that has run and sleeps now. Where
 * /proc does not name it (gone, or a test's --root), sched_getattr() decides.
 */
static bool still_runnable(const Guard *g, pid_t tid) {
        _cleanup_free_ char *s = NULL;
        char path[32];
        const char *e;

        (void) snprintf(path, sizeof path, "%d/stat", (int) tid);
        if (read_one_line_at(g->manager->proc_fd, path, &s) < 0 || !(e = strrchr(s, ')')))
                return true;
        return e[1] == ' ' && e[2] == 'R';
}

static void boost(Guard *g, const StarveWaiter *w, uint64_t now) {
        const RtdConfig *c = g->manager->config;
        struct rtd_sched_attr orig;
        Boost b = { .tid = w->ns_tid, .cpu = w->cpu, .until_usec = now + c->starvation_boost_duration_usec };
        int r;

        if (g->n_boosts >= MAX_BOOSTS ||
            (g->cpus[w->cpu].last_tid == w->tid && g->cpus[w->cpu].last_since == w->since_usec) ||
            !still_runnable(g, w->ns_tid))
                return;
        r = sched_getattr_(w->ns_tid, &orig);
        if (r == -ESRCH)
                return;                 /* gone since the programs saw it */
        if (r < 0) {
                note_failure(g, w, r);
                return;
        }
        if (orig.sched_policy == SCHED_DEADLINE)
                return;                 /* deadline tasks preempt the job already */
        b.pidfd = pidfd_for(w->ns_tid);
        b.orig = restorable(&orig);
        b.boost = (struct rtd_sched_attr){
                .size = SCHED_ATTR_SIZE_VER0,
                .sched_policy = SCHED_DEADLINE,
                .sched_flags = orig.sched_flags & SCHED_FLAG_RESET_ON_FORK,
                .sched_runtime = (uint64_t) c->starvation_boost_runtime_usec * 1000,
                .sched_deadline = (uint64_t) c->starvation_boost_period_usec * 1000,
                .sched_period = (uint64_t) c->starvation_boost_period_usec * 1000,
        };
        r = sched_setattr_(w->ns_tid, &b.boost);
        if (r < 0) {
                if (b.pidfd >= 0)
                        close(b.pidfd);
                if (r != -ESRCH)
                        note_failure(g, w, r);
                return;
        }
        g->boosts[g->n_boosts++] = b;
        boosts_save(g);
        GuardCpu *gc = &g->cpus[w->cpu];
        gc->boosts++;
        gc->last_tid = w->tid;
        gc->last_since = w->since_usec;
        memcpy(gc->last_comm, w->comm, sizeof gc->last_comm);

        char fields[128];
        (void) snprintf(fields, sizeof fields, "RTD_CPU=%u\nRTD_TASK_COMM=%s\nRTD_TASK_PID=%d\nRTD_WAITED_USEC=%" PRIu64,
                        w->cpu, w->comm, (int) w->tid, now - w->since_usec);
        log_struct(LOG_NOTICE, RTD_MSG_STARVATION_BOOST, fields,
                   "Starvation guard: %s (%d) waited %.2f s on CPU %u, boosted to SCHED_DEADLINE %u/%u us for %.2f s",
                   w->comm, (int) w->tid, (now - w->since_usec) / 1e6, w->cpu, c->starvation_boost_runtime_usec,
                   c->starvation_boost_period_usec, c->starvation_boost_duration_usec / 1e6);
}

/* A starving task rtd cannot name (outside its PID namespace): counted, logged once per task. */
static void note_unreachable(Guard *g, const StarveWaiter *w) {
        GuardCpu *gc = &g->cpus[w->cpu];

        if (gc->last_unreachable == w->tid)
                return;
        gc->last_unreachable = w->tid;
        /* Said once per CPU at warning level: a kworker starving there starves again and again. */
        log_full(gc->unreachable++ == 0 ? LOG_WARNING : LOG_DEBUG,
                 "Starvation guard: %s (%d) starves on CPU %u but lies outside rtd's PID namespace; not boosted",
                 w->comm, (int) w->tid, w->cpu);
}

static void sync_state(Guard *g) {
        bool want = g->manager->config && g->manager->config->starvation_guard != STARVATION_GUARD_NO &&
                    !cpuset_is_empty(&g->reserved);
        int r;

        if (want == g->on)
                return;
        if (!g->collector->ops->set_guard) {
                if (want && !g->unavailable) {
                        g->unavailable = strdup("needs the BPF collector");
                        log_warning("Starvation guard unavailable: it needs the BPF metrics collector");
                }
                return;
        }
        r = g->collector->ops->set_guard(g->collector, want);
        if (r < 0) {
                if (!g->unavailable) {
                        g->unavailable = strdup(strerror(-r));
                        log_warning_errno(r, "Starvation guard unavailable: cannot attach its programs: %m");
                }
                return;
        }
        free(g->unavailable);
        g->unavailable = NULL;
        g->on = want;
        log_info("Starvation guard %s", want ? "on" : "off");
}

static uint64_t tick_usec(const Guard *g) {
        uint64_t t = g->manager->config->starvation_threshold_usec / 4;
        return t < 10000 ? 10000 : t > 250000 ? 250000 : t;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Guard *g = userdata;
        const RtdConfig *c = g->manager->config;
        _cleanup_free_ StarveWaiter *w = NULL;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        size_t n = 0;

        sync_state(g);
        unboost_due(g, now, !g->on);
        if (g->on && g->collector->ops->read_waiters(g->collector, &w, &n) >= 0)
                for (size_t i = 0; i < n; i++) {
                        if (w[i].cpu >= CPUSET_MAX || !cpuset_isset(&g->reserved, w[i].cpu) ||
                            now < w[i].since_usec + c->starvation_threshold_usec)
                                continue;
                        /* kernel: only the kernel's own threads (kworker, ksoftirqd, RCU); a user task on a
                         * reserved CPU is a job's own thread or an intruder, neither rtd's to reschedule. */
                        if (c->starvation_guard == STARVATION_GUARD_KERNEL && !w[i].kthread)
                                continue;
                        /* Any task may name itself (PR_SET_NAME): no newline may reach a journal field. */
                        for (char *p = w[i].comm; *p; p++)
                                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                                        *p = '?';
                        if (w[i].ns_tid <= 0)
                                note_unreachable(g, &w[i]);
                        else if (!is_boosted(g, w[i].ns_tid))
                                boost(g, &w[i], now);
                }
        (void) sd_event_source_set_time_relative(s, tick_usec(g));
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

int guard_new(Manager *m, Collector *c, Guard **ret) {
        _cleanup_free_ Guard *g = calloc(1, sizeof *g);
        int r;

        if (!g)
                return -ENOMEM;
        g->manager = m;
        g->collector = c;
        boosts_recover(g);
        if (m->event) {
                r = sd_event_add_time_relative(m->event, &g->timer, CLOCK_MONOTONIC, tick_usec(g), 1000, on_tick, g);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(g->timer, "starvation-guard");
        }
        *ret = TAKE_PTR(g);
        return 0;
}

Guard *guard_free(Guard *g) {
        if (!g)
                return NULL;
        unboost_due(g, 0, true);
        if (g->on && g->collector->ops->set_guard)
                (void) g->collector->ops->set_guard(g->collector, false);
        sd_event_source_disable_unref(g->timer);
        free(g->unavailable);
        free(g);
        return NULL;
}

void guard_set_reserved(Guard *g, const CpuSet *reserved) {
        if (g)
                g->reserved = *reserved;
}

json_t *guard_to_json(const Guard *g) {
        const RtdConfig *c = g->manager->config;
        json_t *cpus;

        if (!c)
                return json_pack("{s:b, s:b}", "enabled", false, "active", false);      /* unit tests */
        cpus = json_array();
        CPUSET_FOREACH(cpu, &g->reserved) {
                const GuardCpu *gc = &g->cpus[cpu];
                (void) json_array_append_new(cpus, json_pack("{s:i, s:I, s:I, s:I, s:s?, s:i}", "cpu", (int) cpu,
                                                             "boosts", (json_int_t) gc->boosts,
                                                             "failures", (json_int_t) gc->failures,
                                                             "unreachable", (json_int_t) gc->unreachable,
                                                             "last_boosted_comm", gc->last_comm[0] ? gc->last_comm : NULL,
                                                             "last_boosted_pid", (int) gc->last_tid));
        }
        static const char *const scope[] = { "no", "kernel", "all" };

        return json_pack("{s:b, s:s, s:b, s:s?, s:f, s:i, s:i, s:f, s:i, s:o}",
                         "enabled", c->starvation_guard != STARVATION_GUARD_NO, "scope", scope[c->starvation_guard],
                         "active", g->on, "unavailable", g->unavailable,
                         "threshold_seconds", c->starvation_threshold_usec / 1e6,
                         "boost_runtime_usec", (int) c->starvation_boost_runtime_usec,
                         "boost_period_usec", (int) c->starvation_boost_period_usec,
                         "boost_duration_seconds", c->starvation_boost_duration_usec / 1e6,
                         "boosted_now", (int) g->n_boosts, "cpus", cpus);
}

void guard_render_prometheus(const Guard *g, FILE *f) {
        char labels[96], esc[40];

        prom_family(f, "rtd_starvation_boosts_total", "counter",
                    "Tasks the starvation guard boosted to SCHED_DEADLINE after they waited on a reserved CPU.");
        CPUSET_FOREACH(cpu, &g->reserved) {
                (void) snprintf(labels, sizeof labels, "cpu=\"%u\"", cpu);
                prom_uint(f, "rtd_starvation_boosts_total", labels, g->cpus[cpu].boosts);
        }
        prom_family(f, "rtd_starvation_boost_failures_total", "counter",
                    "Starving tasks the kernel refused to boost (see the journal for why).");
        CPUSET_FOREACH(cpu, &g->reserved) {
                (void) snprintf(labels, sizeof labels, "cpu=\"%u\"", cpu);
                prom_uint(f, "rtd_starvation_boost_failures_total", labels, g->cpus[cpu].failures);
        }
        prom_family(f, "rtd_starvation_last_boost_info", "gauge", "The task last boosted on each reserved CPU.");
        CPUSET_FOREACH(cpu, &g->reserved) {
                if (!g->cpus[cpu].last_comm[0])
                        continue;
                (void) snprintf(labels, sizeof labels, "cpu=\"%u\",comm=\"%s\"", cpu,
                                prom_label_escape(g->cpus[cpu].last_comm, esc, sizeof esc));
                prom_uint(f, "rtd_starvation_last_boost_info", labels, 1);
        }
}
