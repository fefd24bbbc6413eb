/* SPDX-License-Identifier: MIT */
/* Replaying the restore journal, newest entry first: plain knobs written back, cgroups rtd made removed,
 * every other kind through the undo its owner registered; a report of what was restored, skipped or failed. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "restore.h"
#include "shared/fileio.h"
#include "shared/log.h"

void replay_report_done(ReplayReport *r) {
        json_decref(r->problems);
        json_decref(r->notes);
        *r = (ReplayReport){};
}

json_t *replay_report_to_json(const ReplayReport *r) {
        return json_pack("{s:I, s:I, s:I, s:O?, s:O*}", "restored", (json_int_t) r->restored, "skipped",
                         (json_int_t) r->skipped, "failed", (json_int_t) r->failed, "problems", r->problems,
                         "notes", r->notes);
}

static void report_problem(ReplayReport *rep, const JournalEntry *e, int error, const char *detail) {
        _cleanup_free_ char *what = NULL;

        rep->failed++;
        int q;

        if (e->kind == JOURNAL_KNOB || e->kind == JOURNAL_MKDIR)
                q = asprintf(&what, "%s%s", knob_root_prefix(e->root), e->key);
        else if (e->kind == JOURNAL_TASK)
                q = asprintf(&what, "task %d (%s)", (int) e->pid, strempty(e->comm));
        else
                q = asprintf(&what, "%s %s", journal_kind_to_string(e->kind), strempty(e->key));
        if (q < 0)
                what = NULL;
        if (!rep->problems)
                rep->problems = json_array();
        json_array_append_new(rep->problems,
                              json_pack("{s:s, s:s}", "what", what ?: "?", "error",
                                        detail ?: strerror(-error)));
        log_warning_errno(error, "Could not restore %s: %s", what ?: "?", detail ?: "%m");
}


static bool is_blank(const char *s) {
        return !s || s[strspn(s, " \t\n")] == 0;
}

static void report_note(ReplayReport *rep, const char *what, const char *done) {
        if (!rep->notes)
                rep->notes = json_array();
        json_array_append_new(rep->notes, json_pack("{s:s, s:s}", "what", what, "done", done));
        log_info("Restored /sys/%s: %s", what, done);
}

/*
 * A cgroup's cpuset.cpus that was empty (inherit the parent's CPUs). A zero-length write changes nothing and
 * the kernel may refuse "\n" (EACCES seen on 6.x), so check the file reads back empty; otherwise write the
 * parent's effective CPUs, so the cgroup is unconfined again even if the file is not literally empty.
 */
static int restore_empty_cpuset(int sys_fd, const char *key, ReplayReport *rep) {
        _cleanup_free_ char *cur = NULL, *parent = NULL, *eff = NULL, *note = NULL;
        const char *slash;
        int r;

        r = knob_write(sys_fd, key, "\n");
        if (r == -ENOENT)
                return r;
        if (r >= 0 && read_one_line_at(sys_fd, key, &cur) >= 0 && is_blank(cur))
                return 0;
        slash = strrchr(key, '/');
        if (!slash)
                return r < 0 ? r : -EIO;
        /* key is ".../<cgroup>/cpuset.cpus": the parent is one directory further up. */
        parent = strndup(key, (size_t) (slash - key));
        if (!parent)
                return -ENOMEM;
        char *p2 = strrchr(parent, '/');
        if (p2)
                *p2 = 0;
        _cleanup_free_ char *eff_path = NULL;
        if (asprintf(&eff_path, "%s/cpuset.cpus.effective", parent) < 0)
                return -ENOMEM;
        if (read_one_line_at(sys_fd, eff_path, &eff) < 0 || is_blank(eff)) {
                free(eff);
                eff = NULL;
                if (read_one_line_at(sys_fd, "devices/system/cpu/online", &eff) < 0)
                        return r < 0 ? r : -EIO;
                knob_value_strip(eff);
        }
        int q = knob_write(sys_fd, key, eff);
        if (q < 0)
                return q;
        if (asprintf(&note, "was empty; writing \"\" %s%s, wrote the parent's effective CPUs %s instead",
                     r < 0 ? "failed: " : "did not take effect", r < 0 ? strerror(-r) : "", eff) >= 0)
                report_note(rep, key, note);
        return 0;
}

