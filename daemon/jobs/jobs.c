/* SPDX-License-Identifier: MIT */
/*
 * Jobs: the job model and its states, the job table and the queue, persistence and events, signals and
 * timeouts, finishing, and the life of the JobManager. Submit and cancel live in jobs-submit.c, the
 * dispatcher onto per-CPU workers in jobs-dispatch.c, placement in job-place.c, workers and reservation
 * changes in jobs-workers.c, recovery after a crash in jobs-recover.c. Everything runs on the daemon's single sd-event
 * loop, so there is no lock anywhere; dispatch does no I/O but the store write and the packet to the worker.
 *
 * On shutdown (job_manager_free) running jobs are left to their workers: a worker whose daemon went away
 * finishes its job and leaves the result in <state>/output/<instance>/<id>.exit, which the next rtd picks up. Queued
 * jobs stay queued in the store and resume in their order.
 */
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
#include "metrics/metrics.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "shared/messages.h"
#include "store/store.h"

static const char *const state_names[_JOB_STATE_MAX] = {
        "queued", "starting", "running", "succeeded", "failed", "cancelled", "timed_out", "lost",
};

const char *job_state_to_string(JobState s) {
        return s >= 0 && s < _JOB_STATE_MAX ? state_names[s] : NULL;
}

JobState job_state_from_string(const char *s) {
        for (int i = 0; s && i < _JOB_STATE_MAX; i++)
                if (streq(s, state_names[i]))
                        return (JobState) i;
        return _JOB_STATE_INVALID;
}

bool job_state_is_final(JobState s) {
        return s >= JOB_SUCCEEDED;
}

/* ---- job table ---- */

static unsigned bucket(uint64_t id) {
        return (unsigned) ((id * UINT64_C(0x9E3779B97F4A7C15)) >> 50) % JOB_BUCKETS;
}

Job *job_lookup(JobManager *jm, uint64_t id) {
        for (Job *j = jm->buckets[bucket(id)]; j; j = j->hnext)
                if (j->id == id)
                        return j;
        return NULL;
}

void job_table_add(JobManager *jm, Job *j) {
        unsigned b = bucket(j->id);
        j->hnext = jm->buckets[b];
        jm->buckets[b] = j;
}

void job_table_remove(JobManager *jm, Job *j) {
        for (Job **p = &jm->buckets[bucket(j->id)]; *p; p = &(*p)->hnext)
                if (*p == j) {
                        *p = j->hnext;
                        return;
                }
}

void job_queue_append(JobManager *jm, Job *j) {
        j->prev = jm->queue_tail;
        j->next = NULL;
        if (jm->queue_tail)
                jm->queue_tail->next = j;
        else
                jm->queue_head = j;
        jm->queue_tail = j;
        jm->queue_len++;
}

/* Back into the queue in its place: a job given back by a worker was ahead of every queued one. */
void job_queue_insert_in_order(JobManager *jm, Job *j) {
        Job *after = jm->queue_head;

        while (after && after->seq < j->seq)
                after = after->next;
        if (!after) {
                job_queue_append(jm, j);
                return;
        }
        j->next = after;
        j->prev = after->prev;
        if (after->prev)
                after->prev->next = j;
        else
                jm->queue_head = j;
        after->prev = j;
        jm->queue_len++;
}

void job_queue_remove(JobManager *jm, Job *j) {
        if (j->prev)
                j->prev->next = j->next;
        else
                jm->queue_head = j->next;
        if (j->next)
                j->next->prev = j->prev;
        else
                jm->queue_tail = j->prev;
        j->prev = j->next = NULL;
        jm->queue_len--;
}

UserCount *job_user_count(JobManager *jm, uid_t uid, bool create) {
        for (UserCount *u = jm->users; u; u = u->next)
                if (u->uid == uid)
                        return u;
        if (!create)
                return NULL;
        UserCount *u = calloc(1, sizeof *u);
        if (!u)
                return NULL;
        u->uid = uid;
        u->next = jm->users;
        jm->users = u;
        return u;
}

