/* SPDX-License-Identifier: MIT */
/* Leases: CPUs quieted for a process tree rtd did not start, until its root exits (pidfd), persisted in
 * RuntimeDirectory=/leases so the next run re-adopts them. The knobs are lease-quiet.c's. */
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
#include "host/topology.h"
#include "lease-internal.h"
#include "shared/fileio.h"
#include "shared/log.h"

#define STORE_FILE "leases.json"

static Lease *lease_free(Lease *x) {
        if (!x)
                return NULL;
        sd_event_source_disable_unref(x->exit_source);
        safe_close(x->pidfd);
        free(x->user);
        free(x->policy);
        free(x->end_reason);
        free(x->base);
        json_decref(x->final_metrics);
        json_decref(x->tree_metrics);
        free(x);
        return NULL;
}

static Lease *lease_alloc(void) {
        Lease *x = calloc(1, sizeof *x);
        if (x)
                x->pidfd = -EBADF;
        return x;
}

uint64_t lease_id(const Lease *x) {
        return x->id;
}

const char *lease_owner(const Lease *x) {
        return x->owner;
}

bool lease_quieted(const Lease *x) {
        return x->quieted;
}

void lease_quiet_notify(Lease *x) {
        LeaseQuietFn fn = x->quiet_fn;

        x->quiet_fn = NULL;
        if (fn)
                fn(x, x->quiet_userdata);
}

void lease_on_quieted(Lease *x, LeaseQuietFn fn, void *userdata) {
        x->quiet_fn = fn;
        x->quiet_userdata = userdata;
        if (fn && (x->quieted || !x->active))
                lease_quiet_notify(x);
}

bool lease_is_active(const Lease *x) {
        return x->active;
}

uid_t lease_uid(const Lease *x) {
        return x->uid;
}

unsigned leases_active(Leases *l) {
        return l ? (unsigned) l->n_active : 0;
}

void leases_cpus(Leases *l, CpuSet *ret) {
        cpuset_zero(ret);
        for (size_t i = 0; l && i < l->n_active; i++)
                cpuset_or(ret, ret, &l->active[i]->cpus);
}

size_t leases_pids(Leases *l, pid_t *ret, size_t max) {
        size_t n = 0;

        for (size_t i = 0; l && i < l->n_active && n < max; i++)
                ret[n++] = l->active[i]->pid;
        return n;
}

Lease *leases_overlap(Leases *l, const CpuSet *cpus) {
        for (size_t i = 0; l && i < l->n_active; i++)
                if (cpuset_intersects(&l->active[i]->cpus, cpus))
                        return l->active[i];
        return NULL;
}

Lease *lease_find(Leases *l, uint64_t id) {
        for (size_t i = 0; i < l->n_active; i++)
                if (l->active[i]->id == id)
                        return l->active[i];
        for (size_t i = 0; i < l->n_ended; i++)
                if (l->ended[i]->id == id)
                        return l->ended[i];
        return NULL;
}

static json_t *cpus_json(const CpuSet *s) {
        _cleanup_free_ char *str = NULL;
        return json_string(cpuset_format(s, &str) >= 0 ? str : "");
}

