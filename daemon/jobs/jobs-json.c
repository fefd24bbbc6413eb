/* SPDX-License-Identifier: MIT */
/* Jobs as JSON: the API view, the stored form (API view + what a restart needs), and back. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "jobs-internal.h"
#include "shared/macro.h"

char *job_format_time(uint64_t usec) {
        char buf[64], *s;
        struct tm tm;
        time_t t = (time_t) (usec / 1000000);

        if (usec == 0 || !gmtime_r(&t, &tm))
                return NULL;
        strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
        if (asprintf(&s, "%s.%06uZ", buf, (unsigned) (usec % 1000000)) < 0)
                return NULL;
        return s;
}

static void set_time(json_t *o, const char *key, uint64_t usec) {
        char *s = job_format_time(usec);
        json_object_set_new(o, key, s ? json_string(s) : json_null());
        free(s);
}

static const char *job_name(const Job *j) {
        const char *slash;
        if (j->spec.name)
                return j->spec.name;
        slash = strrchr(j->spec.argv[0], '/');
        return slash && slash[1] ? slash + 1 : j->spec.argv[0];
}

/* Fields only the store needs (credentials and exact clocks for a restart); never shown by the API. */
static const char *const store_only[] = {
        "gid", "groups", "boottime_usec", "submit_usec", "start_usec", "end_usec", "worker_cpu", "seq", "admin",
        "boot_id",
};

json_t *job_to_json(JobManager *jm, const Job *j, bool private, bool for_store) {
        _cleanup_free_ char *cpus = NULL;
        json_t *o = json_object(), *spec;

        if (!o)
                return NULL;
        spec = job_spec_to_json(&j->spec, private || for_store);
        json_object_set_new(o, "id", json_integer((json_int_t) j->id));
        json_object_set_new(o, "name", json_string(job_name(j)));
        json_object_set_new(o, "state", json_string(job_state_to_string(j->state)));
        json_object_set_new(o, "user", json_string(strempty(j->user)));
        json_object_set_new(o, "uid", json_integer(j->uid));
        json_object_set_new(o, "spec", spec);
        json_object_set_new(o, "policy", json_string(job_policy_to_string(j->spec.policy)));
        json_object_set_new(o, "priority", json_integer(j->priority));
        if (!cpuset_is_empty(&j->cpus) && cpuset_format(&j->cpus, &cpus) >= 0)
                json_object_set_new(o, "cpus", json_string(cpus));
        else
                json_object_set_new(o, "cpus", json_null());
        set_time(o, "submitted_at", j->submit_usec);
        set_time(o, "started_at", j->start_usec);
        set_time(o, "ended_at", j->end_usec);
        if (j->start_usec && j->end_usec >= j->start_usec)
                json_object_set_new(o, "duration_s", json_real((double) (j->end_usec - j->start_usec) / 1e6));
        json_object_set_new(o, "pid", j->pid > 0 ? json_integer(j->pid) : json_null());
        if (j->cgroup)
                json_object_set_new(o, "cgroup", json_string(j->cgroup));
        json_object_set_new(o, "exit_code", j->exit_code >= 0 ? json_integer(j->exit_code) : json_null());
        json_object_set_new(o, "signal", j->signal > 0 ? json_integer(j->signal) : json_null());
        json_object_set_new(o, "reason", j->reason ? json_string(j->reason) : json_null());
        json_object_set_new(o, "dispatch_latency_us",
                            j->have_dispatch ? json_integer((json_int_t) j->dispatch_usec) : json_null());
        if (j->have_rusage) {
                const WorkerExited *r = &j->rusage;
                json_object_set_new(o, "cpu_time_s", json_real((double) (r->utime_usec + r->stime_usec) / 1e6));
                json_object_set_new(o, "user_time_s", json_real((double) r->utime_usec / 1e6));
                json_object_set_new(o, "system_time_s", json_real((double) r->stime_usec / 1e6));
                json_object_set_new(o, "voluntary_ctxt_switches", json_integer((json_int_t) r->nvcsw));
                json_object_set_new(o, "involuntary_ctxt_switches", json_integer((json_int_t) r->nivcsw));
                json_object_set_new(o, "max_rss_kb", json_integer((json_int_t) r->maxrss_kb));
        }
        if (j->adopted)
                json_object_set_new(o, "adopted", json_true());
        if (j->array_id)
                json_object_set_new(o, "array", json_pack("{s:I,s:i}", "id", (json_int_t) j->array_id, "index",
                                                          (int) j->array_index));
        if (job_state_is_final(j->state) && (j->pid > 0 || j->have_rusage))
                json_object_set_new(o, "limits_hit", job_limits_hits_json(j));
        if (j->metrics)
                json_object_set_new(o, "metrics", json_incref(j->metrics));

        if (for_store) {
                json_t *g = json_array();
                for (size_t i = 0; i < j->n_groups; i++)
                        json_array_append_new(g, json_integer(j->groups[i]));
                json_object_set_new(o, "gid", json_integer(j->gid));
                json_object_set_new(o, "groups", g);
                json_object_set_new(o, "boottime_usec", json_integer((json_int_t) j->boottime_usec));
                json_object_set_new(o, "submit_usec", json_integer((json_int_t) j->submit_usec));
                json_object_set_new(o, "start_usec", json_integer((json_int_t) j->start_usec));
                json_object_set_new(o, "end_usec", json_integer((json_int_t) j->end_usec));
                json_object_set_new(o, "worker_cpu", json_integer(j->worker_cpu));
                json_object_set_new(o, "admin", json_boolean(j->admin));
                if (j->boot_id[0])
                        json_object_set_new(o, "boot_id", json_string(j->boot_id));
                if (j->have_rusage)
                        json_object_set_new(o, "rusage",
                                            json_pack("{s:I,s:I,s:I,s:I,s:I,s:i}", "utime_usec",
                                                      (json_int_t) j->rusage.utime_usec, "stime_usec",
                                                      (json_int_t) j->rusage.stime_usec, "nvcsw",
                                                      (json_int_t) j->rusage.nvcsw, "nivcsw",
                                                      (json_int_t) j->rusage.nivcsw, "maxrss_kb",
                                                      (json_int_t) j->rusage.maxrss_kb, "status",
                                                      j->rusage.status));
        }
        return o;
}

