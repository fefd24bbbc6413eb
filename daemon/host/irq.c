/* SPDX-License-Identifier: MIT */
/* IRQ affinity: each /proc/irq/N mask becomes (old ∩ housekeeping) or housekeeping; refusals are
 * classified (transient: retried; EIO/EPERM: unmovable, reported with the reason and the remedy). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "irq.h"
#include "shared/fileio.h"
#include "shared/log.h"

#define IRQ_WRITE_TRIES 3

IrqErrorClass irq_classify_error(int r) {
        switch (r) {
        case 0:
                return IRQ_ERROR_NONE;
        /* irqbalance's activate.c treats these as "try again later" (vector allocation races). */
        case -EAGAIN:
        case -EBUSY:
        case -ENOMEM:
        case -EINTR:
        case -EINVAL:
        case -ERANGE:
                return IRQ_ERROR_TRANSIENT;
        /* EIO before 6.12, EPERM since (TuneD plugin_scheduler.py): the affinity cannot be changed. */
        case -EIO:
        case -EPERM:
        case -ENOSPC:
                return IRQ_ERROR_UNMOVABLE;
        default:
                return IRQ_ERROR_FAILED;
        }
}

void irq_target_mask(const CpuSet *old, const CpuSet *hk, CpuSet *ret) {
        CpuSet t;

        cpuset_and(&t, old, hk);
        *ret = cpuset_is_empty(&t) ? *hk : t;
}

void irq_names_free(IrqName *names, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(names[i].chip);
                free(names[i].name);
        }
        free(names);
}

static bool is_hwirq_token(const char *t) {
        /* "5-edge", "27", "Level", "Edge", "fasteoi": the hwirq number and trigger type columns. */
        if (isdigit((unsigned char) t[0])) {
                while (isdigit((unsigned char) *t))
                        t++;
                return *t == 0 || *t == '-';
        }
        return streq(t, "Level") || streq(t, "Edge") || streq(t, "level") || streq(t, "edge") ||
               streq(t, "fasteoi");
}

int irq_parse_interrupts(const char *text, IrqName **ret, size_t *ret_n) {
        IrqName *names = NULL;
        size_t n = 0, alloc = 0;
        unsigned ncpus = 0;
        const char *p = text, *nl;

        /* The header names one column per online CPU. */
        nl = strchr(p, '\n');
        for (const char *q = p; q && q < (nl ?: p + strlen(p)); q++)
                if (startswith(q, "CPU"))
                        ncpus++;
        p = nl ? nl + 1 : p + strlen(p);

        for (; *p; p = nl ? nl + 1 : p + strlen(p)) {
                _cleanup_free_ char *line = NULL;
                char *save = NULL, *tok, *end;
                unsigned long irq;
                size_t len;

                nl = strchr(p, '\n');
                len = nl ? (size_t) (nl - p) : strlen(p);
                line = strndup(p, len);
                if (!line)
                        goto oom;
                tok = strtok_r(line, " \t", &save);
                if (!tok)
                        continue;
                irq = strtoul(tok, &end, 10);
                if (end == tok || !streq(end, ":"))
                        continue;       /* NMI:, LOC:, ... are not numbered IRQs */
                for (unsigned c = 0; c < ncpus && tok; c++)
                        tok = strtok_r(NULL, " \t", &save);
                tok = strtok_r(NULL, " \t", &save);
                if (n == alloc) {
                        alloc = MAX((size_t) 32, alloc * 2);
                        IrqName *nn = realloc(names, alloc * sizeof *nn);
                        if (!nn)
                                goto oom;
                        names = nn;
                }
                IrqName *in = &names[n++];
                *in = (IrqName){ .irq = (unsigned) irq, .chip = tok ? strdup(tok) : NULL };
                /* The rest, after the hwirq/type columns, is the action names. */
                while ((tok = strtok_r(NULL, " \t", &save)) && is_hwirq_token(tok))
                        ;
                if (tok) {
                        size_t off = (size_t) (tok - line);
                        in->name = strdup(p + off);
                        if (in->name) {
                                size_t l = strlen(in->name);
                                if (nl && l > (size_t) (nl - (p + off)))
                                        in->name[nl - (p + off)] = 0;
                                while ((l = strlen(in->name)) > 0 && isspace((unsigned char) in->name[l - 1]))
                                        in->name[l - 1] = 0;
                        }
                }
        }
        *ret = names;
        *ret_n = n;
        return 0;
oom:
        irq_names_free(names, n);
        return -ENOMEM;
}

