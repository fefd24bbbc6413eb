/* SPDX-License-Identifier: MIT */
/* The shape of a job array request (POST /v1/arrays): pure parsing, errors that name the field. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs-array.h"
#include "shared/macro.h"

static int fail(char **rf, char **re, int r, const char *field, const char *fmt, ...) _printf_(5, 6);
static int fail(char **rf, char **re, int r, const char *field, const char *fmt, ...) {
        va_list ap;

        if (rf)
                *rf = strdup(field);
        va_start(ap, fmt);
        if (vasprintf(re, fmt, ap) < 0)
                *re = NULL;
        va_end(ap);
        return r;
}

/* A decimal number of at most JOB_ARRAY_INDEX_MAX at *p, moving *p past it. */
static int number(const char **p, unsigned *ret) {
        uint64_t v = 0;
        const char *s = *p;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        for (; *s >= '0' && *s <= '9'; s++) {
                v = v * 10 + (uint64_t) (*s - '0');
                if (v > JOB_ARRAY_INDEX_MAX)
                        return -ERANGE;
        }
        *p = s;
        *ret = (unsigned) v;
        return 0;
}

typedef struct Item {
        unsigned first, last, step;
} Item;

static int cmp_unsigned(const void *a, const void *b) {
        unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;
        return x < y ? -1 : x > y;
}

int job_array_parse_indices(const char *s, unsigned max, unsigned **ret, unsigned *ret_n, char **re) {
        _cleanup_free_ Item *items = NULL;
        _cleanup_free_ unsigned *out = NULL, *sorted = NULL;
        size_t n_items = 0, cap = 0;
        uint64_t total = 0;
        const char *p = s;
        unsigned n = 0;

        if (!s || !*s)
                return fail(NULL, re, -EINVAL, "", "is empty; give indices like 0-999, 1-10:2 or 1,3,5");
        for (;;) {
                Item it = { .step = 1 };
                int r = number(&p, &it.first);
                it.last = it.first;
                if (r >= 0 && *p == '-') {
                        p++;
                        r = number(&p, &it.last);
                        if (r >= 0 && *p == ':') {
                                p++;
                                r = number(&p, &it.step);
                                if (r >= 0 && it.step == 0)
                                        r = -EINVAL;
                        }
                }
                if (r == -ERANGE)
                        return fail(NULL, re, -EINVAL, "", "'%.64s': indices go from 0 to %u", s, JOB_ARRAY_INDEX_MAX);
                if (r < 0 || (*p && *p != ','))
                        return fail(NULL, re, -EINVAL, "", "'%.64s' is not a list of indices; use forms like 0-999, "
                                    "1-10:2 (a step of 2) or 1,3,5", s);
                if (it.last < it.first)
                        return fail(NULL, re, -EINVAL, "", "'%.64s': the range %u-%u ends before it starts", s,
                                    it.first, it.last);
                total += (it.last - it.first) / it.step + 1;
                if (total > max)
                        return fail(NULL, re, -E2BIG, "", "'%.64s' is %s%" PRIu64 " tasks; an array may have at most "
                                    "%u ([Jobs] MaxArraySize=)", s, *p ? "more than " : "", total, max);
                if (n_items == cap) {
                        cap = cap ? cap * 2 : 8;
                        Item *m = reallocarray(items, cap, sizeof(Item));
                        if (!m)
                                return -ENOMEM;
                        items = m;
                }
                items[n_items++] = it;
                if (!*p)
                        break;
                p++;
        }
        out = calloc(total, sizeof(unsigned));
        sorted = calloc(total, sizeof(unsigned));
        if (!out || !sorted)
                return -ENOMEM;
        for (size_t i = 0; i < n_items; i++)
                for (uint64_t v = items[i].first; v <= items[i].last; v += items[i].step)
                        out[n++] = (unsigned) v;
        memcpy(sorted, out, n * sizeof(unsigned));
        qsort(sorted, n, sizeof(unsigned), cmp_unsigned);
        for (unsigned i = 1; i < n; i++)
                if (sorted[i] == sorted[i - 1])
                        return fail(NULL, re, -EINVAL, "", "'%.64s' names index %u twice; each task needs its own "
                                    "index", s, sorted[i]);
        *ret = TAKE_PTR(out);
        *ret_n = n;
        return 0;
}