static json_t *time_json(uint64_t sec) {
        char buf[64];
        struct tm tm;
        time_t t = (time_t) sec;

        if (!gmtime_r(&t, &tm) || strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                return json_null();
        return json_string(buf);
}

/* The record that survives a restart. */
static json_t *lease_record(const Lease *x) {
        return json_pack("{s:I, s:o, s:s, s:i, s:I, s:i, s:s?, s:i, s:s?, s:I}", "id", (json_int_t) x->id,
                         "cpus", cpus_json(&x->cpus), "owner", x->owner, "pid", (int) x->pid, "starttime",
                         (json_int_t) x->starttime, "uid", (int) x->uid, "user", x->user, "priority",
                         (int) x->priority, "policy", x->policy, "created", (json_int_t) x->created);
}

json_t *lease_to_json(Leases *l, const Lease *x) {
        const RtdConfig *c = l->manager->config;
        json_t *o = lease_record(x);

        if (!o)
                return NULL;
        json_object_del(o, "starttime");
        json_object_set_new(o, "priority", x->priority ? json_integer(x->priority) : json_null());
        json_object_set_new(o, "policy", x->policy ? json_string(x->policy) : json_null());
        json_object_set_new(o, "max_priority", json_integer(c->max_priority));
        json_object_set_new(o, "state", json_string(x->active ? "active" : "released"));
        json_object_set_new(o, "created", time_json(x->created));
        json_object_set_new(o, "created_unix", json_integer((json_int_t) x->created));
        json_object_set_new(o, "adopted", json_boolean(x->adopted));
        json_object_set_new(o, "quieted", json_boolean(x->quieted));
        uint64_t end = x->active ? (uint64_t) time(NULL) : x->ended;
        json_object_set_new(o, "age_sec", json_integer((json_int_t) (end > x->created ? end - x->created : 0)));
        if (!x->active) {
                json_object_set_new(o, "ended", time_json(x->ended));
                json_object_set_new(o, "end_reason", json_string(x->end_reason ?: ""));
        }
        json_object_set_new(o, "metrics", lease_metrics_json(l, x));
        return o;
}

json_t *leases_to_json(Leases *l) {
        json_t *a = json_array();

        for (size_t i = 0; l && i < l->n_active; i++)
                json_array_append_new(a, lease_to_json(l, l->active[i]));
        for (size_t i = l ? l->n_ended : 0; i-- > 0;)
                json_array_append_new(a, lease_to_json(l, l->ended[i]));
        json_t *o = json_pack("{s:o, s:i, s:i}", "leases", a, "active", (int) leases_active(l), "max", LEASES_MAX);
        if (o && l && l->n_active > 0)
                json_object_set_new(o, "quiet", json_pack("{s:{s:i, s:i, s:I, s:I}, s:o}", "tasks", "moved",
                                                          (int) l->tasks_moved, "refused", (int) l->tasks_refused,
                                                          "drifted", (json_int_t) l->tasks_drifted, "drift_checks",
                                                          (json_int_t) l->drift_checks, "irqs",
                                                          irq_state_to_json(&l->irq)));
        if (o && l && l->n_active > 0)
                json_object_set_new(json_object_get(json_object_get(o, "quiet"), "tasks"), "walks_cut_short",
                                    json_integer((json_int_t) l->walks_cut_short));
        if (o && l && l->start)
                json_object_set(o, "start", l->start);
        if (o && l && l->last_restore)
                json_object_set(o, "last_restore", l->last_restore);
        return o;
}

static int store_save(Leases *l) {
        _cleanup_free_ char *text = NULL;
        json_t *a = json_array(), *o;

        for (size_t i = 0; i < l->n_active; i++)
                json_array_append_new(a, lease_record(l->active[i]));
        o = json_pack("{s:i, s:I, s:o}", "version", 1, "next_id", (json_int_t) l->next_id, "leases", a);
        if (!o)
                return -ENOMEM;
        text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(o);
        if (!text)
                return -ENOMEM;
        return write_file_atomic_at(l->dir_fd, STORE_FILE, text, strlen(text), 0600);
}

int lease_pid_starttime(int proc_fd, pid_t pid, uint64_t *ret) {
        _cleanup_free_ char *text = NULL;
        char path[32];
        unsigned long long st;
        int r;

        snprintf(path, sizeof path, "%d/stat", (int) pid);
        r = read_full_file_at(proc_fd, path, &text, NULL);
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;
        const char *close = strrchr(text, ')');
        /* After ") ": state is field 3, starttime field 22. */
        if (!close || sscanf(close + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                                        "%*d %*d %llu", &st) != 1)
                return -EINVAL;
        if (close[2] == 'Z' || close[2] == 'X')
                return -ESRCH;  /* exited, not yet reaped: as good as gone */
        *ret = st;
        return 0;
}

static void lease_move_to_ended(Leases *l, Lease *x) {
        for (size_t i = 0; i < l->n_active; i++)
                if (l->active[i] == x) {
                        memmove(&l->active[i], &l->active[i + 1], (l->n_active - i - 1) * sizeof *l->active);
                        l->n_active--;
                        break;
                }
        if (l->n_ended == LEASES_ENDED_KEPT) {
                lease_free(l->ended[0]);
                memmove(&l->ended[0], &l->ended[1], (LEASES_ENDED_KEPT - 1) * sizeof *l->ended);
                l->n_ended--;
        }
        l->ended[l->n_ended++] = x;
}

int lease_release(Leases *l, Lease *x, const char *reason) {
        _cleanup_free_ char *list = NULL;
        int r;

        if (!x->active)
                return 0;
        /* The figures as they end, then the CPUs back. */
        metrics_refresh(l->manager->metrics);
        x->final_metrics = lease_metrics_json(l, x);
        x->tree_metrics = metrics_job_finish(l->manager->metrics, LEASE_JOB_ID_BASE + x->id);
        if (x->final_metrics && x->tree_metrics)
                json_object_set(x->final_metrics, "tree", x->tree_metrics);
        x->active = false;
        x->ended = (uint64_t) time(NULL);
        x->end_reason = strdup(reason);
        x->exit_source = sd_event_source_disable_unref(x->exit_source);
        x->pidfd = safe_close(x->pidfd);
        lease_move_to_ended(l, x);

        r = leases_quiet(l, false);
        (void) store_save(l);
        manager_leases_changed(l->manager);
        (void) cpuset_format(&x->cpus, &list);
        log_notice("Lease %" PRIu64 " (%s, CPUs %s) released: %s%s", x->id, x->owner, strempty(list), reason,
                   r < 0 ? "; some knobs could not be restored (see rtd --restore)" : "");
        lease_quiet_notify(x);          /* ended before it was quiet: its waiter answers with that */
        return r;
}

static int on_pid_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Lease *x = userdata;
        char reason[64];

        (void) s;
        (void) fd;
        (void) revents;
        snprintf(reason, sizeof reason, "its process %d exited", (int) x->pid);
        (void) lease_release(x->leases, x, reason);
        return 0;
}

