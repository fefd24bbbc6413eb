/* SPDX-License-Identifier: MIT */
/* The restore journal: every original value is made durable before the knob changes, replayed in reverse. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "shared/cpuset.h"
#include "shared/macro.h"

#define JOURNAL_VERSION 1
#define JOURNAL_FILE "restore.json"

typedef enum KnobRoot { KNOB_PROC, KNOB_SYS, _KNOB_ROOT_MAX, _KNOB_ROOT_INVALID = -22 } KnobRoot;

typedef enum JournalKind {
        JOURNAL_KNOB,           /* a file under /proc or /sys: write `undo` (default: original) back */
        JOURNAL_TASK,           /* a task's CPU affinity */
        JOURNAL_UNIT,           /* a systemd unit's AllowedCPUs= (runtime property) */
        JOURNAL_UNIT_STOP,      /* a transient unit rtd started: stop it */
        JOURNAL_MKDIR,          /* a cgroup rtd created: remove it */
        JOURNAL_IRQBALANCE,     /* banned CPUs told to irqbalance over its socket: reset them */
        _JOURNAL_KIND_MAX,
        _JOURNAL_KIND_INVALID = -22,
} JournalKind;

const char *journal_kind_to_string(JournalKind k);
JournalKind journal_kind_from_string(const char *s);
const char *knob_root_to_string(KnobRoot r);

typedef struct JournalEntry {
        JournalKind kind;
        KnobRoot root;          /* KNOB, MKDIR */
        char *key;              /* KNOB/MKDIR: path under root; UNIT*: unit name; IRQBALANCE: socket */
        char *original;         /* KNOB/UNIT/IRQBALANCE: the value before rtd; TASK: CPU list */
        char *undo;             /* KNOB: what to write back when that differs from original; else NULL */
        char *applied;          /* the value rtd wrote last (TASK: CPU list); NULL if none yet */
        pid_t pid;              /* TASK: thread id; IRQBALANCE: irqbalance's pid */
        uint64_t starttime;     /* TASK: /proc/PID/stat field 22, to know it is still the same task */
        char *comm;             /* TASK: for reports */
} JournalEntry;

typedef struct Journal {
        int dir_fd;             /* not owned; -1: in memory only (dry runs, tests) */
        JournalEntry *entries;  /* in recording order; replay goes backwards */
        size_t n_entries, n_alloc;
        json_t *meta;           /* reserved, housekeeping, backend, pid, created: informational */
        bool dirty;
        bool on_disk;
} Journal;

Journal *journal_new(int dir_fd);
Journal *journal_free(Journal *j);
DEFINE_TRIVIAL_CLEANUP_FUNC(Journal *, journal_free);

/*
 * Parse journal text. A journal that does not parse as a whole (torn write, corruption) is salvaged
 * line by line: every entry line that still parses is kept. *ret_problem says what was wrong (NULL when
 * nothing was). Returns 0 or -ENOMEM; never fails for bad content.
 */
int journal_parse(Journal *j, const char *text, char **ret_problem);
char *journal_serialize(const Journal *j);
/* Load JOURNAL_FILE from dir_fd. Returns 0 and *ret = NULL when there is none, 1 when one was loaded. */
int journal_load(int dir_fd, Journal **ret, char **ret_problem);

JournalEntry *journal_find(Journal *j, JournalKind kind, KnobRoot root, const char *key);
JournalEntry *journal_find_task(Journal *j, pid_t pid, uint64_t starttime);
/* Record an original unless one is recorded for the same key already (first original wins). Returns the
 * entry; *ret_new tells whether it was added now. Marks the journal dirty. */
int journal_add(Journal *j, JournalKind kind, KnobRoot root, const char *key, const char *original,
                JournalEntry **ret, bool *ret_new);
int journal_add_task(Journal *j, pid_t pid, uint64_t starttime, const char *comm, const CpuSet *original,
                     JournalEntry **ret, bool *ret_new);
