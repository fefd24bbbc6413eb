/* SPDX-License-Identifier: MIT */
/* Kernel addresses to symbol names ("smp_call_function_many_cond+0x1a"), from /proc/kallsyms, cached:
 * the IPI call sites of metrics are a handful, so each new one costs one scan of the file. */
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
        size_t failures;                /* scans that found no address at all (kptr_restrict): stop trying */
} Symbols;

/* The name of addr (cached); "?" when /proc/kallsyms hides addresses. Never NULL. */
const char *symbols_name(Symbols *s, uint64_t addr);
void symbols_done(Symbols *s);
