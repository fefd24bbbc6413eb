/* SPDX-License-Identifier: MIT */
/*
 * rtctl submit, list, show, cancel, wait, logs.
 *
 * Exit codes of `submit --wait` and `wait`: the job's own exit code when it exited; 128+N when signal N
 * killed it; 124 when it timed out (as timeout(1)); 125 when it was cancelled; 123 when it was lost
 * (rtd could not learn its fate after a crash); otherwise rtctl's codes (1 refused, 2 usage, 69 unreachable).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rtctl.h"
#include "view.h"
#include "shared/http1.h"
#include "shared/macro.h"

#define RTCTL_EXIT_JOB_LOST 123
#define RTCTL_EXIT_JOB_TIMED_OUT 124
#define RTCTL_EXIT_JOB_CANCELLED 125

extern char **environ;

/* Every string shown from rtd goes through here: escaped for the terminal (escape.c). */
static const char *jstr(json_t *o, const char *key, const char *dflt) {
        return ctl_jstr(o, key, dflt);
}

static int parse_job_id(const char *verb, const char *s, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s ? s : "", &end, 10);
        if (!s || !*s || *end || errno || v == 0) {
                fprintf(stderr, "rtctl %s: '%s' is not a job id (a positive number, see 'rtctl list')\n", verb,
                        strempty(s));
                return RTCTL_EXIT_USAGE;
        }
        *ret = v;
        return 0;
}

/* The exit code that tells a script how the job ended (see the header comment). */
int ctl_job_exit_code(json_t *job) {
        const char *state = jstr(job, "state", "");
        json_t *code = json_object_get(job, "exit_code"), *sig = json_object_get(job, "signal");

        if (streq(state, "timed_out"))
                return RTCTL_EXIT_JOB_TIMED_OUT;
        if (streq(state, "cancelled"))
                return RTCTL_EXIT_JOB_CANCELLED;
        if (streq(state, "lost"))
                return RTCTL_EXIT_JOB_LOST;
        if (json_is_integer(sig) && json_integer_value(sig) > 0)
                return 128 + (int) json_integer_value(sig);
        if (json_is_integer(code))
                return (int) json_integer_value(code);
        return streq(state, "succeeded") ? 0 : RTCTL_EXIT_REFUSED;
}

static bool state_is_final(const char *s) {
        return s && (streq(s, "succeeded") || streq(s, "failed") || streq(s, "cancelled") ||
                     streq(s, "timed_out") || streq(s, "lost"));
}

/* ---- waiting: server-sent events for one job ---- */

typedef struct WaitState {
        json_t *final;          /* the event of the job's end: state, exit_code, signal, reason */
        bool status_line;       /* stderr is a terminal: keep one live line */
        uint64_t id;
} WaitState;

static void show_status(WaitState *w, json_t *ev) {
        if (!w->status_line)
                return;
        fprintf(stderr, "\r\033[Kjob %" PRIu64 ": %s", w->id, jstr(ev, "state", "?"));
        if (json_is_string(json_object_get(ev, "reason")))
                fprintf(stderr, " (%s)", jstr(ev, "reason", ""));
        fflush(stderr);
}

static bool on_job_event(const char *type, const char *data, size_t size, void *userdata) {
        WaitState *w = userdata;
        json_t *ev;

        if (!streq(type, "job"))
                return true;
        ev = json_loadb(data, size, 0, NULL);
        if (ev) {
                show_status(w, ev);
                if (state_is_final(jstr(ev, "state", NULL)) && !w->final)
                        w->final = json_incref(ev);
                json_decref(ev);
        }
        return !w->final;
}

/*
 * Wait for the job to end without polling; survives an rtd restart by reconnecting. Returns an exit code.
 * *ret_job is the whole job with --json, else the event of its end, which has all the exit code needs.
 */
static int wait_for_job(Ctl *c, uint64_t id, bool quiet, json_t **ret_job) {
        WaitState w = { .status_line = !quiet && isatty(STDERR_FILENO) && !c->json, .id = id };
        CtlResponse refused;
        char path[64];
        int r;

        snprintf(path, sizeof path, "/v1/events?job=%" PRIu64, id);
        r = ctl_follow(c, path, on_job_event, &w, &w.final, &refused);
        ctl_response_done(&refused);    /* 404/403: the GET below prints the daemon's explanation */
        if (r != 0)
                return r;
        if (w.status_line)
                fputc('\n', stderr);
        if (w.final && !c->json) {
                *ret_job = w.final;
                return 0;
        }
        json_decref(w.final);

        snprintf(path, sizeof path, "/v1/jobs/%" PRIu64, id);
        return ctl_get_json(c, path, ret_job);
}

