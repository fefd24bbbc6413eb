/* SPDX-License-Identifier: MIT */
/* The affinity backend: every task and thread in /proc gets (old ∩ housekeeping) or housekeeping. Also
 * steers movable kthreads for the cgroup backends, and replays task entries of the restore journal. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "shared/fileio.h"
#include "shared/log.h"

#define PF_EXITING 0x00000004u
#define PF_KTHREAD 0x00200000u
#define PF_NO_SETAFFINITY 0x04000000u

int task_parse_stat(const char *text, pid_t *ret_ppid, unsigned *ret_flags, uint64_t *ret_starttime,
                    char **ret_comm) {
        const char *open = strchr(text, '('), *close = strrchr(text, ')');
        unsigned long long starttime = 0;
        unsigned flags = 0;
        int ppid = 0;

        /* comm may hold spaces and parentheses: the fields resume after the last ')'. */
        if (!open || !close || close < open)
                return -EINVAL;
        if (sscanf(close + 1, " %*c %d %*d %*d %*d %*d %u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                   &ppid, &flags, &starttime) != 3)
                return -EINVAL;
        if (ret_comm) {
                *ret_comm = strndup(open + 1, (size_t) (close - open - 1));
                if (!*ret_comm)
                        return -ENOMEM;
        }
        if (ret_ppid)
                *ret_ppid = ppid;
        if (ret_flags)
                *ret_flags = flags;
        if (ret_starttime)
                *ret_starttime = starttime;
        return 0;
}

static int task_read_stat(int proc_fd, pid_t tgid, pid_t tid, pid_t *ret_ppid, unsigned *ret_flags,
                          uint64_t *ret_starttime, char **ret_comm) {
        _cleanup_free_ char *text = NULL;
        char path[64];
        int r;

        if (tgid > 0)
                snprintf(path, sizeof path, "%d/task/%d/stat", (int) tgid, (int) tid);
        else
                snprintf(path, sizeof path, "%d/stat", (int) tid);
        r = read_full_file_at(proc_fd, path, &text, NULL);
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;
        return task_parse_stat(text, ret_ppid, ret_flags, ret_starttime, ret_comm);
}

/* Whether the task is in the root cgroup of the v2 hierarchy (no cpuset can confine it there). */
static bool task_in_root_cgroup(int proc_fd, pid_t tgid) {
        _cleanup_free_ char *text = NULL;
        char path[64];

        snprintf(path, sizeof path, "%d/cgroup", (int) tgid);
        if (read_full_file_at(proc_fd, path, &text, NULL) < 0)
                return false;
        for (char *l = text; l && *l;) {
                char *nl = strchr(l, '\n');
                if (nl)
                        *nl = 0;
                if (startswith(l, "0::"))
                        return streq(l + 3, "/");
                l = nl ? nl + 1 : NULL;
        }
        return false;
}

static int get_affinity(pid_t tid, CpuSet *ret) {
        cpuset_zero(ret);
        /* CpuSet's 64-bit words have the layout of the kernel's unsigned long bitmap on 64-bit hosts. */
        if (sched_getaffinity(tid, sizeof ret->bits, (cpu_set_t *) ret->bits) < 0)
                return -errno;
        return 0;
}

static int set_affinity(pid_t tid, const CpuSet *set) {
        if (sched_setaffinity(tid, sizeof set->bits, (const cpu_set_t *) set->bits) < 0)
                return -errno;
        return 0;
}

typedef struct Proc {
        pid_t pid, ppid;
        uint64_t starttime;
        bool own;               /* a descendant of rtd: a worker or a job */
} Proc;

static int proc_cmp(const void *a, const void *b) {
        const Proc *x = a, *y = b;
        return (x->pid > y->pid) - (x->pid < y->pid);
}

static Proc *proc_find(Proc *procs, size_t n, pid_t pid) {
        Proc key = { .pid = pid };
        return bsearch(&key, procs, n, sizeof *procs, proc_cmp);
}

static uint64_t monotonic_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

static bool past(uint64_t deadline_usec) {
        return deadline_usec > 0 && monotonic_usec() >= deadline_usec;
}

/*
 * The process list must be whole (a job's ancestry decides that it is rtd's own and stays on its CPU), so
 * it has its own, larger bound: past it the walk is given up before anything is changed.
 */
static bool is_root(pid_t p, pid_t own_pid, const pid_t *exempt, size_t n_exempt) {
        if (p == own_pid)
                return true;
        for (size_t i = 0; i < n_exempt; i++)
                if (p == exempt[i])
                        return true;
        return false;
}

static int list_procs(int proc_fd, pid_t own_pid, const pid_t *exempt, size_t n_exempt, uint64_t deadline_usec,
                      Proc **ret, size_t *ret_n) {
        _cleanup_free_ Proc *procs = NULL;
        size_t n = 0, alloc = 0;
        _cleanup_closedir_ DIR *d = opendir_at(proc_fd, ".");
        struct dirent *de;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char *end;
                long pid = strtol(de->d_name, &end, 10);
                if (*end || pid <= 0)
                        continue;
                if ((n & 63) == 0 && past(deadline_usec))
                        return -ETIMEDOUT;
                if (n == alloc) {
                        alloc = MAX((size_t) 256, alloc * 2);
                        Proc *p = realloc(procs, alloc * sizeof *p);
                        if (!p)
                                return -ENOMEM;
                        procs = p;
                }
                Proc *p = &procs[n];
                *p = (Proc){ .pid = (pid_t) pid };
                if (task_read_stat(proc_fd, 0, p->pid, &p->ppid, NULL, &p->starttime, NULL) == 0)
                        n++;
        }
        qsort(procs, n, sizeof *procs, proc_cmp);
        /* Descendants of rtd are its workers and their jobs: they belong on the reserved CPUs. rtd itself pins
         * its own threads (manager.c), so a walk never counts them as moved. */
        for (size_t i = 0; i < n; i++) {
                pid_t p = procs[i].ppid;

                if (is_root(procs[i].pid, own_pid, exempt, n_exempt)) {
                        procs[i].own = true;
                        continue;
                }
                /* p == own_pid before p > 1: rtd may be PID 1 of its namespace, and after a re-exec its
                 * workers with their running jobs are already there when the reservation is adopted. */
                for (unsigned depth = 0; p > 0 && depth < 256; depth++) {
                        if (is_root(p, own_pid, exempt, n_exempt)) {
                                procs[i].own = true;
                                break;
                        }
                        if (p == 1)
                                break;
                        Proc *up = proc_find(procs, n, p);
                        if (!up)
                                break;
                        p = up->ppid;
                }
        }
        *ret = TAKE_PTR(procs);
        *ret_n = n;
        return 0;
}

