/* SPDX-License-Identifier: MIT */
/*
 * Jobs: the job model and its states, the queue (fcfs or priority with aging), topology-aware placement,
 * the dispatcher onto per-CPU workers, cancel and timeout. Workers and reservation changes live in
 * jobs-workers.c, recovery after a crash in jobs-recover.c. Everything runs on the daemon's single sd-event
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

#include "job-cgroup.h"
#include "jobs-internal.h"
#include "manager.h"
#include "metrics.h"
#include "reserve.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "shared/messages.h"
#include "store.h"
#include "topology.h"
#include "worker.h"

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

static void job_table_add(JobManager *jm, Job *j) {
        unsigned b = bucket(j->id);
        j->hnext = jm->buckets[b];
        jm->buckets[b] = j;
}

static void job_table_remove(JobManager *jm, Job *j) {
        for (Job **p = &jm->buckets[bucket(j->id)]; *p; p = &(*p)->hnext)
                if (*p == j) {
                        *p = j->hnext;
                        return;
                }
}

static void queue_append(JobManager *jm, Job *j) {
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
static void queue_insert_in_order(JobManager *jm, Job *j) {
        Job *after = jm->queue_head;

        while (after && after->seq < j->seq)
                after = after->next;
        if (!after) {
                queue_append(jm, j);
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

static void queue_remove(JobManager *jm, Job *j) {
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

static UserCount *user_count(JobManager *jm, uid_t uid, bool create) {
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
static void job_hold_cores(JobManager *jm, Job *j, bool hold) {
        UserCount *u;

        if (j->holds_cores != hold && j->array)
                job_array_task_active(jm, j, hold);     /* the array's running count, for max_running */
        if (j->holds_cores == hold || !(u = user_count(jm, j->uid, hold))) {
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
        u = user_count(jm, j->uid, false);
        return (u ? u->cores : 0) + j->spec.cores <= max;
}

