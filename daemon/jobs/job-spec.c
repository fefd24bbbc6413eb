/* SPDX-License-Identifier: MIT */
/* Job spec parsing: every field checked for type, range and size; unknown fields rejected by name. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "job-spec.h"
#include "shared/macro.h"

static const char *const policy_names[_JOB_POLICY_MAX] = { "fifo", "rr", "other" };

const char *job_policy_to_string(JobPolicy p) {
        return p >= 0 && p < _JOB_POLICY_MAX ? policy_names[p] : NULL;
}

JobPolicy job_policy_from_string(const char *s) {
        for (int i = 0; s && i < _JOB_POLICY_MAX; i++)
                if (streq(s, policy_names[i]))
                        return (JobPolicy) i;
        return _JOB_POLICY_INVALID;
}

void job_spec_done(JobSpec *s) {
        strv_free(s->argv);
        strv_free(s->env);
        free(s->cwd);
        free(s->name);
        *s = (JobSpec){};
}

static int fail(char **ret_field, char **ret_error, const char *field, const char *fmt, ...) _printf_(4, 5);
static int fail(char **ret_field, char **ret_error, const char *field, const char *fmt, ...) {
        va_list ap;
        char *msg = NULL;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        if (ret_field)
                *ret_field = strdup(field);
        if (ret_error)
                *ret_error = msg;
        else
                free(msg);
        return -EINVAL;
}

/* A string field: no embedded NUL (JSON allows \u0000), bounded length. */
static const char *json_plain_string(json_t *v, size_t max) {
        const char *s;

        if (!json_is_string(v))
                return NULL;
        s = json_string_value(v);
        if (strlen(s) != json_string_length(v) || strlen(s) > max)
                return NULL;
        return s;
}

static bool env_key_valid(const char *k) {
        if (!*k)
                return false;
        for (const char *p = k; *p; p++)
                if (*p == '=' || (unsigned char) *p < 0x20)
                        return false;
        return true;
}

static int parse_argv(json_t *v, JobSpec *s, size_t *bytes, char **rf, char **re) {
        size_t n, i;
        json_t *e;

        if (!json_is_array(v))
                return fail(rf, re, "argv", "must be an array of strings, e.g. [\"/bin/echo\", \"hi\"]");
        n = json_array_size(v);
        if (n == 0)
                return fail(rf, re, "argv", "must not be empty: give the command to run");
        if (n > JOB_SPEC_MAX_ARGS)
                return fail(rf, re, "argv", "has %zu elements; at most %d are allowed", n, JOB_SPEC_MAX_ARGS);
        s->argv = calloc(n + 1, sizeof(char *));
        if (!s->argv)
                return -ENOMEM;
        json_array_foreach(v, i, e) {
                const char *a = json_plain_string(e, JOB_SPEC_MAX_STRINGS_BYTES);
                if (!a)
                        return fail(rf, re, "argv", "element %zu must be a string without NUL bytes", i);
                if (i == 0 && !*a)
                        return fail(rf, re, "argv", "the command (element 0) must not be empty");
                *bytes += strlen(a) + 1;
                s->argv[i] = strdup(a);
                if (!s->argv[i])
                        return -ENOMEM;
        }
        return 0;
}

static int parse_env(json_t *v, JobSpec *s, size_t *bytes, char **rf, char **re) {
        const char *k;
        json_t *e;
        size_t i = 0, n;

        if (!json_is_object(v))
                return fail(rf, re, "env", "must be an object of strings, e.g. {\"LANG\": \"C\"}");
        n = json_object_size(v);
        if (n > JOB_SPEC_MAX_ENV)
                return fail(rf, re, "env", "has %zu variables; at most %d are allowed", n, JOB_SPEC_MAX_ENV);
        s->env = calloc(n + 1, sizeof(char *));
        if (!s->env)
                return -ENOMEM;
        json_object_foreach(v, k, e) {
                const char *val = json_plain_string(e, JOB_SPEC_MAX_STRINGS_BYTES);
                if (!env_key_valid(k) || strlen(k) > 1024)
                        return fail(rf, re, "env", "variable name \"%.64s\" is invalid (empty, '=' or control "
                                    "characters)", k);
                if (!val)
                        return fail(rf, re, "env", "value of %.64s must be a string without NUL bytes", k);
                if (asprintf(&s->env[i], "%s=%s", k, val) < 0) {
                        s->env[i] = NULL;
                        return -ENOMEM;
                }
                *bytes += strlen(s->env[i]) + 1;
                i++;
        }
        return 0;
}