void irq_explain_refusal(int error, const char *chip, const char *name, const char **ret_reason,
                         const char **ret_remedy) {
        chip = strempty(chip);
        name = strempty(name);
        if (error == -ENOSPC) {
                *ret_reason = "no free interrupt vectors left on the housekeeping CPUs";
                *ret_remedy = "keep more housekeeping CPUs, or reduce the device's queue count";
        } else if (strstr(chip, "percpu") || strstr(chip, "PCPU") || strstr(name, "timer") ||
                   strstr(chip, "-IPI")) {
                *ret_reason = "per-CPU interrupt: it fires on every CPU by design";
                *ret_remedy = "it cannot be moved; booting with nohz_full= for the reserved CPUs reduces "
                              "timer ticks there";
        } else if (strstr(chip, "MSI")) {
                *ret_reason = "kernel-managed interrupt (a per-queue vector of a multi-queue device): the "
                              "driver fixes its affinity";
                *ret_remedy = "boot with isolcpus=managed_irq,<reserved CPUs> so managed IRQs avoid them, "
                              "or reduce the device's queue count (ethtool -L, nvme poll_queues)";
        } else {
                *ret_reason = "the kernel does not allow changing this IRQ's affinity";
                *ret_remedy = "if it is a managed IRQ, boot with isolcpus=managed_irq,<reserved CPUs>";
        }
}

static void unmovable_clear(IrqState *s) {
        for (size_t i = 0; i < s->n_unmovable; i++) {
                free(s->unmovable[i].name);
                free(s->unmovable[i].chip);
        }
        free(s->unmovable);
        s->unmovable = NULL;
        s->n_unmovable = 0;
}

void irq_state_done(IrqState *s) {
        unmovable_clear(s);
        json_decref(s->failures);
        free(s->irqbalance_note);
        *s = (IrqState){};
}

static int irq_cmp(const void *a, const void *b) {
        unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;
        return (x > y) - (x < y);
}

static int list_irqs(int proc_fd, unsigned **ret, size_t *ret_n) {
        _cleanup_free_ unsigned *irqs = NULL;
        size_t n = 0, alloc = 0;
        _cleanup_closedir_ DIR *d = opendir_at(proc_fd, "irq");
        struct dirent *de;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char *end;
                unsigned long v = strtoul(de->d_name, &end, 10);
                if (*end || end == de->d_name)
                        continue;
                if (n == alloc) {
                        alloc = MAX((size_t) 64, alloc * 2);
                        unsigned *p = realloc(irqs, alloc * sizeof *p);
                        if (!p)
                                return -ENOMEM;
                        irqs = p;
                }
                irqs[n++] = (unsigned) v;
        }
        qsort(irqs, n, sizeof *irqs, irq_cmp);
        *ret = TAKE_PTR(irqs);
        *ret_n = n;
        return 0;
}

static const IrqName *name_of(const IrqName *names, size_t n, unsigned irq) {
        for (size_t i = 0; i < n; i++)
                if (names[i].irq == irq)
                        return &names[i];
        return NULL;
}

static int write_with_retry(KnobCtx *k, const char *path, const char *value) {
        int r = 0;

        for (unsigned t = 0; t < IRQ_WRITE_TRIES; t++) {
                r = knob_write_fn(k)(k->proc_fd, path, value);
                if (irq_classify_error(r) != IRQ_ERROR_TRANSIENT)
                        return r;
                (void) nanosleep(&(struct timespec){ .tv_nsec = 2 * 1000 * 1000 }, NULL);
        }
        return r;
}

static const IrqUnmovable *find_unmovable(const IrqState *st, unsigned irq) {
        for (size_t i = 0; i < st->n_unmovable; i++)
                if (st->unmovable[i].irq == irq)
                        return &st->unmovable[i];
        return NULL;
}

typedef struct IrqChange {
        unsigned irq;
        bool added, drifted;
        CpuSet cur;
        char *value;
} IrqChange;

