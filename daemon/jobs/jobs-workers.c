/* SPDX-License-Identifier: MIT */
/*
 * The job manager's side of the workers and of the reserved CPUs: a worker per reserved CPU (started,
 * restarted with back-off), what its messages mean for the job it holds, and what a reservation change
 * does to workers, job cgroups and queued jobs.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/manager.h"
#include "host/backend.h"
#include "jobs-internal.h"
#include "metrics/metrics.h"
#include "reserve/reserve.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "shared/messages.h"

static Job *worker_job(JobManager *jm, Worker *w, uint64_t job_id) {
        Job *j = job_lookup(jm, job_id);
        if (!j || j->state == JOB_QUEUED || j->worker_cpu != worker_cpu(w))
                return NULL;
        return j;
}

static void on_worker_ready(Worker *w, void *userdata) {
        JobManager *jm = userdata;
        job_manager_schedule(jm);       /* rtd's mark reached the worker at fork (manager.c) */
}

static void job_set_pid(JobManager *jm, Job *j, pid_t pid) {
        if (j->pid > 0)
                return;
        j->pid = pid;
        if (j->cancel_requested || j->timed_out)
                job_terminate(jm, j);
}

static void on_worker_started(Worker *w, uint64_t job_id, pid_t pid, uint64_t boottime, void *userdata) {
        JobManager *jm = userdata;
        Job *j = worker_job(jm, w, job_id);
        if (!j)
                return;
        j->boottime_usec = boottime;
        job_set_pid(jm, j, pid);
        if (j->state == JOB_RUNNING)    /* EXEC came first: store the boot time for re-adoption too */
                (void) job_persist(jm, j, false);
}

static void on_worker_exec(Worker *w, uint64_t job_id, pid_t pid, uint64_t mono, void *userdata) {
        JobManager *jm = userdata;
        Job *j = worker_job(jm, w, job_id);
        uint64_t now_mono = now_usec(CLOCK_MONOTONIC);

        if (!j || j->state != JOB_STARTING)
                return;
        job_set_pid(jm, j, pid);
        j->state = JOB_RUNNING;
        j->spares = 0;          /* the child renamed them before its exec: nothing to clean up at the end */
        j->start_usec = now_usec(CLOCK_REALTIME) - (now_mono > mono ? now_mono - mono : 0);
        j->dispatch_usec = mono > j->accepted_mono ? mono - j->accepted_mono : 0;
        j->have_dispatch = true;
        {
                _cleanup_free_ char *fields = job_log_fields(j);
                log_struct(LOG_INFO, RTD_MSG_JOB_STARTED, fields, "Job %" PRIu64 " of %s started, worker CPU %u",
                           j->id, strempty(j->user), j->worker_cpu);
        }
        job_drift_arm(jm);
        if (jm->manager->metrics) {
                metrics_observe_dispatch(jm->manager->metrics, j->dispatch_usec);
                (void) metrics_track_task(jm->manager->metrics, pid, j->id, j->cgroup_id);
        }
        (void) job_persist(jm, j, false);
        job_publish(jm, j);
}

static void on_worker_exec_failed(Worker *w, uint64_t job_id, const char *stage, int error, void *userdata) {
        JobManager *jm = userdata;
        Job *j = worker_job(jm, w, job_id);
        if (!j)
                return;
        free(j->reason);
        if (asprintf(&j->reason, "%s: %s", stage, strerror(error)) < 0)
                j->reason = NULL;
        j->exec_failed = true;
        /* No child was made: nothing will be reaped, so finish here. Else the exit report follows. */
        if (streq(stage, "fork") || streq(stage, "protocol") || streq(stage, "worker busy"))
                job_finish(jm, j, JOB_FAILED, NULL);
}

void job_apply_exit(Job *j, const WorkerExited *e) {
        j->rusage = *e;
        j->have_rusage = true;
        if (WIFEXITED(e->status)) {
                j->exit_code = WEXITSTATUS(e->status);
                j->signal = 0;
        } else if (WIFSIGNALED(e->status)) {
                j->exit_code = -1;
                j->signal = WTERMSIG(e->status);
        }
}

JobState job_final_state(const Job *j) {
        if (j->timed_out)
                return JOB_TIMED_OUT;
        if (j->cancel_requested)
                return JOB_CANCELLED;
        if (j->exec_failed || j->exit_code != 0 || j->signal != 0)
                return JOB_FAILED;
        return JOB_SUCCEEDED;
}