static int parse_cpus(json_t *v, JobSpec *s, char **rf, char **re) {
        if (json_is_string(v)) {
                _cleanup_free_ char *bad = NULL;
                const char *str = json_plain_string(v, 4096);
                if (!str || cpuset_parse(str, &s->cpus, &bad) < 0)
                        return fail(rf, re, "cpus", "\"%.64s\" is not a CPU list; use the kernel's syntax, e.g. "
                                    "\"2\" or \"2-3,6\"", str ? str : "");
        } else if (json_is_array(v)) {
                size_t i;
                json_t *e;
                cpuset_zero(&s->cpus);
                json_array_foreach(v, i, e) {
                        if (!json_is_integer(e) || json_integer_value(e) < 0 ||
                            json_integer_value(e) >= CPUSET_MAX)
                                return fail(rf, re, "cpus", "element %zu must be a CPU number 0..%d", i,
                                            CPUSET_MAX - 1);
                        if (cpuset_isset(&s->cpus, (unsigned) json_integer_value(e)))
                                return fail(rf, re, "cpus", "CPU %" JSON_INTEGER_FORMAT " is listed twice",
                                            json_integer_value(e));
                        cpuset_set(&s->cpus, (unsigned) json_integer_value(e));
                }
        } else
                return fail(rf, re, "cpus", "must be a CPU list string (\"2-3\") or an array of CPU numbers");
        if (cpuset_is_empty(&s->cpus))
                return fail(rf, re, "cpus", "must name at least one CPU");
        s->has_cpus = true;
        return 0;
}

static const char *const known_fields[] = {
        "argv", "env", "cwd", "name", "cores", "cpus", "policy", "priority", "timeout_s", "queue_priority",
        "max_output_bytes", "max_tasks", "max_memory_bytes",
};

/* The per-job limits: positive integers (what is allowed depends on the config and who asks: job-limits.c). */
static int parse_limits(json_t *j, JobSpec *s, char **rf, char **re) {
        static const struct {
                const char *field;
                size_t offset;
                json_int_t min;
                const char *unit;
        } limits[] = {
                { "max_output_bytes", offsetof(JobSpec, max_output_bytes), 4096, "bytes" },
                { "max_tasks", offsetof(JobSpec, max_tasks), 1, "tasks" },
                { "max_memory_bytes", offsetof(JobSpec, max_memory_bytes), 1024 * 1024, "bytes" },
        };

        for (size_t i = 0; i < ELEMENTSOF(limits); i++) {
                json_t *v = json_object_get(j, limits[i].field);
                if (!v || json_is_null(v))
                        continue;
                if (!json_is_integer(v) || json_integer_value(v) < limits[i].min)
                        return fail(rf, re, limits[i].field, "must be an integer number of %s, at least %"
                                    JSON_INTEGER_FORMAT, limits[i].unit, limits[i].min);
                *(uint64_t *) ((char *) s + limits[i].offset) = (uint64_t) json_integer_value(v);
        }
        return 0;
}

