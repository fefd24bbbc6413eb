/* SPDX-License-Identifier: MIT */
/*
 * rtctl show (one job, like kubectl describe: what happened first, then what it asked for, then how quiet
 * its CPU was) and rtctl list (one aligned line per job).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

/* "exit code 3", "killed by SIGKILL", "timed out", ...: how it ended, for a person. */
static const char *outcome(View *v, json_t *job, char *buf, size_t size) {
        const char *state = view_jstr(v, job, "state", "?");
        json_t *code = json_object_get(job, "exit_code"), *sig = json_object_get(job, "signal");

        if (json_is_integer(sig) && json_integer_value(sig) > 0) {
                const char *name = view_signal_name(json_integer_value(sig));
                if (name)
                        snprintf(buf, size, "killed by SIG%s", name);
                else
                        snprintf(buf, size, "killed by signal %lld", json_integer_value(sig));
        } else if (json_is_integer(code))
                snprintf(buf, size, "exit code %lld", json_integer_value(code));
        else if (streq(state, "queued"))
                snprintf(buf, size, "waiting for a CPU");
        else if (streq(state, "running") || streq(state, "starting"))
                snprintf(buf, size, "%s", state);
        else
                snprintf(buf, size, "no exit code");
        return buf;
}

/* argv as a person would type it: words with spaces or quotes single-quoted. */
static void print_argv(View *v, json_t *argv) {
        json_t *a;
        size_t i;

        fprintf(v->out, "%*s: ", v->key_width, "Command");
        json_array_foreach(argv, i, a) {
                const char *s = view_s(v, json_string_value(a), "''");
                bool quote = strpbrk(s, " \t'\"$`\\|&;<>()*?[]{}~#!") != NULL;
                if (i)
                        fputc(' ', v->out);
                if (!quote) {
                        fputs(s, v->out);
                        continue;
                }
                fputc('\'', v->out);
                for (const char *c = s; *c; c++)
                        fputs(*c == '\'' ? "'\\''" : (char[2]){ *c, 0 }, v->out);
                fputc('\'', v->out);
        }
        fputc('\n', v->out);
}

/* Seconds since the epoch of an API time ("2026-11-25T18:56:27.123456Z"), or -1. */
static double epoch(json_t *job, const char *key) {
        const char *iso = json_string_value(json_object_get(job, key)), *end;
        struct tm tm = {};
        double frac = 0;

        if (!iso || !(end = strptime(iso, "%Y-%m-%dT%H:%M:%S", &tm)))
                return -1;
        if (*end == '.')
                frac = strtod(end, NULL);
        return (double) timegm(&tm) + frac;
}

/* Submitted with its date; started and ended as the time of day and how long after the step before. */
static void times(View *v, json_t *job) {
        double sub = epoch(job, "submitted_at"), start = epoch(job, "started_at"), end = epoch(job, "ended_at");
        const char *s_start = json_string_value(json_object_get(job, "started_at"));
        const char *s_end = json_string_value(json_object_get(job, "ended_at"));
        char buf[96], d[32];

        if (view_time(v, json_string_value(json_object_get(job, "submitted_at")), buf, sizeof buf))
                view_field(v, "Submitted", "%s", buf);
        /* rtd's own dispatch latency (accepted to exec) when it has it, else the difference of the times. */
        if (start >= 0 && sub >= 0)
                view_field(v, "Started", "%.12s, %s after submission", s_start + 11,
                           view_duration(json_is_integer(json_object_get(job, "dispatch_latency_us"))
                                                 ? view_jint(job, "dispatch_latency_us") / 1e6 : start - sub, d, sizeof d));
        if (end >= 0 && start >= 0)
                view_field(v, "Ended", "%.12s, ran %s", s_end + 11,
                           view_duration(json_is_number(json_object_get(job, "duration_s")) ? view_jnum(job, "duration_s")
                                                                                            : end - start, d, sizeof d));
        else if (end >= 0 && sub >= 0)
                view_field(v, "Ended", "%.12s, %s after submission, without running", s_end + 11,
                           view_duration(end - sub, d, sizeof d));
}