static Job *job_free(Job *j) {
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

static void job_arm_timeout(JobManager *jm, Job *j, uint64_t started_mono) {
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
        j->timeout_src = sd_event_source_disable_unref(j->timeout_src);
        j->ahead_src = sd_event_source_disable_unref(j->ahead_src);
}

/* A job a worker gave back unstarted goes back into the queue, in its place. */
void job_requeue(JobManager *jm, Job *j) {
        UserCount *u = user_count(jm, j->uid, true);

        job_unstart(j);
        queue_insert_in_order(jm, j);
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
                queue_remove(jm, j);
                UserCount *u = user_count(jm, j->uid, false);
                if (u && u->queued > 0)
                        u->queued--;
        }
        if (j->pid > 0 || j->state == JOB_STARTING || j->state == JOB_RUNNING)
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
        if (j->cgroup && job_cgroups_remove(jm, j->cgroup) < 0) {
                /* Whatever the job left behind goes with it; what is still dying, the sweep removes later. */
                job_cgroups_signal(jm, j->cgroup, SIGKILL);
                if (job_cgroups_remove(jm, j->cgroup) < 0)
                        jm->cgroups_dirty = true;
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

/* ---- output files ---- */

/*
 * Output files are made ahead of time, when the loop is idle, and kept open: creating a file costs 0.1-0.3
 * ms on ext4, which would otherwise sit between accepting a job and its exec, on the job's CPU. rtd passes
 * two of them to the worker, already the user's; the job's child renames them to <id>.stdout/.stderr.
 * With none left the child creates its own.
 */
static int on_spare(sd_event_source *s, void *userdata) {
        JobManager *jm = userdata;
        char name[32];

        /*
         * One job's worth (two files) per turn of the loop: a job's exit or start never waits behind more,
         * and a flood of jobs, which takes a turn or two per job, does not use them up.
         */
        for (int i = 0; i < 2 && jm->spare_next - jm->spare_first < SPARE_TARGET; i++) {
                snprintf(name, sizeof name, "spare-%" PRIu64, jm->spare_next);
                int fd = openat(jm->output_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0)
                        return 0;       /* full disk or the like: jobs create their own files */
                jm->spare_fds[jm->spare_next++ % SPARE_TARGET] = fd;
        }
        if (jm->spare_next - jm->spare_first < SPARE_TARGET)
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

/* The oldest spare: its name in ret and its descriptor (the caller's to close), or -1 if none is left. */
static int take_spare(JobManager *jm, char *ret, size_t size) {
        if (jm->spare_first == jm->spare_next)
                return -1;
        snprintf(ret, size, "spare-%" PRIu64, jm->spare_first);
        if (jm->spare_src)
                (void) sd_event_source_set_enabled(jm->spare_src, SD_EVENT_ONESHOT);
        return jm->spare_fds[jm->spare_first++ % SPARE_TARGET];
}

static void close_spares(JobManager *jm) {
        while (jm->spare_first != jm->spare_next)
                safe_close(jm->spare_fds[jm->spare_first++ % SPARE_TARGET]);
}

/*
 * Two spares for j's stdout and stderr, made the user's; false unless both are there and could be given
 * away (spares taken but not handed over are removed with the job's unused ones).
 */
static bool take_output_spares(JobManager *jm, Job *j, WorkerJob *wj, char *out, char *err, size_t size) {
        if (jm->spare_next - jm->spare_first < 2)
                return false;
        j->spares = jm->spare_first + 1;
        wj->stdout_fd = take_spare(jm, out, size);
        wj->stderr_fd = take_spare(jm, err, size);
        wj->spare_stdout = out;
        wj->spare_stderr = err;
        /* Owned by the user before the job can write: readable by them and root only (0600). If that fails,
         * the child makes its own files and says why it could not. */
        if (fchown(wj->stdout_fd, j->uid, j->gid) < 0 || fchown(wj->stderr_fd, j->uid, j->gid) < 0) {
                wj->stdout_fd = safe_close(wj->stdout_fd);
                wj->stderr_fd = safe_close(wj->stderr_fd);
                return false;
        }
        /* stderr gets its final name here, on rtd's CPU: only stdout's rename in the child tells that the job
         * got as far as its exec (the take-back and recovery read only that), and a rename on the job's CPU
         * costs ext4 directory lookups (about 19 µs here). */
        char name[32];
        snprintf(name, sizeof name, "%" PRIu64 ".stderr", j->id);
        if (renameat(jm->output_fd, err, jm->output_fd, name) == 0)
                err[0] = 0;
        return true;
}

/* Spares of an earlier run: their numbers would collide with ours. */
static void remove_old_spares(JobManager *jm) {
        int fd = openat(jm->output_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!d) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (startswith(de->d_name, "spare-"))
                        (void) unlinkat(jm->output_fd, de->d_name, 0);
        closedir(d);
}

/* ---- dispatch ---- */

static int sched_policy(JobPolicy p) {
        return p == JOB_POLICY_RR ? SCHED_RR : p == JOB_POLICY_OTHER ? SCHED_OTHER : SCHED_FIFO;
}

static bool env_has(char **env, const char *key) {
        size_t l = strlen(key);
        for (char **e = env; e && *e; e++)
                if (strneq(*e, key, l) && (*e)[l] == '=')
                        return true;
        return false;
}

/* The job's environment plus RTD_JOB_ID, RTD_CPUS and the OpenMP hints unless the user set them. */
static char **job_env(const Job *j) {
        _cleanup_free_ char *cpus = NULL;
        size_t n = 0, i = 0, places_len = 16;
        char **env;

        for (char **e = j->spec.env; e && *e; e++)
                n++;
        env = calloc(n + 7, sizeof(char *));
        if (!env || cpuset_format(&j->cpus, &cpus) < 0)
                goto oom;
        for (char **e = j->spec.env; e && *e; e++)
                if (!(env[i++] = strdup(*e)))
                        goto oom;
        if (asprintf(&env[i++], "RTD_JOB_ID=%" PRIu64, j->id) < 0 || asprintf(&env[i++], "RTD_CPUS=%s", cpus) < 0)
                goto oom;
        if (j->array_id && (asprintf(&env[i++], "RTD_ARRAY_ID=a%" PRIu64, j->array_id) < 0 ||
                            asprintf(&env[i++], "RTD_ARRAY_INDEX=%u", j->array_index) < 0))
                goto oom;
        if (!env_has(j->spec.env, "OMP_NUM_THREADS") &&
            asprintf(&env[i++], "OMP_NUM_THREADS=%u", cpuset_count(&j->cpus)) < 0)
                goto oom;
        if (!env_has(j->spec.env, "OMP_PLACES")) {
                CPUSET_FOREACH(cpu, &j->cpus)
                        places_len += 16;
                char *p = env[i++] = malloc(places_len);
                if (!p)
                        goto oom;
                p += sprintf(p, "OMP_PLACES=");
                bool first = true;
                CPUSET_FOREACH(cpu, &j->cpus) {
                        p += sprintf(p, "%s{%d}", first ? "" : ",", cpu);
                        first = false;
                }
        }
        return env;
oom:
        strv_free(env);
        return NULL;
}

/* fresh: a job accepted right now with nobody ahead of it, not yet in the store or the queue. */
/*
 * Hand the job to the worker of its first CPU. ahead: that worker runs a job still; this one waits there
 * and starts the moment the running one ends (no round trip through rtd), becoming the CPU's job then.
 */
int job_start(JobManager *jm, Job *j, const CpuSet *cpus, bool fresh, bool ahead) {
        int first = cpuset_first(cpus), r;
        Worker *w = jm->slots[first].worker;
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_close_ int cgroup_fd = -EBADF, cpuset_fd = -EBADF;
        char cgroup[64], spare_out[32], spare_err[32];
        _cleanup_free_ char *why = NULL;
        WorkerRlimit rl[WORKER_RLIMITS];
        int join[2], n_join;

        /* Queued for a while: the user may have lost the right to run it, or some of their groups. */
        if (!fresh && job_limits_check_groups(jm->manager->config, j->uid, j->gid, j->groups, &j->n_groups,
                                              &why) < 0) {
                job_finish(jm, j, JOB_FAILED, "%s", why ?: "out of memory checking the user's groups");
                return 0;
        }
        if (!fresh) {
                queue_remove(jm, j);
                UserCount *u = user_count(jm, j->uid, false);
                if (u && u->queued > 0)
                        u->queued--;
        }
        j->state = JOB_STARTING;
        j->cpus = *cpus;
        job_hold_cores(jm, j, true);
        if (ahead)
                slot_set_next(jm, first, j);
        else
                CPUSET_FOREACH(cpu, cpus)
                        jm->slots[cpu].job = j;
        j->worker_cpu = first;
        if (jm->cgroups.dir_fd >= 0 || jm->cpusets.mode == CPU_ENFORCE_V1) {
                snprintf(cgroup, sizeof cgroup, "rtd-%s-job-%" PRIu64, store_instance_id(jm->store), j->id);
                j->cgroup = strdup(cgroup);
        }
        /*
         * Written before the worker sees it, and synced to disk (one WAL fsync): after a crash or a power
         * cut a "starting" job is never started twice. The boot id tells recovery whether the files its
         * child made (which are not synced) can be trusted. A fresh job is stored once, directly as
         * "starting" (one write instead of two before its exec).
         */
        snprintf(j->boot_id, sizeof j->boot_id, "%s", jm->boot_id);
        r = job_persist_durable(jm, j, fresh);
        if (r < 0) {
                /* No durable start, no start (a full disk). A fresh job is refused to its caller; a queued one
                 * goes back to its place, not dispatched again before the next turn (no busy loop). */
                if (ahead)
                        slot_set_next(jm, first, NULL);
                else
                        CPUSET_FOREACH(cpu, cpus)
                                jm->slots[cpu].job = NULL;
                job_unstart(j);
                if (!fresh) {
                        UserCount *u = user_count(jm, j->uid, true);
                        queue_insert_in_order(jm, j);
                        if (u)
                                u->queued++;
                        (void) job_persist(jm, j, false);       /* the newest state for the pending write */
                }
                return r;
        }

        if (job_needs_refusal(jm, &j->spec)) {
                job_finish(jm, j, JOB_FAILED, "real-time jobs are not run where no cpuset holds them on their CPUs "
                           "(%s; [Jobs] RealtimeWithoutCpuset=no)", strempty(jm->cpusets.reason));
                return 0;
        }
        /* The job's cgroups are made here, on rtd's CPU: its CPU only forks the job into them. */
        if (j->cgroup) {
                r = job_cgroups_make(jm, j, &cgroup_fd, &cpuset_fd);
                if (r < 0) {
                        job_finish(jm, j, JOB_FAILED, "could not make the job's cgroup %s with its CPUs (%s): %s",
                                   j->cgroup, cpu_enforcement_to_string(jm->cpusets.mode), strerror(-r));
                        return 0;
                }
        }

        /* pids.max and memory.max (in its v2 cgroup, or v1 cgroups its child joins) and its rlimits. */
        n_join = job_limits_prepare(jm, j, cgroup_fd, join, rl);
        if (n_join < 0) {
                job_finish(jm, j, JOB_FAILED, "could not set the job's limits (pids.max, memory.max): %s",
                           strerror(-n_join));
                return 0;
        }

        env = job_env(j);
        WorkerJob wj = {
                .id = j->id,
                .policy = sched_policy(j->spec.policy),
                .priority = (int) j->priority,
                .uid = j->uid,
                .gid = j->gid,
                .groups = j->groups,
                .n_groups = j->n_groups,
                .cpus = &j->cpus,
                .cgroup_fd = cgroup_fd,
                .cpuset_fd = cpuset_fd,
                .stdout_fd = -EBADF,
                .stderr_fd = -EBADF,
                .cwd = j->spec.cwd ?: "/",
                .start_timeout_ms = jm->manager->config->start_timeout_sec * 1000,
                .join_fds = join,
                .n_join = (unsigned) n_join,
                .rlimits = rl,
                .argv = j->spec.argv,
                .env = env,
        };
        (void) take_output_spares(jm, j, &wj, spare_out, spare_err, sizeof spare_out);
        (void) metrics_worker_job(jm->manager->metrics, worker_pid(w), j->id);
        r = env ? worker_send_job(w, &wj) : -ENOMEM;
        /* The worker has its own copies now; what its child does not rename goes when the job ends. */
        safe_close(wj.stdout_fd);
        safe_close(wj.stderr_fd);
        for (int i = 0; i < n_join; i++)
                safe_close(join[i]);
        if (r < 0) {
                job_finish(jm, j, JOB_FAILED, "could not hand the job to the worker on CPU %d: %s", first,
                           strerror(-r));
                return 0;
        }
        if (!ahead) {
                j->handed_mono = now_usec(CLOCK_MONOTONIC);
                job_arm_timeout(jm, j, j->handed_mono);
        } else
                job_ahead_arm_limit(jm, j, jm->slots[first].job);
        job_publish(jm, j);
        return 0;
}

void job_manager_dispatch(JobManager *jm) {
        jm->dispatch_pending = false;
        if (job_take_back_ahead(jm))
                return;         /* on_worker_dropped() or the job's start dispatches again */
        while (jm->queue_head) {
                Job *j = job_queue_pick(jm);
                CpuSet cpus;
                if (!j || job_place(jm, &j->spec, &cpus) < 0)
                        break;          /* strict order: the next job waits for room, nobody jumps it */
                if (job_start(jm, j, &cpus, false, false) < 0)
                        return;         /* the store takes no writes: nothing starts until it does */
        }
        job_hand_ahead(jm);
}

static int on_dispatch(sd_event_source *s, void *userdata) {
        job_manager_dispatch(userdata);
        return 0;
}

void job_manager_schedule(JobManager *jm) {
        if (jm->dispatch_pending || !jm->queue_head)
                return;
        jm->dispatch_pending = true;
        (void) sd_event_source_set_enabled(jm->dispatch_src, SD_EVENT_ONESHOT);
}

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
        u = user_count(jm, c->uid, true);
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
        u = user_count(jm, c->uid, true);      /* made by the check */
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
                queue_append(jm, j);
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

        remove_old_spares(jm);
        r = sd_event_add_defer(m->event, &jm->spare_src, on_spare, jm);
        if (r < 0)
                return r;
        (void) sd_event_source_set_priority(jm->spare_src, SD_EVENT_PRIORITY_IDLE);
        (void) sd_event_source_set_enabled(jm->spare_src, SD_EVENT_ONESHOT);

        r = worker_find_binary(&jm->worker_path);
        if (r < 0)
                log_error_errno(r, "Cannot find the rtd-worker binary (set $RTD_WORKER): %m; jobs cannot run");

        r = sd_event_add_defer(m->event, &jm->dispatch_src, on_dispatch, jm);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(jm->dispatch_src, SD_EVENT_OFF);
        /* After worker messages, before new requests: a finished job's CPU is refilled first. */
        (void) sd_event_source_set_priority(jm->dispatch_src, SD_EVENT_PRIORITY_IMPORTANT + 1);
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
        close_spares(jm);
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
                queue_append(jm, j);
                UserCount *u = user_count(jm, j->uid, true);
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