int journal_entry_set_applied(Journal *j, JournalEntry *e, const char *applied);
int journal_entry_set_undo(Journal *j, JournalEntry *e, const char *undo);
void journal_forget(Journal *j, JournalEntry *e);
/* Make the journal durable (temp file, fsync, rename) if it changed. Removes the file when empty. */
int journal_flush(Journal *j);
/* Forget every entry and remove the file. */
int journal_remove(Journal *j);

typedef struct ReplayReport {
        unsigned restored;
        unsigned skipped;       /* tasks that are gone or were changed by someone else since */
        unsigned failed;
        json_t *problems;       /* array of {"what","error"} (failures only) */
        json_t *notes;          /* array of {"what","done"}: restored another way than a plain write */
} ReplayReport;
void replay_report_done(ReplayReport *r);
json_t *replay_report_to_json(const ReplayReport *r);

/* Restore every entry, newest first, against the live system. Best effort: continues past failures. */
int journal_replay(Journal *j, int proc_fd, int sys_fd, ReplayReport *ret);

/*
 * Undo of a kind the journal cannot undo by itself (a task's affinity, a systemd unit, irqbalance): the module
 * that records such entries registers it, so the journal (the bottom of host/) names no module above it.
 * Returns 0 restored, 1 skipped (the task is gone or changed since, irqbalance restarted), <0 error. An entry
 * of a kind nobody registered fails its replay with -EOPNOTSUPP (reported, never silently dropped).
 */
typedef int (*JournalUndoFn)(const JournalEntry *e, int proc_fd, int sys_fd);
void journal_register_undo(JournalKind kind, JournalUndoFn fn);

/*
 * Writing one knob through the journal. A KnobCtx is how every module touches the kernel: originals go
 * to the journal (durable) before any write, and a dry run (plan != NULL) records the writes instead.
 */
typedef int (*KnobWriteFn)(int dir_fd, const char *path, const char *value);
/* One write() replacing the value (O_TRUNC: kernel files ignore it, fixture files need it). */
int knob_write(int dir_fd, const char *path, const char *value);
/* A knob whose file is gone (ENOENT) at restore went away with its device (an IRQ, a cgroup): nothing to put
 * back. Not under debugfs (the fair server): there ENOENT means debugfs was unmounted since, and the value
 * rtd wrote is still in force, so the entry must stay for a later restore. */
bool knob_gone_is_restored(KnobRoot root, const char *path);
/* Writes the kernel took through knob_write() since rtd started (a refused one changed nothing): how a start
 * that adopted a reservation shows it changed nothing. */
uint64_t knob_writes(void);
typedef struct KnobCtx {
        int proc_fd;
        int sys_fd;
        Journal *journal;
        json_t *plan;           /* dry run: array of {"path","from","to"} */
        KnobWriteFn write;      /* NULL: knob_write; tests inject failures */
        /* Walks over /proc stop at this CLOCK_MONOTONIC time (0: no limit) and say where: the next walk
         * resumes after resume_pid, so a walk cut short every time still reaches every task in turn. */
        uint64_t deadline_usec;
        pid_t resume_pid;
        /* Roots of process trees a walk over /proc leaves alone like rtd's own (leased trees, lease.c). */
        const pid_t *exempt;
        size_t n_exempt;
} KnobCtx;

static inline KnobWriteFn knob_write_fn(const KnobCtx *k) {
        return k->write ?: knob_write;
}

int knob_root_fd(const KnobCtx *k, KnobRoot root);
const char *knob_root_prefix(KnobRoot root);   /* "/proc/" or "/sys/" */
/* Add one planned write to the dry-run plan. */
int knob_plan(KnobCtx *k, KnobRoot root, const char *path, const char *from, const char *to);
/*
 * Set one knob: read its current value, record the original, flush the journal, write. Returns 0 when
 * written or already equal, -errno otherwise (nothing written then). *ret_current (optional) gets the
 * value read before the write.
 */
int knob_set(KnobCtx *k, KnobRoot root, const char *path, const char *value, char **ret_current);
/* Put one knob back to its journaled original now (a knob the config no longer asks to change). */
int knob_reset(KnobCtx *k, KnobRoot root, const char *path);
/* A value read from a kernel file without its trailing newline and blanks (in place). */
char *knob_value_strip(char *s);
