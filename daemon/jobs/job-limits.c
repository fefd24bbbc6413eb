/* SPDX-License-Identifier: MIT */
/*
 * Job limits (issue 11, point 4): the limits a job may ask for (only below the configured ones unless an
 * admin asks), the login-like rlimits its child gets instead of rtd's own, and pids.max/memory.max in its
 * cgroup: cgroup v2 where the job's parent cgroup has the controllers, else the v1 pids and memory
 * hierarchies of a hybrid host, else none (and /v1/status says so).
 */
#include <ctype.h>
#include <grp.h>
#include <pwd.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "job-limits.h"
#include "shared/parse-util.h"
#include "shared/fileio.h"
#include "shared/macro.h"

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

/* ---- what a caller may ask for ---- */

static int refuse(char **rf, char **re, const char *field, const char *fmt, ...) _printf_(4, 5);
static int refuse(char **rf, char **re, const char *field, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(re, fmt, ap) < 0)
                *re = NULL;
        va_end(ap);
        *rf = strdup(field);
        return -EPERM;
}

typedef struct LimitField {
        const char *field, *key;
        size_t spec_offset, cfg_offset;
} LimitField;

static const LimitField limit_fields[] = {
        { "max_output_bytes", "MaxOutputBytes", offsetof(JobSpec, max_output_bytes), offsetof(RtdConfig, max_output_bytes) },
        { "max_tasks", "MaxTasks", offsetof(JobSpec, max_tasks), offsetof(RtdConfig, max_tasks) },
        { "max_memory_bytes", "MaxMemory", offsetof(JobSpec, max_memory_bytes), offsetof(RtdConfig, max_memory) },
};

int job_limits_resolve(const RtdConfig *cfg, JobSpec *spec, bool admin, char **rf, char **re) {
        uint64_t eff[ELEMENTSOF(limit_fields)];

        /* Checks first, changes after: a refusal leaves the spec as it came. */
        for (size_t i = 0; i < ELEMENTSOF(limit_fields); i++) {
                const LimitField *f = &limit_fields[i];
                uint64_t want = *(const uint64_t *) ((const char *) spec + f->spec_offset);
                uint64_t limit = *(const uint64_t *) ((const char *) cfg + f->cfg_offset);

                if (want > 0 && !admin && limit != CONFIG_INFINITY && want > limit)
                        return refuse(rf, re, f->field, "%" PRIu64 " is above the limit for non-admins ([Jobs] "
                                      "%s=%" PRIu64 "); ask for at most %" PRIu64 " or leave it out", want, f->key,
                                      limit, limit);
                /* Stored as the limit in force; 0 = none. */
                eff[i] = want > 0 ? want : limit == CONFIG_INFINITY ? 0 : limit;
        }
        if (!admin && spec->queue_priority > (int) cfg->max_queue_priority)
                return refuse(rf, re, "queue_priority", "%d is above the limit for non-admins ([Access] "
                              "MaxQueuePriority=%u); use at most %u (lower values are always allowed)",
                              spec->queue_priority, cfg->max_queue_priority, cfg->max_queue_priority);

        for (size_t i = 0; i < ELEMENTSOF(limit_fields); i++)
                *(uint64_t *) ((char *) spec + limit_fields[i].spec_offset) = eff[i];
        if (spec->timeout_s <= 0 && cfg->default_timeout_sec > 0)
                spec->timeout_s = cfg->default_timeout_sec;
        return 0;
}

/* ---- rlimits ---- */

/*
 * A fresh login's limits are the kernel's defaults for init (include/asm-generic/resource.h, INIT_RLIMITS),
 * not rtd's (a service manager gives rtd LimitNOFILE=65536 and the like): NOFILE 1024/4096, STACK 8 MiB,
 * CORE 0 (hard unlimited), MEMLOCK 8 MiB, MSGQUEUE 800 KiB, NICE and RTPRIO 0, NPROC and SIGPENDING half of
 * threads-max. On top: FSIZE is the output cap (soft = hard, so the job cannot lift it), RTPRIO the job's
 * own priority (it may give its threads any priority up to its own, not above), and RTTIME unlimited: a
 * job on a reserved CPU is meant to run without sleeping; its timeout and the starvation guard bound it.
 */