/* Count (or stop counting) the CPUs j holds against its user's [Access] MaxCoresPerUser=; idempotent. */
void job_hold_cores(JobManager *jm, Job *j, bool hold) {
        UserCount *u;

        if (j->holds_cores != hold && j->array)
                job_array_task_active(jm, j, hold);     /* the array's running count, for max_running */
        if (j->holds_cores == hold || !(u = job_user_count(jm, j->uid, hold))) {
                j->holds_cores = hold;
                return;
        }
        unsigned n = cpuset_count(&j->cpus);
        u->cores = hold ? u->cores + n : u->cores > n ? u->cores - n : 0;
        j->holds_cores = hold;
}

/* Whether j may start now as far as its user's other jobs go: they wait in the queue, never refused. */
bool job_user_has_room(JobManager *jm, const Job *j) {
        unsigned max = jm->manager->config->max_cores_per_user;
        UserCount *u;

        if (j->array && !job_array_has_room(j->array))
                return false;   /* its array runs max_running tasks already */
        if (j->admin || max == 0)
                return true;
        u = job_user_count(jm, j->uid, false);
        return (u ? u->cores : 0) + j->spec.cores <= max;
}

Job *job_free(Job *j) {
        if (!j)
                return NULL;
        sd_event_source_disable_unref(j->timeout_src);
        sd_event_source_disable_unref(j->kill_src);
        sd_event_source_disable_unref(j->ahead_src);
        sd_event_source_disable_unref(j->pidfd_src);
        sd_event_source_disable_unref(j->retry_src);
        safe_close(j->pidfd);
        job_spec_done(&j->spec);
        free(j->groups);
        free(j->user);
        free(j->reason);
        free(j->cgroup);
        json_decref(j->metrics);
        free(j);
        return NULL;
}

/* ---- persistence and events ---- */

static int persist(JobManager *jm, Job *j, bool insert, bool durable) {
        _cleanup_(json_decrefp) json_t *data = job_to_json(jm, j, true, true);
        StoreJob sj = { .id = j->id, .state = job_state_to_string(j->state), .uid = j->uid, .seq = j->seq,
                        .data = data, .array_id = j->array_id };
        int r;

        if (!data)
                return -ENOMEM;
        r = job_store_write(jm, &sj, insert, durable);
        return r;
}

int job_persist(JobManager *jm, Job *j, bool insert) {
        return persist(jm, j, insert, false);
}

int job_persist_durable(JobManager *jm, Job *j, bool insert) {
        return persist(jm, j, insert, true);
}

void job_publish(JobManager *jm, Job *j) {
        if (!jm->subs)
                return;
        json_t *e = job_event_json(jm, j);
        if (!e)
                return;
        for (JobSubscription *s = jm->subs, *next; s; s = next) {
                next = s->next;         /* a subscriber may unsubscribe itself */
                s->fn(e, s->userdata);
        }
        json_decref(e);
}

int job_manager_subscribe(JobManager *jm, JobEventFn fn, void *userdata, JobSubscription **ret) {
        JobSubscription *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->fn = fn;
        s->userdata = userdata;
        s->next = jm->subs;
        jm->subs = s;
        *ret = s;
        return 0;
}

JobSubscription *job_manager_unsubscribe(JobManager *jm, JobSubscription *s) {
        if (!s)
                return NULL;
        for (JobSubscription **p = &jm->subs; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        break;
                }
        free(s);
        return NULL;
}

/* ---- signals to a job's whole tree ---- */

void job_signal(JobManager *jm, Job *j, int sig) {
        /* By its cgroups: setsid and double forks do not leave them, and no pid is needed. */
        if (j->cgroup)
                job_cgroups_signal(jm, j->cgroup, sig);
        /* The job leads its own session and process group (setsid in the child). */
        if (j->pid > 0) {
                if (j->pidfd >= 0)
                        (void) syscall(SYS_pidfd_send_signal, j->pidfd, sig, NULL, 0);
                (void) kill(-j->pid, sig);
        }
}

static int on_kill_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Job *j = userdata;
        j->kill_src = sd_event_source_disable_unref(j->kill_src);
        log_info("Job %" PRIu64 " did not stop within KillGraceSec=%u, sending SIGKILL", j->id,
                 j->jm->manager->config->kill_grace_sec);
        job_signal(j->jm, j, SIGKILL);
        return 0;
}

