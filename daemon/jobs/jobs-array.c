/* SPDX-License-Identifier: MIT */
/*
 * Job arrays: N tasks of one command made by one request (POST /v1/arrays), as Slurm's --array. Each task
 * is an ordinary job (its own id, queue place, limits, output) that knows its array and index; the array
 * adds three things: the N jobs are created all or nothing (one store transaction, every task counted
 * against MaxQueued= and MaxQueuedPerUser= before any is made), max_running caps how many of its tasks hold
 * CPUs at once (job_user_has_room() passes the others over), and its progress is one object, published as
 * "array" events (coalesced, at most every ARRAY_PROGRESS_USEC, and at once when the last task ends).
 *
 * An array lives in memory while any task has not ended; then its summary is written to its store row
 * (done = 1). Its tasks are not pruned before that, so after a restart the counts come back from the store.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/manager.h"
#include "jobs-array.h"
#include "jobs-internal.h"
#include "shared/log.h"
#include "store/store.h"

#define ARRAY_PROGRESS_USEC 100000

struct JobArray {
        uint64_t id;
        uid_t uid;
        unsigned size, max_running;
        unsigned active;                /* tasks holding CPUs: starting, running, waiting in a worker */
        unsigned n_ended, ended[_JOB_STATE_MAX];
        json_t *def;                    /* what was asked: user, name, indices, first_job, submitted_at... */
        json_t *first_failure;          /* the lowest-id task that ended other than succeeded, or NULL */
        uint64_t first_failure_id;
        bool dirty;
        JobArray *next;
};

static void array_free(JobArray *a) {
        if (!a)
                return;
        json_decref(a->def);
        json_decref(a->first_failure);
        free(a);
}

static JobArray *array_find(JobManager *jm, uint64_t id) {
        for (JobArray *a = jm->arrays; a; a = a->next)
                if (a->id == id)
                        return a;
        return NULL;
}

bool job_array_has_room(const JobArray *a) {
        return a->max_running == 0 || a->active < a->max_running;
}

/* ---- the array as JSON: the API view, the stored row and the "array" event are the same object ---- */

static json_t *array_to_json(const JobArray *a) {
        unsigned failed = a->ended[JOB_FAILED] + a->ended[JOB_TIMED_OUT] + a->ended[JOB_LOST];
        bool done = a->n_ended >= a->size;
        json_t *o = json_deep_copy(a->def);

        if (!o)
                return NULL;
        json_object_set_new(o, "state", json_string(!done ? (a->active || a->n_ended ? "running" : "queued")
                                                    : a->ended[JOB_SUCCEEDED] == a->size ? "succeeded" : "failed"));
        json_object_set_new(o, "queued", json_integer(a->size - MIN(a->size, a->active + a->n_ended)));
        json_object_set_new(o, "running", json_integer(a->active));
        json_object_set_new(o, "ended", json_integer(a->n_ended));
        for (JobState s = JOB_SUCCEEDED; s < _JOB_STATE_MAX; s++)
                json_object_set_new(o, job_state_to_string(s), json_integer(a->ended[s]));
        json_object_set_new(o, "not_succeeded", json_integer(failed + a->ended[JOB_CANCELLED]));
        json_object_set_new(o, "first_failure", a->first_failure ? json_incref(a->first_failure) : json_null());
        if (!json_object_get(o, "ended_at"))
                json_object_set_new(o, "ended_at", json_null());
        return o;
}

static void array_publish(JobManager *jm, JobArray *a) {
        json_t *e;

        a->dirty = false;
        if (!jm->subs || !(e = array_to_json(a)))
                return;
        json_object_set_new(e, "type", json_string("array"));
        for (JobSubscription *s = jm->subs, *next; s; s = next) {
                next = s->next;
                s->fn(e, s->userdata);
        }
        json_decref(e);
}

static int on_progress(sd_event_source *s, uint64_t usec, void *userdata) {
        JobManager *jm = userdata;

        for (JobArray *a = jm->arrays; a; a = a->next)
                if (a->dirty)
                        array_publish(jm, a);
        return 0;
}

