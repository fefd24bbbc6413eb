/* SPDX-License-Identifier: MIT */
/* rtctl metrics (per-CPU summary of GET /v1/metrics) and rtctl top (the reserved CPUs, live, every second).
 * top redraws with two plain ANSI sequences (home, clear) only on a terminal; otherwise it prints one
 * frame per interval, so it behaves over ssh, in a pipe and in a log. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "rtctl.h"
#include "view.h"
#include "shared/macro.h"

static double num(json_t *o, const char *key) {
        json_t *v = json_object_get(o, key);
        return json_is_number(v) ? json_number_value(v) : 0;
}

static long long integer(json_t *o, const char *key) {
        return json_integer_value(json_object_get(o, key));
}

/* Task and IRQ names are anyone's: escaped for the terminal (escape.c). */
static const char *text(json_t *o, const char *key) {
        return ctl_jstr(o, key, "");
}

/* "12µs", "3.2ms", "1.1s" in a fixed width; "-" for unknown. */
static const char *fmt_seconds(double s, char buf[static 16]) {
        if (s < 0)
                return "-";
        if (s < 1e-3)
                (void) snprintf(buf, 16, "%.0fus", s * 1e6);
        else if (s < 1)
                (void) snprintf(buf, 16, "%.1fms", s * 1e3);
        else
                (void) snprintf(buf, 16, "%.2fs", s);
        return buf;
}

/* The same intruder in two readings: kernel pid and start time. */
static json_t *find_intruder(json_t *list, json_t *x) {
        json_t *y;
        size_t i;

        json_array_foreach(list, i, y)
                if (integer(y, "pid") == integer(x, "pid") && integer(y, "start_time_ns") == integer(x, "start_time_ns"))
                        return y;
        return NULL;
}

static int cmp_seconds(const void *a, const void *b) {
        double x = num(*(json_t *const *) a, "seconds"), y = num(*(json_t *const *) b, "seconds");
        return x < y ? 1 : x > y ? -1 : 0;
}

/* Top intruders of one reserved CPU: cumulative (before == NULL) or over the window before..cpu. */
static void print_intruders(json_t *cpu, json_t *before, long top, double window) {
        json_t *list = json_object_get(cpu, "intruders"), *x, *o = json_object_get(cpu, "intruders_other");
        json_t *old = before ? json_object_get(before, "intruders") : NULL;
        _cleanup_free_ json_t **rows = calloc(json_array_size(list) + 1, sizeof *rows);
        double total = num(cpu, "intrusion_seconds") - (before ? num(before, "intrusion_seconds") : 0), shown = 0;
        size_t i, n = 0;

        if (!rows)
                return;
        json_array_foreach(list, i, x) {
                json_t *p = old ? find_intruder(old, x) : NULL;
                double s = num(x, "seconds") - (p ? num(p, "seconds") : 0);
                long long runs = integer(x, "runs") - (p ? integer(p, "runs") : 0);

                if (runs == 0 && s <= 0)
                        continue;
                rows[n++] = json_pack("{s:s, s:I, s:s, s:I, s:f}", "comm", text(x, "comm"), "pid", integer(x, "pid"),
                                      "kind", text(x, "kind"), "runs", (json_int_t) runs, "seconds", s);
        }
        qsort(rows, n, sizeof *rows, cmp_seconds);
        if (before)
                printf("\nCPU %lld, top intruders over the last %.1f s (intrusion %.6f s):\n", integer(cpu, "cpu"), window,
                       total);
        else
                printf("\nCPU %lld, top intruders since rtd started (intrusion %.6f s in %lld runs):\n",
                       integer(cpu, "cpu"), total, integer(cpu, "intrusions"));
        if (n == 0)
                printf("  none\n");
        else
                printf("  %-16s %8s %-6s %8s %12s\n", "COMM", "PID", "KIND", "RUNS", "SECONDS");
        for (i = 0; i < n; i++) {
                if ((long) i < top) {
                        printf("  %-16s %8lld %-6s %8lld %12.6f\n", text(rows[i], "comm"), integer(rows[i], "pid"),
                               text(rows[i], "kind"), integer(rows[i], "runs"), num(rows[i], "seconds"));
                        shown += num(rows[i], "seconds");
                }
                json_decref(rows[i]);
        }
        /* The rest (past --top, and what the table had no room for) closes the sum. */
        if (total - shown > 5e-7 || (!before && integer(o, "runs")))
                printf("  %-16s %8s %-6s %8s %12.6f\n", "(other)", "-", "-", "-", total - shown);
}