int job_spec_parse(json_t *j, JobSpec *ret, char **rf, char **re) {
        JobSpec s = { .cores = 1, .policy = JOB_POLICY_FIFO };
        size_t bytes = 0;
        const char *key;
        json_t *v;
        int r;

        if (!json_is_object(j))
                return fail(rf, re, "", "the body must be a JSON object with at least \"argv\"");

        json_object_foreach(j, key, v) {
                bool known = false;
                for (size_t i = 0; i < ELEMENTSOF(known_fields); i++)
                        known = known || streq(key, known_fields[i]);
                if (!known)
                        return fail(rf, re, key, "unknown field \"%.64s\"; allowed: argv, env, cwd, name, cores, "
                                    "cpus, policy, priority, timeout_s, queue_priority, max_output_bytes, "
                                    "max_tasks, max_memory_bytes", key);
        }

        v = json_object_get(j, "argv");
        if (!v)
                return fail(rf, re, "argv", "is required: the command and its arguments as an array of strings");
        r = parse_argv(v, &s, &bytes, rf, re);
        if (r < 0)
                goto fail;

        if ((v = json_object_get(j, "env")) && !json_is_null(v)) {
                r = parse_env(v, &s, &bytes, rf, re);
                if (r < 0)
                        goto fail;
        }
        if (bytes > JOB_SPEC_MAX_STRINGS_BYTES) {
                r = fail(rf, re, "argv", "argv and env together take %zu bytes; at most %d are allowed", bytes,
                         JOB_SPEC_MAX_STRINGS_BYTES);
                goto fail;
        }

        if ((v = json_object_get(j, "cwd")) && !json_is_null(v)) {
                const char *c = json_plain_string(v, JOB_SPEC_MAX_PATH);
                if (!c || c[0] != '/') {
                        r = fail(rf, re, "cwd", "must be an absolute path (starting with '/'), at most %d bytes",
                                 JOB_SPEC_MAX_PATH);
                        goto fail;
                }
                if (!(s.cwd = strdup(c))) {
                        r = -ENOMEM;
                        goto fail;
                }
        }

        if ((v = json_object_get(j, "name")) && !json_is_null(v)) {
                const char *n = json_plain_string(v, JOB_SPEC_MAX_NAME);
                bool ok = n && *n;
                /* Names end up in admins' terminals (rtctl list): no C0 controls, DEL, or C1 controls
                 * (U+0080..U+009F, UTF-8 C2 80..C2 9F; jansson has checked the rest is UTF-8). */
                for (const unsigned char *p = (const unsigned char *) n; ok && *p; p++)
                        ok = *p >= 0x20 && *p != 0x7f && !(p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f);
                if (!ok) {
                        r = fail(rf, re, "name", "must be a non-empty string of printable characters (no control "
                                 "characters such as newline, escape or U+0080..U+009F), at most %d bytes",
                                 JOB_SPEC_MAX_NAME);
                        goto fail;
                }
                if (!(s.name = strdup(n))) {
                        r = -ENOMEM;
                        goto fail;
                }
        }

        if ((v = json_object_get(j, "cpus")) && !json_is_null(v)) {
                r = parse_cpus(v, &s, rf, re);
                if (r < 0)
                        goto fail;
                s.cores = cpuset_count(&s.cpus);
        }
        if ((v = json_object_get(j, "cores")) && !json_is_null(v)) {
                if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > CPUSET_MAX) {
                        r = fail(rf, re, "cores", "must be an integer from 1 to %d", CPUSET_MAX);
                        goto fail;
                }
                if (s.has_cpus && (unsigned) json_integer_value(v) != s.cores) {
                        r = fail(rf, re, "cores", "is %" JSON_INTEGER_FORMAT " but \"cpus\" names %u CPUs; give "
                                 "one of the two", json_integer_value(v), s.cores);
                        goto fail;
                }
                s.cores = (unsigned) json_integer_value(v);
        }

        if ((v = json_object_get(j, "policy")) && !json_is_null(v)) {
                s.policy = job_policy_from_string(json_is_string(v) ? json_string_value(v) : NULL);
                if (s.policy < 0) {
                        r = fail(rf, re, "policy", "must be \"fifo\", \"rr\" or \"other\"");
                        goto fail;
                }
        }

        if ((v = json_object_get(j, "priority")) && !json_is_null(v)) {
                if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 99) {
                        r = fail(rf, re, "priority", "must be an integer from 1 to 99");
                        goto fail;
                }
                if (s.policy == JOB_POLICY_OTHER) {
                        r = fail(rf, re, "priority", "applies to the fifo and rr policies only; drop it for "
                                 "\"other\"");
                        goto fail;
                }
                s.priority = (unsigned) json_integer_value(v);
        }

        if ((v = json_object_get(j, "timeout_s")) && !json_is_null(v)) {
                double t = json_is_number(v) ? json_number_value(v) : -1;
                if (!json_is_number(v) || !isfinite(t) || t <= 0 || t > JOB_SPEC_MAX_TIMEOUT_S) {
                        r = fail(rf, re, "timeout_s", "must be a number of seconds greater than 0 and at most "
                                 "%.0f", JOB_SPEC_MAX_TIMEOUT_S);
                        goto fail;
                }
                s.timeout_s = t;
        }

        if ((v = json_object_get(j, "queue_priority")) && !json_is_null(v)) {
                if (!json_is_integer(v) || json_integer_value(v) < -JOB_SPEC_QUEUE_PRIORITY_MAX ||
                    json_integer_value(v) > JOB_SPEC_QUEUE_PRIORITY_MAX) {
                        r = fail(rf, re, "queue_priority", "must be an integer from %d to %d",
                                 -JOB_SPEC_QUEUE_PRIORITY_MAX, JOB_SPEC_QUEUE_PRIORITY_MAX);
                        goto fail;
                }
                s.queue_priority = (int) json_integer_value(v);
        }

        r = parse_limits(j, &s, rf, re);
        if (r < 0)
                goto fail;

        if (!s.env && !(s.env = calloc(1, sizeof(char *)))) {
                r = -ENOMEM;
                goto fail;
        }
        *ret = s;
        return 0;
