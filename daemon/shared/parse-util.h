/* SPDX-License-Identifier: MIT */
/* Strict number and boolean parsers: the whole string must be the value, or it is -EINVAL. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

int safe_atou64(const char *s, uint64_t *ret);
int safe_atoi64(const char *s, int64_t *ret);
int safe_atou(const char *s, unsigned *ret);
int safe_atoi(const char *s, int *ret);
int parse_boolean(const char *s);       /* yes/no, true/false, on/off, 1/0 → 1/0, else -EINVAL */
int parse_mode(const char *s, unsigned *ret);   /* octal file mode, 0..07777 */