static int add_unmovable(IrqState *st, unsigned irq, const IrqName *nm, const CpuSet *cur,
                         const CpuSet *reserved, int error) {
        IrqUnmovable *p = realloc(st->unmovable, (st->n_unmovable + 1) * sizeof *p);

        if (!p)
                return -ENOMEM;
        st->unmovable = p;
        IrqUnmovable *u = &p[st->n_unmovable++];
        *u = (IrqUnmovable){ .irq = irq, .error = error };
        u->name = nm && nm->name ? strdup(nm->name) : NULL;
        u->chip = nm && nm->chip ? strdup(nm->chip) : NULL;
        cpuset_and(&u->hits, cur, reserved);
        irq_explain_refusal(error, u->chip, u->name, &u->reason, &u->remedy);
        return 0;
}

static int apply_default_affinity(KnobCtx *k, const CpuSet *hk, unsigned nr_cpu_ids, IrqState *st) {
        _cleanup_free_ char *cur_s = NULL, *value = NULL;
        JournalEntry *e = journal_find(k->journal, JOURNAL_KNOB, KNOB_PROC, "irq/default_smp_affinity");
        CpuSet cur, orig, target;
        int r;

        r = read_one_line_at(k->proc_fd, "irq/default_smp_affinity", &cur_s);
        if (r < 0)
                return r == -ENOENT ? 0 : r;
        if (cpuset_parse_mask(cur_s, &cur) < 0)
                return -EINVAL;
        orig = cur;
        if (e && cpuset_parse_mask(e->original, &orig) < 0)
                orig = cur;
        irq_target_mask(&orig, hk, &target);
        if (cpuset_equal(&cur, &target)) {
                st->default_affinity_set = true;
                return 0;
        }
        r = cpuset_format_mask(&target, nr_cpu_ids, &value);
        if (r < 0)
                return r;
        r = knob_set(k, KNOB_PROC, "irq/default_smp_affinity", value, NULL);
        if (r >= 0)
                st->default_affinity_set = true;
        return r;
}

int irq_apply(KnobCtx *k, const CpuSet *hk, const CpuSet *reserved, unsigned nr_cpu_ids, bool drift,
              IrqState *st) {
        _cleanup_free_ unsigned *irqs = NULL;
        _cleanup_free_ char *itext = NULL;
        IrqName *names = NULL;
        IrqChange *changes = NULL;
        size_t n_irqs = 0, n_names = 0, n_changes = 0;
        IrqState old_unmovable = { .unmovable = st->unmovable, .n_unmovable = st->n_unmovable };
        int r;

        r = list_irqs(k->proc_fd, &irqs, &n_irqs);
        if (r < 0)
                return r;
        if (read_full_file_at(k->proc_fd, "interrupts", &itext, NULL) >= 0)
                (void) irq_parse_interrupts(itext, &names, &n_names);
        changes = calloc(MAX(n_irqs, (size_t) 1), sizeof *changes);
        if (!changes) {
                r = -ENOMEM;
                goto finish;
        }
        /* A fresh pass (new reservation) tries every IRQ again; a drift check skips known refusals. */
        st->unmovable = NULL;
        st->n_unmovable = 0;
        json_decref(st->failures);
        st->failures = json_array();
        st->total = n_irqs;
        st->moved = st->already = st->failed = 0;
        st->reserved = *reserved;

        for (size_t i = 0; i < n_irqs; i++) {
                _cleanup_free_ char *cur_s = NULL, *value = NULL;
                char path[64];
                CpuSet cur, orig, target;
                JournalEntry *e;
                bool added = false;

                snprintf(path, sizeof path, "irq/%u/smp_affinity_list", irqs[i]);
                if (read_one_line_at(k->proc_fd, path, &cur_s) < 0 || cpuset_parse(cur_s, &cur, NULL) < 0)
                        continue;       /* freed meanwhile, or no affinity file (chained IRQ) */
                const IrqUnmovable *known = drift ? find_unmovable(&old_unmovable, irqs[i]) : NULL;
                if (known) {
                        r = add_unmovable(st, irqs[i], name_of(names, n_names, irqs[i]), &cur, reserved,
                                          known->error);
                        if (r < 0)
                                goto finish;
                        continue;
                }
                e = journal_find(k->journal, JOURNAL_KNOB, KNOB_PROC, path);
                orig = cur;
                if (e && cpuset_parse(e->original, &orig, NULL) < 0)
                        orig = cur;
                irq_target_mask(&orig, hk, &target);
                if (cpuset_equal(&cur, &target)) {
                        st->already++;
                        continue;
                }
                r = cpuset_format(&target, &value);
                if (r < 0)
                        goto finish;
                if (k->plan) {
                        r = knob_plan(k, KNOB_PROC, path, cur_s, value);
                        if (r < 0)
                                goto finish;
                        st->moved++;
                        continue;
                }
                r = journal_add(k->journal, JOURNAL_KNOB, KNOB_PROC, path, cur_s, &e, &added);
                if (r >= 0)
                        r = journal_entry_set_applied(k->journal, e, value);
                if (r < 0)
                        goto finish;
                changes[n_changes++] = (IrqChange){ .irq = irqs[i], .added = added, .drifted = drift && !added,
                                                    .cur = cur, .value = TAKE_PTR(value) };
        }

        if (!k->plan) {
                /* Originals first, durably; only then the masks. */
                r = journal_flush(k->journal);
                if (r < 0)
                        goto finish;
        }
        for (size_t i = 0; i < n_changes; i++) {
                IrqChange *c = &changes[i];
                char path[64];

                snprintf(path, sizeof path, "irq/%u/smp_affinity_list", c->irq);
                r = write_with_retry(k, path, c->value);
                if (r >= 0) {
                        st->moved++;
                        if (c->drifted)
                                st->drifted++;
                        continue;
                }
                JournalEntry *e = journal_find(k->journal, JOURNAL_KNOB, KNOB_PROC, path);
                if (e && c->added)
                        journal_forget(k->journal, e);  /* unchanged: nothing to restore */
                if (irq_classify_error(r) == IRQ_ERROR_UNMOVABLE) {
                        r = add_unmovable(st, c->irq, name_of(names, n_names, c->irq), &c->cur, reserved, r);
                        if (r < 0)
                                goto finish;
                } else {
                        st->failed++;
                        json_array_append_new(st->failures, json_pack("{s:i, s:s}", "irq", (int) c->irq,
                                                                      "error", strerror(-r)));
                        log_warning_errno(r, "Could not set the affinity of IRQ %u: %m", c->irq);
                }
        }
        r = 0;
        if (!k->plan)
                (void) journal_flush(k->journal);
        {
                int q = apply_default_affinity(k, hk, nr_cpu_ids, st);
                if (q < 0)
                        log_warning_errno(q, "Could not set /proc/irq/default_smp_affinity: %m");
        }
finish:
        for (size_t i = 0; i < n_changes; i++)
                free(changes[i].value);
        free(changes);
        irq_names_free(names, n_names);
        unmovable_clear(&old_unmovable);
        return r;
}

