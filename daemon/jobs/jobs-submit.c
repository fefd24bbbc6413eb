/* SPDX-License-Identifier: MIT */
/* Submit and cancel: whether a caller may queue a spec now (limits, quotas, the reservation), the new job, and
 * cancelling one (a queued job at once, a running one by signals to its tree). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/manager.h"
#include "jobs-internal.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "store/store.h"

/* ---- submit ---- */

static int refuse(char **rf, char **re, int r, const char *field, const char *fmt, ...) _printf_(5, 6);
static int refuse(char **rf, char **re, int r, const char *field, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(re, fmt, ap) < 0)
                *re = NULL;
        va_end(ap);
        *rf = strdup(field);
        return r;
}

/* Whether spec may be queued n times for c now (n > 1: an array, all or nothing); *ret_prio its priority. */
int job_submit_check(JobManager *jm, JobSpec *spec, const JobCaller *c, unsigned n, unsigned *ret_prio,
                     char **rf, char **re) {
        const RtdConfig *cfg = jm->manager->config;
        unsigned n_reserved = cpuset_count(&jm->reserved), prio;
        _cleanup_free_ char *list = NULL;
        UserCount *u;
        int r;

        (void) cpuset_format(&jm->reserved, &list);
        if (n_reserved == 0)
                return refuse(rf, re, -ENXIO, "cores", "no CPUs are reserved, so no job can run; an administrator "
                              "can reserve some with 'rtctl reserve CPUS' or [Reserve] CPUs=");
        if (spec->has_cpus && !cpuset_is_subset(&spec->cpus, &jm->reserved)) {
                _cleanup_free_ char *want = NULL;
                (void) cpuset_format(&spec->cpus, &want);
                return refuse(rf, re, -EINVAL, "cpus", "CPUs %s are not all reserved; reserved CPUs are %s",
                              strempty(want), strempty(list));
        }
        if (spec->cores > n_reserved)
                return refuse(rf, re, -EINVAL, "cores", "%u cores requested but only %u CPU%s reserved (%s); ask "
                              "for at most %u", spec->cores, n_reserved, n_reserved == 1 ? " is" : "s are",
                              strempty(list), n_reserved);
        if (!c->admin && cfg->max_cores_per_user > 0 && spec->cores > cfg->max_cores_per_user)
                return refuse(rf, re, -EPERM, "cores", "%u cores requested; a non-admin's jobs may hold at most %u "
                              "together ([Access] MaxCoresPerUser=%u), so this one could never start; ask for at "
                              "most %u", spec->cores, cfg->max_cores_per_user, cfg->max_cores_per_user,
                              cfg->max_cores_per_user);

        prio = spec->policy == JOB_POLICY_OTHER ? 0 : spec->priority ?: cfg->default_priority;
        if (!c->admin && prio > cfg->max_priority) {
                if (spec->priority)
                        return refuse(rf, re, -EPERM, "priority", "%u is above the limit for non-admins "
                                      "([Access] MaxPriority=%u); use 1-%u", prio, cfg->max_priority,
                                      cfg->max_priority);
                prio = cfg->max_priority;
        }
        if (job_needs_refusal(jm, spec))
                return refuse(rf, re, -EPERM, "policy", "real-time jobs need a cpuset to hold them on their CPUs, "
                              "and this machine has none (%s); submit with policy \"other\", or an administrator "
                              "may allow them with [Jobs] RealtimeWithoutCpuset=yes, giving up the kernel's hold "
                              "on the job's CPUs", strempty(jm->cpusets.reason));
        if (prio >= cfg->worker_priority)
                return refuse(rf, re, -EPERM, "priority", "%u is not below the workers' priority ([Jobs] "
                              "WorkerPriority=%u), which must preempt every job; use 1-%u", prio,
                              cfg->worker_priority, cfg->worker_priority - 1);
        r = job_limits_resolve(cfg, spec, c->admin, rf, re);
        if (r < 0)
                return r;
        if (!c->admin && cfg->max_timeout_sec > 0) {
                if (spec->timeout_s > cfg->max_timeout_sec)
                        return refuse(rf, re, -EPERM, "timeout_s", "%g s is above the limit for non-admins "
                                      "([Access] MaxTimeoutSec=%u)", spec->timeout_s, cfg->max_timeout_sec);
                if (spec->timeout_s <= 0)
                        spec->timeout_s = cfg->max_timeout_sec;
        }
        if (n == 1 && jm->queue_len >= cfg->max_queued)
                return refuse(rf, re, -ENOSPC, "", "the queue is full (%u jobs, [Jobs] MaxQueued=); try again "
                              "later", jm->queue_len);
        if (n > 1 && jm->queue_len + (uint64_t) n > cfg->max_queued)
                return refuse(rf, re, -ENOSPC, "", "the queue has room for %u more jobs ([Jobs] MaxQueued=%u, %u "
                              "queued) and the array has %u tasks; nothing was queued", cfg->max_queued -
                              MIN(jm->queue_len, cfg->max_queued), cfg->max_queued, jm->queue_len, n);
        u = job_user_count(jm, c->uid, true);
        if (!u)
                return -ENOMEM;
        if (!c->admin && n == 1 && u->queued >= cfg->max_queued_per_user)
                return refuse(rf, re, -EUSERS, "", "you have %u queued jobs, the limit ([Access] "
                              "MaxQueuedPerUser=); wait for some to start or cancel some", u->queued);
        if (!c->admin && n > 1 && u->queued + (uint64_t) n > cfg->max_queued_per_user)
                return refuse(rf, re, -EUSERS, "", "you have %u queued jobs and the array has %u tasks; each "
                              "counts against your limit of %u ([Access] MaxQueuedPerUser=); nothing was queued",
                              u->queued, n, cfg->max_queued_per_user);
        *ret_prio = prio;
        return 0;
}