void job_limits_rlimits(const JobLimits *l, const JobSpec *spec, unsigned rt_priority,
                        WorkerRlimit ret[WORKER_RLIMITS]) {
        const uint64_t inf = RLIM64_INFINITY;
        uint64_t half_threads = l && l->threads_max > 1 ? l->threads_max / 2 : 4096;
        uint64_t fsize = spec->max_output_bytes > 0 ? spec->max_output_bytes : inf;

        for (int i = 0; i < WORKER_RLIMITS; i++)
                ret[i] = (WorkerRlimit){ inf, inf };
        ret[RLIMIT_FSIZE] = (WorkerRlimit){ fsize, fsize };
        ret[RLIMIT_STACK] = (WorkerRlimit){ 8u << 20, inf };
        ret[RLIMIT_CORE] = (WorkerRlimit){ 0, inf };
        ret[RLIMIT_NPROC] = (WorkerRlimit){ half_threads, half_threads };
        ret[RLIMIT_NOFILE] = (WorkerRlimit){ 1024, 4096 };
        ret[RLIMIT_MEMLOCK] = (WorkerRlimit){ 8u << 20, 8u << 20 };
        ret[RLIMIT_SIGPENDING] = (WorkerRlimit){ half_threads, half_threads };
        ret[RLIMIT_MSGQUEUE] = (WorkerRlimit){ 819200, 819200 };
        ret[RLIMIT_NICE] = (WorkerRlimit){ 0, 0 };
        ret[RLIMIT_RTPRIO] = (WorkerRlimit){ rt_priority, rt_priority };
}

/* ---- cgroups ---- */

/* The path of the v1 hierarchy holding controller in /proc/self/cgroup text ("4:memory:/a/b"). */
int job_limits_parse_v1_self(const char *text, const char *controller, char **ret_path) {
        size_t cl = strlen(controller);

        for (const char *line = text; line && *line;) {
                const char *end = strchrnul(line, '\n'), *c = strchr(line, ':'), *p;
                if (c && c < end && (p = memchr(c + 1, ':', (size_t) (end - c - 1)))) {
                        /* controllers: a comma-separated list between the two colons */
                        for (const char *w = c + 1; w < p;) {
                                size_t wl = strcspn(w, ",:");
                                if (wl == cl && strneq(w, controller, cl)) {
                                        *ret_path = strndup(p + 1, (size_t) (end - p - 1));
                                        return *ret_path ? 0 : -ENOMEM;
                                }
                                w += wl + 1;
                        }
                }
                line = *end ? end + 1 : NULL;
        }
        return -ENOENT;
}

static int open_v1(int proc_fd, int sys_fd, const char *controller, const char *self, char **ret_path) {
        _cleanup_free_ char *own = NULL, *rel = NULL;
        struct statfs sfs;
        int fd;

        if (job_limits_parse_v1_self(self, controller, &own) < 0)
                return -ENOENT;
        if (asprintf(&rel, "fs/cgroup/%s%s", controller, streq(own, "/") ? "" : own) < 0)
                return -ENOMEM;
        fd = openat(sys_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstatfs(fd, &sfs) < 0 || sfs.f_type != CGROUP_SUPER_MAGIC) {
                safe_close(fd);
                return -ENOENT;
        }
        (void) proc_fd;
        if (asprintf(ret_path, "/sys/%s", rel) < 0) {
                safe_close(fd);
                return -ENOMEM;
        }
        return fd;
}

