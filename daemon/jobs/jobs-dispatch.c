/* SPDX-License-Identifier: MIT */
/* Dispatch: a queued job's environment and output files, its start on a worker (or ahead of the one before
 * it), and the dispatcher that runs once per loop turn after anything changed. */
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
#include "store/store.h"

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

void job_spares_close(JobManager *jm) {
        while (jm->spare_first != jm->spare_next)
                safe_close(jm->spare_fds[jm->spare_first++ % SPARE_TARGET]);
}

/* Give the spare named in `spare` its final name <id>.<suffix> here; on success `spare` becomes "". */
static void name_output(JobManager *jm, const Job *j, const char *suffix, char *spare) {
        char name[32];

        snprintf(name, sizeof name, "%" PRIu64 ".%s", j->id, suffix);
        if (renameat(jm->output_fd, spare, jm->output_fd, name) == 0)
                spare[0] = 0;
}

/*
 * Two spares for j's stdout and stderr, made the user's; false unless both are there and could be given
 * away (spares taken but not handed over are removed with the job's unused ones). in_cgroup: the job has
 * a v2 cgroup of its own, which proves whether its child ran (job_never_exec_d()).
 */
static bool take_output_spares(JobManager *jm, Job *j, WorkerJob *wj, char *out, char *err, size_t size,
                               bool in_cgroup) {
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
        /*
         * Named here, on rtd's CPU: a rename on the job's CPU costs ext4 directory lookups (30-38 µs a job
         * here). stdout only where the job's cgroup proves whether its child ran; elsewhere its rename in the
         * child, just before the exec, is that proof (recovery and the take-back read it).
         */
        name_output(jm, j, "stderr", err);
        if (in_cgroup)
                name_output(jm, j, "stdout", out);
        if (!*out && !*err)
                j->spares = 0;          /* both have their names: nothing to remove when the job ends */
        return true;
}

/* Spares of an earlier run: their numbers would collide with ours. */
static void remove_old_spares(JobManager *jm) {
        _cleanup_closedir_ DIR *d = opendir_at(jm->output_fd, ".");
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d)))
                if (startswith(de->d_name, "spare-"))
                        (void) unlinkat(jm->output_fd, de->d_name, 0);
}

int job_spares_start(JobManager *jm) {
        int r;

        remove_old_spares(jm);
        r = sd_event_add_defer(jm->manager->event, &jm->spare_src, on_spare, jm);
        if (r < 0)
                return r;
        (void) sd_event_source_set_priority(jm->spare_src, SD_EVENT_PRIORITY_IDLE);
        (void) sd_event_source_set_enabled(jm->spare_src, SD_EVENT_ONESHOT);
        return 0;
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

/*
 * The cgroup.procs files of the v1 directories the child joins (its cpuset, then n_join more), in place of
 * the directories: opened here, on rtd's CPU, each a kernfs lookup the reserved CPU is spared. All or none:
 * false leaves the directories as they were.
 */
static bool procs_files(int *cpuset_fd, int *join, int n_join) {
        int fds[1 + WORKER_START_MAX_JOIN], n = 0;

        for (int i = -1; i < n_join; i++) {
                int dir = i < 0 ? *cpuset_fd : join[i];
                if (dir < 0)
                        continue;
                fds[n] = openat(dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
                if (fds[n] < 0) {
                        while (n > 0)
                                safe_close(fds[--n]);
                        return false;
                }
                n++;
        }
        n = 0;
        for (int i = -1; i < n_join; i++) {
                int *dir = i < 0 ? cpuset_fd : &join[i];
                if (*dir < 0)
                        continue;
                safe_close(*dir);
                *dir = fds[n++];
        }
        return true;
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
        _cleanup_close_ int cgroup_fd = -EBADF, cpuset_fd = -EBADF, kill_fd = -EBADF;
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
                job_queue_remove(jm, j);
                UserCount *u = job_user_count(jm, j->uid, false);
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
         * Written before the worker sees it, and synced to disk: after a crash or a power cut a "starting"
         * job is never started twice. A queued job's start is flushed before it runs (one WAL fsync); a
         * fresh job is stored once, directly as "starting", and reaches the disk with the next group sync
         * (0.1 s): a power cut before it loses the whole job, which can then not run again either. The
         * boot id tells recovery whether the files its child made (which are not synced) can be trusted.
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
                        UserCount *u = job_user_count(jm, j->uid, true);
                        job_queue_insert_in_order(jm, j);
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

        /* With a v2 cgroup, whose cgroup.kill ends all the job leaves, the worker needs the v1 directories only
         * for the child to join them. */
        bool procs = cgroup_fd >= 0 && (cpuset_fd >= 0 || n_join > 0) && procs_files(&cpuset_fd, join, n_join);
        /* Its cgroup.kill, which the worker writes when the job's main process ends (none: it opens it). */
        if (cgroup_fd >= 0)
                kill_fd = openat(cgroup_fd, "cgroup.kill", O_WRONLY | O_CLOEXEC);

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
                .procs_files = procs,
                .kill_fd = kill_fd,
                .rlimits = rl,
                .argv = j->spec.argv,
                .env = env,
        };
        (void) take_output_spares(jm, j, &wj, spare_out, spare_err, sizeof spare_out, cgroup_fd >= 0);
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

int job_dispatch_start(JobManager *jm) {
        int r = sd_event_add_defer(jm->manager->event, &jm->dispatch_src, on_dispatch, jm);

        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(jm->dispatch_src, SD_EVENT_OFF);
        /* After worker messages, before new requests: a finished job's CPU is refilled first. */
        (void) sd_event_source_set_priority(jm->dispatch_src, SD_EVENT_PRIORITY_IMPORTANT + 1);
        return 0;
}