/* The remedy with the reserved CPUs filled in. */
char *irq_remedy(const char *remedy, const CpuSet *reserved) {
        _cleanup_free_ char *l = NULL;
        const char *at = strstr(remedy, "<reserved CPUs>");
        char *s;

        if (!at || cpuset_format(reserved, &l) < 0 || cpuset_is_empty(reserved))
                return strdup(remedy);
        if (asprintf(&s, "%.*s%s%s", (int) (at - remedy), remedy, l, at + strlen("<reserved CPUs>")) < 0)
                return NULL;
        return s;
}

json_t *irq_state_to_json(const IrqState *st) {
        json_t *list = json_array();

        for (size_t i = 0; i < st->n_unmovable; i++) {
                const IrqUnmovable *u = &st->unmovable[i];
                _cleanup_free_ char *hits = NULL, *remedy = irq_remedy(u->remedy, &st->reserved);
                (void) cpuset_format(&u->hits, &hits);
                json_array_append_new(list, json_pack("{s:i, s:s?, s:s?, s:s, s:s, s:s, s:s}", "irq", (int) u->irq,
                                                      "name", u->name, "chip", u->chip, "reserved_cpus_hit",
                                                      strempty(hits), "error", strerror(-u->error), "reason",
                                                      u->reason, "remedy", remedy ?: u->remedy));
        }
        json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:b, s:o, s:O?}", "total", (json_int_t) st->total,
                              "moved", (json_int_t) st->moved, "already_housekeeping", (json_int_t) st->already,
                              "failed", (json_int_t) st->failed, "drifted", (json_int_t) st->drifted,
                              "default_affinity_set", st->default_affinity_set, "unmovable", list,
                              "failures", st->failures);
        if (o && st->irqbalance_note)
                json_object_set_new(o, "irqbalance", json_pack("{s:i, s:s}", "pid", (int) st->irqbalance_pid,
                                                               "note", st->irqbalance_note));
        return o;
}

