/* SPDX-License-Identifier: MIT */
/* Start-up and shutdown order, signals, reload, sd_notify, and the wiring between modules. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/reexec.h"
#include "core/manager.h"
#include "host/topology.h"
#include "http/http.h"
#include "http/listen.h"
#include "jobs/jobs.h"
#include "lease/lease.h"
#include "metrics/metrics.h"
#include "reserve/reserve.h"
#include "shared/fileio.h"
#include "shared/log.h"
#include "shared/messages.h"

/* The jobs' and the reservation's figures in /metrics and /v1/metrics: metrics includes neither module. */
static void jobs_prometheus(Manager *m, FILE *f) {
        if (m->jobs)
                job_manager_render_prometheus(m->jobs, f);
}

static void reservation_prometheus(Manager *m, FILE *f) {
        if (m->reservation)
                reservation_render_prometheus(m->reservation, f);
}

static json_t *jobs_json(Manager *m) {
        return m->jobs ? job_manager_metrics_json(m->jobs) : NULL;
}

static json_t *reservation_json(Manager *m) {
        return m->reservation ? reservation_stats_json(m->reservation) : NULL;
}

void manager_hand_metrics_exporters(Manager *m) {
        metrics_set_exporters(m->metrics, &(const MetricsExporters) {
                .jobs_prometheus = jobs_prometheus, .reservation_prometheus = reservation_prometheus,
                .jobs_json = jobs_json, .reservation_json = reservation_json,
        });
}

uint64_t now_usec(int clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
}

static int open_dir(const char *root, const char *path, int *ret) {
        _cleanup_free_ char *p = NULL;
        int fd;

        if (asprintf(&p, "%s%s", strempty(root), path) < 0)
                return -ENOMEM;
        fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return log_error_errno(errno, "Failed to open %s: %m", p);
        *ret = fd;
        return 0;
}

static int open_own_dir(const char *path, int mode, int *ret) {
        int r, fd;

        r = mkdir_p_at(AT_FDCWD, path, mode);
        if (r < 0)
                return log_error_errno(r, "Failed to create %s: %m", path);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return log_error_errno(errno, "Failed to open %s: %m", path);
        *ret = fd;
        return 0;
}

int manager_new(RtdConfig *config, const char *config_path, const char *root, Manager **ret) {
        _cleanup_(manager_freep) Manager *m = NULL;
        int r;

        m = calloc(1, sizeof *m);
        if (!m) {
                config_free(config);
                return -ENOMEM;
        }
        m->proc_fd = m->sys_fd = m->runtime_fd = m->state_fd = -EBADF;
        m->control_listen_fd = m->metrics_listen_fd = -EBADF;
        m->config = config;
        if (config_path && !(m->config_path = strdup(config_path)))
                return -ENOMEM;

        r = sd_event_default(&m->event);
        if (r < 0)
                return r;
        r = open_dir(root, "/proc", &m->proc_fd);
        if (r < 0)
                return r;
        r = open_dir(root, "/sys", &m->sys_fd);
        if (r < 0)
                return r;
        m->start_usec = now_usec(CLOCK_MONOTONIC);
        m->start_realtime_usec = now_usec(CLOCK_REALTIME);
        *ret = TAKE_PTR(m);
        return 0;
}

void manager_reserved_cpus(Manager *m, CpuSet *ret) {
        if (m->reservation)
                reservation_cpus(m->reservation, ret, NULL);
        else
                cpuset_zero(ret);
}

void manager_housekeeping_cpus(Manager *m, CpuSet *ret) {
        CpuSet reserved;

        manager_reserved_cpus(m, &reserved);
        cpuset_andnot(ret, &m->topology->online, &reserved);
        /* Leased CPUs are a job's too: rtd keeps off them. */
        leases_cpus(m->leases, &reserved);
        cpuset_andnot(ret, ret, &reserved);
}

/*
 * Keep our own threads off the reserved CPUs: RT load there must not starve the watchdog, and rtd's threads
 * are real-time themselves (main.c), so they must never preempt a job. Every thread: an affinity is per
 * thread, and the checkpoint thread exists by now.
 */
static void pin_self_to_housekeeping(Manager *m) {
        CpuSet hk;
        cpu_set_t mask;
        DIR *d;
        struct dirent *de;

        manager_housekeeping_cpus(m, &hk);
        if (cpuset_is_empty(&hk))
                return;
        cpuset_to_cpu_set(&hk, &mask);
        if (sched_setaffinity(0, sizeof mask, &mask) < 0)
                log_warning_errno(errno, "Failed to pin rtd to the housekeeping CPUs, ignoring: %m");
        d = opendir("/proc/self/task");
        while (d && (de = readdir(d))) {
                char *end;
                long tid = strtol(de->d_name, &end, 10);
                if (!*end && tid > 0 && tid != gettid())
                        (void) sched_setaffinity((pid_t) tid, sizeof mask, &mask);
        }
        if (d)
                closedir(d);
}

