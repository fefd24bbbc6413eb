/* SPDX-License-Identifier: MIT */
/* The restore journal (design.md §5): versioned JSON in the runtime directory, one entry per line so a
 * torn or damaged file can still be salvaged entry by entry. Replaying it is replay.c; writing a knob through
 * it, knob.c. This is the bottom of host/: it names no module that records entries. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "restore.h"
#include "shared/fileio.h"
#include "shared/log.h"

static const char *const kind_table[_JOURNAL_KIND_MAX] = {
        [JOURNAL_KNOB] = "knob",
        [JOURNAL_TASK] = "task",
        [JOURNAL_UNIT] = "unit",
        [JOURNAL_UNIT_STOP] = "unit-stop",
        [JOURNAL_MKDIR] = "mkdir",
        [JOURNAL_IRQBALANCE] = "irqbalance",
};

const char *journal_kind_to_string(JournalKind k) {
        return k >= 0 && k < _JOURNAL_KIND_MAX ? kind_table[k] : NULL;
}

JournalKind journal_kind_from_string(const char *s) {
        for (int i = 0; s && i < _JOURNAL_KIND_MAX; i++)
                if (streq(kind_table[i], s))
                        return (JournalKind) i;
        return _JOURNAL_KIND_INVALID;
}

const char *knob_root_to_string(KnobRoot r) {
        return r == KNOB_PROC ? "proc" : r == KNOB_SYS ? "sys" : NULL;
}

static KnobRoot knob_root_from_string(const char *s) {
        if (streq_ptr(s, "proc"))
                return KNOB_PROC;
        if (streq_ptr(s, "sys"))
                return KNOB_SYS;
        return _KNOB_ROOT_INVALID;
}

const char *knob_root_prefix(KnobRoot root) {
        return root == KNOB_PROC ? "/proc/" : "/sys/";
}

static void entry_done(JournalEntry *e) {
        free(e->key);
        free(e->original);
        free(e->undo);
        free(e->applied);
        free(e->comm);
        *e = (JournalEntry){};
}

Journal *journal_new(int dir_fd) {
        Journal *j = calloc(1, sizeof *j);

        if (!j)
                return NULL;
        j->dir_fd = dir_fd;
        j->meta = json_object();
        if (!j->meta)
                return journal_free(j);
        return j;
}

Journal *journal_free(Journal *j) {
        if (!j)
                return NULL;
        for (size_t i = 0; i < j->n_entries; i++)
                entry_done(&j->entries[i]);
        free(j->entries);
        json_decref(j->meta);
        free(j);
        return NULL;
}

static JournalEntry *journal_append(Journal *j) {
        if (j->n_entries == j->n_alloc) {
                size_t n = MAX((size_t) 64, j->n_alloc * 2);
                JournalEntry *p = realloc(j->entries, n * sizeof *p);
                if (!p)
                        return NULL;
                j->entries = p;
                j->n_alloc = n;
        }
        JournalEntry *e = &j->entries[j->n_entries++];
        *e = (JournalEntry){ .root = KNOB_PROC };
        return e;
}

JournalEntry *journal_find(Journal *j, JournalKind kind, KnobRoot root, const char *key) {
        for (size_t i = 0; i < j->n_entries; i++) {
                JournalEntry *e = &j->entries[i];
                if (e->kind == kind && e->root == root && streq_ptr(e->key, key))
                        return e;
        }
        return NULL;
}

JournalEntry *journal_find_task(Journal *j, pid_t pid, uint64_t starttime) {
        /* Newest first: a recycled pid gets a new entry after the stale one. */
        for (size_t i = j->n_entries; i-- > 0;) {
                JournalEntry *e = &j->entries[i];
                if (e->kind == JOURNAL_TASK && e->pid == pid && e->starttime == starttime)
                        return e;
        }
        return NULL;
}

int journal_add(Journal *j, JournalKind kind, KnobRoot root, const char *key, const char *original,
                JournalEntry **ret, bool *ret_new) {
        JournalEntry *e = journal_find(j, kind, root, key);

        if (ret_new)
                *ret_new = !e;
        if (!e) {
                e = journal_append(j);
                if (!e)
                        return -ENOMEM;
                e->kind = kind;
                e->root = root;
                e->key = strdup(key);
                e->original = original ? strdup(original) : NULL;
                if (!e->key || (original && !e->original)) {
                        journal_forget(j, e);
                        return -ENOMEM;
                }
                j->dirty = true;
        }
        if (ret)
                *ret = e;
        return 0;
}

int journal_add_task(Journal *j, pid_t pid, uint64_t starttime, const char *comm, const CpuSet *original,
                     JournalEntry **ret, bool *ret_new) {
        JournalEntry *e = journal_find_task(j, pid, starttime);

        if (ret_new)
                *ret_new = !e;
        if (!e) {
                e = journal_append(j);
                if (!e)
                        return -ENOMEM;
                e->kind = JOURNAL_TASK;
                e->pid = pid;
                e->starttime = starttime;
                e->comm = comm ? strdup(comm) : NULL;
                if (cpuset_format(original, &e->original) < 0) {
                        journal_forget(j, e);
                        return -ENOMEM;
                }
                j->dirty = true;
        }
        if (ret)
                *ret = e;
        return 0;
}

