/* SPDX-License-Identifier: MIT */
/*
 * Containment of a job: which mechanism holds it on its CPUs (a cpuset in cgroup v2 or v1, or only its
 * starting affinity), signals and removal over all of its cgroups, and where no cpuset exists, the job
 * drift check: every JOB_DRIFT_USEC, each running job's tasks found outside its CPUs are put back and
 * counted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/manager.h"
#include "host/backend.h"
#include "jobs-internal.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "store/store.h"

/* Often enough that an escaped task gets little time elsewhere, cheap enough to run always: one read of
 * the job's cgroup.threads and one sched_getaffinity() per thread. */
#define JOB_DRIFT_USEC (100 * 1000)

void job_containment_setup(JobManager *jm) {
        char self[64], probe[64];

        snprintf(self, sizeof self, "rtd-%s-daemon", store_instance_id(jm->store));
        snprintf(probe, sizeof probe, "rtd-%s-probe", store_instance_id(jm->store));
        job_cpusets_done(&jm->cpusets);
        job_cpusets_setup(jm->manager->proc_fd, jm->cgroups.dir_fd, jm->cgroups.path, self, probe, &jm->cpusets);
        if (jm->cpusets.mode == CPU_ENFORCE_AFFINITY)
                log_warning("Jobs are held on their CPUs by their affinity only, which they may change: %s. "
                            "Tasks that leave are put back by a check every %u ms; real-time jobs are %s",
                            strempty(jm->cpusets.reason), JOB_DRIFT_USEC / 1000,
                            jm->manager->config->realtime_without_cpuset
                                    ? "allowed ([Jobs] RealtimeWithoutCpuset=yes)"
                                    : "refused (see [Jobs] RealtimeWithoutCpuset=)");
        else
                log_info("Jobs are held on their CPUs by a %s%s%s", cpu_enforcement_to_string(jm->cpusets.mode),
                         jm->cpusets.mode == CPU_ENFORCE_V1 ? " in " : "", jm->cpusets.mode == CPU_ENFORCE_V1
                                                                                  ? jm->cpusets.v1_path : "");
}

bool job_needs_refusal(const JobManager *jm, const JobSpec *spec) {
        return spec->policy != JOB_POLICY_OTHER && jm->cpusets.mode == CPU_ENFORCE_AFFINITY &&
               !jm->manager->config->realtime_without_cpuset;
}

int job_cgroups_make(JobManager *jm, Job *j, int *ret_cgroup_fd, int *ret_cpuset_fd) {
        int fd, r;

        *ret_cgroup_fd = *ret_cpuset_fd = -EBADF;
        if (jm->cgroups.dir_fd >= 0) {
                fd = job_cgroup_make(jm->cgroups.dir_fd, j->cgroup, &j->cgroup_id);
                if (fd < 0)
                        return fd;
                *ret_cgroup_fd = fd;
        }
        /* The job's CPUs are in its cpuset before the child can be cloned into it. */
        r = job_cpuset_make(&jm->cpusets, jm->cgroups.dir_fd, j->cgroup, &j->cpus);
        if (r < 0)
                return r;
        if (jm->cpusets.mode == CPU_ENFORCE_V1)
                *ret_cpuset_fd = r;
        return 0;
}

void job_cgroups_signal(JobManager *jm, const char *name, int sig) {
        if (jm->cgroups.dir_fd >= 0)
                (void) job_cgroup_signal(jm->cgroups.dir_fd, name, sig);
        if (jm->cpusets.mode == CPU_ENFORCE_V1 && jm->cpusets.v1_fd >= 0)
                (void) cgroup_kill_procs(jm->cpusets.v1_fd, name, sig, sig == SIGKILL ? 50 : 1);
}

int job_cgroups_remove(JobManager *jm, const char *name) {
        int r = 0, q;

        if (jm->cgroups.dir_fd >= 0)
                r = job_cgroup_remove(jm->cgroups.dir_fd, name);
        q = job_cpuset_remove(&jm->cpusets, name);
        return r < 0 ? r : q;
}

/* ---- the job drift check (no cpuset) ---- */

static int get_affinity(pid_t tid, CpuSet *ret) {
        cpuset_zero(ret);
        return sched_getaffinity(tid, sizeof ret->bits, (cpu_set_t *) ret->bits) < 0 ? -errno : 0;
}

/* One thread of the job: put back on the job's CPUs if it left them. */
static void check_task(JobManager *jm, Job *j, pid_t tid) {
        CpuSet cur;

        if (get_affinity(tid, &cur) < 0 || cpuset_is_subset(&cur, &j->cpus))
                return;
        if (sched_setaffinity(tid, sizeof j->cpus.bits, (const cpu_set_t *) j->cpus.bits) < 0)
                return;         /* gone meanwhile */
        jm->tasks_put_back++;
        if (j->tasks_put_back++ == 0) {
                _cleanup_free_ char *from = NULL, *to = NULL, *fields = job_log_fields(j);
                (void) cpuset_format(&cur, &from);
                (void) cpuset_format(&j->cpus, &to);
                log_struct(LOG_NOTICE, NULL, fields, "Job %" PRIu64 ": task %d had moved itself to CPUs %s, put "
                           "back on its CPUs %s (no cpuset holds jobs here; further ones are only counted)",
                           j->id, (int) tid, strempty(from), strempty(to));
        }
}