void manager_leases_changed(Manager *m) {
        CpuSet leased;

        leases_cpus(m->leases, &leased);
        pin_self_to_housekeeping(m);
        metrics_set_leased(m->metrics, &leased);
        manager_update_status(m);
}

void manager_reservation_changed(Manager *m) {
        CpuSet reserved;

        manager_reserved_cpus(m, &reserved);
        pin_self_to_housekeeping(m);
        if (m->metrics)
                metrics_set_reserved(m->metrics, &reserved);
        if (m->jobs)
                (void) job_manager_set_cpus(m->jobs, &reserved);
        manager_update_status(m);
}

/* Which CPUs the config asks for, checked against this machine. Logs and returns -EINVAL when impossible. */
int manager_configured_cpus(Manager *m, const RtdConfig *c, CpuSet *ret) {
        const Topology *t = m->topology;
        CpuSet bad;

        switch (c->reserve_mode) {
        case RESERVE_NONE:
                cpuset_zero(ret);
                return 0;
        case RESERVE_AUTO:
                topology_default_reserved(t, ret);
                if (cpuset_is_empty(ret))
                        return log_error_errno(SYNTHETIC_ERRNO(EINVAL),
                                               "[Reserve] CPUs=auto: this machine has only one core (%u CPU%s "
                                               "online); nothing can be reserved while keeping a housekeeping "
                                               "CPU. Set CPUs=none to run without a reservation.",
                                               cpuset_count(&t->online), cpuset_count(&t->online) == 1 ? "" : "s");
                return 0;
        default:
                cpuset_andnot(&bad, &c->reserve_cpus, &t->online);
                if (!cpuset_is_empty(&bad)) {
                        _cleanup_free_ char *b = NULL, *on = NULL;
                        (void) cpuset_format(&bad, &b);
                        (void) cpuset_format(&t->online, &on);
                        return log_error_errno(SYNTHETIC_ERRNO(EINVAL),
                                               "[Reserve] CPUs=: CPU %s is not online (online CPUs: %s)",
                                               strempty(b), strempty(on));
                }
                if (cpuset_is_subset(&t->online, &c->reserve_cpus))
                        return log_error_errno(SYNTHETIC_ERRNO(EINVAL),
                                               "[Reserve] CPUs=: reserving every online CPU leaves no "
                                               "housekeeping CPU; keep at least one CPU out of the list");
                *ret = c->reserve_cpus;
                return 0;
        }
}

void manager_update_status(Manager *m) {
        _cleanup_free_ char *cpus = NULL;
        CpuSet reserved;
        JobCounts jc = {};

        manager_reserved_cpus(m, &reserved);
        (void) cpuset_format(&reserved, &cpus);
        if (m->jobs)
                job_manager_counts(m->jobs, &jc);
        (void) sd_notifyf(false, "STATUS=%s%s%s, %u job%s running, %u queued",
                          cpuset_is_empty(&reserved) ? "No CPUs reserved" : "Reserved CPUs ",
                          cpuset_is_empty(&reserved) ? "" : strempty(cpus), "", jc.by_state[JOB_RUNNING],
                          jc.by_state[JOB_RUNNING] == 1 ? "" : "s", jc.queue_depth);
}