static int pidfd_open_(pid_t pid) {
        return (int) syscall(SYS_pidfd_open, pid, 0);
}

/* Bind x to its root's pidfd; the pid must still be the process it was (pid + starttime). */
static int lease_watch(Leases *l, Lease *x) {
        uint64_t st;
        int r;

        x->pidfd = pidfd_open_(x->pid);
        if (x->pidfd < 0)
                return errno == ESRCH ? -ESRCH : -errno;
        /* Checked after the pidfd exists: a pid reused in between would otherwise be watched instead. */
        r = lease_pid_starttime(l->proc_fd, x->pid, &st);
        if (r < 0)
                return r;
        if (st != x->starttime)
                return -ESRCH;
        return sd_event_add_io(l->manager->event, &x->exit_source, x->pidfd, EPOLLIN, on_pid_exit, x);
}

static void lease_activate(Leases *l, Lease *x) {
        l->active[l->n_active++] = x;
        x->active = true;
        lease_walk_begin(l, x);
        lease_track(l, x);
        lease_metrics_baseline(l, x);
}

#define REFUSE(status, ...)                                              \
        ({                                                               \
                *ret_status = (status);                                  \
                if (asprintf(ret_error, __VA_ARGS__) < 0)                \
                        *ret_error = NULL;                               \
                -EINVAL;                                                 \
        })

static int check_cpus(Leases *l, const CpuSet *cpus, int *ret_status, char **ret_error) {
        Manager *m = l->manager;
        const Topology *t = m->topology;
        _cleanup_free_ char *a = NULL, *b = NULL;
        CpuSet bad, reserved, leased, hk;
        Lease *other;

        manager_reserved_cpus(m, &reserved);
        leases_cpus(l, &leased);
        if (cpuset_is_empty(cpus))
                return REFUSE(400, "cpus: the list is empty; name the CPUs the job was given, such as \"2-3\"");
        if (cpuset_andnot(&bad, cpus, &t->online), !cpuset_is_empty(&bad)) {
                (void) cpuset_format(&bad, &a);
                (void) cpuset_format(&t->online, &b);
                return REFUSE(400, "cpus: CPU %s is not online; online CPUs are %s", strempty(a), strempty(b));
        }
        if (cpuset_and(&bad, cpus, &reserved), !cpuset_is_empty(&bad)) {
                (void) cpuset_format(&bad, &a);
                (void) cpuset_format(&reserved, &b);
                return REFUSE(409, "cpus: CPU %s is in rtd's own reservation (CPUs %s), where rtd runs its own "
                                   "jobs; lease other CPUs, or shrink or release the reservation first (rtctl "
                                   "release)", strempty(a), strempty(b));
        }
        other = leases_overlap(l, cpus);
        if (other) {
                cpuset_and(&bad, cpus, &other->cpus);
                (void) cpuset_format(&bad, &a);
                return REFUSE(409, "cpus: CPU %s is leased already, by lease %" PRIu64 " of owner %s (pid %d); "
                                   "wait until it ends or lease other CPUs", strempty(a), other->id, other->owner,
                              (int) other->pid);
        }
        cpuset_andnot(&hk, &t->online, &reserved);
        cpuset_andnot(&hk, &hk, &leased);
        cpuset_andnot(&hk, &hk, cpus);
        if (cpuset_is_empty(&hk))
                return REFUSE(409, "cpus: leasing them would leave no housekeeping CPU for the system and rtd; "
                                   "keep at least one online CPU out of every lease and the reservation");
        if (l->n_active >= LEASES_MAX)
                return REFUSE(409, "too many leases: %d are active, the most rtd keeps", LEASES_MAX);
        return 0;
}