static bool write_chunk(const char *data, size_t size, void *userdata) {
        return fwrite(data, 1, size, userdata) == size;
}

static void print_output(Ctl *c, uint64_t id, const char *stream, FILE *to) {
        CtlResponse r;
        char path[96];

        snprintf(path, sizeof path, "/v1/jobs/%" PRIu64 "/output?stream=%s", id, stream);
        (void) ctl_stream(c, path, false, write_chunk, to, &r);
        fflush(to);
        ctl_response_done(&r);
}

/* ---- submit ---- */

static const char submit_usage[] =
        "rtctl submit [OPTIONS] -- CMD [ARGS...]\n"
        "Run CMD on reserved CPUs as you, pinned, under SCHED_FIFO (by default). Prints the job id.\n"
        "  -n, --name NAME          a name for the job\n"
        "  -c, --cores N            number of CPUs (default 1)\n"
        "      --cpus LIST          exactly these reserved CPUs (e.g. 2-3)\n"
        "  -P, --policy POLICY      fifo (default), rr, or other (pinned, not real-time)\n"
        "  -p, --priority N         real-time priority 1-99 (non-admins are capped)\n"
        "  -t, --timeout SEC        stop the job after SEC seconds\n"
        "  -Q, --queue-priority N   with [Jobs] Policy=priority: higher runs first (-1000..1000)\n"
        "  -C, --cwd DIR            working directory (default: the current one)\n"
        "  -e, --env KEY=VALUE      set a variable (repeatable)\n"
        "  -E, --no-env             do not send the current environment\n"
        "      --max-output BYTES   cap each of stdout/stderr (K, M, G suffixes; non-admins: only lower)\n"
        "      --max-tasks N        processes and threads the job may have at once (pids.max)\n"
        "      --max-memory BYTES   memory the job may use (memory.max)\n"
        "  -w, --wait               wait for the end, print the job's output, exit with its code:\n"
        "                           its exit code, 128+N if killed by signal N, 124 timed out,\n"
        "                           125 cancelled, 123 lost\n"
        "  -q, --quiet              with --wait: do not print the id, status or output\n"
        "Arrays (one request, N tasks; prints the array id, e.g. a12):\n"
        "      --array INDICES      a task per index: 0-999, 1-10:2 (step 2), 1,3,5; each task has\n"
        "                           RTD_ARRAY_ID and RTD_ARRAY_INDEX in its environment\n"
        "      --each FILE          a task per line of FILE ('-': stdin), its words appended to CMD\n"
        "                           (split as a shell would, quotes kept literal, # lines skipped)\n"
        "      --array-subst        replace {} in CMD's arguments by the task's index\n"
        "      --max-running K      at most K tasks of the array hold CPUs at once\n"
        "  with --wait: a progress bar on a terminal, a summary, exit 0 if every task succeeded,\n"
        "  else the code of the first failed task in the array's order\n";

static int env_put(json_t *env, const char *kv) {
        const char *eq = strchr(kv, '=');
        _cleanup_free_ char *k = eq ? strndup(kv, eq - kv) : NULL;
        if (!k || !*k)
                return -EINVAL;
        return json_object_set_new(env, k, json_string(eq + 1)) < 0 ? -ENOMEM : 0;
}