/* Architecture interrupts: the tick against HZ (the floor while the CPU runs), the rest named. */
static void print_vectors(json_t *j, json_t *cpu) {
        json_t *v = json_object_get(cpu, "vectors"), *e, *ipi;
        json_t *hz = json_object_get(j, "hz");
        const char *k;
        char hzs[24] = "unknown";
        size_t i;

        if (json_is_integer(hz))
                (void) snprintf(hzs, sizeof hzs, "%lld", json_integer_value(hz));
        printf("  vectors rtd/kernel (%s):", text(j, "vectors_source"));
        json_object_foreach(v, k, e)
                if (integer(e, "count") || integer(e, "kernel_count"))
                        /* rtd's programs against the kernel's own counter, both since rtd started: a
                         * shortfall is events the tracepoints never delivered. */
                        printf(" %s %lld/%lld", k, integer(e, "count"), integer(e, "kernel_count"));
        printf("\n  tick: LOC %.0f/s in the last interval, HZ %s: the floor of a CPU that runs a task "
               "(no nohz_full), not an intruder\n", num(json_object_get(v, "LOC"), "per_second"),
               hzs);
        /* Switches no tracepoint reported: their slices are read from the tasks themselves, and the
         * ones that could not be are counted apart (their time is not in the figures). */
        if (integer(cpu, "missed_events"))
                printf("  sched_switch events never reported: %lld (slices left out: %lld)\n",
                       integer(cpu, "missed_events"), integer(cpu, "missed_unrecovered"));
        json_array_foreach(json_object_get(cpu, "ipis"), i, ipi)
                printf("  IPI from %s (pid %lld, CPU %lld) at %s: %lld\n", text(ipi, "sender_comm"),
                       integer(ipi, "sender_pid"), integer(ipi, "sender_cpu"), text(ipi, "site"), integer(ipi, "count"));
}

int verb_metrics(Ctl *c, int argc, char **argv) {
        static const struct option options[] = {
                { "window", required_argument, NULL, 'w' },
                { "top", required_argument, NULL, 't' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        json_t *j = NULL, *before = NULL, *cpus, *cpu;
        double window = 0;
        long top = 10;
        size_t i;
        int opt, r;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "w:t:h", options, NULL)) >= 0) {
                char *end = NULL;

                switch (opt) {
                case 'w':
                        window = strtod(optarg, &end);
                        if (!end || *end || !(window >= 1 && window <= 3600)) {
                                fprintf(stderr, "rtctl: --window needs seconds from 1 to 3600, got '%s'\n", optarg);
                                return RTCTL_EXIT_USAGE;
                        }
                        break;
                case 't':
                        top = strtol(optarg, &end, 10);
                        if (!end || *end || top < 1 || top > 4096) {
                                fprintf(stderr, "rtctl: --top needs a number from 1 to 4096, got '%s'\n", optarg);
                                return RTCTL_EXIT_USAGE;
                        }
                        break;
                case 'h':
                        printf("Usage: rtctl metrics [--window SEC] [--top N] [--json]\nPer-CPU scheduling counters "
                               "since rtd started; for each reserved CPU its top intruders\n(cumulative, or over the "
                               "last SEC seconds with --window), its interrupt vectors against\nthe tick, and the "
                               "IPIs it was sent.\n  -w, --window SEC  intruders over a window of SEC seconds (1-3600)\n"
                               "  -t, --top N       intruders shown per CPU (default 10; the rest is \"other\")\n");
                        return 0;
                default:
                        return RTCTL_EXIT_USAGE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "rtctl: metrics takes no arguments (got '%s'); see rtctl metrics --help\n", argv[optind]);
                return RTCTL_EXIT_USAGE;
        }
        if (window > 0) {
                r = ctl_get_json(c, "/v1/metrics", &before);
                if (r != 0)
                        return r;
                (void) usleep((useconds_t) (window * 1e6));
        }
        r = ctl_get_json(c, "/v1/metrics", &j);
        if (r != 0) {
                json_decref(before);
                return r;
        }
        if (c->json) {
                ctl_dump_json(j);
                json_decref(j);
                json_decref(before);
                return 0;
        }

        View v;
        view_init(&v, stdout);
        view_metrics(&v, j);
        view_done(&v);

        /* Then each reserved CPU's intruders (cumulative, or over --window) and interrupt vectors. */
        cpus = json_object_get(j, "cpus");
        json_array_foreach(cpus, i, cpu) {
                if (!json_is_true(json_object_get(cpu, "reserved")))
                        continue;
                print_intruders(cpu, before ? json_array_get(json_object_get(before, "cpus"), i) : NULL, top, window);
                print_vectors(j, cpu);
        }
        json_decref(j);
        json_decref(before);
        return 0;
}


/* ---- top ---- */

static volatile sig_atomic_t top_stop;
static struct termios saved_tty;
static bool tty_raw;

static void on_signal(int sig) {
        (void) sig;
        top_stop = 1;
}

static void tty_restore(void) {
        if (tty_raw)
                (void) tcsetattr(STDIN_FILENO, TCSANOW, &saved_tty);
        tty_raw = false;
}

/* Non-canonical, no echo: a single 'q' is seen at once. Output processing stays on (\n works). */
static void tty_setup(void) {
        struct termios t;

        if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tty) < 0)
                return;
        t = saved_tty;
        t.c_lflag &= ~(ICANON | ECHO);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0)
                tty_raw = true;
}

static unsigned term_width(void) {
        struct winsize w;
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20)
                return w.ws_col;
        return 200;
}