static int check_pid(Leases *l, const LeaseRequest *req, uint64_t *ret_starttime, int *ret_status,
                     char **ret_error) {
        char path[32];
        struct stat sb;
        int r;

        if (req->pid <= 1)
                return REFUSE(400, "pid: %d is not a process tree rtd can lease for; give the root of the job's "
                                   "process tree (slurmstepd), a pid above 1", (int) req->pid);
        if (req->pid == getpid())
                return REFUSE(422, "pid: %d is rtd itself", (int) req->pid);
        r = lease_pid_starttime(l->proc_fd, req->pid, ret_starttime);
        snprintf(path, sizeof path, "%d", (int) req->pid);
        if (r == -ESRCH || (r >= 0 && fstatat(l->proc_fd, path, &sb, 0) < 0))
                return REFUSE(422, "pid: no process %d is running (as rtd sees it, in its PID namespace); the "
                                   "lease ends when that process exits, so it must exist first", (int) req->pid);
        if (r < 0)
                return r;
        /* A LeaseGroup= member may quiet CPUs only for its own processes. */
        if (!req->admin && sb.st_uid != req->uid)
                return REFUSE(403, "pid: process %d belongs to uid %u, not to you (uid %u); a LeaseGroup= member "
                                   "may lease only for its own processes, root and AdminGroup= members for any",
                              (int) req->pid, (unsigned) sb.st_uid, (unsigned) req->uid);
        return 0;
}

