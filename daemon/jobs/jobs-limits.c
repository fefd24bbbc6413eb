/* SPDX-License-Identifier: MIT */
/* The job manager's side of job limits (job-limits.c): set them up when a job starts, note what they did when it ends. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/manager.h"
#include "jobs-internal.h"
#include "shared/log.h"
#include "store/store.h"

/* A job's cgroup name in the v1 hierarchies, the same as its v2 one. */
static void limits_name(JobManager *jm, const Job *j, char *buf, size_t size) {
        snprintf(buf, size, "rtd-%s-job-%" PRIu64, store_instance_id(jm->store), j->id);
}

int job_limits_prepare(JobManager *jm, Job *j, int cgroup_fd, int join[static 2], WorkerRlimit rl[WORKER_RLIMITS]) {
        char name[64];

        limits_name(jm, j, name, sizeof name);
        job_limits_rlimits(&jm->limits, &j->spec, j->priority, rl);
        return job_limits_apply(&jm->limits, jm->cgroups.dir_fd, cgroup_fd, name, &j->spec, join);
}

static uint64_t output_size(JobManager *jm, const Job *j, const char *suffix) {
        char name[64];
        struct stat st;

        snprintf(name, sizeof name, "%" PRIu64 ".%s", j->id, suffix);
        return fstatat(jm->output_fd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0 ? (uint64_t) st.st_size : 0;
}

/* The job ended (or never got going): what its limits did, into j->hits, j->output_capped and its reason. */
void job_limits_note_end(JobManager *jm, Job *j, JobState state) {
        char name[64];

        limits_name(jm, j, name, sizeof name);
        job_limits_finish(&jm->limits, j->cgroup ? jm->cgroups.dir_fd : -EBADF, name, &j->hits);
        j->output_capped = (job_limits_output_capped(output_size(jm, j, "stdout"), j->spec.max_output_bytes) ? 1 : 0) |
                           (job_limits_output_capped(output_size(jm, j, "stderr"), j->spec.max_output_bytes) ? 2 : 0);
        if (j->hits.oom_kills > 0 && state == JOB_FAILED) {
                char *reason = NULL;
                if (asprintf(&reason, "the OOM killer killed %" PRIu64 " of its tasks: the job reached its memory "
                             "limit of %" PRIu64 " bytes (max_memory_bytes, [Jobs] MaxMemory=)%s%s", j->hits.oom_kills,
                             j->spec.max_memory_bytes, j->reason ? "; " : "", strempty(j->reason)) >= 0) {
                        free(j->reason);
                        j->reason = reason;
                }
        }
}

/* What the limits did, for the job's JSON (also stored). */
json_t *job_limits_hits_json(const Job *j) {
        json_t *o = json_object(), *capped = json_array();

        if (!o || !capped) {
                json_decref(o);
                json_decref(capped);
                return NULL;
        }
        if (j->output_capped & 1)
                json_array_append_new(capped, json_string("stdout"));
        if (j->output_capped & 2)
                json_array_append_new(capped, json_string("stderr"));
        json_object_set_new(o, "output_capped", capped);
        json_object_set_new(o, "oom_kills", json_integer((json_int_t) j->hits.oom_kills));
        json_object_set_new(o, "tasks_refused", json_integer((json_int_t) j->hits.pids_max));
        return o;
}
