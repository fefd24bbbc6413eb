/* SPDX-License-Identifier: MIT */
/*
 * The job manager and the jobs' scope (job-scope.c): the scope becomes the home of job cgroups and
 * workers; on SIGTERM rtd tells a restart (jobs and reservation stay for the next rtd) from a stop (jobs
 * are cancelled, since systemd no longer kills them with rtd's cgroup); after a crash a job whose start
 * never reached the store is found by its cgroup.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/manager.h"
#include "job-scope.h"
#include "jobs-internal.h"
#include "shared/fileio.h"
#include "shared/log.h"

void job_scope_adopt_home(JobManager *jm) {
        _cleanup_free_ char *why = NULL, *path = NULL;
        int fd, r;

        if (jm->cgroups.dir_fd < 0)
                return;         /* no job cgroups at all (hybrid host without systemd): nothing changes */
        r = job_scope_setup(jm->manager->proc_fd, &jm->scope, &why);
        if (r < 0) {
                if (r == -ENOENT)
                        log_debug("Workers and jobs live in rtd's own cgroup: %s", strempty(why));
                else
                        log_warning("Workers and jobs live in rtd's own cgroup (%s): under systemd a crash or a "
                                    "restart of rtd ends them", strempty(why));
                return;
        }
        fd = fcntl(jm->scope.dir_fd, F_DUPFD_CLOEXEC, 3);
        path = strdup(jm->scope.path);
        if (fd < 0 || !path) {
                safe_close(fd);
                job_scope_done(&jm->scope);
                return;
        }
        safe_close(jm->cgroups.dir_fd);
        jm->cgroups.dir_fd = fd;
        free(jm->cgroups.path);
        jm->cgroups.path = TAKE_PTR(path);
        log_info("Workers and jobs live in %s (%s)%s: they outlive a crash or a restart of rtd", JOB_SCOPE_UNIT,
                 jm->scope.path, jm->scope.adopted ? ", kept from before this rtd started" : "");
}

int job_scope_workers_cgroup(JobManager *jm) {
        return jm->scope.workers_fd;
}

static bool cgroup_populated(JobManager *jm, const Job *j) {
        _cleanup_free_ char *events = NULL;
        char path[128];

        snprintf(path, sizeof path, "%s/cgroup.events", j->cgroup);
        if (read_full_file_at(jm->cgroups.dir_fd, path, &events, NULL) < 0)
                return false;
        return !strstr(events, "populated 0");
}

/* `systemctl stop`: SIGTERM to every job, SIGKILL after KillGraceSec=, each one recorded as cancelled. */
static void cancel_jobs(JobManager *jm) {
        unsigned grace_ms = jm->manager->config->kill_grace_sec * 1000, n = 0, alive = 0;
        _cleanup_free_ Job **jobs = NULL;
        size_t cap = 0;

        for (unsigned b = 0; b < JOB_BUCKETS; b++)
                for (Job *j = jm->buckets[b]; j; j = j->hnext) {
                        if (j->state != JOB_STARTING && j->state != JOB_RUNNING)
                                continue;
                        if (n == cap) {
                                Job **g = realloc(jobs, (cap = cap ? cap * 2 : 16) * sizeof *jobs);
                                if (!g)
                                        break;
                                jobs = g;
                        }
                        jobs[n++] = j;
                }
        if (n == 0)
                return;
        log_info("rtd is stopping, not restarting: cancelling %u running job%s", n, n == 1 ? "" : "s");
        for (unsigned i = 0; i < n; i++)
                job_signal(jm, jobs[i], SIGTERM);
        for (unsigned t = 0; t < grace_ms; t += 20) {
                alive = 0;
                for (unsigned i = 0; i < n; i++)
                        alive += jobs[i]->cgroup && cgroup_populated(jm, jobs[i]);
                if (!alive)
                        break;
                (void) nanosleep(&(struct timespec){ .tv_nsec = 20000000 }, NULL);
        }
        for (unsigned i = 0; i < n; i++) {
                job_signal(jm, jobs[i], SIGKILL);
                job_finish(jm, jobs[i], JOB_CANCELLED, "rtd was stopped%s", alive ? " (killed after KillGraceSec=)"
                                                                                   : "");
        }
}

bool job_manager_exit_keeps(JobManager *jm) {
        if (job_scope_restart_pending()) {
                log_info("systemd restarts rtd: jobs keep running%s and the reservation stays for the next rtd",
                         jm && jm->scope.dir_fd >= 0 ? " in " JOB_SCOPE_UNIT : "");
                return true;
        }
        if (jm && jm->scope.dir_fd >= 0) {
                cancel_jobs(jm);
                /* Whatever is left in the scope (idle workers, a job a worker started meanwhile) goes too. */
                (void) job_scope_stop_unit();
        }
        return false;
}

/*
 * The job's own process in its cgroup, for a job whose `started` never reached the store: the oldest
 * session leader there (the job's child calls setsid(); a descendant may too, but it started later, or in
 * the same clock tick with a higher pid unless pids wrapped). Should a job fool this, it only hurts
 * itself: rtd ends it (lost) when the process it took for the job ends. Its start time (CLOCK_REALTIME)
 * in *ret_start_usec.
 */
pid_t job_cgroup_leader(JobManager *jm, const Job *j, uint64_t *ret_start_usec) {
        _cleanup_free_ char *procs = NULL;
        unsigned long long best_start = ULLONG_MAX;
        pid_t best = 0;
        char path[128];

        if (!j->cgroup || jm->cgroups.dir_fd < 0)
                return 0;
        snprintf(path, sizeof path, "%s/cgroup.procs", j->cgroup);
        if (read_full_file_at(jm->cgroups.dir_fd, path, &procs, NULL) < 0)
                return 0;
        for (char *p = procs, *end; *p; p = end) {
                _cleanup_free_ char *stat = NULL;
                long pid = strtol(p, &end, 10);
                unsigned long long start;
                char name[32], *s;
                int session;

                if (end == p)
                        break;
                snprintf(name, sizeof name, "%ld/stat", pid);
                if (read_full_file_at(jm->manager->proc_fd, name, &stat, NULL) < 0 || !(s = strrchr(stat, ')')) ||
                    sscanf(s + 2, "%*c %*d %*d %d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                           &session, &start) != 2 || session != pid)
                        continue;
                if (start < best_start || (start == best_start && pid < best)) {
                        best_start = start;
                        best = (pid_t) pid;
                }
        }
        if (best > 0) {
                /* starttime counts clock ticks since boot (CLOCK_BOOTTIME). */
                uint64_t boot = now_usec(CLOCK_BOOTTIME), rt = now_usec(CLOCK_REALTIME),
                         at = best_start * 1000000ULL / (uint64_t) sysconf(_SC_CLK_TCK);
                *ret_start_usec = rt - MIN(boot - MIN(boot, at), rt);
        }
        return best;
}