/* Progress is published at most every ARRAY_PROGRESS_USEC: 2000 tiny tasks are not 6000 events. */
static void array_touch(JobManager *jm, JobArray *a) {
        int enabled = SD_EVENT_OFF;

        a->dirty = true;
        if (!jm->subs)
                return;
        if (!jm->array_progress_src) {
                (void) sd_event_add_time_relative(jm->manager->event, &jm->array_progress_src, CLOCK_MONOTONIC,
                                                  ARRAY_PROGRESS_USEC, 0, on_progress, jm);
                return;
        }
        if (sd_event_source_get_enabled(jm->array_progress_src, &enabled) >= 0 && enabled != SD_EVENT_OFF)
                return;
        (void) sd_event_source_set_time_relative(jm->array_progress_src, ARRAY_PROGRESS_USEC);
        (void) sd_event_source_set_enabled(jm->array_progress_src, SD_EVENT_ONESHOT);
}

void job_array_task_active(JobManager *jm, Job *j, bool active) {
        JobArray *a = j->array;

        if (active)
                a->active++;
        else if (a->active > 0)
                a->active--;
        array_touch(jm, a);
}

static json_t *failure_json(uint64_t id, unsigned index, const char *state, json_t *exit_code, json_t *sig,
                            json_t *reason) {
        return json_pack("{s:I,s:i,s:s,s:O?,s:O?,s:O?}", "job", (json_int_t) id, "index", (int) index, "state",
                         state, "exit_code", exit_code, "signal", sig, "reason", reason);
}

static void array_note_failure(JobArray *a, uint64_t id, json_t *failure) {
        if (!failure || (a->first_failure && a->first_failure_id < id)) {
                json_decref(failure);
                return;
        }
        json_decref(a->first_failure);
        a->first_failure = failure;
        a->first_failure_id = id;
}

/* The last task ended: the summary goes to the store and to watchers, and the array leaves memory. */
static void array_finish(JobManager *jm, JobArray *a) {
        char *now = job_format_time(now_usec(CLOCK_REALTIME));
        json_t *o;
        int r;

        json_object_set_new(a->def, "ended_at", now ? json_string(now) : json_null());
        free(now);
        o = array_to_json(a);
        r = o ? store_array_update(jm->store, a->id, true, o) : -ENOMEM;
        if (r < 0)
                log_warning_errno(r, "Failed to store the summary of job array a%" PRIu64 ", ignoring: %m", a->id);
        json_decref(o);
        log_info("Job array a%" PRIu64 " ended: %u of %u tasks succeeded", a->id, a->ended[JOB_SUCCEEDED], a->size);
        array_publish(jm, a);
        for (JobArray **p = &jm->arrays; *p; p = &(*p)->next)
                if (*p == a) {
                        *p = a->next;
                        break;
                }
        array_free(a);
}

void job_array_task_ended(JobManager *jm, Job *j, JobState state) {
        JobArray *a = j->array;

        j->array = NULL;
        a->ended[state]++;
        a->n_ended++;
        if (state != JOB_SUCCEEDED)
                array_note_failure(a, j->id, failure_json(j->id, j->array_index, job_state_to_string(state),
                                                          j->exit_code >= 0 ? json_integer(j->exit_code) : NULL,
                                                          j->signal > 0 ? json_integer(j->signal) : NULL,
                                                          j->reason ? json_string(j->reason) : NULL));
        if (a->n_ended >= a->size)
                array_finish(jm, a);
        else
                array_touch(jm, a);
}

/* ---- submit ---- */

static int refuse(char **rf, char **re, int r, const char *field, const char *fmt, ...) _printf_(5, 6);
static int refuse(char **rf, char **re, int r, const char *field, const char *fmt, ...) {
        va_list ap;

        free(*rf);
        free(*re);
        va_start(ap, fmt);
        if (vasprintf(re, fmt, ap) < 0)
                *re = NULL;
        va_end(ap);
        *rf = strdup(field);
        return r;
}

