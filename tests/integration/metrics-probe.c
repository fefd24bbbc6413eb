/* SPDX-License-Identifier: MIT */
/* Drives the real metrics module (BPF or procfs collector) against real processes and prints what it
 * measured next to the kernel's own figures, as JSON, for test-metrics.py to judge:
 *   metrics-probe sleeper N       a tracked job that sleeps N times vs /proc/PID/status
 *   metrics-probe hog CPU MSEC    an untracked CFS hog pinned to a "reserved" CPU vs /proc/PID/schedstat
 *   metrics-probe irq MSEC        per-CPU hard IRQ counts vs /proc/interrupts deltas (does disk I/O)
 *   metrics-probe resident CPU MSEC  a SCHED_FIFO hog already running on CPU when it is marked reserved
 *   metrics-probe resident-outside CPU  the same with the caller's hog, from outside the probe's PID namespace
 *                                 (run it in one without remounting /proc): says "ready" on stderr, then reads
 *                                 the hog's host PID on stdin; the hog stops itself (SIGSTOP) when done */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/manager.h"
#include "metrics/metrics.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "shared/macro.h"

static void die(const char *what) {
        fprintf(stderr, "metrics-probe: %s: %s\n", what, strerror(errno));
        exit(1);
}

static uint64_t status_field(pid_t pid, const char *field) {
        _cleanup_free_ char *s = NULL;
        char path[64];
        const char *p;

        (void) snprintf(path, sizeof path, "/proc/%d/status", pid);
        if (read_full_file_at(AT_FDCWD, path, &s, NULL) < 0)
                die("read status");
        p = strstr(s, field);
        return p ? strtoull(p + strlen(field), NULL, 10) : 0;
}

static uint64_t schedstat_run_ns(pid_t pid) {
        _cleanup_free_ char *s = NULL;
        char path[64];

        (void) snprintf(path, sizeof path, "/proc/%d/schedstat", pid);
        if (read_full_file_at(AT_FDCWD, path, &s, NULL) < 0)
                die("read schedstat");
        return strtoull(s, NULL, 10);
}

static void print_json(const char *key, json_t *j) {
        char *s = json_dumps(j, JSON_COMPACT);
        printf("\"%s\": %s", key, s ?: "null");
        free(s);
}

/* The child waits for "go" (so it is tracked before it starts), sleeps n times, says "done", and stays
 * alive until killed so /proc/PID/status can be read. */
static int cmd_sleeper(Metrics *x, int n) {
        int go[2], done[2];
        pid_t pid;
        char c = 0;

        if (pipe2(go, O_CLOEXEC) < 0 || pipe2(done, O_CLOEXEC) < 0)
                die("pipe");
        pid = fork();
        if (pid < 0)
                die("fork");
        if (pid == 0) {
                /* 1 ms: long enough that every sleep really blocks (a very short one can expire before
                 * the task schedules out, and the kernel then counts no switch). */
                struct timespec ts = { 0, 1000 * 1000 };
                if (read(go[0], &c, 1) != 1)
                        _exit(1);
                for (int i = 0; i < n; i++)
                        (void) nanosleep(&ts, NULL);
                (void) !write(done[1], "d", 1);
                pause();
                _exit(0);
        }
        if (metrics_track_task(x, pid, 7, 0) < 0)
                die("metrics_track_task");
        if (write(go[1], "g", 1) != 1 || read(done[0], &c, 1) != 1)
                die("child");
        usleep(100 * 1000);     /* the child is blocked in pause() now: its counters are final */
        uint64_t vol = status_field(pid, "voluntary_ctxt_switches:");
        uint64_t invol = status_field(pid, "nonvoluntary_ctxt_switches:");
        json_t *j = metrics_job_current(x, 7);
        (void) kill(pid, SIGKILL);
        (void) waitpid(pid, NULL, 0);

        printf("{\"sleeps\": %d, \"proc_voluntary\": %" PRIu64 ", \"proc_involuntary\": %" PRIu64 ", ", n, vol,
               invol);
        print_json("job", j);
        printf(", ");
        json_decref(j);
        j = metrics_job_finish(x, 7);
        print_json("finished", j);
        printf("}\n");
        json_decref(j);
        return 0;
}

static json_t *cpu_of(json_t *metrics, int cpu) {
        return json_array_get(json_object_get(metrics, "cpus"), cpu);
}

/* A child pinned to cpu (SCHED_FIFO at *fifo if given) that spins until it has used msec of CPU time. */
static pid_t spin_child(int cpu, int msec, const struct sched_param *fifo) {
        pid_t pid = fork();

        if (pid < 0)
                die("fork");
        if (pid == 0) {
                struct timespec ts;
                cpu_set_t mask;

                CPU_ZERO(&mask);
                CPU_SET(cpu, &mask);
                if (sched_setaffinity(0, sizeof mask, &mask) < 0 ||
                    (fifo && sched_setscheduler(0, SCHED_FIFO, fifo) < 0))
                        _exit(2);
                do
                        (void) clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
                while (ts.tv_sec * 1000 + ts.tv_nsec / 1000000 < msec);
                _exit(0);
        }
        return pid;
}