/* The exit report's verdict on the job, with the reason when it failed. */
JobState job_state_after_exit(Job *j, const WorkerExited *e) {
        JobState st;

        job_apply_exit(j, e);
        st = job_final_state(j);
        if (st == JOB_FAILED && !j->exec_failed) {
                free(j->reason);
                if ((j->signal ? asprintf(&j->reason, "killed by signal %d (%s)", j->signal, strsignal(j->signal))
                               : asprintf(&j->reason, "exited with status %d", j->exit_code)) < 0)
                        j->reason = NULL;
        }
        return st;
}

static void on_worker_exited(Worker *w, const WorkerExited *e, void *userdata) {
        JobManager *jm = userdata;
        Job *j = worker_job(jm, w, e->hdr.job_id);
        JobState st;

        if (!j)
                return;
        st = job_state_after_exit(j, e);
        /*
         * The CPU is idle until the next job arrives: hand it out first, then do this job's bookkeeping
         * (store, cgroup, metrics, events) while the next one already runs.
         */
        job_release_cpus(jm, j);
        job_manager_dispatch(jm);
        job_finish(jm, j, st, NULL);
}

/*
 * The job's child hung before its exec, walking the user's file systems (its cwd, its PATH, its program on a
 * stale NFS or a FUSE mount that does not answer): the worker killed it and has gone on. The CPU is free for
 * the next job now, even if the killed child lingers until the file system answers.
 */
static void on_worker_start_timed_out(Worker *w, uint64_t job_id, const char *stage, void *userdata) {
        JobManager *jm = userdata;
        Job *j = worker_job(jm, w, job_id);
        unsigned t = jm->manager->config->start_timeout_sec;
        const char *what = j && j->spec.argv ? j->spec.argv[0] : "?";
        int r;

        if (!j)
                return;
        j->exec_failed = true;
        free(j->reason);
        if (streq(stage, "chdir"))
                r = asprintf(&j->reason, "did not start within [Jobs] StartTimeoutSec=%u: chdir to %s did not return "
                             "(a file system that does not answer?); the job was killed", t, j->spec.cwd ?: "/");
        else if (streq(stage, "PATH lookup"))
                r = asprintf(&j->reason, "did not start within [Jobs] StartTimeoutSec=%u: the PATH lookup of %s did "
                             "not return (a file system that does not answer?); the job was killed", t, what);
        else
                r = asprintf(&j->reason, "did not start within [Jobs] StartTimeoutSec=%u: %s of %s did not return; "
                             "the job was killed", t, stage, what);
        if (r < 0)
                j->reason = NULL;
        job_signal(jm, j, SIGKILL);     /* by its cgroup: nothing of it may run on */
        JobState st = job_final_state(j);
        job_release_cpus(jm, j);
        job_manager_dispatch(jm);
        job_finish(jm, j, st, NULL);
}

/* The worker gave back a job that waited behind its running one, unstarted. */
static void on_worker_dropped(Worker *w, uint64_t job_id, void *userdata) {
        JobManager *jm = userdata;
        Job *j = worker_job(jm, w, job_id);

        if (!j || !job_is_ahead(jm, j))
                return;
        slot_set_next(jm, worker_cpu(w), NULL);
        if (j->cancel_requested)
                job_finish(jm, j, JOB_CANCELLED, NULL);         /* its reason says who cancelled it */
        else
                job_requeue(jm, j);     /* a CPU came free elsewhere: it is placed again from the queue */
}

static int on_respawn(sd_event_source *s, uint64_t usec, void *userdata);

static void slot_spawn(JobManager *jm, unsigned cpu) {
        WorkerSlot *slot = &jm->slots[cpu];
        WorkerConfig wc = {
                .path = jm->worker_path,
                .priority = jm->manager->config->worker_priority,
                .output_dir_fd = jm->output_fd,
                .spawn_cgroup_fd = jm->reserved_cgroup_fd >= 0 ? jm->reserved_cgroup_fd
                                                                : job_scope_workers_cgroup(jm),
        };
        int r;

        r = jm->worker_path ? worker_spawn(jm->manager->event, cpu, &wc, &jm->worker_cb, jm, &slot->worker)
                            : -ENOENT;
        if (r < 0) {
                log_error_errno(r, "Failed to start the worker for CPU %u, retrying in 5 s: %m", cpu);
                slot->respawn_src = sd_event_source_disable_unref(slot->respawn_src);
                (void) sd_event_add_time_relative(jm->manager->event, &slot->respawn_src, CLOCK_MONOTONIC,
                                                  5000000, 0, on_respawn, slot);
        }
}

