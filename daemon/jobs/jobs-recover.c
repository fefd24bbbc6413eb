/* SPDX-License-Identifier: MIT */
/*
 * After a restart (or a crash): queued jobs go back in the queue in their order; a job that was starting
 * or running is re-adopted if its process still lives, finished from its worker's exit file if it ended
 * meanwhile, and otherwise marked lost with the reason. Nothing is started twice: a job the store calls
 * "starting" was handed to a worker and is never handed out again, unless it certainly never ran
 * (never_ran()).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/manager.h"
#include "jobs-internal.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "store/store.h"

/* Parse an orphaned worker's "<id>.exit" file (key=value lines). */
static int read_exit_file(JobManager *jm, uint64_t id, WorkerExited *ret) {
        _cleanup_free_ char *text = NULL;
        char name[64];
        int r, fields = 0;

        snprintf(name, sizeof name, "%" PRIu64 ".exit", id);
        r = read_full_file_at(jm->output_fd, name, &text, NULL);
        if (r < 0)
                return r;
        *ret = (WorkerExited){ .hdr = { .type = WMSG_EXITED, .job_id = id } };
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
                unsigned long long v;
                int st;
                if (sscanf(line, "status=%d", &st) == 1) {
                        ret->status = st;
                        fields++;
                } else if (sscanf(line, "utime_usec=%llu", &v) == 1)
                        ret->utime_usec = v;
                else if (sscanf(line, "stime_usec=%llu", &v) == 1)
                        ret->stime_usec = v;
                else if (sscanf(line, "nvcsw=%llu", &v) == 1)
                        ret->nvcsw = v;
                else if (sscanf(line, "nivcsw=%llu", &v) == 1)
                        ret->nivcsw = v;
                else if (sscanf(line, "maxrss_kb=%llu", &v) == 1)
                        ret->maxrss_kb = v;
                else if (sscanf(line, "realtime_usec=%llu", &v) == 1)
                        ret->realtime_usec = v;
        }
        return fields == 1 ? 0 : -EBADMSG;
}

static void finish_from_exit_file(JobManager *jm, Job *j, const WorkerExited *e) {
        job_finish(jm, j, job_state_after_exit(j, e), NULL);
}