/* Job cgroups of an earlier run of this store's rtd that are empty now; running jobs' ones stay (EBUSY). */
static void remove_stale(int dir_fd, const char *instance) {
        _cleanup_closedir_ DIR *d = dir_fd >= 0 ? opendir_at(dir_fd, ".") : NULL;
        _cleanup_free_ char *prefix = NULL;
        struct dirent *de;

        if (!d)
                return;
        if (asprintf(&prefix, "rtd-%s-job-", instance) >= 0)
                while ((de = readdir(d)))
                        if (startswith(de->d_name, prefix))
                                (void) unlinkat(dir_fd, de->d_name, AT_REMOVEDIR);
}

void job_limits_setup(int proc_fd, int sys_fd, const char *instance, JobLimits *ret) {
        _cleanup_free_ char *self = NULL, *tm = NULL;
        int fd;

        *ret = (JobLimits){ .v1_pids_fd = -EBADF, .v1_memory_fd = -EBADF };
        if (read_one_line_at(proc_fd, "sys/kernel/threads-max", &tm) >= 0)
                (void) safe_atou64(tm, &ret->threads_max);
        if (read_full_file_at(proc_fd, "self/cgroup", &self, NULL) < 0)
                return;
        fd = open_v1(proc_fd, sys_fd, "pids", self, &ret->v1_pids_path);
        if (fd >= 0)
                ret->v1_pids_fd = fd;
        fd = open_v1(proc_fd, sys_fd, "memory", self, &ret->v1_memory_path);
        if (fd >= 0) {
                struct stat st;
                ret->v1_memory_fd = fd;
                ret->v1_memsw = fstatat(fd, "memory.memsw.limit_in_bytes", &st, 0) >= 0;
        }
        remove_stale(ret->v1_pids_fd, instance);
        remove_stale(ret->v1_memory_fd, instance);
}

void job_limits_done(JobLimits *l) {
        job_limits_retry_leftovers(l);
        for (size_t i = 0; i < l->n_leftovers; i++)
                free(l->leftovers[i]);
        free(l->leftovers);
        safe_close(l->v1_pids_fd);
        safe_close(l->v1_memory_fd);
        free(l->v1_pids_path);
        free(l->v1_memory_path);
        free(l->v2_note);
        *l = (JobLimits){ .v1_pids_fd = -EBADF, .v1_memory_fd = -EBADF };
}

static bool has_file(int dir_fd, const char *name) {
        struct stat st;
        return fstatat(dir_fd, name, &st, 0) >= 0;
}

/*
 * Enable a controller for the job cgroups' parent, only where that parent holds no process of its own (or is
 * the root, which may mix): there cgroup v2 refuses a domain controller (memory: EBUSY), and a threaded one
 * (pids) would make the parent a thread root, after which no process could enter a job's (domain) cgroup
 * at all (EOPNOTSUPP). Under rtd's current layout (rtd or its workers in that parent) the limit is then not
 * enforced, and status says why.
 */
static void v2_enable(JobLimits *l, int parent_fd, const char *controller) {
        _cleanup_free_ char *procs = NULL, *avail = NULL;
        char word[32];
        int r;

        /* Not offered to this cgroup at all (a hybrid host's v2 hierarchy has none): nothing to try. */
        snprintf(word, sizeof word, " %s ", controller);
        if (read_full_file_at(parent_fd, "cgroup.controllers", &avail, NULL) < 0)
                return;
        for (char *p = avail; *p; p++)
                if (*p == '\n')
                        *p = ' ';
        _cleanup_free_ char *padded = NULL;
        if (asprintf(&padded, " %s ", avail) < 0 || !strstr(padded, word))
                return;
        if (has_file(parent_fd, "cgroup.type") &&
            (read_full_file_at(parent_fd, "cgroup.procs", &procs, NULL) < 0 || !procs || *procs)) {
                if (!l->v2_note && !(l->v2_note = strdup("cgroup v2: no controller (pids, memory) can be enabled "
                                                         "for job cgroups: their parent cgroup holds processes of "
                                                         "its own (rtd or its workers), and cgroup v2 allows "
                                                         "controllers only below a cgroup without processes")))
                        l->v2_note = NULL;
                return;
        }
        snprintf(word, sizeof word, "+%s", controller);
        r = write_string_at(parent_fd, "cgroup.subtree_control", word);
        if (r < 0 && !l->v2_note && asprintf(&l->v2_note, "cgroup v2: cannot enable the %s controller for job "
                                             "cgroups: %s", controller, strerror(-r)) < 0)
                l->v2_note = NULL;
}