static int apply_reload(Manager *m, RtdConfig *n) {
        CpuSet want, have;
        int r;

        /* Keys that only take effect on restart. */
        if (!streq(n->socket_path, m->config->socket_path) ||
            !streq_ptr(n->metrics_listen, m->config->metrics_listen) ||
            !streq(n->state_directory, m->config->state_directory) ||
            !streq(n->runtime_directory, m->config->runtime_directory))
                log_warning("Socket=, MetricsListen=, StateDirectory= and RuntimeDirectory= changes take effect "
                            "on restart only");

        r = manager_configured_cpus(m, n, &want);
        if (r < 0)
                return r;
        manager_reserved_cpus(m, &have);
        log_set_max_level(n->log_level);
        metrics_set_program_stats(m->metrics, n->program_stats);

        /* Swap the config in before re-reserving: the reservation reads its options from m->config. */
        RtdConfig *old = m->config;
        m->config = n;
        if (!cpuset_equal(&want, &have) || n->backend != old->backend || n->irqs != old->irqs ||
            n->rt_runtime_usec != old->rt_runtime_usec ||
            n->fair_server_runtime_usec != old->fair_server_runtime_usec ||
            n->timer_migration != old->timer_migration || n->stat_interval_sec != old->stat_interval_sec) {
                r = cpuset_is_empty(&want) ? reservation_release(m->reservation)
                                           : reservation_apply(m->reservation, &want);
                if (r < 0) {
                        m->config = old;
                        log_set_max_level(old->log_level);
                        return log_error_errno(r, "Failed to apply the new reservation, keeping the old "
                                                  "configuration: %m");
                }
                manager_reservation_changed(m);
        }
        config_free(old);
        return 0;
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;
        _cleanup_(config_freep) RtdConfig *n = config_new();
        _cleanup_free_ char *errors = NULL;
        size_t errors_size = 0;
        FILE *err;
        int r;

        (void) sd_notifyf(false, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=Reloading configuration",
                          (unsigned long long) now_usec(CLOCK_MONOTONIC));
        if (!n) {
                log_error("Out of memory while reloading, keeping the old configuration");
                goto done;
        }
        err = open_memstream(&errors, &errors_size);
        if (!err)
                goto done;
        r = config_load(n, m->config_path, err);
        if (r >= 0)
                r = config_validate(n, err);
        fclose(err);
        if (errors && *errors)
                for (char *line = strtok(errors, "\n"); line; line = strtok(NULL, "\n"))
                        log_full(r < 0 ? LOG_ERR : LOG_WARNING, "%s", line);
        if (r < 0) {
                log_struct(LOG_ERR, RTD_MSG_RELOAD_FAILED, NULL,
                           "Configuration reload failed, keeping the old configuration");
                goto done;
        }
        if (apply_reload(m, n) >= 0) {
                n = NULL;       /* now m->config */
                log_struct(LOG_NOTICE, RTD_MSG_RELOADED, NULL, "Configuration reloaded");
        }
done:
        (void) sd_notify(false, "READY=1");
        manager_update_status(m);
        return 0;
}

static int on_sigterm(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        log_info("Received %s, shutting down", strsignal((int) si->ssi_signo));
        m->keep_on_exit = job_manager_exit_keeps(m->jobs);
        (void) sd_notify(false, m->keep_on_exit ? "STOPPING=1\nSTATUS=Restarting: jobs and knobs kept for the next rtd"
                                                : "STOPPING=1\nSTATUS=Stopping: restoring every knob");
        return sd_event_exit(m->event, 0);
}

static int start_listeners(Manager *m) {
        Listeners l;
        pid_t holder = 0;
        int r;

        r = listeners_from_activation(&l);
        if (r < 0)
                return log_error_errno(r, "Failed to receive sockets from systemd: %m");
        reexec_fix_listeners(&l);
        m->socket_activated = l.activated;

        if (l.control < 0) {
                r = listen_unix(m->config, &l.control, &holder);
                if (r == -EADDRINUSE)
                        return log_error_errno(r, "Socket %s is in use by a running process (pid %d); refusing "
                                                  "to steal it. Stop that rtd first, or choose another Socket=.",
                                               m->config->socket_path, (int) holder);
                if (r < 0)
                        return log_error_errno(r, "Failed to listen on %s: %m", m->config->socket_path);
        }
        r = http_new(m, l.control, false, api_find_route, &m->control);
        if (r < 0) {
                listeners_close(&l);
                return log_error_errno(r, "Failed to start the HTTP server on the control socket: %m");
        }
        m->control_listen_fd = l.control;

        if (l.metrics < 0 && m->config->metrics_listen) {
                r = listen_tcp(m->config->metrics_listen, &l.metrics);
                if (r < 0)
                        log_warning_errno(r, "Failed to listen on %s for metrics, continuing without the TCP "
                                             "listener: %m",
                                          m->config->metrics_listen);
        }
        if (l.metrics >= 0) {
                r = http_new(m, l.metrics, true, api_find_route, &m->metrics_http);
                if (r < 0) {
                        (void) close(l.metrics);
                        log_warning_errno(r, "Failed to start the metrics listener, continuing without it: %m");
                } else
                        m->metrics_listen_fd = l.metrics;
        }
        return 0;
}

/*
 * systemd's watchdog (WatchdogSec=10s) runs from the start, not from READY=1, and the loop pings it only once it
 * runs. rtd's start (the BPF load above all) takes about 1.2 s natively and 20-50x that emulated: systemd
 * killed rtd 10.4 s into its start in the TCG guest. A start is bounded by TimeoutStartSec= already, so until
 * READY=1 the watchdog is widened to START_WATCHDOG_USEC, then put back to the unit's value.
 */
#define START_WATCHDOG_USEC (300ULL * 1000 * 1000)

static uint64_t start_watchdog_widen(void) {
        uint64_t usec = 0;

        if (sd_watchdog_enabled(false, &usec) <= 0 || usec >= START_WATCHDOG_USEC)
                return 0;
        (void) sd_notifyf(false, "WATCHDOG=1\nWATCHDOG_USEC=%llu", (unsigned long long) START_WATCHDOG_USEC);
        return usec;
}