static int on_respawn(sd_event_source *s, uint64_t usec, void *userdata) {
        WorkerSlot *slot = userdata;
        slot->respawn_src = sd_event_source_disable_unref(slot->respawn_src);
        if (cpuset_isset(&slot->jm->reserved, slot->cpu) && !slot->worker)
                slot_spawn(slot->jm, slot->cpu);
        return 0;
}

/*
 * Whether a job handed to a worker that died provably never reached its exec: no pid reported, and no trace
 * of an exec (job_never_exec_d(), as recovery after a crash). Only with a cgroup: its SIGKILL (cgroup.kill)
 * has then reached a child cloned meanwhile, which can start no further system call, so no exec can follow
 * the check either.
 */
static bool never_exec_d(JobManager *jm, Job *j) {
        if (j->state != JOB_STARTING || j->pid > 0 || !j->cgroup || jm->cgroups.dir_fd < 0)
                return false;
        return job_never_exec_d(jm, j);
}

static void on_worker_died(Worker *w, int status, void *userdata) {
        JobManager *jm = userdata;
        unsigned cpu = worker_cpu(w);
        WorkerSlot *slot = &jm->slots[cpu];
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        char how[64];

        if (WIFEXITED(status))
                snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
        else
                snprintf(how, sizeof how, "killed by signal %d", status & 0x7f);
        log_struct(LOG_WARNING, RTD_MSG_WORKER_DIED, NULL, "Worker for CPU %u (pid %d) %s, restarting it", cpu,
                   (int) worker_pid(w), how);
        slot->worker = worker_free(w);
        jm->worker_restarts++;

        /* Taken first: finishing the running job would otherwise make the waiting one the CPU's job. */
        Job *waiting = slot->next;
        slot_set_next(jm, cpu, NULL);
        Job *j = slot->job;
        if (j && j->worker_cpu == cpu) {
                /* Nobody can reap or report it any more: take the whole tree down and say why. */
                job_signal(jm, j, SIGKILL);
                job_finish(jm, j, JOB_FAILED, "the worker for CPU %u %s while running the job; the job was "
                           "killed", cpu, how);
        }
        /* A job that waited behind it may or may not have started: never run it twice. */
        if (waiting) {
                job_signal(jm, waiting, SIGKILL);
                if (never_exec_d(jm, waiting)) {
                        log_info("Job %" PRIu64 " waited on the worker for CPU %u and never started: back in the "
                                 "queue", waiting->id, cpu);
                        job_requeue(jm, waiting);
                } else
                        job_finish(jm, waiting, JOB_FAILED, "the worker for CPU %u %s while the job waited there "
                                   "to start; whether it started is unknown, so it is not run again", cpu, how);
        }

        /* Crash loops back off: more than 5 deaths within 10 s wait 5 s before the next try. */
        if (now - slot->restart_window > 10000000) {
                slot->restart_window = now;
                slot->restarts = 0;
        }
        if (!cpuset_isset(&jm->reserved, cpu))
                return;
        if (++slot->restarts > 5) {
                slot->respawn_src = sd_event_source_disable_unref(slot->respawn_src);
                (void) sd_event_add_time_relative(jm->manager->event, &slot->respawn_src, CLOCK_MONOTONIC,
                                                  5000000, 0, on_respawn, slot);
        } else
                slot_spawn(jm, cpu);
}

/* ---- reservation changes ---- */

/*
 * With the cgroup backend the reserved CPUs belong to the reservation's cgroup (an isolated partition takes
 * them away from rtd's own cgroup): workers join it before pinning and job cgroups are made below it. With
 * the other backends (reservation_cgroup() NULL) everything stays in rtd's own cgroup.
 */