/*
 * SIGTERM now, SIGKILL after KillGraceSec=. A job with a cgroup is signalled through it, its pid known or
 * not (a child that is cloned in later dies by the SIGKILL); without one only once its pid is known.
 */
void job_terminate(JobManager *jm, Job *j) {
        if ((j->pid <= 0 && !j->cgroup) || j->kill_src)
                return;
        job_signal(jm, j, SIGTERM);
        (void) sd_event_add_time_relative(jm->manager->event, &j->kill_src, CLOCK_MONOTONIC,
                                          (uint64_t) jm->manager->config->kill_grace_sec * 1000000, 0,
                                          on_kill_timer, j);
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Job *j = userdata;
        j->timeout_src = sd_event_source_disable_unref(j->timeout_src);
        if (job_state_is_final(j->state) || j->cancel_requested)
                return 0;
        j->timed_out = true;
        free(j->reason);
        if (asprintf(&j->reason, "timed out after %g s", j->spec.timeout_s) < 0)
                j->reason = NULL;
        log_info("Job %" PRIu64 " timed out after %g s, stopping it", j->id, j->spec.timeout_s);
        job_terminate(j->jm, j);
        return 0;
}

void job_arm_timeout(JobManager *jm, Job *j, uint64_t started_mono) {
        if (j->spec.timeout_s <= 0 || j->timeout_src)
                return;
        (void) sd_event_add_time(jm->manager->event, &j->timeout_src, CLOCK_MONOTONIC,
                                 started_mono + (uint64_t) (j->spec.timeout_s * 1e6), 1000, on_timeout, j);
}

/* Journal fields of a job's state changes, so `journalctl RTD_JOB_ID=42` finds them (issue 6). */
char *job_log_fields(const Job *j) {
        _cleanup_free_ char *cpus = NULL;
        char *f = NULL;

        if (cpuset_is_empty(&j->cpus) || cpuset_format(&j->cpus, &cpus) < 0)
                return asprintf(&f, "RTD_JOB_ID=%" PRIu64 "\nRTD_USER=%s\nRTD_UID=%u\nRTD_JOB_STATE=%s", j->id,
                                strempty(j->user), (unsigned) j->uid, job_state_to_string(j->state)) < 0 ? NULL : f;
        return asprintf(&f, "RTD_JOB_ID=%" PRIu64 "\nRTD_USER=%s\nRTD_UID=%u\nRTD_JOB_STATE=%s\nRTD_CPUS=%s\nRTD_CPU=%u",
                        j->id, strempty(j->user), (unsigned) j->uid, job_state_to_string(j->state), cpus,
                        j->worker_cpu) < 0 ? NULL : f;
}

/* ---- finishing ---- */

void job_release_cpus(JobManager *jm, Job *j) {
        CPUSET_FOREACH(cpu, &j->cpus) {
                WorkerSlot *slot = &jm->slots[cpu];

                if (slot->next == j)
                        slot_set_next(jm, cpu, NULL);   /* it waited there and ends unstarted */
                if (slot->job != j)
                        continue;
                slot->job = NULL;
                if (slot->next) {
                        /* The worker starts the job that waited behind this one right away. */
                        Job *n = slot->next;
                        slot_set_next(jm, cpu, NULL);
                        n->drop_requested = false;
                        n->ahead_src = sd_event_source_disable_unref(n->ahead_src);
                        n->handed_mono = now_usec(CLOCK_MONOTONIC);
                        slot->job = n;
                        job_arm_timeout(jm, n, n->handed_mono);
                } else if (!cpuset_isset(&jm->reserved, cpu))
                        /* The CPU left the reservation while this job ran: its worker goes now. */
                        slot->worker = worker_free(slot->worker);
        }
}

/* The spares handed with the job, where its child never renamed them (taken back, or it never ran). */
static void job_remove_unused_spares(Job *j) {
        char name[32];

        if (!j->spares)
                return;
        for (uint64_t n = j->spares - 1; n <= j->spares; n++) {
                snprintf(name, sizeof name, "spare-%" PRIu64, n);
                (void) unlinkat(j->jm->output_fd, name, 0);     /* ENOENT: renamed, as it should be */
        }
        j->spares = 0;
}