/* s with every "{}" replaced by index. */
static json_t *subst_index(const char *s, unsigned index) {
        char num[16], *out, *p;
        size_t n = 0, len = strlen(s);
        json_t *j;

        for (const char *q = s; (q = strstr(q, "{}")); q += 2)
                n++;
        if (n == 0)
                return json_string(s);
        snprintf(num, sizeof num, "%u", index);
        out = p = malloc(len + n * strlen(num) + 1);
        if (!out)
                return NULL;
        for (const char *q = s, *m; ; q = m + 2) {
                m = strstr(q, "{}");
                if (!m) {
                        strcpy(p, q);
                        break;
                }
                memcpy(p, q, (size_t) (m - q));
                p = stpcpy(p + (m - q), num);
        }
        j = json_string(out);
        free(out);
        return j;
}

/* Task i's spec as JSON: the template with its arguments appended (tasks form) and {} substituted. */
static json_t *task_spec_json(json_t *tmpl, json_t *extra, unsigned index, bool subst) {
        json_t *o = json_copy(tmpl), *argv = json_array(), *src = json_object_get(tmpl, "argv"), *v;
        size_t i;

        if (!o || !argv || !json_is_array(src)) {
                json_decref(argv);
                return o;       /* no argv: the spec parser names the field */
        }
        for (int k = 0; k < 2; k++)
                json_array_foreach(k == 0 ? src : extra, i, v)
                        json_array_append_new(argv, subst && json_is_string(v) ?
                                                    subst_index(json_string_value(v), index) : json_incref(v));
        json_object_set_new(o, "argv", argv);
        return o;
}

static void free_jobs(Job **jobs, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                job_free_unregistered(jobs[i]);
        free(jobs);
}

