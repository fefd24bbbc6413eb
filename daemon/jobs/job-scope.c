/* SPDX-License-Identifier: MIT */
/*
 * The jobs' scope. Under systemd a service's processes live in its cgroup, and systemd kills that whole
 * cgroup when the main process dies (kill -9, a watchdog kill) and on every stop, `systemctl restart`
 * included (KillMode=mixed: SIGKILL to what is left after the main process). Jobs run for hours; rtd must
 * be restartable under them. So rtd asks systemd over sd-bus for a scope unit, rtd-jobs.scope, in its own
 * slice (rtd.slice: the reserved CPUs live there, the systemd backend never shrinks it) with Delegate=yes
 * (rtd makes the jobs' cgroups and cpusets inside it, as it did in its own delegated cgroup), and its
 * workers (and through them the jobs) live there. A scope is systemd's unit for processes started by
 * someone else; it is not stopped with rtd.service, and it goes away by itself once it is empty.
 *
 * A scope needs a process to begin with: rtd forks an anchor ("rtd-anchor") that only sleeps, in the
 * scope's leaf with the workers. It keeps the scope also while no worker or job runs (CPUs=none, or idle
 * workers that leave on their daemon's EOF) and outlives rtd: were the scope empty for a moment between
 * two rtds, systemd would collect it while the next rtd adopts it. The next rtd puts its own anchor in
 * and ends the old one. Nothing else ends an anchor but the scope's stop, so a scope never outlives the
 * unit: every way out of rtd.service that does not start rtd again stops it (rtd's own stop path,
 * ExecStopPost= after a stop, rtd-restore.service after a failure for good).
 *
 * Who ends the jobs then: rtd itself on `systemctl stop` (jobs-scope.c), `rtd --restore` (ExecStopPost=
 * after a real stop, and rtd-restore.service, OnFailure= of a unit that failed for good) by stopping the
 * scope, which kills whatever is left in it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-login.h>

#include "job-cgroup.h"
#include "job-scope.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "shared/macro.h"

#define SD_DEST "org.freedesktop.systemd1"
#define SD_PATH "/org/freedesktop/systemd1"
#define SD_MANAGER "org.freedesktop.systemd1.Manager"
#define SD_UNIT "org.freedesktop.systemd1.Unit"

static void bus_closep(sd_bus **b) {
        sd_bus_flush_close_unref(*b);
}

static int bus_unit_path(sd_bus *bus, const char *unit, char **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        const char *p;
        int r;

        r = sd_bus_call_method(bus, SD_DEST, SD_PATH, SD_MANAGER, "GetUnit", &error, &reply, "s", unit);
        sd_bus_error_free(&error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "o", &p);
        if (r < 0)
                return r;
        *ret = strdup(p);
        return *ret ? 0 : -ENOMEM;
}

static int bus_unit_string(sd_bus *bus, const char *unit, const char *iface, const char *prop, char **ret) {
        _cleanup_free_ char *path = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = bus_unit_path(bus, unit, &path);
        if (r < 0)
                return r;
        r = sd_bus_get_property_string(bus, SD_DEST, path, iface, prop, &error, ret);
        sd_bus_error_free(&error);
        return r;
}

/* A child that sleeps until rtd dies. Only async-signal-safe calls after fork(): rtd has threads. */
static int fork_anchor(pid_t *ret) {
        pid_t pid;
        sigset_t none;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                (void) prctl(PR_SET_NAME, (unsigned long) JOB_SCOPE_ANCHOR_COMM);
                (void) setsid();        /* no signal of rtd's process group or terminal reaches it */
                (void) syscall(SYS_close_range, 0U, ~0U, 0U);   /* no socket or store of rtd's held on */
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                for (;;)
                        pause();
        }
        *ret = pid;
        return 0;
}

static int start_scope(sd_bus *bus, const char *slice, pid_t anchor, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SD_DEST, SD_PATH, SD_MANAGER, "StartTransientUnit");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", JOB_SCOPE_UNIT, "fail");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        /* TimeoutStopUSec: `rtd --restore` stops the scope; a job that ignores SIGTERM is killed after 10 s. */
        if (r >= 0)
                r = sd_bus_message_append(m, "(sv)(sv)(sv)(sv)(sv)(sv)",
                                          "Description", "s", "rtd's workers and jobs",
                                          "Slice", "s", slice,
                                          "Delegate", "b", 1,
                                          "CollectMode", "s", "inactive-or-failed",
                                          "TimeoutStopUSec", "t", (uint64_t) 10 * 1000000,
                                          "PIDs", "au", 1, (uint32_t) anchor);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_append(m, "a(sa(sv))", 0);
        if (r < 0)
                return r;
        return sd_bus_call(bus, m, 0, error, NULL);
}