/* The journal entry of the nearest ancestor (thread group leader first, then parents), if any. */
static JournalEntry *ancestor_entry(Journal *j, Proc *procs, size_t n, pid_t tgid, pid_t tid) {
        Proc *p = proc_find(procs, n, tgid);
        JournalEntry *e;

        if (!p)
                return NULL;
        if (tid != tgid && (e = journal_find_task(j, p->pid, p->starttime)))
                return e;
        for (unsigned depth = 0; p && p->ppid > 0 && depth < 256; depth++) {
                p = proc_find(procs, n, p->ppid);
                if (p && (e = journal_find_task(j, p->pid, p->starttime)))
                        return e;
        }
        return NULL;
}

typedef struct Change {
        pid_t tid;
        JournalEntry *entry;    /* index may move when entries are forgotten: use tid+starttime */
        uint64_t starttime;
        bool added;
        CpuSet target;
} Change;

int tasks_apply(KnobCtx *k, const CpuSet *hk, TaskScope scope, bool drift, pid_t own_pid, TaskStats *ret) {
        _cleanup_free_ Proc *procs = NULL;
        _cleanup_free_ Change *changes = NULL;
        size_t n_procs = 0, n_changes = 0, alloc = 0;
        TaskStats st = {};
        int r;

        *ret = st;
        if (!proc_is_procfs(k->proc_fd))
                return 0;       /* a fixture tree: its pids are not real tasks */
        /* The list may take up to three times the walk's budget: the budget is a fraction of a second. */
        uint64_t start = monotonic_usec(), budget = k->deadline_usec > start ? k->deadline_usec - start : 0;
        uint64_t list_deadline = k->deadline_usec > 0 ? MAX(k->deadline_usec, start + 1) + 2 * budget : 0;
        r = list_procs(k->proc_fd, own_pid, k->exempt, k->n_exempt, list_deadline, &procs, &n_procs);
        if (r == -ETIMEDOUT) {
                st.cut_short = true;
                *ret = st;
                return 0;
        }
        if (r < 0)
                return r;

        /* However long the list took, the walk gets half its budget after it: every pass gets somewhere (a list
         * that takes the whole budget on a crowded node would otherwise leave none, pass after pass). */
        uint64_t walk_deadline = k->deadline_usec > 0 ? MAX(k->deadline_usec, monotonic_usec() + budget / 2) : 0;

        /* Resume after the task where the last walk was cut short, wrapping around. */
        size_t first = 0;
        while (first < n_procs && procs[first].pid <= k->resume_pid)
                first++;
        k->resume_pid = 0;
        for (size_t step = 0; step < n_procs; step++) {
                Proc *p = &procs[(first + step) % n_procs];
                if (past(walk_deadline)) {
                        st.cut_short = true;
                        k->resume_pid = procs[(first + step + n_procs - 1) % n_procs].pid;
                        break;
                }
                bool unconfined_cgroup = scope == TASKS_ALL || task_in_root_cgroup(k->proc_fd, p->pid);
                _cleanup_closedir_ DIR *d = NULL;
                char tpath[32];
                struct dirent *de;

                snprintf(tpath, sizeof tpath, "%d/task", (int) p->pid);
                d = opendir_at(k->proc_fd, tpath);
                if (!d)
                        continue;       /* exited meanwhile */
                while ((de = readdir(d))) {
                        _cleanup_free_ char *comm = NULL;
                        char *end;
                        long tid = strtol(de->d_name, &end, 10);
                        unsigned flags;
                        uint64_t starttime;
                        CpuSet cur, target, orig;
                        JournalEntry *e;

                        if (*end || tid <= 0)
                                continue;
                        if (task_read_stat(k->proc_fd, p->pid, (pid_t) tid, NULL, &flags, &starttime, &comm) < 0)
                                continue;
                        if (flags & PF_EXITING)
                                continue;       /* exiting, or a zombie its parent never reaps: runs nowhere */
                        st.seen++;
                        if (p->own) {
                                st.own++;
                                continue;
                        }
                        if (!(flags & PF_KTHREAD) && !unconfined_cgroup)
                                continue;       /* the cgroup backend confines it */
                        if (flags & PF_NO_SETAFFINITY) {
                                st.refused++;   /* per-CPU kthread: the kernel will not move it */
                                continue;
                        }
                        if (get_affinity((pid_t) tid, &cur) < 0)
                                continue;
                        e = journal_find_task(k->journal, (pid_t) tid, starttime);
                        if (e) {
                                if (cpuset_parse(e->original, &orig, NULL) < 0)
                                        orig = cur;
                        } else
                                orig = cur;
                        cpuset_and(&target, &orig, hk);
                        if (cpuset_is_empty(&target))
                                target = *hk;
                        if (cpuset_equal(&cur, &target)) {
                                if (e && !k->plan) {    /* what restore compares against */
                                        _cleanup_free_ char *s = NULL;
                                        if (cpuset_format(&cur, &s) >= 0)
                                                (void) journal_entry_set_applied(k->journal, e, s);
                                        continue;
                                }
                                /* Born during the reservation with the confined mask: remember what its
                                 * ancestor had, so release gives it that back too. */
                                if (!e && drift && !k->plan) {
                                        JournalEntry *a = ancestor_entry(k->journal, procs, n_procs, p->pid,
                                                                         (pid_t) tid);
                                        CpuSet aorig;
                                        if (a && a->applied && cpuset_parse(a->original, &aorig, NULL) == 0 &&
                                            !cpuset_equal(&aorig, &cur)) {
                                                _cleanup_free_ char *s = NULL;
                                                if (journal_add_task(k->journal, (pid_t) tid, starttime, comm,
                                                                     &aorig, &e, NULL) >= 0 &&
                                                    cpuset_format(&cur, &s) >= 0)
                                                        (void) journal_entry_set_applied(k->journal, e, s);
                                                st.inherited++;
                                        }
                                }
                                continue;
                        }
                        if (k->plan) {
                                _cleanup_free_ char *from = NULL, *to = NULL;
                                if (cpuset_format(&cur, &from) >= 0 && cpuset_format(&target, &to) >= 0)
                                        json_array_append_new(k->plan,
                                                json_pack("{s:i, s:s, s:s, s:s}", "task", (int) tid,
                                                          "comm", strempty(comm), "from", from, "to", to));
                                st.moved++;
                                continue;
                        }
                        bool added = false;
                        if (!e) {
                                r = journal_add_task(k->journal, (pid_t) tid, starttime, comm, &cur, &e, &added);
                                if (r < 0)
                                        break;
                        }
                        _cleanup_free_ char *applied = NULL;
                        if (cpuset_format(&target, &applied) < 0 ||
                            journal_entry_set_applied(k->journal, e, applied) < 0) {
                                r = -ENOMEM;
                                break;
                        }
                        if (n_changes == alloc) {
                                alloc = MAX((size_t) 64, alloc * 2);
                                Change *c = realloc(changes, alloc * sizeof *c);
                                if (!c) {
                                        r = -ENOMEM;
                                        break;
                                }
                                changes = c;
                        }
                        changes[n_changes++] = (Change){ .tid = (pid_t) tid, .starttime = starttime,
                                                         .added = added, .target = target };
                        if (drift)
                                st.drifted++;
                }
                if (r < 0)
                        break;
        }
        if (k->plan || r < 0) {
                *ret = st;
                return r < 0 ? r : 0;
        }

        /* Originals first, durably; only then the affinities. */
        r = journal_flush(k->journal);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_changes; i++) {
                Change *c = &changes[i];
                r = set_affinity(c->tid, &c->target);
                if (r >= 0) {
                        st.moved++;
                        continue;
                }
                if (r != -ESRCH)
                        st.refused++;   /* EINVAL: per-CPU kthread; EPERM: not ours to move */
                if (drift && st.drifted > 0)
                        st.drifted--;
                JournalEntry *e = journal_find_task(k->journal, c->tid, c->starttime);
                if (e && c->added)
                        journal_forget(k->journal, e);
        }
        (void) journal_flush(k->journal);
        *ret = st;
        return 0;
}

