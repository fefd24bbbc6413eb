/* SPDX-License-Identifier: MIT */
/* Writing one knob through the journal (KnobCtx): the original made durable first, then the write; a dry
 * run records the write in a plan instead. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "restore.h"
#include "shared/fileio.h"

static uint64_t knob_writes_total;

uint64_t knob_writes(void) {
        return knob_writes_total;
}

int knob_write(int dir_fd, const char *path, const char *value) {
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(value);
        ssize_t n;

        fd = openat(dir_fd, path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        n = write(fd, value, len);
        if (n < 0)
                return -errno;
        if ((size_t) n != len)
                return -EIO;
        knob_writes_total++;
        return 0;
}

int knob_root_fd(const KnobCtx *k, KnobRoot root) {
        return root == KNOB_PROC ? k->proc_fd : k->sys_fd;
}

int knob_plan(KnobCtx *k, KnobRoot root, const char *path, const char *from, const char *to) {
        _cleanup_free_ char *full = NULL;

        if (asprintf(&full, "%s%s", knob_root_prefix(root), path) < 0)
                return -ENOMEM;
        return json_array_append_new(k->plan, json_pack("{s:s, s:s?, s:s}", "path", full, "from", from,
                                                        "to", to)) < 0 ? -ENOMEM : 0;
}

char *knob_value_strip(char *s) {
        size_t l = strlen(s);
        while (l > 0 && (s[l - 1] == '\n' || s[l - 1] == ' '))
                s[--l] = 0;
        return s;
}

int knob_set(KnobCtx *k, KnobRoot root, const char *path, const char *value, char **ret_current) {
        _cleanup_free_ char *cur = NULL;
        JournalEntry *e;
        bool added;
        int fd = knob_root_fd(k, root), r;

        r = read_full_file_at(fd, path, &cur, NULL);
        if (r < 0)
                return r;
        knob_value_strip(cur);
        if (k->plan) {
                if (!streq(cur, value))
                        r = knob_plan(k, root, path, cur, value);
                goto done;
        }
        r = journal_add(k->journal, JOURNAL_KNOB, root, path, cur, &e, &added);
        if (r < 0)
                return r;
        r = journal_entry_set_applied(k->journal, e, value);
        if (r >= 0)
                r = journal_flush(k->journal);
        if (r < 0) {
                /* No durable original: do not touch the knob. */
                if (added)
                        journal_forget(k->journal, e);
                return r;
        }
        if (!streq(cur, value)) {
                r = knob_write_fn(k)(fd, path, value);
                if (r < 0 && added) {
                        journal_forget(k->journal, e);
                        (void) journal_flush(k->journal);
                }
        }
done:
        if (r >= 0 && ret_current)
                *ret_current = TAKE_PTR(cur);
        return r < 0 ? r : 0;
}

bool knob_gone_is_restored(KnobRoot root, const char *path) {
        return !(root == KNOB_SYS && startswith(path, "kernel/debug/"));
}

int knob_reset(KnobCtx *k, KnobRoot root, const char *path) {
        JournalEntry *e = k->journal ? journal_find(k->journal, JOURNAL_KNOB, root, path) : NULL;
        int r;

        if (!e)
                return 0;
        if (k->plan)
                return knob_plan(k, root, path, e->applied, e->undo ?: e->original);
        r = knob_write_fn(k)(knob_root_fd(k, root), path, e->undo ?: e->original);
        if (r < 0 && (r != -ENOENT || !knob_gone_is_restored(root, path)))
                return r;               /* the entry stays, for the stop's replay or rtd --restore */
        journal_forget(k->journal, e);
        return journal_flush(k->journal);
}