/* Back to "queued", as if never handed out: no CPUs, no cgroup, no spares, no timers. */
void job_unstart(Job *j) {
        job_hold_cores(j->jm, j, false);
        j->state = JOB_QUEUED;
        j->boot_id[0] = 0;
        j->drop_requested = false;
        cpuset_zero(&j->cpus);
        if (j->cgroup)
                (void) job_cgroups_remove(j->jm, j->cgroup);    /* made, never entered */
        free(j->cgroup);
        j->cgroup = NULL;
        j->cgroup_id = 0;
        job_remove_unused_spares(j);
        /* The output files rtd named for it, never written: left there, they would pass for a trace of an
         * exec (job_never_exec_d()) should rtd stop while it is being started again. */
        for (unsigned i = 0; i < 2; i++) {
                char name[32];
                snprintf(name, sizeof name, "%" PRIu64 ".%s", j->id, i ? "stderr" : "stdout");
                (void) unlinkat(j->jm->output_fd, name, 0);
        }
        j->timeout_src = sd_event_source_disable_unref(j->timeout_src);
        j->ahead_src = sd_event_source_disable_unref(j->ahead_src);
}

/* A job a worker gave back unstarted goes back into the queue, in its place. */
void job_requeue(JobManager *jm, Job *j) {
        UserCount *u = job_user_count(jm, j->uid, true);

        job_unstart(j);
        job_queue_insert_in_order(jm, j);
        if (u)
                u->queued++;
        (void) job_persist(jm, j, false);
        job_manager_schedule(jm);
}

void job_finish(JobManager *jm, Job *j, JobState state, const char *reason_fmt, ...) {
        if (reason_fmt) {
                va_list ap;
                char *reason = NULL;
                va_start(ap, reason_fmt);
                if (vasprintf(&reason, reason_fmt, ap) < 0)
                        reason = NULL;
                va_end(ap);
                free(j->reason);
                j->reason = reason;
        }
        if (j->state == JOB_QUEUED) {
                job_queue_remove(jm, j);
                UserCount *u = job_user_count(jm, j->uid, false);
                if (u && u->queued > 0)
                        u->queued--;
        }
        bool started = j->pid > 0 || j->state == JOB_STARTING || j->state == JOB_RUNNING;
        if (started)
                job_limits_note_end(jm, j, state);
        job_hold_cores(jm, j, false);
        j->state = state;
        j->end_usec = now_usec(CLOCK_REALTIME);
        job_release_cpus(jm, j);
        if (j->pid > 0 && jm->manager->metrics) {
                json_decref(j->metrics);
                j->metrics = metrics_job_finish(jm->manager->metrics, j->id);
        }
        (void) job_persist(jm, j, false);
        job_remove_unused_spares(j);
        if (j->cgroup || started) {
                char name[64];
                snprintf(name, sizeof name, "rtd-%s-job-%" PRIu64, store_instance_id(jm->store), j->id);
                job_cgroups_remove_later(jm, j->cgroup ?: name, j->cgroup != NULL);
        }
        jm->finished[state]++;
        {
                _cleanup_free_ char *fields = job_log_fields(j);
                log_struct(state == JOB_SUCCEEDED ? LOG_INFO : LOG_NOTICE, RTD_MSG_JOB_FINISHED, fields,
                           "Job %" PRIu64 " %s%s%s", j->id, job_state_to_string(state), j->reason ? ": " : "",
                           strempty(j->reason));
        }
        job_publish(jm, j);
        if (j->array)
                job_array_task_ended(jm, j, state);
        job_table_remove(jm, j);
        job_free(j);
        if (++jm->finished_since_prune >= 256) {
                jm->finished_since_prune = 0;
                job_manager_prune(jm);
        }
        job_manager_schedule(jm);
}

/* ---- life of the manager ---- */

