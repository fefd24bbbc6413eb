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

int verb_metrics(Ctl *c, int argc, char **argv) {
        json_t *j = NULL;
        int r;

        if (argc > 1) {
                if (streq(argv[1], "--help") || streq(argv[1], "-h")) {
                        printf("Usage: rtctl metrics [--json]\nPer-CPU scheduling counters since rtd started, and "
                               "the intruders of the last second on reserved CPUs.\n");
                        return 0;
                }
                fprintf(stderr, "rtctl: metrics takes no arguments (got '%s'); see rtctl metrics --help\n", argv[1]);
                return RTCTL_EXIT_USAGE;
        }
        r = ctl_get_json(c, "/v1/metrics", &j);
        if (r != 0)
                return r;
        if (c->json) {
                ctl_dump_json(j);
                json_decref(j);
                return 0;
        }

        View v;
        view_init(&v, stdout);
        view_metrics(&v, j);
        view_done(&v);
        json_decref(j);
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