int job_manager_submit_array(JobManager *jm, json_t *body, const JobCaller *c, uint64_t *ret_id, char **rf,
                             char **re) {
        const RtdConfig *cfg = jm->manager->config;
        _cleanup_free_ unsigned *indices = NULL;
        json_t *tmpl = json_object_get(body, "spec"), *tasks, *def;
        JobArrayRequest req;
        Job **jobs = NULL;
        JobArray *a;
        int r;

        r = job_array_request_parse(body, cfg->max_array_size, &req, &indices, rf, re);
        if (r < 0)
                return r;
        tasks = json_object_get(body, "tasks");
        jobs = calloc(req.size, sizeof(Job *));
        if (!jobs)
                return -ENOMEM;
        for (unsigned i = 0; i < req.size; i++) {
                unsigned index = tasks ? i : indices[i], prio;
                _cleanup_(json_decrefp) json_t *sj =
                        task_spec_json(tmpl, tasks ? json_array_get(tasks, i) : NULL, index, req.substitute);
                _cleanup_free_ char *f = NULL, *e = NULL;
                JobSpec spec;

                r = sj ? job_spec_parse(sj, &spec, &f, &e) : -ENOMEM;
                if (r == -EINVAL) {
                        char where[32];
                        if (i == 0 || !tasks)
                                snprintf(where, sizeof where, "spec");
                        else
                                snprintf(where, sizeof where, "tasks[%u]", i);
                        r = refuse(rf, re, -EINVAL, where, "%s%s%s", strempty(f), *strempty(f) ? ": " : "",
                                   strempty(e));
                }
                if (r >= 0) {
                        /* Every task is counted against the queue limits: the array fits whole or not at all. */
                        r = job_submit_check(jm, &spec, c, req.size, &prio, rf, re);
                        if (r >= 0 && !(jobs[i] = job_new(jm, &spec, c, prio)))
                                r = -ENOMEM;
                        job_spec_done(&spec);
                }
                if (r < 0) {
                        free_jobs(jobs, i);
                        return r;
                }
                jobs[i]->id = jm->next_id + i;
                jobs[i]->seq = jm->next_seq + i;
                jobs[i]->array_id = jm->next_array_id;
                jobs[i]->array_index = index;
        }

        const char *name = jobs[0]->spec.name, *slash = strrchr(jobs[0]->spec.argv[0], '/');
        if (!name)
                name = slash && slash[1] ? slash + 1 : jobs[0]->spec.argv[0];
        a = calloc(1, sizeof *a);
        def = json_pack("{s:I,s:s,s:s,s:i,s:i,s:o,s:o,s:b,s:b,s:I,s:I,s:o}", "id", (json_int_t) jm->next_array_id,
                        "name", name,
                        "user", strempty(c->user), "uid", (int) c->uid, "size", (int) req.size, "max_running",
                        req.max_running ? json_integer(req.max_running) : json_null(), "indices",
                        req.indices ? json_string(req.indices) : json_null(), "each", tasks != NULL,
                        "substitute", req.substitute, "first_job", (json_int_t) jobs[0]->id, "last_job",
                        (json_int_t) jobs[req.size - 1]->id, "submitted_at", json_null());
        if (!a || !def) {
                free(a);
                json_decref(def);
                free_jobs(jobs, req.size);
                return -ENOMEM;
        }
        _cleanup_free_ char *when = job_format_time(jobs[0]->submit_usec);
        json_object_set_new(def, "submitted_at", when ? json_string(when) : json_null());
        *a = (JobArray){ .id = jm->next_array_id, .uid = c->uid, .size = req.size, .max_running = req.max_running,
                         .def = def };

        /* One commit for the array and its N jobs: all of them are stored, or none. */
        r = store_begin(jm->store);
        if (r >= 0)
                r = store_array_insert(jm->store, a->id, a->uid, def);
        for (unsigned i = 0; r >= 0 && i < req.size; i++)
                r = job_persist(jm, jobs[i], true);
        if (r >= 0)
                r = store_commit(jm->store);
        if (r < 0) {
                store_rollback(jm->store);
                array_free(a);
                free_jobs(jobs, req.size);
                return refuse(rf, re, r == -ENOSPC ? -EDQUOT : -EIO, "", "rtd could not store the array in "
                              "%s/jobs.db (%s); nothing was queued. %s", cfg->state_directory, strerror(-r),
                              r == -ENOSPC ? "An administrator must free space on that file system" :
                                             "Try again later; an administrator can look at rtd's log");
        }
        a->next = jm->arrays;
        jm->arrays = a;
        for (unsigned i = 0; i < req.size; i++) {
                jobs[i]->array = a;
                job_register(jm, jobs[i]);
                job_publish(jm, jobs[i]);
        }
        free(jobs);
        jm->next_id += req.size;
        jm->next_seq += req.size;
        jm->submitted += req.size;
        *ret_id = jm->next_array_id++;
        log_info("Job array a%" PRIu64 " of %u tasks queued for %s", a->id, a->size, strempty(c->user));
        job_manager_schedule(jm);
        return 0;
}

/* ---- show, cancel ---- */

int job_manager_get_array(JobManager *jm, uint64_t id, json_t **ret, uid_t *ret_uid) {
        JobArray *a = array_find(jm, id);
        bool done;

        if (a) {
                *ret = array_to_json(a);
                if (ret_uid)
                        *ret_uid = a->uid;
                return *ret ? 0 : -ENOMEM;
        }
        return store_array_get(jm->store, id, ret, ret_uid, &done);
}