/* A CFS hog the probe pins onto cpu (marked reserved in metrics), burning msec of CPU time. */
static int cmd_hog(Metrics *x, int cpu, int msec) {
        CpuSet reserved = {};
        pid_t pid;
        siginfo_t si;

        cpuset_set(&reserved, cpu);
        metrics_set_reserved(x, &reserved);
        usleep(200 * 1000);
        metrics_refresh(x);
        json_t *before = metrics_render_json(x);

        pid = spin_child(cpu, msec, NULL);
        /* Keep the zombie (WNOWAIT) so its schedstat can still be read. */
        if (waitid(P_PID, pid, &si, WEXITED | WNOWAIT) < 0)
                die("waitid");
        uint64_t run_ns = schedstat_run_ns(pid);
        metrics_refresh(x);
        json_t *after = metrics_render_json(x);
        (void) waitpid(pid, NULL, 0);

        printf("{\"pid\": %d, \"cpu\": %d, \"exit\": %d, \"proc_run_seconds\": %.6f, ", pid, cpu, si.si_status,
               run_ns / 1e9);
        printf("\"intrusion_seconds_before\": %.6f, \"intrusion_seconds_after\": %.6f, ",
               json_real_value(json_object_get(cpu_of(before, cpu), "intrusion_seconds")),
               json_real_value(json_object_get(cpu_of(after, cpu), "intrusion_seconds")));
        print_json("last_interval", json_object_get(cpu_of(after, cpu), "last_interval"));
        printf("}\n");
        json_decref(before);
        json_decref(after);
        return 0;
}

/* A hog that sits on cpu before it is reserved and is never moved (a task rtd cannot move): SCHED_FIFO, so
 * no switch marks the reservation's start. Its time since then is in [end - at, end - before], schedstat
 * read just before and just after the reservation; rtd's figure must lie there (its CPU time is stale by at
 * most a tick where rtd notes it). */
/* The state letter of /proc/PID/stat (after the last ')': the name may hold one). */
static char proc_state(pid_t pid) {
        _cleanup_free_ char *s = NULL;
        char path[64];
        const char *p;

        (void) snprintf(path, sizeof path, "/proc/%d/stat", pid);
        if (read_full_file_at(AT_FDCWD, path, &s, NULL) < 0 || !(p = strrchr(s, ')')))
                die("read stat");
        return p[1] == ' ' ? p[2] : 0;
}

/* outside: the caller's hog, of a PID namespace the probe does not see (it stops itself when done), started
 * once the probe is ready and off its CPU (a FIFO hog there would starve the probe's start). */
static int cmd_resident(Metrics *x, int cpu, int msec, bool outside) {
        struct sched_param sp = { .sched_priority = 1 };
        CpuSet reserved = {};
        cpu_set_t mask;
        siginfo_t si = { .si_status = 0 };
        pid_t pid;

        CPU_ZERO(&mask);
        CPU_SET(cpu == 0 ? 1 : 0, &mask);
        if (sched_setaffinity(0, sizeof mask, &mask) < 0)
                die("sched_setaffinity");
        if (outside) {
                fprintf(stderr, "ready\n");
                if (scanf("%d", &pid) != 1 || pid <= 0)
                        die("read the hog's PID");
        } else
                pid = spin_child(cpu, msec, &sp);
        usleep(300 * 1000);             /* running there by now */
        uint64_t before = schedstat_run_ns(pid);
        cpuset_set(&reserved, cpu);
        metrics_set_reserved(x, &reserved);
        uint64_t at = schedstat_run_ns(pid);
        if (outside)
                while (proc_state(pid) != 'T')
                        usleep(10 * 1000);
        else if (waitid(P_PID, pid, &si, WEXITED | WNOWAIT) < 0)
                die("waitid");
        uint64_t end = schedstat_run_ns(pid);
        metrics_refresh(x);
        json_t *after = metrics_render_json(x), *e, *found = NULL;
        size_t i;
        if (!outside)
                (void) waitpid(pid, NULL, 0);

        json_array_foreach(json_object_get(cpu_of(after, cpu), "intruders"), i, e)
                if (json_integer_value(json_object_get(e, "pid")) == pid)
                        found = e;
        printf("{\"pid\": %d, \"exit\": %d, \"run_before_reserve_ns\": %" PRIu64 ", \"run_at_reserve_ns\": %" PRIu64
               ", \"run_end_ns\": %" PRIu64 ", \"hz\": %" JSON_INTEGER_FORMAT ", ", pid, si.si_status, before, at, end,
               json_integer_value(json_object_get(after, "hz")));
        print_json("intruder", found);
        printf("}\n");
        json_decref(after);
        return 0;
}