int verb_submit(Ctl *c, int argc, char **argv) {
        static const struct option options[] = {
                { "name", required_argument, NULL, 'n' },
                { "cores", required_argument, NULL, 'c' },
                { "cpus", required_argument, NULL, 'L' },
                { "policy", required_argument, NULL, 'P' },
                { "priority", required_argument, NULL, 'p' },
                { "timeout", required_argument, NULL, 't' },
                { "queue-priority", required_argument, NULL, 'Q' },
                { "cwd", required_argument, NULL, 'C' },
                { "env", required_argument, NULL, 'e' },
                { "no-env", no_argument, NULL, 'E' },
                { "max-output", required_argument, NULL, 'O' },
                { "max-tasks", required_argument, NULL, 'T' },
                { "max-memory", required_argument, NULL, 'M' },
                { "wait", no_argument, NULL, 'w' },
                { "quiet", no_argument, NULL, 'q' },
                { "array", required_argument, NULL, 'A' },
                { "each", required_argument, NULL, 'F' },
                { "array-subst", no_argument, NULL, 'S' },
                { "max-running", required_argument, NULL, 'R' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(json_decrefp) json_t *spec = json_object(), *extra_env = json_object();
        CtlArrayOptions arr = {};
        json_t *job = NULL;
        bool send_env = true, wait = false, quiet = false;
        char cwd[PATH_MAX];
        CtlResponse r;
        uint64_t id;
        int o, k;

        while ((o = getopt_long(argc, argv, "+n:c:P:p:t:Q:C:e:Ewqh", options, NULL)) >= 0) {
                char *end = NULL;
                long long v;
                switch (o) {
                case 'n':
                        json_object_set_new(spec, "name", json_string(optarg));
                        break;
                case 'c':
                case 'p':
                case 'Q':
                        v = strtoll(optarg, &end, 10);
                        if (!*optarg || *end) {
                                fprintf(stderr, "rtctl submit: --%s needs a number, not '%s'\n",
                                        o == 'c' ? "cores" : o == 'p' ? "priority" : "queue-priority", optarg);
                                return RTCTL_EXIT_USAGE;
                        }
                        json_object_set_new(spec, o == 'c' ? "cores" : o == 'p' ? "priority" : "queue_priority",
                                            json_integer(v));
                        break;
                case 'O':
                case 'T':
                case 'M': {
                        const char *field = o == 'O' ? "max_output_bytes" : o == 'T' ? "max_tasks" : "max_memory_bytes";
                        unsigned long long n = strtoull(optarg, &end, 10);
                        const char *units = "KMGT", *u = *end ? strchr(units, *end) : NULL;
                        if (!*optarg || *optarg == '-' || (*end && (!u || end[1])) || (o == 'T' && *end)) {
                                fprintf(stderr, "rtctl submit: --%s needs a number%s, not '%s'\n",
                                        o == 'O' ? "max-output" : o == 'T' ? "max-tasks" : "max-memory",
                                        o == 'T' ? "" : " of bytes (K, M, G, T suffixes allowed)", optarg);
                                return RTCTL_EXIT_USAGE;
                        }
                        for (const char *p = units; u && p <= u; p++)
                                n *= 1024;
                        json_object_set_new(spec, field, json_integer((json_int_t) n));
                        break;
                }
                case 'L':
                        json_object_set_new(spec, "cpus", json_string(optarg));
                        break;
                case 'P':
                        json_object_set_new(spec, "policy", json_string(optarg));
                        break;
                case 't': {
                        double t = strtod(optarg, &end);
                        if (!*optarg || *end) {
                                fprintf(stderr, "rtctl submit: --timeout needs seconds, not '%s'\n", optarg);
                                return RTCTL_EXIT_USAGE;
                        }
                        json_object_set_new(spec, "timeout_s", json_real(t));
                        break;
                }
                case 'C':
                        json_object_set_new(spec, "cwd", json_string(optarg));
                        break;
                case 'e':
                        if (env_put(extra_env, optarg) < 0) {
                                fprintf(stderr, "rtctl submit: --env needs KEY=VALUE, not '%s'\n", optarg);
                                return RTCTL_EXIT_USAGE;
                        }
                        break;
                case 'E':
                        send_env = false;
                        break;
                case 'w':
                        wait = true;
                        break;
                case 'q':
                        quiet = true;
                        break;
                case 'A':
                        arr.indices = optarg;
                        break;
                case 'F':
                        arr.each = optarg;
                        break;
                case 'S':
                        arr.subst = true;
                        break;
                case 'R': {
                        unsigned long m = strtoul(optarg, &end, 10);
                        if (!*optarg || *end || *optarg == '-' || m == 0 || m > UINT_MAX) {
                                fprintf(stderr, "rtctl submit: --max-running needs a number of tasks (1 or more), "
                                        "not '%s'\n", optarg);
                                return RTCTL_EXIT_USAGE;
                        }
                        arr.max_running = (unsigned) m;
                        break;
                }
                case 'h':
                        printf("%s", submit_usage);
                        return RTCTL_EXIT_OK;
                default:
                        fprintf(stderr, "%s", submit_usage);
                        return RTCTL_EXIT_USAGE;
                }
        }
        if (optind >= argc) {
                fprintf(stderr, "rtctl submit: no command given. Usage:\n%s", submit_usage);
                return RTCTL_EXIT_USAGE;
        }

        json_t *args = json_array(), *env = json_object();
        for (int i = optind; i < argc; i++)
                json_array_append_new(args, json_string(argv[i]));
        json_object_set_new(spec, "argv", args);
        if (send_env)
                for (char **e = environ; e && *e; e++)
                        (void) env_put(env, *e);
        json_object_update(env, extra_env);
        json_object_set_new(spec, "env", env);
        if (!json_object_get(spec, "cwd") && getcwd(cwd, sizeof cwd))
                json_object_set_new(spec, "cwd", json_string(cwd));
        if (arr.indices && arr.each) {
                fprintf(stderr, "rtctl submit: give --array or --each, not both\n");
                return RTCTL_EXIT_USAGE;
        }
        if (arr.indices || arr.each) {
                arr.wait = wait;
                arr.quiet = quiet;
                return ctl_array_submit(c, spec, &arr);
        }
        if (arr.subst || arr.max_running) {
                fprintf(stderr, "rtctl submit: --array-subst and --max-running go with --array or --each\n");
                return RTCTL_EXIT_USAGE;
        }

        k = ctl_create(c, "/v1/jobs", spec, &r, &id);
        if (k != 0)
                return k;
        if (!wait)
                return ctl_print_created(c, &r, "", id);
        ctl_response_done(&r);
        if (!quiet && !c->json && !isatty(STDERR_FILENO))
                fprintf(stderr, "job %" PRIu64 "\n", id);
        k = wait_for_job(c, id, quiet, &job);
        if (k != 0)
                return k;
        if (c->json) {
                ctl_dump_json(job);
        } else if (!quiet) {
                print_output(c, id, "stdout", stdout);
                print_output(c, id, "stderr", stderr);
                if (json_is_string(json_object_get(job, "reason")) && !streq(jstr(job, "state", ""), "succeeded"))
                        fprintf(stderr, "rtctl: job %" PRIu64 " %s: %s\n", id, jstr(job, "state", "?"),
                                jstr(job, "reason", ""));
        }
        k = ctl_job_exit_code(job);
        json_decref(job);
        return k;
}

/* ---- list, show ---- */

int verb_list(Ctl *c, int argc, char **argv) {
        static const struct option options[] = {
                { "state", required_argument, NULL, 's' },
                { "user", required_argument, NULL, 'u' },
                { "limit", required_argument, NULL, 'l' },
                { "cursor", required_argument, NULL, 'c' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *state = NULL, *user = NULL, *limit = NULL, *cursor = NULL;
        _cleanup_free_ char *path = NULL;
        const char *array = NULL;
        json_t *res;
        int o, k;

        while ((o = getopt_long(argc, argv, "+s:u:l:c:h", options, NULL)) >= 0)
                switch (o) {
                case 's': state = optarg; break;
                case 'u': user = optarg; break;
                case 'l': limit = optarg; break;
                case 'c': cursor = optarg; break;
                case 'h':
                        printf("rtctl list [aN] [--state STATE] [--user USER] [--limit N] [--cursor ID]\n"
                               "Jobs, newest first (with an array id aN: that array's tasks). Other users' jobs are\n"
                               "shown without their command line.\n");
                        return RTCTL_EXIT_OK;
                default:
                        return RTCTL_EXIT_USAGE;
                }
        if (optind < argc) {
                if (optind + 1 != argc || !ctl_is_array_id(argv[optind])) {
                        fprintf(stderr, "rtctl list: '%s' is not an array id (a12); list takes options, or one "
                                "array id\n", argv[optind]);
                        return RTCTL_EXIT_USAGE;
                }
                array = argv[optind];
        }
        _cleanup_free_ char *e_limit = http1_escape_query(limit ?: "50"), *e_state = http1_escape_query(strempty(state)),
                            *e_user = http1_escape_query(strempty(user)), *e_cursor = http1_escape_query(strempty(cursor));
        if (!e_limit || !e_state || !e_user || !e_cursor)
                return RTCTL_EXIT_REFUSED;
        if (asprintf(&path, "/v1/jobs?limit=%s%s%s%s%s%s%s%s%s", e_limit, state ? "&state=" : "", e_state,
                     user ? "&user=" : "", e_user, cursor ? "&cursor=" : "", e_cursor, array ? "&array=" : "",
                     strempty(array)) < 0)
                return RTCTL_EXIT_REFUSED;
        if (c->json) {
                CtlResponse r;
                k = ctl_request(c, "GET", path, NULL, &r);
                if (k == 0)
                        k = r.status == 200 ? ctl_print_json(&r) : ctl_fail(c, &r);
                ctl_response_done(&r);
                return k;
        }
        k = ctl_get_json(c, path, &res);
        if (k != 0)
                return k;
        View v;
        view_init(&v, stdout);
        view_jobs(&v, res);
        view_done(&v);
        json_decref(res);
        return RTCTL_EXIT_OK;
}

static int one_job(Ctl *c, int argc, char **argv, const char *usage, uint64_t *ret) {
        if (argc == 2 && (streq(argv[1], "--help") || streq(argv[1], "-h"))) {
                printf("%s", usage);
                return -1;
        }
        if (argc != 2) {
                fprintf(stderr, "%s", usage);
                return RTCTL_EXIT_USAGE;
        }
        return parse_job_id(argv[0], argv[1], ret);
}

int verb_show(Ctl *c, int argc, char **argv) {
        if (argc == 2 && ctl_is_array_id(argv[1]))
                return ctl_array_show(c, argv[1]);     /* an array: verb-array.c */
        char path[64];
        json_t *job;
        uint64_t id;
        /* rtctl show lease:ID is rtctl leases ID. */
        if (argc == 2 && startswith(argv[1], "lease:"))
                return verb_leases(c, argc, argv);
        int r = one_job(c, argc, argv, "rtctl show ID|aN|lease:ID\nOne job (or with aN, one array; with lease:ID, one "
                        "lease): spec, state, times, exit, CPU time, context switches, dispatch latency, "
                        "scheduling metrics.\n", &id);

        if (r != 0)
                return r < 0 ? RTCTL_EXIT_OK : r;
        snprintf(path, sizeof path, "/v1/jobs/%" PRIu64, id);
        if (c->json) {
                CtlResponse resp;
                r = ctl_request(c, "GET", path, NULL, &resp);
                if (r == 0)
                        r = resp.status == 200 ? ctl_print_json(&resp) : ctl_fail(c, &resp);
                ctl_response_done(&resp);
                return r;
        }
        r = ctl_get_json(c, path, &job);
        if (r != 0)
                return r;
        View v;
        view_init(&v, stdout);
        view_job(&v, job);
        view_done(&v);
        json_decref(job);
        return RTCTL_EXIT_OK;
}

int verb_cancel(Ctl *c, int argc, char **argv) {
        if (argc == 2 && ctl_is_array_id(argv[1]))
                return ctl_array_cancel(c, argv[1]);     /* an array: verb-array.c */
        char path[64];
        CtlResponse resp;
        uint64_t id;
        int r = one_job(c, argc, argv, "rtctl cancel ID|aN\nCancel a job (aN: every task of an array that has not ended): a queued job is dropped, a running one "
                        "gets SIGTERM and, after [Jobs] KillGraceSec=, SIGKILL.\n", &id);

        if (r != 0)
                return r < 0 ? RTCTL_EXIT_OK : r;
        snprintf(path, sizeof path, "/v1/jobs/%" PRIu64, id);
        r = ctl_request(c, "DELETE", path, NULL, &resp);
        if (r != 0)
                return r;
        if (resp.status != 200 && resp.status != 202)
                r = ctl_fail(c, &resp);
        else if (c->json)
                r = ctl_print_json(&resp);
        else
                printf("job %" PRIu64 ": %s\n", id, resp.status == 202 ? "stopping (SIGTERM sent)" : "cancelled");
        ctl_response_done(&resp);
        return r;
}

int verb_wait(Ctl *c, int argc, char **argv) {
        if (argc == 2 && ctl_is_array_id(argv[1]))
                return ctl_array_wait(c, argv[1]);     /* an array: verb-array.c */
        json_t *job = NULL;
        uint64_t id;
        int r = one_job(c, argc, argv, "rtctl wait ID|aN\nWait for a job (aN: every task of an array, 0 if all succeeded, else the first failure's code) to end; exit with its exit code, 128+N if "
                        "signal N killed it, 124 timed out, 125 cancelled, 123 lost.\n", &id);

        if (r != 0)
                return r < 0 ? RTCTL_EXIT_OK : r;
        r = wait_for_job(c, id, false, &job);
        if (r != 0)
                return r;
        if (c->json) {
                ctl_dump_json(job);
        } else
                printf("job %" PRIu64 ": %s%s%s\n", id, jstr(job, "state", "?"),
                       json_is_string(json_object_get(job, "reason")) ? ": " : "", jstr(job, "reason", ""));
        r = ctl_job_exit_code(job);
        json_decref(job);
        return r;
}

/* ---- logs ---- */

typedef struct LogState {
        uint64_t received;      /* bytes written to stdout: where a resumed stream starts */
        bool failed;
} LogState;

static bool on_log_chunk(const char *data, size_t size, void *userdata) {
        LogState *l = userdata;

        if (fwrite(data, 1, size, stdout) != size || fflush(stdout) != 0) {
                l->failed = true;       /* stdout closed (| head): stop */
                return false;
        }
        l->received += size;
        return true;
}

/*
 * logs -f: print until the job has ended and rtd has sent every byte. A stream that ends before that (rtd
 * restarted, the connection dropped) is resumed where it stopped (offset=), so nothing is printed twice or
 * lost; rtctl gives up only when rtd stays unreachable for a minute.
 */
static int follow_logs(Ctl *c, uint64_t id, const char *stream) {
        LogState l = {};
        unsigned unreachable = 0;
        char path[160];
        int r;

        for (;;) {
                CtlResponse resp;
                json_t *job = NULL;
                long status;

                snprintf(path, sizeof path, "/v1/jobs/%" PRIu64 "/output?stream=%s&follow=1&offset=%" PRIu64, id,
                         stream, l.received);
                r = ctl_stream(c, path, true, on_log_chunk, &l, &resp);
                status = resp.status;
                ctl_response_done(&resp);
                if (l.failed)
                        return RTCTL_EXIT_REFUSED;
                if (r == 0 && status != 200) {
                        fprintf(stderr, "rtctl: rtd answered HTTP %ld to %s\n", status, path);
                        return RTCTL_EXIT_REFUSED;
                }
                if (r == 0) {
                        /* rtd ends the body when the job is over; make sure, then stop. */
                        snprintf(path, sizeof path, "/v1/jobs/%" PRIu64, id);
                        r = ctl_get_json(c, path, &job);
                        if (r != 0)
                                return r;
                        bool over = state_is_final(jstr(job, "state", NULL));
                        json_decref(job);
                        if (over)
                                return RTCTL_EXIT_OK;
                        unreachable = 0;
                } else if (++unreachable > 120)
                        return r;
                usleep(500000);
        }
}

int verb_logs(Ctl *c, int argc, char **argv) {
        static const struct option options[] = {
                { "follow", no_argument, NULL, 'f' },
                { "stderr", no_argument, NULL, 'e' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        bool follow = false, err = false;
        char path[128];
        CtlResponse resp;
        uint64_t id;
        int o, r;

        while ((o = getopt_long(argc, argv, "+feh", options, NULL)) >= 0)
                switch (o) {
                case 'f': follow = true; break;
                case 'e': err = true; break;
                case 'h':
                        printf("rtctl logs ID [-f|--follow] [--stderr]\nPrint a job's captured stdout (or "
                               "stderr); -f keeps printing until the job ends.\n");
                        return RTCTL_EXIT_OK;
                default:
                        return RTCTL_EXIT_USAGE;
                }
        if (optind + 1 != argc) {
                fprintf(stderr, "rtctl logs: give one job id\n");
                return RTCTL_EXIT_USAGE;
        }
        r = parse_job_id("logs", argv[optind], &id);
        if (r != 0)
                return r;
        /*
         * Ask first (for no bytes: the offset is past any file), so a refusal (no such job, not yours) prints
         * the daemon's reason instead of problem JSON as "output".
         */
        snprintf(path, sizeof path, "/v1/jobs/%" PRIu64 "/output?stream=%s&offset=%" PRId64, id,
                 err ? "stderr" : "stdout", INT64_MAX);
        r = ctl_request(c, "GET", path, NULL, &resp);
        if (r != 0)
                return r;
        if (resp.status != 200)
                r = ctl_fail(c, &resp);
        ctl_response_done(&resp);
        if (r != 0)
                return r;
        if (follow)
                return follow_logs(c, id, err ? "stderr" : "stdout");
        /* Streamed too: a log of any size is copied through, never held whole. */
        LogState l = {};
        snprintf(path, sizeof path, "/v1/jobs/%" PRIu64 "/output?stream=%s", id, err ? "stderr" : "stdout");
        r = ctl_stream(c, path, false, on_log_chunk, &l, &resp);
        if (r == 0 && resp.status != 200) {
                fprintf(stderr, "rtctl: rtd answered HTTP %ld to %s\n", resp.status, path);
                r = RTCTL_EXIT_REFUSED;
        }
        ctl_response_done(&resp);
        return l.failed ? RTCTL_EXIT_REFUSED : r;
}