void job_json_for_api(json_t *o, bool private) {
        json_t *spec = json_object_get(o, "spec");

        for (size_t i = 0; i < ELEMENTSOF(store_only); i++)
                (void) json_object_del(o, store_only[i]);
        (void) json_object_del(o, "rusage");
        if (!private && spec) {
                (void) json_object_del(spec, "argv");
                (void) json_object_del(spec, "env");
                (void) json_object_del(spec, "cwd");
        }
}

json_t *job_event_json(JobManager *jm, const Job *j) {
        json_t *o = json_pack("{s:s,s:I,s:s,s:s,s:i,s:s}", "type", "job", "id", (json_int_t) j->id, "state",
                              job_state_to_string(j->state), "user", strempty(j->user), "uid", (int) j->uid,
                              "name", job_name(j));
        if (!o)
                return NULL;
        if (j->array_id) {
                json_object_set_new(o, "array_id", json_integer((json_int_t) j->array_id));
                json_object_set_new(o, "array_index", json_integer(j->array_index));
        }
        if (job_state_is_final(j->state)) {
                json_object_set_new(o, "exit_code", j->exit_code >= 0 ? json_integer(j->exit_code) : json_null());
                json_object_set_new(o, "signal", j->signal > 0 ? json_integer(j->signal) : json_null());
                json_object_set_new(o, "reason", j->reason ? json_string(j->reason) : json_null());
        }
        return o;
}

static uint64_t get_u64(json_t *o, const char *key) {
        json_t *v = json_object_get(o, key);
        return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t) json_integer_value(v) : 0;
}

int job_from_json(JobManager *jm, uint64_t id, const char *state, uid_t uid, uint64_t seq, json_t *data,
                  Job **ret) {
        _cleanup_free_ char *field = NULL, *error = NULL;
        json_t *spec = json_object_get(data, "spec"), *v;
        Job *j;
        int r;

        j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        *j = (Job){ .jm = jm, .id = id, .seq = seq, .uid = uid, .exit_code = -1, .pidfd = -EBADF };
        j->state = job_state_from_string(state);
        r = spec ? job_spec_parse(spec, &j->spec, &field, &error) : -EINVAL;
        if (r < 0 || j->state < 0) {
                job_free_unregistered(j);
                return r < 0 ? r : -EINVAL;
        }
        j->user = strdup(json_string_value(json_object_get(data, "user")) ?: "");
        j->gid = (gid_t) get_u64(data, "gid");
        j->priority = (unsigned) get_u64(data, "priority");
        j->pid = (pid_t) get_u64(data, "pid");
        j->boottime_usec = get_u64(data, "boottime_usec");
        j->submit_usec = get_u64(data, "submit_usec");
        j->start_usec = get_u64(data, "start_usec");
        j->worker_cpu = (unsigned) get_u64(data, "worker_cpu");
        j->admin = json_is_true(json_object_get(data, "admin"));
        if ((v = json_object_get(data, "array")) && json_is_object(v)) {
                j->array_id = get_u64(v, "id");
                j->array_index = (unsigned) get_u64(v, "index");
        }
        if ((v = json_object_get(data, "boot_id")) && json_is_string(v))
                snprintf(j->boot_id, sizeof j->boot_id, "%s", json_string_value(v));
        if ((v = json_object_get(data, "cpus")) && json_is_string(v))
                (void) cpuset_parse(json_string_value(v), &j->cpus, NULL);
        if ((v = json_object_get(data, "cgroup")) && json_is_string(v))
                j->cgroup = strdup(json_string_value(v));
        if ((v = json_object_get(data, "reason")) && json_is_string(v))
                j->reason = strdup(json_string_value(v));
        if ((v = json_object_get(data, "dispatch_latency_us")) && json_is_integer(v)) {
                j->dispatch_usec = (uint64_t) json_integer_value(v);
                j->have_dispatch = true;
        }
        v = json_object_get(data, "groups");
        if (json_is_array(v) && json_array_size(v) > 0) {
                size_t i;
                json_t *g;
                j->groups = calloc(json_array_size(v), sizeof(gid_t));
                if (j->groups)
                        json_array_foreach(v, i, g)
                                j->groups[j->n_groups++] = (gid_t) json_integer_value(g);
        }
        if (!j->user) {
                job_free_unregistered(j);
                return -ENOMEM;
        }
        *ret = j;
        return 0;
}