static int write_u64_at(int dir_fd, const char *path, uint64_t v) {
        char buf[32];
        snprintf(buf, sizeof buf, "%" PRIu64, v);
        return write_string_at(dir_fd, path, buf);
}

/* Make dir_fd/name and set file=v in it (and file2, if given); its fd, or -errno (removed again then). */
static int v1_make(int dir_fd, const char *name, const char *file, const char *file2, uint64_t v) {
        char path[256];
        int fd, r;

        if (mkdirat(dir_fd, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                (void) unlinkat(dir_fd, name, AT_REMOVEDIR);
                return r;
        }
        snprintf(path, sizeof path, "%s", file);
        r = write_u64_at(fd, path, v);
        if (r >= 0 && file2)
                r = write_u64_at(fd, file2, v);
        if (r < 0) {
                safe_close(fd);
                (void) unlinkat(dir_fd, name, AT_REMOVEDIR);
                return r;
        }
        return fd;
}

int job_limits_apply(JobLimits *l, int parent_fd, int cgroup_fd, const char *name, const JobSpec *spec,
                     int ret_join[static 2]) {
        int n = 0, r, fd;

        job_limits_retry_leftovers(l);
        if (cgroup_fd >= 0 && parent_fd >= 0) {
                if (spec->max_tasks > 0 && !has_file(cgroup_fd, "pids.max"))
                        v2_enable(l, parent_fd, "pids");
                if (spec->max_memory_bytes > 0 && !has_file(cgroup_fd, "memory.max"))
                        v2_enable(l, parent_fd, "memory");
                l->v2_pids = has_file(cgroup_fd, "pids.max");
                l->v2_memory = has_file(cgroup_fd, "memory.max");
        }
        if (spec->max_tasks > 0) {
                if (cgroup_fd >= 0 && l->v2_pids) {
                        r = write_u64_at(cgroup_fd, "pids.max", spec->max_tasks);
                        if (r < 0)
                                return r;
                } else if (l->v1_pids_fd >= 0) {
                        fd = v1_make(l->v1_pids_fd, name, "pids.max", NULL, spec->max_tasks);
                        if (fd < 0)
                                return fd;
                        ret_join[n++] = fd;
                }
        }
        if (spec->max_memory_bytes > 0) {
                if (cgroup_fd >= 0 && l->v2_memory) {
                        r = write_u64_at(cgroup_fd, "memory.max", spec->max_memory_bytes);
                        /* Swap would let the job go past its limit: none for jobs (absent without swap). */
                        if (r >= 0 && has_file(cgroup_fd, "memory.swap.max"))
                                r = write_string_at(cgroup_fd, "memory.swap.max", "0");
                        if (r < 0)
                                goto fail;
                } else if (l->v1_memory_fd >= 0) {
                        /* memsw (memory + swap) must stay >= the memory limit: set memory first. */
                        fd = v1_make(l->v1_memory_fd, name, "memory.limit_in_bytes",
                                     l->v1_memsw ? "memory.memsw.limit_in_bytes" : NULL, spec->max_memory_bytes);
                        if (fd < 0) {
                                r = fd;
                                goto fail;
                        }
                        ret_join[n++] = fd;
                }
        }
        return n;
fail:
        while (n > 0)
                safe_close(ret_join[--n]);
        if (l->v1_pids_fd >= 0)
                (void) unlinkat(l->v1_pids_fd, name, AT_REMOVEDIR);
        return r;
}

/* "key N" out of a flat-keyed cgroup file (memory.events, pids.events, memory.oom_control). */
static uint64_t read_key(int dir_fd, const char *path, const char *key) {
        _cleanup_free_ char *text = NULL;
        size_t kl = strlen(key);
        uint64_t v = 0;

        if (read_full_file_at(dir_fd, path, &text, NULL) < 0)
                return 0;
        for (char *line = text; line && *line;) {
                char *end = strchrnul(line, '\n');
                if (strneq(line, key, kl) && line[kl] == ' ') {
                        char c = *end;
                        *end = 0;
                        (void) safe_atou64(line + kl + 1, &v);
                        *end = c;
                        break;
                }
                line = *end ? end + 1 : NULL;
        }
        return v;
}

/* v1 has no cgroup.kill: SIGKILL what is left (the v2 cgroup's kill or the process group usually did). */
static int v1_remove(int dir_fd, const char *name) {
        char path[256];

        if (dir_fd < 0 || unlinkat(dir_fd, name, AT_REMOVEDIR) >= 0 || errno == ENOENT)
                return 0;
        if (errno != EBUSY)
                return -errno;
        snprintf(path, sizeof path, "%s/cgroup.procs", name);
        _cleanup_free_ char *procs = NULL;
        if (read_full_file_at(dir_fd, path, &procs, NULL) >= 0)
                for (char *p = procs; *p;) {
                        char *e;
                        long pid = strtol(p, &e, 10);
                        if (e == p)
                                break;
                        if (pid > 0)
                                (void) kill((pid_t) pid, SIGKILL);
                        p = e;
                        while (*p == '\n')
                                p++;
                }
        return unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

void job_limits_retry_leftovers(JobLimits *l) {
        size_t k = 0;

        for (size_t i = 0; i < l->n_leftovers; i++) {
                int a = v1_remove(l->v1_pids_fd, l->leftovers[i]), b = v1_remove(l->v1_memory_fd, l->leftovers[i]);
                if (a == -EBUSY || b == -EBUSY)
                        l->leftovers[k++] = l->leftovers[i];
                else
                        free(l->leftovers[i]);
        }
        l->n_leftovers = k;
}

void job_limits_finish(JobLimits *l, int v2_parent_fd, const char *name, JobLimitHits *ret) {
        char path[256];

        *ret = (JobLimitHits){};
        if (v2_parent_fd >= 0) {
                snprintf(path, sizeof path, "%s/memory.events", name);
                ret->oom_kills = read_key(v2_parent_fd, path, "oom_kill");
                snprintf(path, sizeof path, "%s/pids.events", name);
                ret->pids_max = read_key(v2_parent_fd, path, "max");
        }
        if (l->v1_memory_fd >= 0 && !ret->oom_kills) {
                snprintf(path, sizeof path, "%s/memory.oom_control", name);
                ret->oom_kills = read_key(l->v1_memory_fd, path, "oom_kill");
        }
        if (l->v1_pids_fd >= 0 && !ret->pids_max) {
                snprintf(path, sizeof path, "%s/pids.events", name);
                ret->pids_max = read_key(l->v1_pids_fd, path, "max");
        }
}

void job_limits_remove(JobLimits *l, const char *name) {
        int a, b;

        a = v1_remove(l->v1_pids_fd, name);
        b = v1_remove(l->v1_memory_fd, name);
        if (a == -EBUSY || b == -EBUSY) {
                char **n = realloc(l->leftovers, (l->n_leftovers + 1) * sizeof(char *));
                if (n) {
                        l->leftovers = n;
                        if ((n[l->n_leftovers] = strdup(name)))
                                l->n_leftovers++;
                }
        }
}

/* How each limit is enforced here, for /v1/status. */
json_t *job_limits_to_json(const JobLimits *l, const RtdConfig *cfg) {
        _cleanup_free_ char *pids = NULL, *mem = NULL;

        if (l->v2_pids)
                pids = strdup("cgroup v2 pids.max in the job's cgroup");
        else if (l->v1_pids_fd >= 0 && asprintf(&pids, "cgroup v1 pids.max under %s", l->v1_pids_path) < 0)
                pids = NULL;
        if (l->v2_memory)
                mem = strdup("cgroup v2 memory.max (and memory.swap.max=0) in the job's cgroup");
        else if (l->v1_memory_fd >= 0 && asprintf(&mem, "cgroup v1 memory.limit_in_bytes%s under %s",
                                                  l->v1_memsw ? " and memory.memsw.limit_in_bytes" : "",
                                                  l->v1_memory_path) < 0)
                mem = NULL;
        return json_pack("{s:s,s:s,s:s,s:s?,s:I,s:I,s:I,s:I}",
                         "output", "RLIMIT_FSIZE (every file the job writes; EFBIG beyond it)",
                         "tasks", pids ?: "not enforced: no pids controller for job cgroups (see note)",
                         "memory", mem ?: "not enforced: no memory controller for job cgroups (see note)",
                         "note", l->v2_note,
                         "max_output_bytes", (json_int_t) (cfg->max_output_bytes == CONFIG_INFINITY ? -1 : (json_int_t) cfg->max_output_bytes),
                         "max_tasks", (json_int_t) (cfg->max_tasks == CONFIG_INFINITY ? -1 : (json_int_t) cfg->max_tasks),
                         "max_memory", (json_int_t) (cfg->max_memory == CONFIG_INFINITY ? -1 : (json_int_t) cfg->max_memory),
                         "leftover_cgroups", (json_int_t) l->n_leftovers);
}

/* ---- who may still run ---- */

static bool in_list(gid_t g, const gid_t *list, int n) {
        for (int i = 0; i < n; i++)
                if (list[i] == g)
                        return true;
        return false;
}

/*
 * At dispatch, a queued job runs only if its user is still allowed to submit (a member of [Access]
 * SubmitGroup= or AdminGroup=, as the group database says now), and only with the groups it had at
 * submission that the user still has: membership taken away while the job waited is never used. Drops the
 * lost supplementary groups from groups/n_groups; -EPERM with *ret_reason when the job must not run.
 */
int job_limits_check_groups(const RtdConfig *cfg, uid_t uid, gid_t gid, gid_t *groups, size_t *n_groups,
                            char **ret_reason) {
        struct passwd *pw;
        struct group *g;
        gid_t now[4096];
        int n = (int) ELEMENTSOF(now);
        size_t k = 0;

        if (uid == 0)
                return 0;
        pw = getpwuid(uid);
        if (!pw)
                return asprintf(ret_reason, "user %u no longer exists; the job did not run", (unsigned) uid) < 0
                               ? -ENOMEM : -EPERM;
        if (getgrouplist(pw->pw_name, pw->pw_gid, now, &n) < 0)
                return asprintf(ret_reason, "user %s is in more than %zu groups; the job did not run", pw->pw_name,
                                ELEMENTSOF(now)) < 0 ? -ENOMEM : -EPERM;
        bool admin = cfg->admin_group && (g = getgrnam(cfg->admin_group)) && in_list(g->gr_gid, now, n);
        bool submit = cfg->submit_group && (g = getgrnam(cfg->submit_group)) && in_list(g->gr_gid, now, n);
        if (!admin && !submit)
                return asprintf(ret_reason, "user %s is no longer a member of the submit group %s ([Access] "
                                "SubmitGroup=) at dispatch; the job did not run", pw->pw_name,
                                cfg->submit_group ?: "(none)") < 0 ? -ENOMEM : -EPERM;
        if (!in_list(gid, now, n))
                return asprintf(ret_reason, "user %s is no longer a member of group %u, the job's group; the job "
                                "did not run", pw->pw_name, (unsigned) gid) < 0 ? -ENOMEM : -EPERM;
        for (size_t i = 0; i < *n_groups; i++)
                if (in_list(groups[i], now, n))
                        groups[k++] = groups[i];
        *n_groups = k;
        return 0;
}
