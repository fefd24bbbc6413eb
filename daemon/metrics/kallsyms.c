/* SPDX-License-Identifier: MIT */
/* See kallsyms.h. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kallsyms.h"
#include "shared/macro.h"

#define MAX_CACHE 256

/* One pass over /proc/kallsyms: the text symbol at or below addr. */
static void lookup(Symbols *s, uint64_t addr, char *buf, size_t size) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[256], best[128] = "";
        uint64_t best_addr = 0;
        bool any = false;
        int fd;

        (void) snprintf(buf, size, "?");
        fd = openat(s->proc_fd, "kallsyms", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        f = fdopen(fd, "re");
        if (!f) {
                (void) close(fd);
                return;
        }
        while (fgets(line, sizeof line, f)) {
                uint64_t a;
                char type, name[128];

                if (sscanf(line, "%" SCNx64 " %c %127s", &a, &type, name) != 3)
                        continue;
                any |= a != 0;
                if ((type != 't' && type != 'T') || a > addr || a < best_addr)
                        continue;
                best_addr = a;
                (void) snprintf(best, sizeof best, "%s", name);
        }
        if (!any) {
                s->failures++;
                return;
        }
        if (best[0])
                (void) snprintf(buf, size, "%s+0x%" PRIx64, best, addr - best_addr);
}

const char *symbols_name(Symbols *s, uint64_t addr) {
        Symbol *n;

        if (addr == 0)
                return "-";
        for (size_t i = 0; i < s->n_cache; i++)
                if (s->cache[i].addr == addr)
                        return s->cache[i].name;
        if (s->failures > 0 || s->n_cache >= MAX_CACHE)
                return "?";
        n = reallocarray(s->cache, s->n_cache + 1, sizeof *n);
        if (!n)
                return "?";
        s->cache = n;
        n = &s->cache[s->n_cache++];
        n->addr = addr;
        lookup(s, addr, n->name, sizeof n->name);
        return n->name;
}

void symbols_done(Symbols *s) {
        free(s->cache);
        *s = (Symbols) { .proc_fd = s->proc_fd };
}