int lease_create(Leases *l, const LeaseRequest *req, Lease **ret, int *ret_status, char **ret_error) {
        const RtdConfig *c = l->manager->config;
        _cleanup_free_ char *list = NULL;
        uint64_t starttime = 0;
        Lease *x;
        int r;

        *ret_error = NULL;
        *ret_status = 500;
        if (req->priority > c->max_priority)
                return REFUSE(403, "priority: %u is above [Access] MaxPriority=%u, the highest real-time priority "
                                   "this machine allows; ask for at most %u", req->priority, c->max_priority,
                              c->max_priority);
        r = check_cpus(l, &req->cpus, ret_status, ret_error);
        if (r < 0)
                return r;
        r = check_pid(l, req, &starttime, ret_status, ret_error);
        if (r < 0)
                return r;

        x = lease_alloc();
        if (!x)
                return -ENOMEM;
        x->leases = l;
        x->id = l->next_id++;
        x->cpus = req->cpus;
        snprintf(x->owner, sizeof x->owner, "%s", req->owner);
        x->pid = req->pid;
        x->starttime = starttime;
        x->uid = req->uid;
        x->user = req->user ? strdup(req->user) : NULL;
        x->priority = req->priority;
        x->policy = req->priority ? strdup(req->policy ?: "fifo") : NULL;
        x->created = (uint64_t) time(NULL);
        r = lease_watch(l, x);
        if (r < 0) {
                lease_free(x);
                if (r == -ESRCH)
                        return REFUSE(422, "pid: process %d exited before rtd could watch it", (int) req->pid);
                return r;
        }
        lease_activate(l, x);
        /* On record before any knob changes: a crash in between leaves a lease the next run releases. */
        r = store_save(l);
        if (r >= 0)
                r = leases_quiet(l, false);
        if (r < 0) {
                log_warning_errno(r, "Could not quiet CPUs for lease %" PRIu64 ": %m", x->id);
                (void) lease_release(l, x, "quieting its CPUs failed");
                *ret_status = 500;
                if (asprintf(ret_error, "the CPUs could not be quieted (%s); see rtd's log; every knob already "
                                        "changed was put back", strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        leases_drift_timer_arm(l);
        manager_leases_changed(l->manager);
        (void) cpuset_format(&x->cpus, &list);
        log_notice("Lease %" PRIu64 ": CPUs %s quiet for %s (pid %d, uid %u)", x->id, strempty(list), x->owner,
                   (int) x->pid, (unsigned) x->uid);
        *ret = x;
        return 0;
}

/* One record of a previous run: re-adopted when its root still runs and its CPUs are still free. */
static void adopt(Leases *l, json_t *rec) {
        const char *cpus = json_string_value(json_object_get(rec, "cpus")),
                   *owner = json_string_value(json_object_get(rec, "owner"));
        CpuSet set, reserved;
        uint64_t st;
        Lease *x = lease_alloc();

        if (!x)
                return;
        x->leases = l;
        x->id = (uint64_t) json_integer_value(json_object_get(rec, "id"));
        x->pid = (pid_t) json_integer_value(json_object_get(rec, "pid"));
        x->starttime = (uint64_t) json_integer_value(json_object_get(rec, "starttime"));
        x->uid = (uid_t) json_integer_value(json_object_get(rec, "uid"));
        x->priority = (unsigned) json_integer_value(json_object_get(rec, "priority"));
        x->created = (uint64_t) json_integer_value(json_object_get(rec, "created"));
        x->user = json_string_value(json_object_get(rec, "user")) ? strdup(json_string_value(json_object_get(rec, "user"))) : NULL;
        x->policy = json_string_value(json_object_get(rec, "policy")) ? strdup(json_string_value(json_object_get(rec, "policy"))) : NULL;
        snprintf(x->owner, sizeof x->owner, "%s", owner ?: "?");
        if (!cpus || cpuset_parse(cpus, &set, NULL) < 0 || x->id == 0) {
                log_warning("Dropping an unreadable lease record");
                lease_free(x);
                return;
        }
        x->cpus = set;
        x->adopted = true;
        l->next_id = MAX(l->next_id, x->id + 1);
        manager_reserved_cpus(l->manager, &reserved);
        const char *why = NULL;
        if (lease_pid_starttime(l->proc_fd, x->pid, &st) < 0 || st != x->starttime)
                why = "its process exited while rtd was not running";
        else if (cpuset_intersects(&set, &reserved))
                why = "its CPUs are rtd's own reservation now";
        else if (leases_overlap(l, &set))
                why = "its CPUs overlap another adopted lease";
        else if (lease_watch(l, x) < 0)
                why = "its process exited while rtd was starting";
        if (why) {
                x->pidfd = safe_close(x->pidfd);
                x->ended = (uint64_t) time(NULL);
                x->end_reason = strdup(why);
                lease_move_to_ended(l, x);
                log_notice("Lease %" PRIu64 " (%s) of a previous run released: %s", x->id, x->owner, why);
                return;
        }
        lease_activate(l, x);
        log_notice("Lease %" PRIu64 " (%s, pid %d) of a previous run adopted", x->id, x->owner, (int) x->pid);
}

int leases_new(Manager *m, Leases **ret) {
        _cleanup_(leases_freep) Leases *l = NULL;
        _cleanup_free_ char *problem = NULL, *text = NULL;
        json_t *store;
        int r;

        l = calloc(1, sizeof *l);
        if (!l)
                return -ENOMEM;
        l->dir_fd = -EBADF;
        l->manager = m;
        l->proc_fd = m->proc_fd;
        l->sys_fd = m->sys_fd;
        l->next_id = 1;
        l->walk_budget_usec = leases_walk_budget();
        l->active = calloc(LEASES_MAX, sizeof *l->active);
        if (!l->active)
                return -ENOMEM;
        if (mkdirat(m->runtime_fd, LEASES_DIR, 0755) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Could not create %s/" LEASES_DIR ": %m",
                                       m->config->runtime_directory);
        l->dir_fd = openat(m->runtime_fd, LEASES_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (l->dir_fd < 0)
                return log_error_errno(errno, "Could not open %s/" LEASES_DIR ": %m", m->config->runtime_directory);
        r = journal_load(l->dir_fd, &l->journal, &problem);
        if (r < 0)
                return log_error_errno(r, "Could not read the leases' restore journal: %m");
        if (problem)
                log_warning("Leases: %s", problem);
        if (r == 0 && !(l->journal = journal_new(l->dir_fd)))
                return -ENOMEM;

        r = read_full_file_at(l->dir_fd, STORE_FILE, &text, NULL);
        if (r >= 0 && (store = json_loads(text, 0, NULL))) {
                size_t i;
                json_t *rec;
                l->next_id = MAX((uint64_t) 1, (uint64_t) json_integer_value(json_object_get(store, "next_id")));
                json_array_foreach(json_object_get(store, "leases"), i, rec)
                        if (l->n_active < LEASES_MAX)
                                adopt(l, rec);
                json_decref(store);
        } else if (r >= 0)
                log_warning("Leases: %s/" LEASES_DIR "/" STORE_FILE " does not parse; its leases are released",
                            m->config->runtime_directory);
        /* Adopted leases get only what drifted while no rtd watched; without any, the journal goes back. */
        uint64_t writes0 = knob_writes();
        r = leases_quiet(l, false);
        if (r < 0)
                log_warning_errno(r, "Leases: could not re-apply or restore every knob: %m");
        l->start = json_pack("{s:i, s:i, s:I}", "adopted", (int) l->n_active, "released", (int) l->n_ended,
                             "knob_writes", (json_int_t) (knob_writes() - writes0));
        (void) store_save(l);
        leases_drift_timer_arm(l);
        *ret = TAKE_PTR(l);
        return 0;
}

Leases *leases_free(Leases *l) {
        if (!l)
                return NULL;
        sd_event_source_disable_unref(l->drift_timer);
        sd_event_source_disable_unref(l->walk_more);
        for (size_t i = 0; i < l->n_active; i++)
                lease_free(l->active[i]);
        for (size_t i = 0; i < l->n_ended; i++)
                lease_free(l->ended[i]);
        free(l->active);
        journal_free(l->journal);
        irq_state_done(&l->irq);
        json_decref(l->last_restore);
        json_decref(l->start);
        safe_close(l->dir_fd);
        free(l);
        return NULL;
}

int leases_restore_only(int proc_fd, int sys_fd, int runtime_fd) {
        _cleanup_(journal_freep) Journal *j = NULL;
        _cleanup_free_ char *problem = NULL;
        _cleanup_close_ int fd = openat(runtime_fd, LEASES_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        ReplayReport rep = {};
        int r;

        if (fd < 0)
                return 0;
        r = journal_load(fd, &j, &problem);
        if (r <= 0)
                return r;
        /* systemd runs this after every stop (ExecStopPost=): a lease whose job still runs stays in force for
         * the next rtd to adopt. Only when no leased tree is left does everything go back. */
        unsigned live = 0;
        _cleanup_free_ char *text = NULL;
        json_t *store = read_full_file_at(fd, STORE_FILE, &text, NULL) >= 0 ? json_loads(text, 0, NULL) : NULL;
        size_t i;
        json_t *rec;
        json_array_foreach(json_object_get(store, "leases"), i, rec) {
                uint64_t st;
                if (lease_pid_starttime(proc_fd, (pid_t) json_integer_value(json_object_get(rec, "pid")), &st) >= 0 &&
                    st == (uint64_t) json_integer_value(json_object_get(rec, "starttime")))
                        live++;
        }
        json_decref(store);
        if (live > 0) {
                log_notice("Leases: %u lease%s still ha%s a running process tree; its knobs stay for the next rtd "
                           "to adopt (or end those processes and run rtd --restore again)", live,
                           live == 1 ? "" : "s", live == 1 ? "s" : "ve");
                return 0;
        }
        r = journal_replay(j, proc_fd, sys_fd, &rep);
        log_notice("Leases' restore journal replayed: %u restored, %u skipped, %u failed", rep.restored,
                   rep.skipped, rep.failed);
        replay_report_done(&rep);
        if (r >= 0) {
                (void) journal_remove(j);
                (void) unlinkat(fd, STORE_FILE, 0);
        }
        return r;
}