int job_manager_cancel_array(JobManager *jm, uint64_t id, const JobCaller *c, unsigned *ret_cancelled) {
        JobArray *a = array_find(jm, id);
        _cleanup_free_ uint64_t *ids = NULL;
        unsigned n = 0, live;
        bool txn;

        if (!a) {
                _cleanup_(json_decrefp) json_t *data = NULL;
                uid_t uid;
                int r = job_manager_get_array(jm, id, &data, &uid);
                if (r < 0)
                        return r;
                return !c->admin && uid != c->uid ? -EPERM : -EALREADY;
        }
        if (!c->admin && a->uid != c->uid)
                return -EPERM;
        live = a->size - a->n_ended;
        ids = calloc(live, sizeof(uint64_t));
        if (!ids)
                return -ENOMEM;
        for (unsigned b = 0; b < JOB_BUCKETS && n < live; b++)
                for (Job *j = jm->buckets[b]; j && n < live; j = j->hnext)
                        if (j->array == a)
                                ids[n++] = j->id;
        /* a may be freed by the last cancel: only ids from here on. The queued tasks' ends are one commit. */
        txn = store_begin(jm->store) >= 0;
        for (unsigned i = 0; i < n; i++) {
                JobState st;
                (void) job_manager_cancel(jm, ids[i], c, &st);
        }
        if (txn && store_commit(jm->store) < 0) {
                log_warning("Failed to commit the cancel of job array a%" PRIu64 "; its tasks' states are "
                            "written again one by one", id);
                store_rollback(jm->store);
        }
        *ret_cancelled = n;
        return 0;
}

/* ---- life ---- */

typedef struct RecoverCtx {
        JobManager *jm;
        JobArray *a;
} RecoverCtx;

static int count_cb(const char *state, unsigned count, void *userdata) {
        JobArray *a = userdata;
        JobState s = job_state_from_string(state);

        if (job_state_is_final(s)) {
                a->ended[s] += count;
                a->n_ended += count;
        }
        return 0;
}

static int failure_cb(const StoreJob *sj, void *userdata) {
        JobArray *a = userdata;
        json_t *arr = json_object_get(sj->data, "array");

        array_note_failure(a, sj->id, failure_json(sj->id, (unsigned) json_integer_value(json_object_get(arr, "index")),
                                                   sj->state, json_object_get(sj->data, "exit_code"),
                                                   json_object_get(sj->data, "signal"),
                                                   json_object_get(sj->data, "reason")));
        return 0;
}

static int recover_one(uint64_t id, uid_t uid, json_t *data, void *userdata) {
        JobManager *jm = userdata;
        JobArray *a = calloc(1, sizeof *a);
        unsigned attached = 0;
        int r;

        if (!a)
                return -ENOMEM;
        *a = (JobArray){ .id = id, .uid = uid, .def = json_incref(data),
                         .size = (unsigned) json_integer_value(json_object_get(data, "size")),
                         .max_running = (unsigned) json_integer_value(json_object_get(data, "max_running")) };
        r = store_array_count_states(jm->store, id, count_cb, a);
        if (r >= 0)
                r = store_array_first_failure(jm->store, id, failure_cb, a);
        if (r < 0) {
                array_free(a);
                return r;
        }
        for (unsigned b = 0; b < JOB_BUCKETS; b++)
                for (Job *j = jm->buckets[b]; j; j = j->hnext)
                        if (j->array_id == id && !job_state_is_final(j->state)) {
                                j->array = a;
                                attached++;
                                a->active += j->holds_cores;
                        }
        /* Tasks neither ended in the store nor back in memory (rows recovery could not read): lost. */
        if (a->n_ended + attached < a->size) {
                a->ended[JOB_LOST] += a->size - a->n_ended - attached;
                a->n_ended = a->size - attached;
        }
        a->next = jm->arrays;
        jm->arrays = a;
        if (attached == 0)
                array_finish(jm, a);    /* it ended while no rtd was there to write its summary */
        return 0;
}

int job_arrays_recover(JobManager *jm) {
        jm->next_array_id = store_array_max_id(jm->store) + 1;
        return store_array_foreach_live(jm->store, recover_one, jm);
}

void job_arrays_free(JobManager *jm) {
        while (jm->arrays) {
                JobArray *a = jm->arrays;
                jm->arrays = a->next;
                array_free(a);
        }
        jm->array_progress_src = sd_event_source_disable_unref(jm->array_progress_src);
}