static int set_field(Journal *j, char **field, const char *value) {
        if (streq_ptr(*field, value))
                return 0;
        char *c = value ? strdup(value) : NULL;
        if (value && !c)
                return -ENOMEM;
        free(*field);
        *field = c;
        j->dirty = true;
        return 0;
}

int journal_entry_set_applied(Journal *j, JournalEntry *e, const char *applied) {
        return set_field(j, &e->applied, applied);
}

int journal_entry_set_undo(Journal *j, JournalEntry *e, const char *undo) {
        return set_field(j, &e->undo, undo);
}

void journal_forget(Journal *j, JournalEntry *e) {
        size_t i = (size_t) (e - j->entries);

        if (i >= j->n_entries)
                return;
        entry_done(e);
        memmove(&j->entries[i], &j->entries[i + 1], (j->n_entries - i - 1) * sizeof *e);
        j->n_entries--;
        j->dirty = true;
}

static json_t *entry_to_json(const JournalEntry *e) {
        json_t *o = json_pack("{s:s}", "kind", journal_kind_to_string(e->kind));

        if (!o)
                return NULL;
        if (e->kind == JOURNAL_KNOB || e->kind == JOURNAL_MKDIR)
                json_object_set_new(o, "root", json_string(knob_root_to_string(e->root)));
        if (e->key)
                json_object_set_new(o, "key", json_string(e->key));
        if (e->kind == JOURNAL_TASK || e->kind == JOURNAL_IRQBALANCE)
                json_object_set_new(o, "pid", json_integer(e->pid));
        if (e->kind == JOURNAL_TASK) {
                json_object_set_new(o, "starttime", json_integer((json_int_t) e->starttime));
                if (e->comm)
                        json_object_set_new(o, "comm", json_string(e->comm));
        }
        if (e->original)
                json_object_set_new(o, "original", json_string(e->original));
        if (e->undo)
                json_object_set_new(o, "undo", json_string(e->undo));
        if (e->applied)
                json_object_set_new(o, "applied", json_string(e->applied));
        return o;
}

static int entry_from_json(Journal *j, json_t *o) {
        const char *kind = NULL, *root = "proc", *key = NULL, *original = NULL, *undo = NULL,
                   *applied = NULL, *comm = NULL;
        json_int_t pid = 0, starttime = 0;
        JournalEntry *e;
        json_error_t err;
        JournalKind k;

        if (json_unpack_ex(o, &err, 0, "{s:s, s?s, s?s, s?s, s?s, s?s, s?s, s?I, s?I}", "kind", &kind,
                           "root", &root, "key", &key, "original", &original, "undo", &undo, "applied",
                           &applied, "comm", &comm, "pid", &pid, "starttime", &starttime) < 0)
                return -EINVAL;
        k = journal_kind_from_string(kind);
        if (k < 0 || knob_root_from_string(root) < 0)
                return -EINVAL;
        /* Each kind needs its own fields; an entry missing them cannot be replayed. */
        if ((k == JOURNAL_TASK && (pid <= 0 || !original)) ||
            (k != JOURNAL_TASK && !key) ||
            ((k == JOURNAL_KNOB || k == JOURNAL_UNIT) && !original && !undo))
                return -EINVAL;
        if ((k == JOURNAL_KNOB || k == JOURNAL_MKDIR) && (key[0] == '/' || strstr(key, "..")))
                return -EINVAL;         /* paths stay below their root */
        if (pid < 0 || pid > INT32_MAX)
                return -EINVAL;         /* a pid_t: a wider number would come back another pid */

        e = journal_append(j);
        if (!e)
                return -ENOMEM;
        e->kind = k;
        e->root = knob_root_from_string(root);
        e->pid = (pid_t) pid;
        e->starttime = (uint64_t) starttime;
        e->key = key ? strdup(key) : NULL;
        e->original = original ? strdup(original) : NULL;
        e->undo = undo ? strdup(undo) : NULL;
        e->applied = applied ? strdup(applied) : NULL;
        e->comm = comm ? strdup(comm) : NULL;
        return 0;
}