fail:
        job_spec_done(&s);
        return r;
}

int job_spec_parse_text(const char *text, size_t size, JobSpec *ret, char **rf, char **re) {
        json_error_t err;
        json_t *j;
        int r;

        j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &err);
        if (!j)
                return fail(rf, re, "", "the body is not valid JSON: %s (line %d, column %d)", err.text, err.line,
                            err.column);
        r = job_spec_parse(j, ret, rf, re);
        json_decref(j);
        return r;
}

json_t *job_spec_to_json(const JobSpec *s, bool include_private) {
        _cleanup_free_ char *cpus = NULL;
        json_t *j = json_object();

        if (!j)
                return NULL;
        if (include_private) {
                json_t *a = json_array(), *e = json_object();
                for (char **p = s->argv; p && *p; p++)
                        json_array_append_new(a, json_string(*p));
                for (char **p = s->env; p && *p; p++) {
                        const char *eq = strchr(*p, '=');
                        _cleanup_free_ char *k = eq ? strndup(*p, eq - *p) : NULL;
                        if (k)
                                json_object_set_new(e, k, json_string(eq + 1));
                }
                json_object_set_new(j, "argv", a);
                json_object_set_new(j, "env", e);
                if (s->cwd)
                        json_object_set_new(j, "cwd", json_string(s->cwd));
        }
        if (s->name)
                json_object_set_new(j, "name", json_string(s->name));
        json_object_set_new(j, "cores", json_integer(s->cores));
        if (s->has_cpus && cpuset_format(&s->cpus, &cpus) >= 0)
                json_object_set_new(j, "cpus", json_string(cpus));
        json_object_set_new(j, "policy", json_string(job_policy_to_string(s->policy)));
        if (s->priority > 0)
                json_object_set_new(j, "priority", json_integer(s->priority));
        if (s->timeout_s > 0)
                json_object_set_new(j, "timeout_s", json_real(s->timeout_s));
        json_object_set_new(j, "queue_priority", json_integer(s->queue_priority));
        if (s->max_output_bytes > 0)
                json_object_set_new(j, "max_output_bytes", json_integer((json_int_t) s->max_output_bytes));
        if (s->max_tasks > 0)
                json_object_set_new(j, "max_tasks", json_integer((json_int_t) s->max_tasks));
        if (s->max_memory_bytes > 0)
                json_object_set_new(j, "max_memory_bytes", json_integer((json_int_t) s->max_memory_bytes));
        return j;
}
