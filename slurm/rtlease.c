/* SPDX-License-Identifier: MIT */
/*
 * The SPANK plugin's options, request and reply handling (see rtlease.h). The JSON reader is our own and
 * small on purpose: the plugin is loaded into srun and slurmstepd, where a JSON library of our choosing could
 * clash by symbol name with one Slurm's own plugins load (json-c and jansson both export json_object_get).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtlease.h"
#include "shared/cpuset.h"
#include "shared/macro.h"

int rtlease_parse_priority(const char *arg, int *ret) {
        char *end;
        long v;

        if (!arg || !*arg) {
                *ret = RTLEASE_DEFAULT_PRIORITY;
                return 0;
        }
        if (!isdigit((unsigned char) arg[0]))
                return -EINVAL;
        errno = 0;
        v = strtol(arg, &end, 10);
        if (*end)
                return -EINVAL;
        if (errno == ERANGE || v < 1 || v > 99)
                return -ERANGE;
        *ret = (int) v;
        return 0;
}

int rtlease_parse_policy(const char *arg, bool *ret_rr) {
        if (!arg)
                return -EINVAL;
        if (streq(arg, "fifo"))
                *ret_rr = false;
        else if (streq(arg, "rr"))
                *ret_rr = true;
        else
                return -EINVAL;
        return 0;
}

const char *rtlease_options_resolve(RtOptions *o) {
        if (o->rt_asked && o->quiet_asked)
                return "--rt and --rt-quiet exclude each other: --rt[=PRIO] quiets the CPUs and sets a real-time "
                       "policy, --rt-quiet only quiets them";
        if (o->policy_asked && !o->rt_asked)
                return "--rt-policy goes with --rt[=PRIO]";
        if (o->optional && !o->rt_asked && !o->quiet_asked)
                return "--rt-optional goes with --rt[=PRIO] or --rt-quiet";
        o->mode = o->rt_asked ? RT_MODE_RT : o->quiet_asked ? RT_MODE_QUIET : RT_MODE_OFF;
        if (o->mode == RT_MODE_RT && o->priority == 0)
                o->priority = RTLEASE_DEFAULT_PRIORITY;
        return NULL;
}

int rtlease_parse_plugin_args(int argc, char **argv, RtPluginArgs *ret, const char **ret_bad) {
        RtPluginArgs a = { .socket = RTLEASE_DEFAULT_SOCKET, .timeout_ms = RTLEASE_DEFAULT_TIMEOUT_MS };

        for (int i = 0; i < argc; i++) {
                const char *v;

                if ((v = startswith(argv[i], "socket="))) {
                        if (*v != '/' || strlen(v) >= sizeof a.socket)
                                goto bad;
                        strcpy(a.socket, v);
                } else if ((v = startswith(argv[i], "timeout="))) {
                        char *end;
                        long s;

                        errno = 0;
                        s = strtol(v, &end, 10);
                        if (!isdigit((unsigned char) *v) || *end || errno || s < 1 || s > 3600)
                                goto bad;
                        a.timeout_ms = (int) s * 1000;
                } else
                        goto bad;
                continue;
        bad:
                if (ret_bad)
                        *ret_bad = argv[i];
                return -EINVAL;
        }
        *ret = a;
        return 0;
}

int rtlease_owner(uint32_t job, uint32_t step, char *buf, size_t size) {
        int n = snprintf(buf, size, "slurm:%" PRIu32 ".%" PRIu32, job, step);
        return n < 0 || (size_t) n >= size ? -ENOBUFS : 0;
}

bool rtlease_step_is_special(uint32_t step) {
        /* slurm.h: SLURM_PENDING_STEP 0xfffffffd, SLURM_BATCH_SCRIPT 0xfffffffb, SLURM_EXTERN_CONT 0xfffffffc,
         * SLURM_INTERACTIVE_STEP 0xfffffffa; none of them is a step of the user's tasks. */
        return step >= 0xfffffff0u;
}

int rtlease_format_cpus(const cpu_set_t *set, char *buf, size_t size) {
        _cleanup_free_ char *s = NULL;
        CpuSet c;
        int r;

        cpuset_from_cpu_set(set, &c);
        if (cpuset_is_empty(&c))
                return -EINVAL;
        r = cpuset_format(&c, &s);
        if (r < 0)
                return r;
        if (strlen(s) >= size)
                return -ENOBUFS;
        strcpy(buf, s);
        return 0;
}