char *journal_serialize(const Journal *j) {
        char *buf = NULL, *s;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return NULL;
        /* The header line carries everything but the entries; then one entry per line. */
        s = json_dumps(j->meta, JSON_COMPACT | JSON_SORT_KEYS);
        if (s && strlen(s) >= 2) {
                size_t l = strlen(s);
                s[l - 1] = 0;   /* drop the closing brace to append "entries" */
                fprintf(f, "{\"version\":%d%s%s,\"entries\":[\n", JOURNAL_VERSION, l > 2 ? "," : "",
                        s + 1);
        } else
                fprintf(f, "{\"version\":%d,\"entries\":[\n", JOURNAL_VERSION);
        free(s);
        for (size_t i = 0; i < j->n_entries; i++) {
                json_t *o = entry_to_json(&j->entries[i]);
                char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
                json_decref(o);
                if (!line) {
                        fclose(f);
                        free(buf);
                        return NULL;
                }
                fprintf(f, "%s%s\n", line, i + 1 < j->n_entries ? "," : "");
                free(line);
        }
        fputs("]}\n", f);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* Salvage: every line that parses as an entry object on its own. */
static unsigned journal_salvage(Journal *j, const char *text, unsigned *ret_bad) {
        unsigned good = 0, bad = 0;

        for (const char *p = text; *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t) (nl - p) : strlen(p);
                _cleanup_free_ char *line = strndup(p, len);

                p += len + (nl ? 1 : 0);
                if (!line)
                        break;
                size_t l = strlen(line);
                while (l > 0 && (line[l - 1] == ',' || line[l - 1] == ' ' || line[l - 1] == '\r'))
                        line[--l] = 0;
                if (l == 0 || !strstr(line, "\"kind\""))
                        continue;
                json_t *o = json_loads(line, 0, NULL);
                if (o && json_is_object(o) && entry_from_json(j, o) == 0)
                        good++;
                else
                        bad++;
                json_decref(o);
        }
        *ret_bad = bad;
        return good;
}

int journal_parse(Journal *j, const char *text, char **ret_problem) {
        _cleanup_free_ char *problem = NULL;
        json_error_t err;
        json_t *root = json_loads(text, 0, &err);
        json_t *entries, *version;
        unsigned bad = 0;
        int r = 0;

        if (!root || !json_is_object(root)) {
                unsigned good = journal_salvage(j, text, &bad);
                if (asprintf(&problem, "restore journal is damaged (%s at line %d); salvaged %u entries, "
                             "%u unreadable", root ? "not an object" : err.text, err.line, good, bad) < 0)
                        problem = NULL;
                json_decref(root);
                goto done;
        }
        version = json_object_get(root, "version");
        if (!json_is_integer(version) || json_integer_value(version) != JOURNAL_VERSION) {
                if (asprintf(&problem, "restore journal has version %lld, this rtd writes version %d; "
                             "restoring the entries it understands",
                             json_is_integer(version) ? (long long) json_integer_value(version) : -1LL,
                             JOURNAL_VERSION) < 0)
                        problem = NULL;
        }
        entries = json_object_get(root, "entries");
        if (!json_is_array(entries)) {
                if (!problem && asprintf(&problem, "restore journal has no \"entries\" array") < 0)
                        problem = NULL;
        } else {
                size_t i;
                json_t *o;
                json_array_foreach(entries, i, o) {
                        r = json_is_object(o) ? entry_from_json(j, o) : -EINVAL;
                        if (r == -ENOMEM)
                                break;
                        if (r < 0)
                                bad++;
                        r = 0;
                }
                if (bad > 0 && !problem &&
                    asprintf(&problem, "restore journal has %u unreadable entries (skipped)", bad) < 0)
                        problem = NULL;
        }
        /* Keep the informational header (reserved CPUs, backend) for reports. */
        const char *k;
        json_t *v;
        json_object_foreach(root, k, v)
                if (!streq(k, "entries") && !streq(k, "version"))
                        json_object_set(j->meta, k, v);
        json_decref(root);
done:
        if (ret_problem)
                *ret_problem = TAKE_PTR(problem);
        return r;
}

int journal_load(int dir_fd, Journal **ret, char **ret_problem) {
        _cleanup_(journal_freep) Journal *j = NULL;
        _cleanup_free_ char *text = NULL;
        int r;

        *ret = NULL;
        if (ret_problem)
                *ret_problem = NULL;
        r = read_full_file_at(dir_fd, JOURNAL_FILE, &text, NULL);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        j = journal_new(dir_fd);
        if (!j)
                return -ENOMEM;
        r = journal_parse(j, text, ret_problem);
        if (r < 0)
                return r;
        j->on_disk = true;
        *ret = TAKE_PTR(j);
        return 1;
}

int journal_flush(Journal *j) {
        _cleanup_free_ char *text = NULL;
        int r;

        if (!j->dirty || j->dir_fd < 0)
                return 0;
        if (j->n_entries == 0) {
                if (unlinkat(j->dir_fd, JOURNAL_FILE, 0) < 0 && errno != ENOENT)
                        return -errno;
                j->on_disk = false;
                j->dirty = false;
                return 0;
        }
        text = journal_serialize(j);
        if (!text)
                return -ENOMEM;
        r = write_file_atomic_at(j->dir_fd, JOURNAL_FILE, text, strlen(text), 0600);
        if (r < 0)
                return r;
        j->on_disk = true;
        j->dirty = false;
        return 0;
}

int journal_remove(Journal *j) {
        while (j->n_entries > 0)
                journal_forget(j, &j->entries[j->n_entries - 1]);
        j->dirty = true;
        return journal_flush(j);
}