Job *job_new(JobManager *jm, JobSpec *spec, const JobCaller *c, unsigned prio) {
        Job *j;

        j = calloc(1, sizeof *j);
        if (!j)
                return NULL;
        *j = (Job){
                .jm = jm,
                .id = jm->next_id,
                .seq = jm->next_seq,
                .state = JOB_QUEUED,
                .spec = *spec,
                .uid = c->uid,
                .gid = c->gid,
                .priority = prio,
                .user = strdup(strempty(c->user)),
                .submit_usec = now_usec(CLOCK_REALTIME),
                .accepted_mono = now_usec(CLOCK_MONOTONIC),
                .exit_code = -1,
                .pidfd = -EBADF,
                .admin = c->admin,
        };
        if (c->n_groups > 0) {
                j->groups = malloc(c->n_groups * sizeof(gid_t));
                if (j->groups) {
                        memcpy(j->groups, c->groups, c->n_groups * sizeof(gid_t));
                        j->n_groups = c->n_groups;
                }
        }
        if (!j->user || (c->n_groups > 0 && !j->groups)) {
                j->spec = (JobSpec){};
                job_free(j);
                return NULL;
        }
        *spec = (JobSpec){};
        return j;
}

int job_manager_submit(JobManager *jm, JobSpec *spec, const JobCaller *c, uint64_t *ret_id, char **rf,
                       char **re) {
        const RtdConfig *cfg = jm->manager->config;
        unsigned prio;
        UserCount *u;
        Job *j;
        int r;

        r = job_submit_check(jm, spec, c, 1, &prio, rf, re);
        if (r < 0)
                return r;
        u = job_user_count(jm, c->uid, true);      /* made by the check */
        j = job_new(jm, spec, c, prio);
        if (!u || !j)
                return -ENOMEM;
        /* Nobody ahead (queued or waiting in a worker) and room now: straight to the worker, stored once.
         * Else stored as queued. */
        CpuSet cpus;
        uint64_t id = j->id;
        bool now = !jm->queue_head && cpuset_is_empty(&jm->ahead_cpus) && job_user_has_room(jm, j) &&
                   job_place(jm, &j->spec, &cpus) >= 0;
        if (now) {
                job_table_add(jm, j);
                job_publish(jm, j);     /* watchers see "queued" first, as for every job */
                r = job_start(jm, j, &cpus, true, false);
        } else
                r = job_persist(jm, j, true);
        if (r < 0) {
                if (now)
                        job_table_remove(jm, j);
                job_free(j);
                /* Nothing was queued: a job rtd could not store would be lost on a restart. */
                return refuse(rf, re, r == -ENOSPC ? -EDQUOT : -EIO, "", "rtd could not store the job in %s/jobs.db "
                              "(%s); nothing was queued. %s", cfg->state_directory, strerror(-r),
                              r == -ENOSPC ? "An administrator must free space on that file system" :
                                             "Try again later; an administrator can look at rtd's log");
        }
        *spec = (JobSpec){};
        *ret_id = id;           /* j may be gone already if the worker refused it */
        jm->next_id++;
        jm->next_seq++;
        jm->submitted++;
        if (!now) {
                job_table_add(jm, j);
                job_queue_append(jm, j);
                u->queued++;
                job_publish(jm, j);
                job_manager_dispatch(jm);
        }
        return 0;
}

/* ---- cancel ---- */

int job_manager_cancel(JobManager *jm, uint64_t id, const JobCaller *c, JobState *ret_state) {
        Job *j = job_lookup(jm, id);

        if (!j) {
                _cleanup_(json_decrefp) json_t *data = NULL;
                _cleanup_free_ char *state = NULL;
                uid_t uid;
                int r = store_get(jm->store, id, &data, &state, &uid);
                if (r < 0)
                        return r;
                if (!c->admin && uid != c->uid)
                        return -EPERM;
                *ret_state = job_state_from_string(state);
                return -EALREADY;
        }
        if (!c->admin && j->uid != c->uid)
                return -EPERM;
        *ret_state = j->state;
        if (j->state == JOB_QUEUED) {
                job_finish(jm, j, JOB_CANCELLED, "cancelled by %s before it started", strempty(c->user));
                *ret_state = JOB_CANCELLED;
                return 0;
        }
        if (!j->cancel_requested) {
                j->cancel_requested = true;
                free(j->reason);
                if (asprintf(&j->reason, "cancelled by %s", strempty(c->user)) < 0)
                        j->reason = NULL;
                /* Waiting in a worker: take it back unstarted if we can (dropped() finishes it), else it
                 * is terminated once it has a pid, like any starting job. */
                job_take_back(jm, j);
                job_terminate(jm, j);
        }
        return 0;
}
