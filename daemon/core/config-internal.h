/* SPDX-License-Identifier: MIT */
/* rtd.conf's table (config.c) and its value parsers (config-values.c): nothing outside core/ includes this. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* A parser gets the value and writes into the field at ptr; on error it fills *allowed with what is valid. */
typedef int (*ConfParser)(const char *value, void *ptr, const void *arg, const char **allowed);

typedef struct ConfItem {
        const char *section;
        const char *key;
        ConfParser parse;
        size_t offset;
        const void *arg;        /* parser-specific: bounds, enum names */
} ConfItem;

typedef struct UintRange {
        unsigned min, max;
        const char *allowed;
} UintRange;

typedef struct EnumSpec {
        const char *const *names;       /* NULL-terminated, index = enum value */
        const char *allowed;
} EnumSpec;

typedef struct TuneRange {
        int64_t min, max;
        const char *allowed;
} TuneRange;

typedef struct UsecRange {
        uint64_t min, max;
        const char *allowed;
} UsecRange;

typedef struct SizeRange {
        uint64_t min;
        const char *allowed;
} SizeRange;

/* config-values.c: one parser per kind of value; arg is the item's range or EnumSpec. */
int parse_string(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_absolute_path(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_group_or_none(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_uint(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_bool(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_socket_mode(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_log_level(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_listen(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_enum(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_reserve_cpus(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_tune(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_sec_usec(const char *v, void *ptr, const void *arg, const char **allowed);
int parse_size(const char *v, void *ptr, const void *arg, const char **allowed);