static void sleep_msec(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* The anchors of earlier rtds in the workers' leaf: ours is in place, they may go. */
static void end_old_anchors(const JobScope *s) {
        _cleanup_free_ char *procs = NULL;

        if (read_full_file_at(s->workers_fd, "cgroup.procs", &procs, NULL) < 0)
                return;
        for (char *p = procs, *end; *p; p = end) {
                _cleanup_free_ char *comm = NULL;
                long pid = strtol(p, &end, 10);
                char path[64];

                if (end == p)
                        break;
                snprintf(path, sizeof path, "/proc/%ld/comm", pid);
                if (pid != s->anchor && read_one_line_at(AT_FDCWD, path, &comm) >= 0 &&
                    streq(comm, JOB_SCOPE_ANCHOR_COMM) && kill((pid_t) pid, SIGKILL) == 0)
                        (void) waitpid((pid_t) pid, NULL, 0);   /* ours after a re-exec; ECHILD otherwise */
        }
}

/* The scope's cgroup as systemd names it, once its start job has run (a few ms; 5 s at most). */
static int scope_cgroup(sd_bus *bus, char **ret) {
        for (unsigned i = 0; i < 250; i++) {
                _cleanup_free_ char *state = NULL, *cg = NULL;
                if (bus_unit_string(bus, JOB_SCOPE_UNIT, SD_UNIT, "ActiveState", &state) >= 0 &&
                    streq(state, "active") &&
                    bus_unit_string(bus, JOB_SCOPE_UNIT, "org.freedesktop.systemd1.Scope", "ControlGroup",
                                    &cg) >= 0 && *cg) {
                        *ret = TAKE_PTR(cg);
                        return 0;
                }
                sleep_msec(20);
        }
        return -ETIMEDOUT;
}

static int open_scope(int proc_fd, const char *cg, JobScope *s) {
        _cleanup_free_ char *mountinfo = NULL, *mnt = NULL, *root = NULL;
        const char *rel = cg;
        char pid[32];
        int r;

        r = read_full_file_at(proc_fd, "self/mountinfo", &mountinfo, NULL);
        if (r >= 0)
                r = job_cgroups_parse_mountinfo(mountinfo, &mnt, &root);
        if (r < 0)
                return r;
        if (!streq(root, "/") && startswith(cg, root))
                rel = cg + strlen(root);
        if (asprintf(&s->path, "%s%s", mnt, rel) < 0) {
                s->path = NULL;
                return -ENOMEM;
        }
        s->dir_fd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->dir_fd < 0)
                return -errno;
        if (mkdirat(s->dir_fd, JOB_SCOPE_WORKERS, 0755) < 0 && errno != EEXIST)
                return -errno;
        s->workers_fd = openat(s->dir_fd, JOB_SCOPE_WORKERS, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->workers_fd < 0)
                return -errno;
        /* Out of the scope's own cgroup into the leaf: the scope's children (jobs) get controllers only
         * while it holds no process itself. */
        snprintf(pid, sizeof pid, "%d", (int) s->anchor);
        r = write_string_at(s->workers_fd, "cgroup.procs", pid);
        if (r >= 0)
                end_old_anchors(s);
        return r;
}

/* Setup failed: our anchor goes (a scope it alone kept goes with it). */
static void scope_abandon(JobScope *s) {
        if (s->anchor > 0) {
                (void) kill(s->anchor, SIGKILL);
                (void) waitpid(s->anchor, NULL, 0);
        }
        job_scope_done(s);
}

int job_scope_setup(int proc_fd, JobScope *ret, char **ret_why) {
        _cleanup_(bus_closep) sd_bus *bus = NULL;
        _cleanup_free_ char *unit = NULL, *slice = NULL, *cg = NULL;
        _cleanup_(scope_abandon) JobScope s = { .dir_fd = -EBADF, .workers_fd = -EBADF };
        sd_bus_error error = SD_BUS_ERROR_NULL;
        const char *why;
        int r;

        *ret = (JobScope){ .dir_fd = -EBADF, .workers_fd = -EBADF };
        *ret_why = NULL;
        if (sd_booted() <= 0 || sd_pid_get_unit(0, &unit) < 0 || !strstr(unit, ".service"))
                return asprintf(ret_why, "rtd does not run as a systemd service") < 0 ? -ENOMEM : -ENOENT;
        r = sd_pid_get_slice(0, &slice);
        if (r >= 0)
                r = sd_bus_open_system(&bus);
        if (r < 0)
                return asprintf(ret_why, "cannot reach systemd over D-Bus: %s", strerror(-r)) < 0 ? -ENOMEM : r;
        r = fork_anchor(&s.anchor);
        if (r < 0)
                return asprintf(ret_why, "cannot fork: %s", strerror(-r)) < 0 ? -ENOMEM : r;

        r = start_scope(bus, slice, s.anchor, &error);
        if (r < 0 && sd_bus_error_has_name(&error, "org.freedesktop.systemd1.UnitExists")) {
                s.adopted = true;       /* an earlier rtd's anchor (and its jobs) kept it */
                r = 0;
        }
        why = r < 0 ? (error.message ?: strerror(-r)) : NULL;
        if (r >= 0 && (r = scope_cgroup(bus, &cg)) < 0)
                why = "the scope did not become active within 5 s";
        if (r >= 0 && (r = open_scope(proc_fd, cg, &s)) < 0)
                why = strerror(-r);
        if (r < 0) {
                r = asprintf(ret_why, "cannot use %s: %s", JOB_SCOPE_UNIT, why) < 0 ? -ENOMEM : r;
                sd_bus_error_free(&error);
                return r;
        }
        sd_bus_error_free(&error);
        *ret = s;
        s = (JobScope){ .dir_fd = -EBADF, .workers_fd = -EBADF };
        return 0;
}