int task_restore_affinity(int proc_fd, pid_t pid, uint64_t starttime, const char *original,
                          const char *applied) {
        CpuSet orig, app, cur;
        uint64_t st;
        int r;

        if (!proc_is_procfs(proc_fd))
                return 1;
        r = task_read_stat(proc_fd, 0, pid, NULL, NULL, &st, NULL);
        if (r == -ESRCH || (r >= 0 && st != starttime))
                return 1;               /* gone, or the pid now names another task */
        if (r < 0)
                return r;
        if (cpuset_parse(original, &orig, NULL) < 0)
                return -EINVAL;
        if (!applied)
                return 1;               /* recorded but never changed */
        if (cpuset_parse(applied, &app, NULL) < 0)
                return -EINVAL;
        r = get_affinity(pid, &cur);
        if (r == -ESRCH)
                return 1;
        if (r < 0)
                return r;
        if (!cpuset_equal(&cur, &app))
                return 1;               /* someone set its mask since: theirs wins */
        r = set_affinity(pid, &orig);
        if (r == -ESRCH)
                return 1;
        return r;
}

static int task_undo(const JournalEntry *e, int proc_fd, int sys_fd) {
        return task_restore_affinity(proc_fd, e->pid, e->starttime, e->original, e->applied);
}

void task_register_undo(void) {
        journal_register_undo(JOURNAL_TASK, task_undo);
}