static int read_proc_interrupts(uint64_t *per_cpu, unsigned n) {
        _cleanup_free_ char *s = NULL;
        char *save = NULL;

        memset(per_cpu, 0, n * sizeof *per_cpu);
        if (read_full_file_at(AT_FDCWD, "/proc/interrupts", &s, NULL) < 0)
                die("read /proc/interrupts");
        for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                char *p = l, *end;
                while (*p == ' ')
                        p++;
                (void) strtoul(p, &end, 10);
                if (end == p || *end != ':')
                        continue;
                p = end + 1;
                for (unsigned i = 0; i < n; i++) {
                        uint64_t v = strtoull(p, &end, 10);
                        if (end == p)
                                break;
                        per_cpu[i] += v;
                        p = end;
                }
        }
        return 0;
}

static uint64_t json_irqs(json_t *metrics, unsigned cpu) {
        json_t *irq;
        size_t i;
        uint64_t sum = 0;

        json_array_foreach(json_object_get(metrics, "irqs"), i, irq)
                sum += json_integer_value(json_array_get(json_object_get(irq, "per_cpu"), cpu));
        return sum;
}

/* Disk I/O (write + fsync) makes block-device IRQs; the test compares per-CPU deltas. */
static int cmd_irq(Metrics *x, int msec) {
        unsigned n = (unsigned) sysconf(_SC_NPROCESSORS_CONF);
        uint64_t a[n], b[n];
        char path[] = "/var/tmp/rtd-metrics-probe-XXXXXX", buf[4096] = {};
        struct timespec start, now;
        int fd;

        fd = mkstemp(path);
        if (fd < 0)
                die("mkstemp");
        (void) unlink(path);

        read_proc_interrupts(a, n);
        metrics_refresh(x);
        json_t *before = metrics_render_json(x);
        (void) clock_gettime(CLOCK_MONOTONIC, &start);
        do {
                (void) !pwrite(fd, buf, sizeof buf, 0);
                (void) fdatasync(fd);
                (void) clock_gettime(CLOCK_MONOTONIC, &now);
        } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < msec);
        metrics_refresh(x);
        json_t *after = metrics_render_json(x);
        read_proc_interrupts(b, n);
        close(fd);

        printf("{\"cpus\": [");
        for (unsigned i = 0; i < n; i++)
                printf("%s{\"cpu\": %u, \"proc\": %" PRIu64 ", \"collector\": %" PRIu64 "}", i ? ", " : "", i,
                       b[i] - a[i], json_irqs(after, i) - json_irqs(before, i));
        printf("]}\n");
        json_decref(before);
        json_decref(after);
        return 0;
}

int main(int argc, char **argv) {
        Manager m = { .proc_fd = -EBADF, .sys_fd = -EBADF };
        Metrics *x = NULL;
        int r;

        if (argc < 2) {
                fprintf(stderr, "usage: metrics-probe sleeper N | hog CPU MSEC | resident CPU MSEC | "
                        "resident-outside CPU | irq MSEC\n");
                return 2;
        }
        if (getenv("METRICS_PROBE_DEBUG"))
                log_set_max_level(LOG_DEBUG);   /* libbpf's verifier log on load failures */
        m.proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (m.proc_fd < 0)
                die("open /proc");
        /* No event loop: the probe refreshes the snapshot itself (metrics_refresh). */
        r = metrics_new(&m, &x);
        if (r < 0) {
                errno = -r;
                die("metrics_new");
        }
        json_t *st = metrics_to_json(x);
        char *s = json_dumps(st, JSON_COMPACT);
        fprintf(stderr, "collector: %s\n", s);
        free(s);
        json_decref(st);

        if (streq(argv[1], "sleeper") && argc == 3)
                r = cmd_sleeper(x, atoi(argv[2]));
        else if (streq(argv[1], "hog") && argc == 4)
                r = cmd_hog(x, atoi(argv[2]), atoi(argv[3]));
        else if (streq(argv[1], "resident") && argc == 4)
                r = cmd_resident(x, atoi(argv[2]), atoi(argv[3]), false);
        else if (streq(argv[1], "resident-outside") && argc == 3)
                r = cmd_resident(x, atoi(argv[2]), 0, true);
        else if (streq(argv[1], "irq") && argc == 3)
                r = cmd_irq(x, atoi(argv[2]));
        else {
                fprintf(stderr, "metrics-probe: unknown command\n");
                r = 2;
        }
        metrics_free(x);
        close(m.proc_fd);
        return r;
}