/* Is pid still the job we started? Same session leader, started when we forked it. */
static bool same_process(JobManager *jm, pid_t pid, uint64_t boottime_usec) {
        _cleanup_free_ char *stat = NULL;
        char path[32], *p;
        unsigned long long start = 0;
        int session = 0;

        snprintf(path, sizeof path, "%d/stat", (int) pid);
        if (read_full_file_at(jm->manager->proc_fd, path, &stat, NULL) < 0)
                return false;
        p = strrchr(stat, ')');
        /* after ")": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
         * cutime cstime priority nice num_threads itrealvalue starttime */
        if (!p || sscanf(p + 2, "%*c %*d %*d %d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                         &session, &start) != 2)
                return false;
        if (session != pid)
                return false;
        if (boottime_usec > 0) {
                double started = (double) start / (double) sysconf(_SC_CLK_TCK), forked = boottime_usec / 1e6;
                if (started < forked - 1.0 || started > forked + 1.0)
                        return false;
        }
        return true;
}

static int on_exit_file_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Job *j = userdata;
        JobManager *jm = j->jm;
        WorkerExited e;

        if (read_exit_file(jm, j->id, &e) >= 0) {
                finish_from_exit_file(jm, j, &e);
                return 0;
        }
        if (++j->retries > 100) {
                job_finish(jm, j, JOB_LOST, "the job's process (pid %d) ended while rtd was restarting and its "
                           "worker left no exit status", (int) j->pid);
                return 0;
        }
        (void) sd_event_source_set_time_relative(s, 50000);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

/* The adopted process ended; its old worker (still its parent) writes the exit file right after reaping. */
static int on_adopted_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Job *j = userdata;

        j->pidfd_src = sd_event_source_disable_unref(j->pidfd_src);
        j->pidfd = safe_close(j->pidfd);
        if (sd_event_add_time_relative(j->jm->manager->event, &j->retry_src, CLOCK_MONOTONIC, 0, 0,
                                       on_exit_file_retry, j) < 0)
                job_finish(j->jm, j, JOB_LOST, "lost track of the job's exit: out of memory");
        return 0;
}

static void recover_active(JobManager *jm, Job *j) {
        const char *was = job_state_to_string(j->state);
        WorkerExited e;

        job_register(jm, j);
        if (read_exit_file(jm, j->id, &e) >= 0) {
                free(j->reason);
                j->reason = NULL;
                log_info("Job %" PRIu64 " finished while rtd was not running; taking its result from its worker",
                         j->id);
                finish_from_exit_file(jm, j, &e);
                return;
        }
        /* Its `started` never reached the store (rtd died right after the fork): its cgroup names it. */
        bool found = false;
        if (j->pid <= 0 && (j->pid = job_cgroup_leader(jm, j, &j->start_usec)) > 0) {
                log_info("Job %" PRIu64 " started (pid %d) but rtd died before it recorded that; found by its "
                         "cgroup", j->id, (int) j->pid);
                j->boottime_usec = 0;
                found = true;
        }
        if (j->pid > 0 && same_process(jm, j->pid, j->boottime_usec)) {
                j->pidfd = (int) syscall(SYS_pidfd_open, j->pid, 0);
                if (j->pidfd >= 0 && sd_event_add_io(jm->manager->event, &j->pidfd_src, j->pidfd, EPOLLIN,
                                                     on_adopted_exit, j) >= 0) {
                        uint64_t now_rt = now_usec(CLOCK_REALTIME), now_mono = now_usec(CLOCK_MONOTONIC);
                        j->state = JOB_RUNNING;
                        j->adopted = true;
                        job_rearm_timeout(jm, j, now_mono - MIN(now_mono, now_rt - MIN(now_rt, j->start_usec)));
                        log_info("Re-adopted job %" PRIu64 " (pid %d) on CPUs held since before the restart", j->id,
                                 (int) j->pid);
                        job_drift_arm(jm);
                        if (found)
                                (void) job_persist(jm, j, false);
                        return;
                }
        }
        if (j->cgroup)
                job_cgroups_signal(jm, j->cgroup, SIGKILL);
        if (j->pid > 0)
                job_finish(jm, j, JOB_LOST, "rtd stopped while the job was %s (pid %d) and the process is gone "
                           "without a recorded exit status", was, (int) j->pid);
        else
                job_finish(jm, j, JOB_LOST, "rtd stopped while the job was being started; whether it ran is "
                           "unknown");
}

/*
 * Whether j's child provably never reached its exec, on this boot (neither cgroups nor the output files,
 * which are not synced, survive a reboot). When the job has a v2 cgroup, rtd names both output files itself
 * (take_output_spares()) and the cgroup is the proof: the child is born in it, or joins it before anything
 * else, and the kernel charges every v2 cgroup, with or without controllers, for the CPU time of its tasks
 * (cpu.stat usage_usec, up to date when read): a child that ran at all left time there, and one still there
 * is listed. Without that cgroup (never made, or rtd had none) the child renames its stdout file into
 * place before its exec: no file, no exec.
 */
bool job_never_exec_d(JobManager *jm, const Job *j) {
        char name[64];

        if (j->cgroup && jm->cgroups.dir_fd >= 0) {
                _cleanup_close_ int fd = openat(jm->cgroups.dir_fd, j->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                _cleanup_free_ char *stat = NULL, *procs = NULL;
                const char *u;

                if (fd >= 0)
                        return read_full_file_at(fd, "cpu.stat", &stat, NULL) >= 0 &&
                               read_full_file_at(fd, "cgroup.procs", &procs, NULL) >= 0 &&
                               (u = startswith(stat, "usage_usec ")) && strtoull(u, NULL, 10) == 0 &&
                               procs[strspn(procs, " \n")] == 0;
                if (errno != ENOENT)
                        return false;
        }
        snprintf(name, sizeof name, "%" PRIu64 ".stdout", j->id);
        return faccessat(jm->output_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
}

/*
 * Whether a job the store calls "starting" (no pid recorded) certainly never ran: its worker said so (it
 * waited there behind the running job when rtd stopped), or on this boot it left no trace of an exec
 * (job_never_exec_d()). Otherwise it may have run and is never started again. After a reboot (a power cut)
 * only the worker's word counts.
 */
static bool never_ran(JobManager *jm, const Job *j) {
        char name[64];

        snprintf(name, sizeof name, WORKER_UNSTARTED_FILE_FMT, j->id);
        if (unlinkat(jm->output_fd, name, 0) == 0)
                return true;
        if (!jm->boot_id[0] || !streq(j->boot_id, jm->boot_id))
                return false;
        return job_never_exec_d(jm, j);
}

static int recover_cb(const StoreJob *sj, void *userdata) {
        JobManager *jm = userdata;
        Job *j;
        int r;

        r = job_from_json(jm, sj->id, sj->state, sj->uid, sj->seq, sj->data, &j);
        if (r < 0) {
                /* Unreadable row: never run it blind; record it as lost so it is accounted for. */
                StoreJob lost = *sj;
                json_object_set_new(sj->data, "state", json_string("lost"));
                json_object_set_new(sj->data, "reason", json_string("the stored job could not be read back "
                                                                    "after a restart"));
                lost.state = "lost";
                (void) store_update(jm->store, &lost);
                return 0;
        }
        if (j->state == JOB_STARTING && j->pid <= 0 && read_exit_file(jm, j->id, &(WorkerExited){}) < 0 &&
            never_ran(jm, j)) {
                log_info("Job %" PRIu64 " was being started when rtd stopped and never ran: queued again", j->id);
                job_unstart(j);
                (void) job_persist(jm, j, false);
        }
        if (j->state == JOB_QUEUED) {
                j->accepted_mono = now_usec(CLOCK_MONOTONIC);
                job_register(jm, j);
        } else
                recover_active(jm, j);
        return 0;
}

int job_manager_recover(JobManager *jm) {
        static const char *const active[] = { "queued", "starting", "running", NULL };
        int r;

        r = store_foreach_in_states(jm->store, active, recover_cb, jm);
        if (r < 0)
                return log_error_errno(r, "Failed to read jobs back from the store: %m");
        if (jm->queue_len > 0)
                log_info("Resuming %u queued jobs", jm->queue_len);
        job_sweep_cgroups(jm);
        return 0;
}

/* Remove the job cgroups of ours in dir_fd that no live job uses, killing what they still hold. */
static void sweep_dir(JobManager *jm, int dir_fd) {
        _cleanup_closedir_ DIR *d = opendir_at(dir_fd, ".");
        char prefix[64];
        struct dirent *de;

        if (!d)
                return;
        snprintf(prefix, sizeof prefix, "rtd-%s-job-", store_instance_id(jm->store));
        while ((de = readdir(d))) {
                const char *idstr = startswith(de->d_name, prefix);
                Job *j;
                if (!idstr)
                        continue;
                j = job_lookup(jm, strtoull(idstr, NULL, 10));
                if (j && j->state != JOB_QUEUED)
                        continue;
                if (job_cgroups_remove(jm, de->d_name) < 0) {
                        job_cgroups_signal(jm, de->d_name, SIGKILL);
                        jm->cgroups_dirty = true;
                }
        }
}

/* Remove job cgroups (and v1 cpusets) of ours that no live job uses: leftovers of finished or lost jobs,
 * also those of an rtd that crashed. */
void job_sweep_cgroups(JobManager *jm) {
        jm->cgroups_dirty = false;
        if (jm->cgroups.dir_fd >= 0)
                sweep_dir(jm, jm->cgroups.dir_fd);
        if (jm->cpusets.mode == CPU_ENFORCE_V1 && jm->cpusets.v1_fd >= 0)
                sweep_dir(jm, jm->cpusets.v1_fd);
}

/*
 * An rtd from before output/<instance>/ kept output files in output/ itself, named by job id alone. Those
 * of this store's jobs move into its directory: stdout and stderr only when the job's owner owns the file
 * (the file of a job N from an earlier, deleted store is never given to this store's job N), exit files
 * of jobs still starting or running. Everything else stays where it is, never served.
 */
void job_output_adopt_legacy(JobManager *jm, int legacy_fd) {
        _cleanup_closedir_ DIR *d = opendir_at(legacy_fd, ".");
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                _cleanup_free_ char *state = NULL;
                unsigned long long id;
                char suffix[8];
                json_t *data;
                struct stat st;
                uid_t uid;
                int n = 0;

                if (de->d_type != DT_REG || sscanf(de->d_name, "%llu.%7[a-z]%n", &id, suffix, &n) != 2 ||
                    de->d_name[n] || fstatat(legacy_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (store_get(jm->store, id, &data, &state, &uid) < 0)
                        continue;
                json_decref(data);
                if ((streq(suffix, "stdout") || streq(suffix, "stderr")) ? st.st_uid == uid
                    : streq(suffix, "exit") ? !job_state_is_final(job_state_from_string(state)) : false)
                        (void) renameat(legacy_fd, de->d_name, jm->output_fd, de->d_name);
        }
}

/*
 * Output files of jobs the store has no record of: a job that started at once on submission reaches the
 * disk with the next group sync, and a power cut before it loses the job's record but maybe not its files
 * (docs/jobs.md, "Power cut"). Its id goes to the next job submitted, which must never be served the lost
 * job's output (another user's, perhaps) where its own is missing: removed before any job gets that id.
 */
void job_output_forget_unknown(JobManager *jm) {
        _cleanup_closedir_ DIR *d = opendir_at(jm->output_fd, ".");
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                unsigned long long id;
                char suffix[16];
                int n = 0;

                if (sscanf(de->d_name, "%llu.%15[a-z]%n", &id, suffix, &n) == 2 && !de->d_name[n] &&
                    id >= jm->next_id && unlinkat(jm->output_fd, de->d_name, 0) == 0)
                        log_notice("Removed %s: the store has no job %llu (its record was lost, e.g. in a power "
                                   "cut), and a new job gets that id", de->d_name, id);
        }
}