/* The one-line answer to "was it quiet?" from the collector's figures. */
static void quiet_line(View *v, json_t *m) {
        long long pre = view_jint(m, "preemptions"), mig = view_jint(m, "migrations");
        long long irq = view_jint(m, "hardirqs") + view_jint(m, "softirqs");
        long long inv = view_jint(m, "involuntary_switches");

        if (!json_is_object(m) || json_object_get(m, "error"))
                return;
        if (pre + mig + irq == 0)
                view_field_color(v, "Quiet", VC_GOOD, "yes: no preemption, migration or interrupt while it ran");
        else
                view_field_color(v, "Quiet", VC_WARN, "no: %lld preemption%s, %lld migration%s, %lld interrupt%s "
                                 "(%lld involuntary switch%s)", pre, pre == 1 ? "" : "s", mig, mig == 1 ? "" : "s",
                                 irq, irq == 1 ? "" : "s", inv, inv == 1 ? "" : "es");
}


/* "12 hard (340µs)", or "0 hard": a time only where there was something to time. */
static const char *irq_part(json_t *m, const char *count_key, const char *seconds_key, const char *kind, char *buf,
                            size_t size) {
        char d[32];
        long long n = view_jint(m, count_key);

        if (n == 0)
                snprintf(buf, size, "%lld %s", n, kind);
        else
                snprintf(buf, size, "%lld %s (%s)", n, kind, view_duration(view_jnum(m, seconds_key), d, sizeof d));
        return buf;
}
static void scheduling(View *v, json_t *m) {
        char b1[32], b2[64], b3[64];

        if (!json_is_object(m))
                return;
        view_section(v, "How quiet it ran");
        if (json_is_string(json_object_get(m, "error"))) {
                view_field(v, "Figures", "none (%s)", view_jstr(v, m, "error", ""));
                return;
        }
        view_field(v, "On CPU", "%s in %lld task%s (collector %s)", view_duration(view_jnum(m, "on_cpu_seconds"), b1, sizeof b1),
                   view_jint(m, "tasks"), view_jint(m, "tasks") == 1 ? "" : "s", view_jstr(v, m, "collector", "?"));
        view_field(v, "Switches", "%lld voluntary, %lld involuntary", view_jint(m, "voluntary_switches"),
                   view_jint(m, "involuntary_switches"));
        if (json_object_get(m, "preemptions") || json_object_get(m, "migrations"))
                view_field(v, "Disturbed", "%lld preemption%s, %lld migration%s", view_jint(m, "preemptions"),
                           view_jint(m, "preemptions") == 1 ? "" : "s", view_jint(m, "migrations"),
                           view_jint(m, "migrations") == 1 ? "" : "s");
        fprintf(v->out, "%*s: %lld wait%s, %s in all", v->key_width, "Run queue", view_jint(m, "runqueue_waits"),
                view_jint(m, "runqueue_waits") == 1 ? "" : "s",
                view_duration(view_jnum(m, "runqueue_wait_seconds"), b1, sizeof b1));
        if (view_jnum(m, "runqueue_max_seconds") > 0)
                fprintf(v->out, ", longest %s", view_duration(view_jnum(m, "runqueue_max_seconds"), b2, sizeof b2));
        fputc('\n', v->out);
        if (json_object_get(m, "hardirqs") && view_jint(m, "hardirqs") + view_jint(m, "softirqs") == 0)
                view_field(v, "Interrupts", "none");
        else if (json_object_get(m, "hardirqs"))
                view_field(v, "Interrupts", "%s, %s", irq_part(m, "hardirqs", "hardirq_seconds", "hard", b2, sizeof b2),
                           irq_part(m, "softirqs", "softirq_seconds", "soft", b3, sizeof b3));
}