int job_array_request_parse(json_t *body, unsigned max_size, JobArrayRequest *ret, unsigned **ret_indices,
                            char **rf, char **re) {
        static const char *const known[] = { "spec", "indices", "tasks", "max_running", "substitute" };
        json_t *spec = json_object_get(body, "spec"), *indices = json_object_get(body, "indices"),
               *tasks = json_object_get(body, "tasks"), *max = json_object_get(body, "max_running"),
               *subst = json_object_get(body, "substitute"), *v;
        JobArrayRequest req = {};
        const char *key;
        size_t i;
        int r;

        if (!json_is_object(body))
                return fail(rf, re, -EINVAL, "", "the body must be a JSON object: {\"spec\": {...}, \"indices\": "
                            "\"0-9\"} or {\"spec\": {...}, \"tasks\": [[\"arg\"], ...]}");
        json_object_foreach(body, key, v) {
                bool ok = false;
                for (size_t k = 0; k < ELEMENTSOF(known); k++)
                        ok = ok || streq(key, known[k]);
                if (!ok)
                        return fail(rf, re, -EINVAL, key, "unknown field \"%.64s\"; allowed: spec, indices, tasks, "
                                    "max_running, substitute", key);
        }
        if (!json_is_object(spec))
                return fail(rf, re, -EINVAL, "spec", "is required: the job spec every task runs, as for POST "
                            "/v1/jobs");
        if (!!indices == !!tasks)
                return fail(rf, re, -EINVAL, indices ? "tasks" : "indices", "give exactly one of \"indices\" (a "
                            "string like \"0-999\") and \"tasks\" (an array of argument arrays)");
        if (indices) {
                if (!json_is_string(indices))
                        return fail(rf, re, -EINVAL, "indices", "must be a string like \"0-999\", \"1-10:2\" or "
                                    "\"1,3,5\"");
                r = job_array_parse_indices(json_string_value(indices), max_size, ret_indices, &req.size, re);
                if (r < 0) {
                        if (r != -ENOMEM)
                                *rf = strdup("indices");
                        return r;
                }
                req.indices = json_string_value(indices);
        } else {
                if (!json_is_array(tasks) || json_array_size(tasks) == 0)
                        return fail(rf, re, -EINVAL, "tasks", "must be a non-empty array of argument arrays, one "
                                    "per task");
                if (json_array_size(tasks) > max_size)
                        return fail(rf, re, -E2BIG, "tasks", "%zu tasks; an array may have at most %u ([Jobs] "
                                    "MaxArraySize=)", json_array_size(tasks), max_size);
                json_array_foreach(tasks, i, v) {
                        json_t *a;
                        size_t k;
                        if (!json_is_array(v))
                                return fail(rf, re, -EINVAL, "tasks", "task %zu: must be an array of strings (its "
                                            "arguments)", i);
                        json_array_foreach(v, k, a)
                                if (!json_is_string(a))
                                        return fail(rf, re, -EINVAL, "tasks", "task %zu, argument %zu: must be a "
                                                    "string", i, k);
                }
                req.size = (unsigned) json_array_size(tasks);
        }
        if (max && !json_is_null(max)) {
                if (!json_is_integer(max) || json_integer_value(max) < 0 || json_integer_value(max) > (json_int_t) req.size)
                        return fail(rf, re, -EINVAL, "max_running", "must be a number from 1 to the array's size "
                                    "(%u), or 0 or null for no cap", req.size);
                req.max_running = (unsigned) json_integer_value(max);
        }
        if (subst && !json_is_boolean(subst))
                return fail(rf, re, -EINVAL, "substitute", "must be true or false");
        req.substitute = json_is_true(subst);
        *ret = req;
        return 0;
}