/*
 * Remove a directory rtd made. A cgroup may still hold workers that were let go and are exiting (they live
 * in the reserved cgroup with the cgroup backend): wait for them briefly, then move what is left to the
 * parent cgroup so the directory can go.
 */
static int rmdir_cgroup(int fd, const char *key) {
        for (int i = 0; i < 50; i++) {
                _cleanup_free_ char *procs = NULL, *path = NULL, *parent_procs = NULL;

                if (unlinkat(fd, key, AT_REMOVEDIR) >= 0 || errno == ENOENT)
                        return 0;
                if (errno != EBUSY)
                        return -errno;
                if (i < 25) {
                        (void) usleep(10000);
                        continue;
                }
                const char *slash = strrchr(key, '/');
                if (!slash || asprintf(&path, "%s/cgroup.procs", key) < 0 ||
                    asprintf(&parent_procs, "%.*s/cgroup.procs", (int) (slash - key), key) < 0 ||
                    read_full_file_at(fd, path, &procs, NULL) < 0)
                        return -EBUSY;
                for (char *l = procs, *save = NULL, *t; (t = strtok_r(l, "\n", &save)); l = NULL)
                        (void) knob_write(fd, parent_procs, t);
                (void) usleep(10000);
        }
        return -EBUSY;
}

static bool key_is_cpuset_cpus(const char *key) {
        const char *slash = strrchr(key, '/');
        return slash && streq(slash + 1, "cpuset.cpus") && startswith(key, "fs/cgroup/");
}

static JournalUndoFn undo_fns[_JOURNAL_KIND_MAX];

void journal_register_undo(JournalKind kind, JournalUndoFn fn) {
        assert(kind >= 0 && kind < _JOURNAL_KIND_MAX);
        undo_fns[kind] = fn;
}

static int replay_one(JournalEntry *e, int proc_fd, int sys_fd, ReplayReport *rep) {
        int fd = e->root == KNOB_PROC ? proc_fd : sys_fd;
        int r;

        switch (e->kind) {
        case JOURNAL_KNOB: {
                const char *v = e->undo ?: e->original;
                if (e->root == KNOB_SYS && !e->undo && is_blank(v) && key_is_cpuset_cpus(e->key))
                        r = restore_empty_cpuset(fd, e->key, rep);
                else
                        r = knob_write(fd, e->key, v);
                if (r == -ENOENT && knob_gone_is_restored(e->root, e->key)) {
                        rep->skipped++;         /* the IRQ or cgroup went away with its device */
                        return 0;
                }
                if (r == -ENOENT) {
                        report_problem(rep, e, r, "debugfs is no longer mounted at /sys/kernel/debug, and the "
                                       "value rtd wrote is still in force: mount debugfs, then run rtd --restore");
                        return r;
                }
                break;
        }
        case JOURNAL_MKDIR:
                r = rmdir_cgroup(fd, e->key);
                break;
        case JOURNAL_TASK:
        case JOURNAL_UNIT:
        case JOURNAL_UNIT_STOP:
        case JOURNAL_IRQBALANCE:
                r = undo_fns[e->kind] ? undo_fns[e->kind](e, proc_fd, sys_fd) : -EOPNOTSUPP;
                if (r > 0) {            /* gone, changed by someone else, or restarted: leave it */
                        rep->skipped++;
                        return 0;
                }
                break;
        default:
                r = -EINVAL;
        }
        if (r < 0) {
                report_problem(rep, e, r, NULL);
                return r;
        }
        rep->restored++;
        return 0;
}

int journal_replay(Journal *j, int proc_fd, int sys_fd, ReplayReport *ret) {
        ReplayReport rep = {};

        for (size_t i = j->n_entries; i-- > 0;)
                (void) replay_one(&j->entries[i], proc_fd, sys_fd, &rep);
        *ret = rep;
        return rep.failed > 0 ? -EIO : 0;
}