/* The job's limits that bit ([Jobs] MaxOutputBytes=, MaxTasks=, MaxMemory=), once it has ended. */
static void limits_hit_line(View *v, json_t *job) {
        json_t *h = json_object_get(job, "limits_hit"), *capped = json_object_get(h, "output_capped"), *x;
        long long oom = view_jint(h, "oom_kills"), refused = view_jint(h, "tasks_refused");
        char buf[160] = "";
        size_t i, n = 0;

        if (json_array_size(capped) > 0) {
                n += (size_t) snprintf(buf + n, sizeof buf - n, "output capped (");
                json_array_foreach(capped, i, x)
                        n += (size_t) snprintf(buf + n, sizeof buf - n, "%s%s", i ? ", " : "",
                                               view_s(v, json_string_value(x), "?"));
                n += (size_t) snprintf(buf + n, sizeof buf - n, ")");
        }
        if (oom > 0 && n < sizeof buf)
                n += (size_t) snprintf(buf + n, sizeof buf - n, "%s%lld OOM kill%s", n ? ", " : "", oom, oom == 1 ? "" : "s");
        if (refused > 0 && n < sizeof buf)
                n += (size_t) snprintf(buf + n, sizeof buf - n, "%s%lld task%s refused", n ? ", " : "", refused,
                                       refused == 1 ? "" : "s");
        if (n > 0)
                view_field_color(v, "Limits hit", VC_WARN, "%s", buf);
}

void view_job(View *v, json_t *job) {
        json_t *spec = json_object_get(job, "spec"), *x;
        const char *state = view_jstr(v, job, "state", "?");
        ViewColor c = view_state_color(state);
        char b1[64], b2[32], b3[32];

        fprintf(v->out, "%s●%s job %lld (%s): %s%s%s", view_on(v, c), view_off(v), view_jint(job, "id"),
                view_jstr(v, job, "name", "?"), view_on(v, c), state, view_off(v));
        if (json_is_integer(json_object_get(job, "exit_code")) || json_is_integer(json_object_get(job, "signal")))
                fprintf(v->out, ", %s", outcome(v, job, b1, sizeof b1));
        fputc('\n', v->out);
        if (json_is_string(json_object_get(job, "reason")))
                view_field_color(v, "Reason", c == VC_GOOD ? VC_NONE : c, "%s", view_jstr(v, job, "reason", ""));
        limits_hit_line(v, job);
        if (json_is_array(json_object_get(spec, "argv")))
                print_argv(v, json_object_get(spec, "argv"));
        else
                view_field(v, "Command", "(another user's job: not shown)");
        view_field(v, "User", "%s (uid %lld)", view_jstr(v, job, "user", "?"), view_jint(job, "uid"));
        bool ended = json_is_string(json_object_get(job, "ended_at"));
        fprintf(v->out, "%*s: ", v->key_width, ended ? "Ran on" : "Runs on");
        if (json_is_string(json_object_get(job, "cpus")))
                fprintf(v->out, "%s", view_cpus(view_jstr(v, job, "cpus", NULL), b1, sizeof b1));
        else
                fprintf(v->out, "%s", ended ? "nowhere (it never started)" : "not placed yet");
        fprintf(v->out, ", %s", view_jstr(v, job, "policy", "?"));
        if (!streq(view_jstr(v, job, "policy", ""), "other"))
                fprintf(v->out, " priority %lld", view_jint(job, "priority"));
        fputc('\n', v->out);
        quiet_line(v, json_object_get(job, "metrics"));
        if (json_is_integer(json_object_get(job, "pid")))
                view_field(v, "PID", "%lld%s", view_jint(job, "pid"),
                           json_is_true(json_object_get(job, "adopted")) ? " (adopted after an rtd restart)" : "");

        times(v, job);
        if (json_is_number(json_object_get(job, "cpu_time_s"))) {
                view_field(v, "CPU time", "%s (user %s, system %s)", view_duration(view_jnum(job, "cpu_time_s"), b1, sizeof b1),
                           view_duration(view_jnum(job, "user_time_s"), b2, sizeof b2),
                           view_duration(view_jnum(job, "system_time_s"), b3, sizeof b3));
                view_field(v, "Memory", "%s at most", view_kib(view_jint(job, "max_rss_kb"), b1, sizeof b1));
                if (!json_is_object(json_object_get(job, "metrics")))
                        view_field(v, "Switches", "%lld voluntary, %lld involuntary",
                                   view_jint(job, "voluntary_ctxt_switches"), view_jint(job, "involuntary_ctxt_switches"));
        }
        scheduling(v, json_object_get(job, "metrics"));

        view_section(v, "Asked for");
        fprintf(v->out, "%*s: %lld CPU%s", v->key_width, "CPUs", view_jint(spec, "cores"), view_jint(spec, "cores") == 1 ? "" : "s");
        if (json_is_string(json_object_get(spec, "cpus")))
                fprintf(v->out, " (exactly %s)", view_jstr(v, spec, "cpus", ""));
        fputc('\n', v->out);
        if (json_is_number(json_object_get(spec, "timeout_s")))
                view_field(v, "Timeout", "%s", view_duration(view_jnum(spec, "timeout_s"), b2, sizeof b2));
        if (json_is_string(json_object_get(spec, "cwd")))
                view_field(v, "Directory", "%s", view_jstr(v, spec, "cwd", ""));
        if ((x = json_object_get(spec, "env")) && json_object_size(x) > 0)
                view_field(v, "Environment", "%zu variable%s (--json shows them)", json_object_size(x),
                           json_object_size(x) == 1 ? "" : "s");
        else if (x)
                view_field(v, "Environment", "empty");
        if (json_is_string(json_object_get(job, "cgroup")))
                view_field(v, "Cgroup", "%s", view_jstr(v, job, "cgroup", ""));
}