/* The job's threads from its cgroup v2 (which holds it even where it has no cpuset controller). */
static void check_job_cgroup(JobManager *jm, Job *j) {
        _cleanup_free_ char *text = NULL;
        char path[128];

        snprintf(path, sizeof path, "%s/cgroup.threads", j->cgroup);
        if (read_full_file_at(jm->cgroups.dir_fd, path, &text, NULL) < 0)
                return;
        for (char *p = text, *end; *p; p = end) {
                long tid = strtol(p, &end, 10);
                if (end == p)
                        break;
                if (tid > 0)
                        check_task(jm, j, (pid_t) tid);
        }
}

typedef struct PidPair {
        pid_t pid, ppid;
} PidPair;

static int pair_cmp(const void *a, const void *b) {
        const PidPair *x = a, *y = b;
        return (x->pid > y->pid) - (x->pid < y->pid);
}

static void check_threads(JobManager *jm, Job *j, pid_t pid) {
        _cleanup_closedir_ DIR *d = NULL;
        char path[32];
        struct dirent *de;

        snprintf(path, sizeof path, "%d/task", (int) pid);
        d = opendir_at(jm->manager->proc_fd, path);
        if (!d)
                return;
        while ((de = readdir(d))) {
                long tid = strtol(de->d_name, NULL, 10);
                if (tid > 0)
                        check_task(jm, j, (pid_t) tid);
        }
}

/*
 * Without any cgroup: the descendants of its worker (a child subreaper, so orphans stay below it), found
 * by a walk over /proc. A worker runs one job at a time.
 */
static void check_job_tree(JobManager *jm, Job *j, pid_t worker) {
        _cleanup_closedir_ DIR *d = opendir_at(jm->manager->proc_fd, ".");
        _cleanup_free_ PidPair *procs = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                _cleanup_free_ char *stat = NULL;
                char *end, path[32];
                long pid = strtol(de->d_name, &end, 10);
                pid_t ppid;

                snprintf(path, sizeof path, "%ld/stat", pid);
                if (*end || pid <= 0 || read_full_file_at(jm->manager->proc_fd, path, &stat, NULL) < 0 ||
                    task_parse_stat(stat, &ppid, NULL, NULL, NULL) < 0)
                        continue;
                if (n == alloc) {
                        alloc = MAX((size_t) 256, alloc * 2);
                        PidPair *a = realloc(procs, alloc * sizeof *a);
                        if (!a)
                                break;
                        procs = a;
                }
                procs[n++] = (PidPair){ (pid_t) pid, ppid };
        }
        qsort(procs, n, sizeof *procs, pair_cmp);
        for (size_t i = 0; i < n; i++) {
                pid_t p = procs[i].ppid;
                for (unsigned depth = 0; p > 1 && p != worker && depth < 256; depth++) {
                        PidPair *up = bsearch(&(PidPair){ .pid = p }, procs, n, sizeof *procs, pair_cmp);
                        p = up ? up->ppid : 0;
                }
                if (p == worker)
                        check_threads(jm, j, procs[i].pid);
        }
}

static int on_job_drift(sd_event_source *s, uint64_t usec, void *userdata) {
        JobManager *jm = userdata;
        bool any = false;

        CPUSET_FOREACH(cpu, &jm->reserved) {
                WorkerSlot *slot = &jm->slots[cpu];
                Job *j = slot->job;
                if (!j || j->worker_cpu != (unsigned) cpu || j->pid <= 0 || job_state_is_final(j->state))
                        continue;
                any = true;
                if (j->cgroup && jm->cgroups.dir_fd >= 0)
                        check_job_cgroup(jm, j);
                else if (slot->worker)
                        check_job_tree(jm, j, worker_pid(slot->worker));
        }
        if (any) {
                (void) sd_event_source_set_time_relative(s, JOB_DRIFT_USEC);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        }
        return 0;
}

void job_drift_arm(JobManager *jm) {
        int enabled = SD_EVENT_OFF;

        if (jm->cpusets.mode != CPU_ENFORCE_AFFINITY)
                return;
        if (!jm->drift_src) {
                if (sd_event_add_time_relative(jm->manager->event, &jm->drift_src, CLOCK_MONOTONIC, 0, 1000,
                                               on_job_drift, jm) < 0)
                        return;
                (void) sd_event_source_set_priority(jm->drift_src, SD_EVENT_PRIORITY_IMPORTANT);
                return;
        }
        if (sd_event_source_get_enabled(jm->drift_src, &enabled) >= 0 && enabled != SD_EVENT_OFF)
                return;
        (void) sd_event_source_set_time_relative(jm->drift_src, 0);
        (void) sd_event_source_set_enabled(jm->drift_src, SD_EVENT_ONESHOT);
}