int manager_start(Manager *m) {
        uint64_t watchdog_usec = start_watchdog_widen();
        CpuSet cpus;
        int r;

        r = topology_load(m->sys_fd, &m->topology);
        if (r < 0)
                return log_error_errno(r, "Failed to read the CPU topology: %m");
        r = manager_configured_cpus(m, m->config, &cpus);
        if (r < 0)
                return r;

        r = open_own_dir(m->config->runtime_directory, 0755, &m->runtime_fd);
        if (r < 0)
                return r;
        r = open_own_dir(m->config->state_directory, 0711, &m->state_fd);
        if (r < 0)
                return r;
        /* The job store and output live here: nobody lists it, also when an older rtd made it 0755. */
        struct stat st;
        if (fstat(m->state_fd, &st) >= 0 && (st.st_mode & 07777 & ~0711) &&
            fchmod(m->state_fd, st.st_mode & 0711) < 0)
                log_warning_errno(errno, "Failed to make %s mode 0711, ignoring: %m", m->config->state_directory);

        (void) sd_event_add_signal(m->event, NULL, SIGTERM, on_sigterm, m);
        (void) sd_event_add_signal(m->event, NULL, SIGINT, on_sigterm, m);
        (void) sd_event_add_signal(m->event, NULL, SIGHUP, on_sighup, m);
        (void) reexec_attach(m);
        r = sd_event_set_watchdog(m->event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable the watchdog, ignoring: %m");

        r = metrics_new(m, &m->metrics);
        if (r < 0)
                return log_error_errno(r, "Failed to set up metrics: %m");
        manager_hand_metrics_exporters(m);
        metrics_set_program_stats(m->metrics, m->config->program_stats);
        /* rtd and what it forks (workers, and through them each job until it is marked) are rtd's own, never
         * intruders: the mark is inherited at fork, so a worker is covered before it first runs. */
        (void) metrics_track_task(m->metrics, getpid(), 0, 0);
        r = reservation_new(m, &m->reservation);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the reservation: %m");
        r = job_manager_new(m, &m->jobs);
        if (r < 0)
                return log_error_errno(r, "Failed to set up jobs: %m");

        r = reservation_start(m->reservation, &cpus);
        if (r < 0)
                return log_error_errno(r, "Failed to reserve CPUs: %m");
        manager_reservation_changed(m);
        /* After the reservation: a lease of a previous run is adopted only where it does not overlap it. */
        r = leases_new(m, &m->leases);
        if (r < 0)
                return log_error_errno(r, "Failed to set up leases: %m");
        manager_leases_changed(m);

        r = start_listeners(m);
        if (r < 0)
                return r;

        if (watchdog_usec > 0)
                (void) sd_notifyf(false, "READY=1\nWATCHDOG=1\nWATCHDOG_USEC=%llu", (unsigned long long) watchdog_usec);
        else
                (void) sd_notify(false, "READY=1");
        manager_update_status(m);
        reexec_ready(m);
        log_struct(LOG_NOTICE, RTD_MSG_STARTED, NULL, "rtd %s started, listening on %s%s", RTD_VERSION,
                   m->config->socket_path, m->socket_activated ? " (socket-activated)" : "");
        return 0;
}

int manager_run(Manager *m) {
        int r = sd_event_loop(m->event);
        return r < 0 ? r : 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        /* Stop taking requests, then jobs, then give the CPUs back, then metrics. */
        m->metrics_http = http_free(m->metrics_http);
        /* A socket we bound ourselves goes with us; systemd owns an activated one. */
        if (m->control && !m->socket_activated && !m->handing_over)
                (void) unlink(m->config->socket_path);
        m->control = http_free(m->control);
        m->jobs = job_manager_free(m->jobs);
        /* A restart under systemd (keep_on_exit) and a re-exec (handing_over) leave every knob and the journal
         * to the next rtd, which adopts them (no blip). */
        if (m->reservation && !m->keep_on_exit && !m->handing_over) {
                int r = reservation_release(m->reservation);
                if (r < 0)
                        log_error_errno(r, "Failed to restore some knobs; the restore journal in %s is kept for "
                                           "'rtd --restore': %m",
                                        m->config->runtime_directory);
        }
        m->reservation = reservation_free(m->reservation);
        /* Active leases stay (their jobs run on): the next run adopts them; freed after the reservation's
         * release, whose last walk leaves their trees and CPUs alone. */
        m->leases = leases_free(m->leases);
        m->metrics = metrics_free(m->metrics);
        m->topology = topology_free(m->topology);
        m->event = sd_event_unref(m->event);
        safe_close(m->proc_fd);
        safe_close(m->sys_fd);
        safe_close(m->runtime_fd);
        safe_close(m->state_fd);
        free(m->config_path);
        config_free(m->config);
        free(m);
        return NULL;
}