void job_manager_prune(JobManager *jm) {
        int r = store_prune_finished(jm->store, jm->manager->config->keep_finished, job_remove_output, jm);
        if (r < 0)
                log_warning_errno(r, "Failed to prune finished jobs from the store, ignoring: %m");
}

int job_remove_output(const StoreJob *sj, void *userdata) {
        JobManager *jm = userdata;
        static const char *const suffixes[] = { "stdout", "stderr", "exit" };
        char name[64];

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                snprintf(name, sizeof name, "%" PRIu64 ".%s", sj->id, suffixes[i]);
                (void) unlinkat(jm->output_fd, name, 0);
        }
        return 0;
}

static int on_sweep(sd_event_source *s, uint64_t usec, void *userdata) {
        JobManager *jm = userdata;
        if (jm->cgroups_dirty)
                job_sweep_cgroups(jm);
        if (jm->limits.n_leftovers > 0)
                job_limits_retry_leftovers(&jm->limits);
        (void) sd_event_source_set_time_relative(s, 2000000);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(JobManager *, job_manager_free);

int job_manager_new(Manager *m, JobManager **ret) {
        _cleanup_(job_manager_freep) JobManager *jm = NULL;
        char probe[64];
        int r;

        jm = calloc(1, sizeof *jm);
        if (!jm)
                return -ENOMEM;
        jm->manager = m;
        jm->output_fd = -EBADF;
        jm->cgroups.dir_fd = -EBADF;
        jm->scope = (JobScope){ .dir_fd = -EBADF, .workers_fd = -EBADF };
        jm->limits = (JobLimits){ .v1_pids_fd = -EBADF, .v1_memory_fd = -EBADF };
        jm->own_cgroup_fd = -EBADF;
        jm->reserved_cgroup_fd = -EBADF;
        jm->cpusets.v1_fd = -EBADF;
        jm->worker_cb = job_worker_callbacks;
        jm->slots = calloc(CPUSET_MAX, sizeof(WorkerSlot));
        jm->buckets = calloc(JOB_BUCKETS, sizeof(Job *));
        if (!jm->slots || !jm->buckets)
                return -ENOMEM;
        for (unsigned i = 0; i < CPUSET_MAX; i++)
                jm->slots[i] = (WorkerSlot){ .jm = jm, .cpu = i };

        r = store_open(m->state_fd, "jobs.db", &jm->store);
        if (r < 0)
                return log_error_errno(r, "Failed to open the job store %s/jobs.db: %m",
                                       m->config->state_directory);
        _cleanup_free_ char *boot_id = NULL;
        if (read_one_line_at(m->proc_fd, "sys/kernel/random/boot_id", &boot_id) >= 0)
                snprintf(jm->boot_id, sizeof jm->boot_id, "%s", boot_id);
        jm->next_id = store_max_id(jm->store) + 1;
        jm->next_seq = store_max_seq(jm->store) + 1;

        /*
         * Output files live in output/<instance>/, named by the store's random instance id: job ids restart
         * at 1 in a recreated store, and its job N must never be handed the old job N's output. The
         * directories are traversable so users can open their own (0600) files by name.
         */
        char outdir[64];
        snprintf(outdir, sizeof outdir, "output/%s", store_instance_id(jm->store));
        r = mkdir_p_at(m->state_fd, outdir, 0711);
        if (r < 0 && r != -EEXIST)
                return log_error_errno(r, "Failed to create %s/%s: %m", m->config->state_directory, outdir);
        _cleanup_close_ int legacy_fd = openat(m->state_fd, "output", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        jm->output_fd = openat(m->state_fd, outdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (legacy_fd < 0 || jm->output_fd < 0)
                return log_error_errno(errno, "Failed to open %s/%s: %m", m->config->state_directory, outdir);
        (void) fchmod(legacy_fd, 0711);
        (void) fchmod(jm->output_fd, 0711);
        job_output_adopt_legacy(jm, legacy_fd);
        job_output_forget_unknown(jm);

        snprintf(probe, sizeof probe, "rtd-%s-probe", store_instance_id(jm->store));
        job_cgroups_setup(m->proc_fd, probe, &jm->cgroups);
        job_scope_adopt_home(jm);
        job_limits_setup(m->proc_fd, m->sys_fd, store_instance_id(jm->store), &jm->limits);
        if (jm->cgroups.reason)
                log_info("Job cgroups: %s", jm->cgroups.reason);
        else
                log_info("Jobs get their own cgroups under %s", jm->cgroups.path);
        if (jm->cgroups.dir_fd >= 0) {
                jm->own_cgroup_fd = fcntl(jm->cgroups.dir_fd, F_DUPFD_CLOEXEC, 3);
                jm->own_cgroup_path = strdup(strempty(jm->cgroups.path));
        }
        job_containment_setup(jm);

        r = job_spares_start(jm);
        if (r < 0)
                return r;

        r = worker_find_binary(&jm->worker_path);
        if (r < 0)
                log_error_errno(r, "Cannot find the rtd-worker binary (set $RTD_WORKER): %m; jobs cannot run");

        r = job_dispatch_start(jm);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(m->event, &jm->sweep_src, CLOCK_MONOTONIC, 2000000, 0, on_sweep, jm);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(jm->sweep_src, SD_EVENT_ON);

        r = job_manager_recover(jm);
        if (r < 0)
                return r;
        r = job_arrays_recover(jm);
        if (r < 0)
                return log_error_errno(r, "Failed to recover job arrays from the store: %m");
        job_manager_prune(jm);
        *ret = TAKE_PTR(jm);
        return 0;
}

JobManager *job_manager_free(JobManager *jm) {
        if (!jm)
                return NULL;
        /* Leftover cgroups of finished jobs go; those of running jobs stay for the next rtd to adopt. */
        job_cgroups_remove_pending(jm);
        if (jm->store && jm->buckets)
                job_sweep_cgroups(jm);
        job_arrays_free(jm);
        for (unsigned b = 0; jm->buckets && b < JOB_BUCKETS; b++)
                for (Job *j = jm->buckets[b], *next; j; j = next) {
                        next = j->hnext;
                        job_free(j);
                }
        for (unsigned i = 0; jm->slots && i < CPUSET_MAX; i++) {
                worker_free(jm->slots[i].worker);
                sd_event_source_disable_unref(jm->slots[i].respawn_src);
        }
        worker_forget_detached();
        while (jm->subs)
                jm->subs = job_manager_unsubscribe(jm, jm->subs);
        while (jm->users) {
                UserCount *u = jm->users;
                jm->users = u->next;
                free(u);
        }
        sd_event_source_disable_unref(jm->dispatch_src);
        sd_event_source_disable_unref(jm->spare_src);
        job_spares_close(jm);
        sd_event_source_disable_unref(jm->sweep_src);
        sd_event_source_disable_unref(jm->drift_src);
        job_store_done(jm);
        store_free(jm->store);
        job_cgroups_done(&jm->cgroups);
        job_scope_done(&jm->scope);
        job_cpusets_done(&jm->cpusets);
        job_limits_done(&jm->limits);
        safe_close(jm->own_cgroup_fd);
        free(jm->own_cgroup_path);
        safe_close(jm->reserved_cgroup_fd);
        safe_close(jm->output_fd);
        free(jm->worker_path);
        free(jm->slots);
        free(jm->buckets);
        free(jm);
        return NULL;
}

/* Exposed to jobs-recover.c and jobs-json.c. */
void job_register(JobManager *jm, Job *j) {
        job_table_add(jm, j);
        if (j->state == JOB_QUEUED) {
                job_queue_append(jm, j);
                UserCount *u = job_user_count(jm, j->uid, true);
                if (u)
                        u->queued++;
        } else {
                CPUSET_FOREACH(cpu, &j->cpus)
                        if (!jm->slots[cpu].job)        /* a job that only waited there never claims it */
                                jm->slots[cpu].job = j;
                job_hold_cores(jm, j, true);
        }
}

void job_set_terminate(JobManager *jm, Job *j) {
        job_terminate(jm, j);
}

void job_rearm_timeout(JobManager *jm, Job *j, uint64_t started_mono) {
        job_arm_timeout(jm, j, started_mono);
}

Job *job_free_unregistered(Job *j) {
        return job_free(j);
}