void view_jobs(View *v, json_t *res) {
        json_t *jobs = json_object_get(res, "jobs"), *job;
        size_t i;

        if (json_array_size(jobs) == 0) {
                fprintf(v->out, "No jobs.\n");
                return;
        }
        fprintf(v->out, "%s%-7s %-10s %-10s %-6s %-9s %-14s %-8s %s%s\n", view_on(v, VC_BOLD), "ID", "STATE", "USER",
                "CPUS", "EXIT", "SUBMITTED UTC", "TOOK", "NAME", view_off(v));
        json_array_foreach(jobs, i, job) {
                const char *state = view_jstr(v, job, "state", "?");
                json_t *code = json_object_get(job, "exit_code"), *sig = json_object_get(job, "signal");
                const char *sub = json_string_value(json_object_get(job, "submitted_at"));
                char exit_s[24] = "", took[32] = "", when[16] = "";

                if (json_is_integer(sig)) {
                        const char *name = view_signal_name(json_integer_value(sig));
                        snprintf(exit_s, sizeof exit_s, name ? "SIG%s" : "signal %s", name ? name : "?");
                } else if (json_is_integer(code))
                        snprintf(exit_s, sizeof exit_s, "%lld", json_integer_value(code));
                if (json_is_number(json_object_get(job, "duration_s")))
                        view_duration(view_jnum(job, "duration_s"), took, sizeof took);
                if (sub && strlen(sub) >= 19)
                        snprintf(when, sizeof when, "%.5s %.8s", sub + 5, sub + 11);
                /* Pad by hand: the state is coloured and escapes would count in a printf width. */
                fprintf(v->out, "%-7lld %s", view_jint(job, "id"), view_on(v, view_state_color(state)));
                view_pad(v, state, 10);
                fprintf(v->out, "%s %-10s %-6s %-9s %-14s ", view_off(v), view_jstr(v, job, "user", "?"),
                        view_jstr(v, job, "cpus", "-"), *exit_s ? exit_s : "-", *when ? when : "-");
                view_pad(v, *took ? took : "-", 8);
                fprintf(v->out, " %s\n", view_jstr(v, job, "name", "-"));
        }
        if (json_is_string(json_object_get(res, "next_cursor")))
                fprintf(v->out, "(more: rtctl list --cursor %s)\n", view_jstr(v, res, "next_cursor", ""));
}
