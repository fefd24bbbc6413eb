/* SPDX-License-Identifier: MIT */
/* The cgroup v2 backend: shrink every top-level cgroup's cpuset.cpus to the housekeeping CPUs and hold the
 * reserved CPUs in a cgroup of rtd's own, an isolated partition where the kernel offers it. Also backend
 * detection. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "shared/fileio.h"
#include "shared/log.h"

#define CG "fs/cgroup"
#define CGROUP_RESERVED "rtd-reserved"

void cgroup_state_done(CgroupState *s) {
        free(s->reserved_cgroup);
        free(s->partition);
        free(s->partition_note);
        json_decref(s->shrunk);
        *s = (CgroupState){};
}

/* mkdir through the journal: recorded first so a crash leaves nothing behind. */
static int cgroup_mkdir(KnobCtx *k, const char *path) {
        struct stat sb;
        JournalEntry *e;
        bool added;
        int r;

        if (fstatat(k->sys_fd, path, &sb, 0) == 0)
                return 0;
        if (k->plan)
                return json_array_append_new(k->plan, json_pack("{s:s, s:s}", "mkdir", path, "path", path));
        r = journal_add(k->journal, JOURNAL_MKDIR, KNOB_SYS, path, NULL, &e, &added);
        if (r >= 0)
                r = journal_flush(k->journal);
        if (r < 0)
                return r;
        if (mkdirat(k->sys_fd, path, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int cgroup_setup_reserved(KnobCtx *k, const char *cgroup, const CpuSet *reserved, CgroupState *st) {
        _cleanup_free_ char *list = NULL, *path = NULL, *part = NULL;
        struct stat sb;
        int r;

        r = cpuset_format(reserved, &list);
        if (r < 0)
                return r;
        free(st->reserved_cgroup);
        st->reserved_cgroup = strdup(cgroup);
        if (asprintf(&path, CG "/%s", cgroup) < 0)
                return -ENOMEM;
        if (k->plan && fstatat(k->sys_fd, path, &sb, 0) < 0) {
                /* Not created yet in a dry run: say what would be written. */
                _cleanup_free_ char *p2 = NULL;
                if (asprintf(&p2, "%s/cpuset.cpus.partition", path) < 0)
                        return -ENOMEM;
                return knob_plan(k, KNOB_SYS, p2, "member", "isolated");
        }
        free(path);
        path = NULL;
        /* Exclusive CPUs first (kernels >= 6.7 want them before a partition away from the root). */
        if (asprintf(&path, CG "/%s/cpuset.cpus.exclusive", cgroup) < 0)
                return -ENOMEM;
        if (fstatat(k->sys_fd, path, &sb, 0) == 0) {
                r = knob_set(k, KNOB_SYS, path, list, NULL);
                if (r < 0)
                        log_debug_errno(r, "Could not set %s: %m", path);
        }
        free(path);
        if (asprintf(&path, CG "/%s/cpuset.cpus.partition", cgroup) < 0)
                return -ENOMEM;
        if (fstatat(k->sys_fd, path, &sb, 0) < 0) {
                free(st->partition_note);
                st->partition_note = strdup("this kernel offers no cpuset partitions (cpuset.cpus.partition)");
                return 0;
        }
        r = knob_set(k, KNOB_SYS, path, "isolated", NULL);
        if (r < 0) {
                free(st->partition_note);
                if (asprintf(&st->partition_note, "writing \"isolated\" failed: %s", strerror(-r)) < 0)
                        st->partition_note = NULL;
                return 0;
        }
        if (k->plan)
                return 0;
        (void) read_one_line_at(k->sys_fd, path, &part);
        free(st->partition);
        st->partition = part ? strdup(part) : NULL;
        if (part && !streq(part, "isolated")) {
                /* "isolated invalid (reason)": the kernel accepted the word but not the partition. */
                free(st->partition_note);
                st->partition_note = strdup(part);
                (void) knob_set(k, KNOB_SYS, path, "member", NULL);
        }
        return 0;
}

int cgroup_backend_apply(KnobCtx *k, const CpuSet *hk, const CpuSet *reserved, CgroupState *st) {
        _cleanup_free_ char *hk_list = NULL, *ctl = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        int r;
        struct dirent *de;

        _cleanup_free_ char *own = NULL, *own_top = NULL;

        r = cpuset_format(hk, &hk_list);
        if (r < 0)
                return r;
        json_decref(st->shrunk);
        st->shrunk = json_array();
        /* rtd's own top-level cgroup holds its job cgroups: it is not shrunk (rtd pins itself). */
        if (proc_is_procfs(k->proc_fd) && own_cgroup(k->proc_fd, &own) >= 0)
                own_top = cgroup_top(own);

        /* The cpuset controller must be on for the root's children. Undo is "-cpuset", not the old text. */
        r = read_one_line_at(k->sys_fd, CG "/cgroup.subtree_control", &ctl);
        if (r < 0)
                return r;
        _cleanup_free_ char *words = strdup(ctl);
        bool enabled = false;
        if (!words)
                return -ENOMEM;
        for (char *w = words, *save = NULL, *t; (t = strtok_r(w, " ", &save)); w = NULL)
                enabled = enabled || streq(t, "cpuset");
        if (!enabled) {
                if (k->plan)
                        (void) knob_plan(k, KNOB_SYS, CG "/cgroup.subtree_control", ctl, "+cpuset");
                else {
                        JournalEntry *e;
                        r = journal_add(k->journal, JOURNAL_KNOB, KNOB_SYS, CG "/cgroup.subtree_control", ctl,
                                        &e, NULL);
                        if (r >= 0)
                                r = journal_entry_set_undo(k->journal, e, "-cpuset");
                        if (r >= 0)
                                r = journal_flush(k->journal);
                        if (r >= 0)
                                r = knob_write_fn(k)(k->sys_fd, CG "/cgroup.subtree_control", "+cpuset");
                        if (r < 0)
                                return log_error_errno(r, "Could not enable the cpuset controller: %m");
                }
        }

        r = cgroup_mkdir(k, CG "/" CGROUP_RESERVED);
        if (r < 0)
                return log_error_errno(r, "Could not create /sys/" CG "/" CGROUP_RESERVED ": %m");

        /* Shrink every other top-level cgroup first: the partition needs CPUs no sibling claims. */
        d = opendir_at(k->sys_fd, CG);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char path[512];
                struct stat sb;

                if (de->d_name[0] == '.' || streq(de->d_name, CGROUP_RESERVED) || streq_ptr(de->d_name, own_top))
                        continue;
                snprintf(path, sizeof path, CG "/%s/cpuset.cpus", de->d_name);
                if (fstatat(k->sys_fd, path, &sb, 0) < 0)
                        continue;
                r = knob_set(k, KNOB_SYS, path, hk_list, NULL);
                if (r < 0)
                        log_warning_errno(r, "Could not set /sys/%s: %m", path);
                else
                        json_array_append_new(st->shrunk, json_pack("{s:s, s:s}", "cgroup", de->d_name, "cpus",
                                                                    hk_list));
        }

        _cleanup_free_ char *list = NULL, *path = NULL;
        r = cpuset_format(reserved, &list);
        if (r < 0 || asprintf(&path, CG "/%s/cpuset.cpus", CGROUP_RESERVED) < 0)
                return -ENOMEM;
        if (k->plan)
                (void) knob_plan(k, KNOB_SYS, path, "", list);
        else {
                r = knob_set(k, KNOB_SYS, path, list, NULL);
                if (r < 0)
                        return log_error_errno(r, "Could not set /sys/%s: %m", path);
        }
        r = cgroup_setup_reserved(k, CGROUP_RESERVED, reserved, st);
        if (r < 0)
                return r;
        /*
         * Workers live in a leaf of their own, so the reserved cgroup holds no process and its job cgroups may
         * get the cpuset controller: cgroup v2 makes a cgroup with processes and a threaded controller such
         * as cpuset a thread root, where no job cgroup (a domain) could take a process.
         */
        r = cgroup_mkdir(k, CG "/" CGROUP_RESERVED "/" RESERVED_WORKERS_CGROUP);
        if (r < 0)
                return log_error_errno(r, "Could not create /sys/" CG "/" CGROUP_RESERVED "/" RESERVED_WORKERS_CGROUP
                                       ": %m");
        return 0;
}

int cgroup_backend_place(int sys_fd, const char *cgroup, pid_t pid) {
        char path[512], value[32];

        snprintf(path, sizeof path, CG "/%s/cgroup.procs", cgroup);
        snprintf(value, sizeof value, "%d", (int) pid);
        return knob_write(sys_fd, path, value);
}