static void line(bool tty, unsigned width, const char *fmt, ...) _printf_(3, 4);
static void line(bool tty, unsigned width, const char *fmt, ...) {
        char buf[512];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        if (tty && strlen(buf) >= width)
                buf[width - 1] = 0;     /* never wrap: a wrapped line scrolls the screen over ssh */
        fputs(buf, stdout);
        fputs(tty ? "\033[K\n" : "\n", stdout);
}

static void top_frame(json_t *j, bool tty) {
        unsigned width = term_width();
        json_t *cpus = json_object_get(j, "cpus"), *cpu, *col = json_object_get(j, "collector");
        bool any_reserved = *text(j, "reserved_cpus") != 0;
        time_t now = time(NULL);
        char ts[16];
        size_t i;

        (void) strftime(ts, sizeof ts, "%H:%M:%S", localtime(&now));
        if (tty)
                fputs("\033[H", stdout);
        line(tty, width, "rtctl top  %s  collector %s%s%s  reserved %s%s", ts, text(col, "collector"),
             json_is_true(json_object_get(col, "bpf_enabled")) ? " " : "",
             json_is_true(json_object_get(col, "bpf_enabled")) ? text(col, "attach") : "",
             any_reserved ? text(j, "reserved_cpus") : "none (showing all CPUs)", tty ? "   q quits" : "");
        line(tty, width, "%-4s %-8s %9s %9s %8s %-22s %8s %8s %9s", "CPU", "JOB", "CSW/s", "INVOL/s", "INTR%",
             "TOP INTRUDER", "IRQ/s", "SIRQ/s", "RUNQ-P99");
        json_array_foreach(cpus, i, cpu) {
                json_t *li = json_object_get(cpu, "last_interval"), *top, *p99;
                char job[16] = "-", who[40] = "-", b[16];

                if (any_reserved && !json_is_true(json_object_get(cpu, "reserved")))
                        continue;
                if (json_is_integer(json_object_get(cpu, "current_job")))
                        (void) snprintf(job, sizeof job, "%lld", integer(cpu, "current_job"));
                top = json_array_get(json_object_get(li, "top_intruders"), 0);
                if (top)
                        (void) snprintf(who, sizeof who, "%.15s/%lld", text(top, "comm"), integer(top, "pid"));
                p99 = json_object_get(li, "runqueue_latency_p99_seconds");
                line(tty, width, "%-4lld %-8s %9.0f %9.0f %7.2f%% %-22s %8.0f %8.0f %9s", integer(cpu, "cpu"), job,
                     num(li, "context_switches_per_second"), num(li, "involuntary_switches_per_second"),
                     100 * num(li, "intrusion_ratio"), who, num(li, "hardirqs_per_second"),
                     num(li, "softirqs_per_second"), fmt_seconds(json_is_number(p99) ? json_number_value(p99) : -1, b));
        }
        if (tty)
                fputs("\033[J", stdout);        /* clear what an earlier, longer frame left below */
        else
                putchar('\n');
        fflush(stdout);
}

int verb_top(Ctl *c, int argc, char **argv) {
        static const struct option options[] = {
                { "iterations", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        long iterations = -1;
        bool tty = isatty(STDOUT_FILENO);
        int opt, r = 0;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "n:h", options, NULL)) >= 0)
                switch (opt) {
                case 'n': {
                        char *end;
                        iterations = strtol(optarg, &end, 10);
                        if (*end || iterations <= 0) {
                                fprintf(stderr, "rtctl: --iterations needs a positive number, got '%s'\n", optarg);
                                return RTCTL_EXIT_USAGE;
                        }
                        break;
                }
                case 'h':
                        printf("Usage: rtctl top [-n N]\nLive view of the reserved CPUs, refreshed every second: "
                               "job, context switches/s,\nintrusion time and the top intruder, IRQs/s, run-queue "
                               "latency p99. q quits.\nWhen stdout is not a terminal, prints one plain frame per "
                               "second.\n  -n, --iterations N  stop after N frames\n");
                        return 0;
                default:
                        return RTCTL_EXIT_USAGE;
                }
        if (optind < argc) {
                fprintf(stderr, "rtctl: top takes no arguments (got '%s')\n", argv[optind]);
                return RTCTL_EXIT_USAGE;
        }

        (void) signal(SIGINT, on_signal);
        (void) signal(SIGTERM, on_signal);
        if (tty) {
                tty_setup();
                fputs("\033[H\033[2J", stdout);
        }
        for (long n = 0; !top_stop && (iterations < 0 || n < iterations); n++) {
                json_t *j = NULL;
                struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };

                r = ctl_get_json(c, "/v1/metrics", &j);
                if (r != 0)
                        break;
                if (c->json) {
                        json_dumpf(j, stdout, JSON_COMPACT);
                        putchar('\n');
                        fflush(stdout);
                } else
                        top_frame(j, tty);
                json_decref(j);
                if (iterations >= 0 && n + 1 >= iterations)
                        break;
                /* Wait a second, or less if 'q' is pressed. */
                if (poll(&p, tty_raw ? 1 : 0, 1000) > 0) {
                        char ch;
                        if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
                                break;
                }
        }
        tty_restore();
        return r;
}