/* The anchor stays (see the top): the next rtd ends it, or the scope's stop does. */
void job_scope_done(JobScope *s) {
        safe_close(s->dir_fd);
        safe_close(s->workers_fd);
        free(s->path);
        *s = (JobScope){ .dir_fd = -EBADF, .workers_fd = -EBADF };
}

/* The type of the job systemd has queued for our own unit ("restart", "stop", ...), NULL when none. */
static int own_unit_job(sd_bus *bus, char **ret_unit, char **ret_type) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *unit = NULL, *path = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        const char *job_path;
        uint32_t id;
        int r;

        *ret_type = NULL;
        r = sd_pid_get_unit(0, &unit);
        if (r < 0)
                return r;
        r = bus_unit_path(bus, unit, &path);
        if (r >= 0)
                r = sd_bus_get_property(bus, SD_DEST, path, SD_UNIT, "Job", &error, &reply, "(uo)");
        sd_bus_error_free(&error);
        if (r >= 0)
                r = sd_bus_message_read(reply, "(uo)", &id, &job_path);
        if (r >= 0 && id > 0)
                r = sd_bus_get_property_string(bus, SD_DEST, job_path, "org.freedesktop.systemd1.Job", "JobType",
                                               &error, ret_type);
        sd_bus_error_free(&error);
        if (r >= 0 && ret_unit)
                *ret_unit = TAKE_PTR(unit);
        return r;
}

bool job_scope_restart_pending(void) {
        _cleanup_(bus_closep) sd_bus *bus = NULL;
        _cleanup_free_ char *type = NULL;

        if (sd_booted() <= 0 || sd_bus_open_system(&bus) < 0 || own_unit_job(bus, NULL, &type) < 0)
                return false;
        /* "restart", also "try-restart" and "reload-or-restart" as systemctl names them. */
        return type && strstr(type, "restart");
}

bool job_scope_keep_decision(const char *job_type, const char *result, const char *restart) {
        if (job_type)
                return strstr(job_type, "restart");     /* "stop" (systemctl stop, shutdown) restores */
        /* No job: rtd died by itself (a crash, kill -9, the watchdog). Restart= brings it back unless the
         * start limit is hit; then OnFailure=rtd-restore.service restores. A clean exit is not restarted. */
        if (!result || streq(result, "success") || !restart)
                return false;
        if (streq(restart, "always") || streq(restart, "on-failure"))
                return true;
        if (streq(restart, "on-abnormal"))
                return !streq(result, "exit-code");
        if (streq(restart, "on-watchdog"))
                return streq(result, "watchdog");
        if (streq(restart, "on-abort"))
                return streq(result, "signal") || streq(result, "core-dump");
        return false;   /* "no", "on-success" */
}

bool job_scope_keep_at_stop_post(char **ret_why) {
        _cleanup_(bus_closep) sd_bus *bus = NULL;
        _cleanup_free_ char *unit = NULL, *type = NULL, *restart = NULL;
        const char *result = getenv("SERVICE_RESULT");

        *ret_why = NULL;
        if (!result || sd_booted() <= 0 || sd_bus_open_system(&bus) < 0 || own_unit_job(bus, &unit, &type) < 0)
                return false;
        if (!type)
                (void) bus_unit_string(bus, unit, "org.freedesktop.systemd1.Service", "Restart", &restart);
        if (!job_scope_keep_decision(type, result, restart))
                return false;
        if (type ? asprintf(ret_why, "systemd restarts %s (job %s)", unit, type) < 0
                 : asprintf(ret_why, "%s failed (%s) and Restart=%s starts it again", unit, result, restart) < 0)
                *ret_why = NULL;
        return true;
}

int job_scope_stop_unit(void) {
        _cleanup_(bus_closep) sd_bus *bus = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        if (sd_booted() <= 0)
                return 0;
        r = sd_bus_open_system(&bus);
        if (r < 0)
                return r;
        r = sd_bus_call_method(bus, SD_DEST, SD_PATH, SD_MANAGER, "StopUnit", &error, NULL, "ss", JOB_SCOPE_UNIT,
                               "replace");
        if (r < 0 && sd_bus_error_has_name(&error, "org.freedesktop.systemd1.NoSuchUnit"))
                r = 0;
        sd_bus_error_free(&error);
        return r;
}
