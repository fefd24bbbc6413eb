/* SPDX-License-Identifier: MIT */
/* See kallsyms.h. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kallsyms.h"
#include "shared/macro.h"

#define MAX_CACHE 256
#define MAX_BATCH 64

typedef struct Want {
        uint64_t addr;
        uint64_t best_addr;
        Symbol *into;
} Want;

/* "ffffffff81000000 T _stext [module]": address, type, name. Hand-parsed: sscanf() made a scan of the
 * file's ~120000 lines take 50 ms of rtd's loop, where reading it costs the kernel about 25. */
static bool parse_line(char *line, uint64_t *ret_addr, char *ret_type, char **ret_name) {
        char *p;

        *ret_addr = strtoull(line, &p, 16);
        if (p == line || *p != ' ' || !p[1] || p[2] != ' ')
                return false;
        *ret_type = p[1];
        *ret_name = p + 3;
        (*ret_name)[strcspn(*ret_name, " \t\n")] = 0;
        return true;
}

/* One pass over /proc/kallsyms for every address in want: the text symbol at or below each. */
static void lookup(Symbols *s, Want *want, size_t n) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[256];
        bool any = false;
        int fd;

        for (size_t i = 0; i < n; i++)
                (void) snprintf(want[i].into->name, sizeof want[i].into->name, "?");
        fd = openat(s->proc_fd, "kallsyms", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        f = fdopen(fd, "re");
        if (!f) {
                (void) close(fd);
                return;
        }
        s->scans++;
        while (fgets(line, sizeof line, f)) {
                uint64_t a;
                char type, *name;

                if (!parse_line(line, &a, &type, &name))
                        continue;
                any |= a != 0;
                if (type != 't' && type != 'T')
                        continue;
                for (size_t i = 0; i < n; i++) {
                        Want *w = &want[i];
                        if (a > w->addr || a < w->best_addr)
                                continue;
                        w->best_addr = a;
                        (void) snprintf(w->into->name, sizeof w->into->name, "%s+0x%llx", name,
                                        (unsigned long long) (w->addr - a));
                }
        }
        if (!any) {
                s->failures++;
                for (size_t i = 0; i < n; i++)
                        (void) snprintf(want[i].into->name, sizeof want[i].into->name, "?");
        }
}

static Symbol *cached(Symbols *s, uint64_t addr) {
        for (size_t i = 0; i < s->n_cache; i++)
                if (s->cache[i].addr == addr)
                        return &s->cache[i];
        return NULL;
}

void symbols_resolve(Symbols *s, const uint64_t *addrs, size_t n) {
        Want want[MAX_BATCH];
        size_t n_want = 0, first;
        Symbol *grown;

        if (s->failures > 0)
                return;
        first = s->n_cache;
        for (size_t i = 0; i < n && n_want < MAX_BATCH && s->n_cache + n_want < MAX_CACHE; i++) {
                bool dup = addrs[i] == 0 || cached(s, addrs[i]);
                for (size_t k = 0; k < n_want && !dup; k++)
                        dup = want[k].addr == addrs[i];
                if (!dup)
                        want[n_want++] = (Want) { .addr = addrs[i] };
        }
        if (n_want == 0)
                return;
        grown = reallocarray(s->cache, first + n_want, sizeof *grown);
        if (!grown)
                return;
        s->cache = grown;
        for (size_t k = 0; k < n_want; k++) {
                s->cache[first + k] = (Symbol) { .addr = want[k].addr };
                want[k].into = &s->cache[first + k];
        }
        s->n_cache = first + n_want;
        lookup(s, want, n_want);
}

const char *symbols_name(Symbols *s, uint64_t addr) {
        Symbol *c;

        if (addr == 0)
                return "-";
        c = cached(s, addr);
        if (!c && s->failures == 0) {
                symbols_resolve(s, &addr, 1);
                c = cached(s, addr);
        }
        return c ? c->name : "?";
}

void symbols_done(Symbols *s) {
        free(s->cache);
        *s = (Symbols) { .proc_fd = s->proc_fd };
}