pid_t irqbalance_find(int proc_fd) {
        _cleanup_closedir_ DIR *d = opendir_at(proc_fd, ".");
        pid_t found = 0;
        struct dirent *de;

        if (!d)
                return 0;
        /* Bounded by time too (a fork storm must not hold the loop): not found in time is not found. */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (unsigned n = 0; !found && (de = readdir(d)); n++) {
                _cleanup_free_ char *comm = NULL;
                char path[64], *end;
                long pid = strtol(de->d_name, &end, 10);
                if ((n & 63) == 63 && clock_gettime(CLOCK_MONOTONIC, &t) == 0 &&
                    (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > 250)
                        break;
                if (*end || pid <= 0)
                        continue;
                snprintf(path, sizeof path, "%ld/comm", pid);
                if (read_one_line_at(proc_fd, path, &comm) >= 0 && streq(comm, "irqbalance"))
                        found = (pid_t) pid;
        }
        return found;
}

/* irqbalance's control socket: /run/irqbalance/irqbalance<pid>.sock, or the abstract name (a leading '@'). */
static int irqbalance_send(const char *socket_name, const char *cmd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        socklen_t len;
        size_t l = strlen(socket_name);

        if (l >= sizeof sa.sun_path)
                return -EINVAL;
        memcpy(sa.sun_path, socket_name, l);
        if (socket_name[0] == '@')
                sa.sun_path[0] = 0;
        len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + l + (socket_name[0] == '@' ? 0 : 1));
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* irqbalance checks the sender's credentials (uid 0); the kernel attaches them (SO_PASSCRED). */
        if (connect(fd, (struct sockaddr *) &sa, len) < 0)
                return -errno;
        if (send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) < 0)
                return -errno;
        return 0;
}

static int irqbalance_socket(pid_t pid, char **ret) {
        char *s;

        if (asprintf(&s, "/run/irqbalance/irqbalance%d.sock", (int) pid) < 0)
                return -ENOMEM;
        if (access(s, F_OK) < 0) {
                free(s);
                if (asprintf(&s, "@irqbalance%d.sock", (int) pid) < 0)
                        return -ENOMEM;
        }
        *ret = s;
        return 0;
}

int irqbalance_ban(KnobCtx *k, pid_t pid, const CpuSet *reserved, char **ret_note) {
        _cleanup_free_ char *sock = NULL, *list = NULL, *cmd = NULL;
        JournalEntry *e;
        int r;

        r = irqbalance_socket(pid, &sock);
        if (r >= 0)
                r = cpuset_format(reserved, &list);
        if (r >= 0 && asprintf(&cmd, "settings cpus %s", list) < 0)
                r = -ENOMEM;
        if (r < 0)
                return r;
        if (k->plan)
                return json_array_append_new(k->plan, json_pack("{s:s, s:s}", "irqbalance", sock, "send", cmd));
        r = journal_add(k->journal, JOURNAL_IRQBALANCE, KNOB_PROC, sock, "NULL", &e, NULL);
        if (r >= 0) {
                e->pid = pid;
                r = journal_flush(k->journal);
        }
        if (r >= 0)
                r = irqbalance_send(sock, cmd);
        if (r < 0) {
                if (asprintf(ret_note, "irqbalance (pid %d) runs and could not be told to leave CPUs %s "
                             "alone (%s): it may undo the IRQ masks; the drift check re-applies them",
                             (int) pid, list, strerror(-r)) < 0)
                        *ret_note = NULL;
                return r;
        }
        if (asprintf(ret_note, "irqbalance (pid %d) runs: told to leave CPUs %s alone over %s", (int) pid,
                     list, sock) < 0)
                *ret_note = NULL;
        return 0;
}

int irqbalance_reset(pid_t pid, const char *socket_name) {
        char path[64];

        snprintf(path, sizeof path, "/proc/%d/comm", (int) pid);
        if (access(path, F_OK) < 0)
                return -ESRCH;
        return irqbalance_send(socket_name, "settings cpus NULL");
}

static int irqbalance_undo(const JournalEntry *e, int proc_fd, int sys_fd) {
        int r = irqbalance_reset(e->pid, e->key);

        /* irqbalance restarted: it starts from its own config. */
        return r == -ESRCH || r == -ENOENT || r == -ECONNREFUSED ? 1 : r;
}

void irqbalance_register_undo(void) {
        journal_register_undo(JOURNAL_IRQBALANCE, irqbalance_undo);
}