static void follow_reserved_cgroup(JobManager *jm) {
        Manager *m = jm->manager;
        const char *rc = m->reservation ? reservation_cgroup(m->reservation) : NULL;
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int fd = -EBADF;

        while (rc && *rc == '/')
                rc++;
        if (rc && *rc) {
                if (asprintf(&rel, "fs/cgroup/%s", rc) < 0)
                        rel = NULL;
                fd = rel ? openat(m->sys_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -EBADF;
                if (fd < 0)
                        log_warning_errno(errno, "Could not open the reserved cgroup /sys/%s, workers stay in "
                                          "rtd's cgroup: %m", strempty(rel));
        }
        jm->reserved_cgroup_fd = safe_close(jm->reserved_cgroup_fd);
        if (fd >= 0) {
                /* Workers join its leaf (backend-cgroup.c says why); the reserved cgroup is the jobs' home. */
                jm->reserved_cgroup_fd = openat(fd, RESERVED_WORKERS_CGROUP, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (jm->reserved_cgroup_fd < 0)
                        jm->reserved_cgroup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        }

        if (jm->own_cgroup_fd < 0)
                return;         /* job cgroups are not usable at all */
        _cleanup_free_ char *path = NULL;
        if (fd >= 0 ? asprintf(&path, "/sys/%s", rel) < 0 : !(path = strdup(strempty(jm->own_cgroup_path))))
                return;
        if (streq_ptr(path, jm->cgroups.path))
                return;
        job_sweep_cgroups(jm);  /* leftovers in the old home */
        int nfd = fcntl(fd >= 0 ? fd : jm->own_cgroup_fd, F_DUPFD_CLOEXEC, 3);
        if (nfd < 0)
                return;
        safe_close(jm->cgroups.dir_fd);
        jm->cgroups.dir_fd = nfd;
        free(jm->cgroups.path);
        jm->cgroups.path = TAKE_PTR(path);
        log_info("Jobs get their own cgroups under %s", jm->cgroups.path);
        job_containment_setup(jm);      /* the cpuset controller in the new home */
}

int job_manager_set_cpus(JobManager *jm, const CpuSet *reserved) {
        CpuSet old = jm->reserved;

        jm->reserved = *reserved;
        follow_reserved_cgroup(jm);
        CPUSET_FOREACH(cpu, &old)
                if (!cpuset_isset(reserved, cpu)) {
                        /* A job waiting in that worker comes back to the queue (on_worker_dropped). */
                        if (jm->slots[cpu].next)
                                job_take_back(jm, jm->slots[cpu].next);
                        /* A busy worker stays until its job ends (job_release_cpus lets it go then). */
                        if (!jm->slots[cpu].job)
                                jm->slots[cpu].worker = worker_free(jm->slots[cpu].worker);
                        jm->slots[cpu].respawn_src = sd_event_source_disable_unref(jm->slots[cpu].respawn_src);
                }
        CPUSET_FOREACH(cpu, reserved)
                if (!jm->slots[cpu].worker && !jm->slots[cpu].respawn_src)
                        slot_spawn(jm, cpu);

        /* Queued jobs that can never run on the new set fail now instead of blocking the queue forever. */
        for (Job *j = jm->queue_head, *next; j; j = next) {
                next = j->next;
                if ((j->spec.has_cpus && !cpuset_is_subset(&j->spec.cpus, reserved)) ||
                    j->spec.cores > cpuset_count(reserved))
                        job_finish(jm, j, JOB_FAILED, "the reservation changed and no longer has the CPUs this "
                                   "job asked for");
        }
        job_manager_schedule(jm);
        return 0;
}

bool job_manager_cpus_busy(JobManager *jm, const CpuSet *cpus) {
        CPUSET_FOREACH(cpu, cpus)
                if (jm->slots[cpu].job)
                        return true;
        return false;
}

int job_manager_cancel_on_cpus(JobManager *jm, const CpuSet *cpus, const char *reason) {
        int n = 0;
        CPUSET_FOREACH(cpu, cpus) {
                Job *j = jm->slots[cpu].job;
                if (!j || j->cancel_requested)
                        continue;
                j->cancel_requested = true;
                free(j->reason);
                j->reason = strdup(strempty(reason));
                job_terminate(jm, j);
                n++;
        }
        return n;
}

const WorkerCallbacks job_worker_callbacks = {
        .ready = on_worker_ready,
        .started = on_worker_started,
        .exec = on_worker_exec,
        .exec_failed = on_worker_exec_failed,
        .exited = on_worker_exited,
        .dropped = on_worker_dropped,
        .start_timed_out = on_worker_start_timed_out,
        .died = on_worker_died,
};
