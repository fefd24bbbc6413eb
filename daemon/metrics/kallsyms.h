/* SPDX-License-Identifier: MIT */
/* Kernel addresses to symbol names ("smp_call_function_many_cond+0x1a"), from /proc/kallsyms, cached:
 * the IPI call sites of metrics are a handful. A scan of the file holds rtd's loop for some 30 ms (the
 * kernel formats ~120000 lines), so the new addresses of a sample are named together in one scan. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct Symbol {
        uint64_t addr;
        char name[48];
} Symbol;

typedef struct Symbols {
        int proc_fd;
        Symbol *cache;
        size_t n_cache;
        size_t scans;                   /* passes over the file so far */
        size_t failures;                /* scans that found no address at all (kptr_restrict): stop trying */
} Symbols;

/* The name of addr (cached); "?" when /proc/kallsyms hides addresses. Never NULL. */
const char *symbols_name(Symbols *s, uint64_t addr);
/* Name every uncached address of addrs (0s ignored) in one pass over the file, for symbols_name(). */
void symbols_resolve(Symbols *s, const uint64_t *addrs, size_t n);
void symbols_done(Symbols *s);