int rtlease_request_body(const char *cpus, const char *owner, int pid, const RtOptions *o, char **ret) {
        char *s;
        int n;

        /* Both strings are ours (a formatted CPU list, "slurm:N.N"): nothing to escape, but say so loudly. */
        for (const char *p = cpus; *p; p++)
                if (!isdigit((unsigned char) *p) && *p != ',' && *p != '-')
                        return -EINVAL;
        for (const char *p = owner; *p; p++)
                if (!isalnum((unsigned char) *p) && !strchr(":._-", *p))
                        return -EINVAL;
        if (pid <= 0 || o->mode == RT_MODE_OFF)
                return -EINVAL;
        if (o->mode == RT_MODE_RT)
                n = asprintf(&s, "{\"cpus\":\"%s\",\"owner\":\"%s\",\"pid\":%d,\"priority\":%d,\"policy\":\"%s\"}",
                             cpus, owner, pid, o->priority, o->rr ? "rr" : "fifo");
        else
                n = asprintf(&s, "{\"cpus\":\"%s\",\"owner\":\"%s\",\"pid\":%d}", cpus, owner, pid);
        if (n < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* ---- JSON: one object, its scalar members read, everything else skipped strictly ---- */

static const char *skip_ws(const char *p) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
                p++;
        return p;
}

static int hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        c = (char) tolower((unsigned char) c);
        return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A string at *pp (at its opening quote); decoded into out (may be NULL to skip). \u escapes beyond ASCII
 * become '?': the plugin only shows these strings to a person. */
static int scan_string(const char **pp, char *out, size_t size) {
        const char *p = *pp;
        size_t n = 0;

        if (*p++ != '"')
                return -EBADMSG;
        for (;;) {
                char c = *p++;

                if (c == '"')
                        break;
                if (c == 0 || (unsigned char) c < 0x20)
                        return -EBADMSG;
                if (c == '\\') {
                        char e = *p++;

                        switch (e) {
                        case '"': case '\\': case '/': c = e; break;
                        case 'b': c = '\b'; break;
                        case 'f': c = '\f'; break;
                        case 'n': c = '\n'; break;
                        case 'r': c = '\r'; break;
                        case 't': c = '\t'; break;
                        case 'u': {
                                int v = 0;
                                for (int i = 0; i < 4; i++) {
                                        int h = hexval(p[i]);
                                        if (h < 0)
                                                return -EBADMSG;
                                        v = v * 16 + h;
                                }
                                p += 4;
                                c = v >= 0x20 && v < 0x7f ? (char) v : '?';
                                break;
                        }
                        default:
                                return -EBADMSG;
                        }
                }
                if (out && n + 1 < size)
                        out[n++] = c;
        }
        if (out && size > 0)
                out[n] = 0;
        *pp = p;
        return 0;
}

static int skip_value(const char **pp, int depth) {
        const char *p = skip_ws(*pp);
        int r;

        if (depth > 32)
                return -EBADMSG;
        if (*p == '"') {
                r = scan_string(&p, NULL, 0);
                if (r < 0)
                        return r;
        } else if (*p == '{' || *p == '[') {
                char close = *p == '{' ? '}' : ']';
                bool obj = *p == '{';

                p = skip_ws(p + 1);
                if (*p == close)
                        p++;
                else
                        for (;;) {
                                if (obj) {
                                        r = scan_string(&p, NULL, 0);
                                        if (r < 0)
                                                return r;
                                        p = skip_ws(p);
                                        if (*p++ != ':')
                                                return -EBADMSG;
                                }
                                r = skip_value(&p, depth + 1);
                                if (r < 0)
                                        return r;
                                p = skip_ws(p);
                                if (*p == ',') {
                                        p = skip_ws(p + 1);
                                        continue;
                                }
                                if (*p++ != close)
                                        return -EBADMSG;
                                break;
                        }
        } else if (*p == '-' || isdigit((unsigned char) *p)) {
                p++;
                while (isdigit((unsigned char) *p) || (*p && strchr(".eE+-", *p)))
                        p++;
        } else if (startswith(p, "true"))
                p += 4;
        else if (startswith(p, "false"))
                p += 5;
        else if (startswith(p, "null"))
                p += 4;
        else
                return -EBADMSG;
        *pp = p;
        return 0;
}

/* Find key among the top-level members; *ret_value points at its value. -ENOENT when absent. */
static int find_member(const char *json, const char *key, const char **ret_value) {
        const char *p = skip_ws(json), *found = NULL;
        char name[64];
        int r;

        if (*p++ != '{')
                return -EBADMSG;
        p = skip_ws(p);
        if (*p == '}')
                p++;
        else
                for (;;) {
                        r = scan_string(&p, name, sizeof name);
                        if (r < 0)
                                return r;
                        p = skip_ws(p);
                        if (*p++ != ':')
                                return -EBADMSG;
                        p = skip_ws(p);
                        if (!found && streq(name, key))
                                found = p;
                        r = skip_value(&p, 0);
                        if (r < 0)
                                return r;
                        p = skip_ws(p);
                        if (*p == ',') {
                                p = skip_ws(p + 1);
                                continue;
                        }
                        if (*p++ != '}')
                                return -EBADMSG;
                        break;
                }
        /* The whole body must be that one object: a truncated or doubled answer is not trusted. */
        if (*skip_ws(p))
                return -EBADMSG;
        if (!found)
                return -ENOENT;
        *ret_value = found;
        return 0;
}

int rtlease_json_string(const char *json, const char *key, char **ret) {
        const char *v, *p;
        char *s;
        size_t len;
        int r;

        r = find_member(json, key, &v);
        if (r < 0)
                return r;
        if (*v != '"')
                return -EMEDIUMTYPE;
        p = v;
        r = scan_string(&p, NULL, 0);           /* validated already; its length bounds the decoded size */
        if (r < 0)
                return r;
        len = (size_t) (p - v);
        s = malloc(len);
        if (!s)
                return -ENOMEM;
        p = v;
        (void) scan_string(&p, s, len);
        *ret = s;
        return 0;
}

int rtlease_json_int(const char *json, const char *key, int64_t *ret) {
        const char *v;
        char *end;
        long long x;
        int r;

        r = find_member(json, key, &v);
        if (r < 0)
                return r;
        if (*v != '-' && !isdigit((unsigned char) *v))
                return -EMEDIUMTYPE;
        errno = 0;
        x = strtoll(v, &end, 10);
        if (errno || *end == '.' || *end == 'e' || *end == 'E')
                return -EMEDIUMTYPE;
        *ret = x;
        return 0;
}

int rtlease_json_bool(const char *json, const char *key, bool *ret) {
        const char *v;
        int r;

        r = find_member(json, key, &v);
        if (r < 0)
                return r;
        if (startswith(v, "true"))
                *ret = true;
        else if (startswith(v, "false"))
                *ret = false;
        else
                return -EMEDIUMTYPE;
        return 0;
}

int rtlease_parse_lease(const char *body, RtLease *ret) {
        _cleanup_free_ char *cpus = NULL, *state = NULL;
        RtLease l = { .max_priority = -1, .quieted = true };
        int64_t v;
        int r;

        if (!body)
                return -EBADMSG;
        r = rtlease_json_int(body, "id", &v);
        if (r < 0 || v <= 0)
                return -EBADMSG;
        l.id = (uint64_t) v;
        if (rtlease_json_int(body, "max_priority", &v) >= 0 && v >= 0 && v <= 99)
                l.max_priority = (int) v;
        (void) rtlease_json_bool(body, "quieted", &l.quieted);
        l.ended = rtlease_json_string(body, "state", &state) >= 0 && !streq(state, "active");
        if (rtlease_json_string(body, "cpus", &cpus) >= 0 && strlen(cpus) < sizeof l.cpus)
                strcpy(l.cpus, cpus);
        *ret = l;
        return 0;
}

static void make_printable(char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || (unsigned char) *s >= 0x7f)
                        *s = '?';
}

char *rtlease_problem_text(int status, const char *body) {
        _cleanup_free_ char *title = NULL, *detail = NULL;
        char *s = NULL;
        int n;

        if (body) {
                (void) rtlease_json_string(body, "title", &title);
                (void) rtlease_json_string(body, "detail", &detail);
        }
        if (title && detail)
                n = asprintf(&s, "%s: %s", title, detail);
        else if (title || detail)
                n = asprintf(&s, "%s", title ?: detail);
        else
                n = asprintf(&s, "HTTP status %d without a problem description", status);
        if (n < 0)
                return NULL;
        make_printable(s);
        return s;
}

int rtlease_task_priority(const RtOptions *o, const RtLease *l, int *ret) {
        if (o->mode != RT_MODE_RT)
                return -EINVAL;
        if (l->max_priority >= 0 && o->priority > l->max_priority)
                return -ERANGE;
        *ret = o->priority;
        return 0;
}
