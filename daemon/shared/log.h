/* SPDX-License-Identifier: MIT */
/* Leveled logging to stderr, and to the journal as structured entries when it is there. */
#pragma once

#include <stdbool.h>
#include <syslog.h>

#include "macro.h"

void log_set_max_level(int level);
int log_get_max_level(void);
int log_level_from_string(const char *s);       /* "debug".."emerg" → LOG_*, or -EINVAL */
const char *log_level_to_string(int level);
/* Log to the journal (structured) instead of stderr when stderr is connected to it or forced. */
void log_open(bool use_journal);
bool log_use_journal(void);

/* The first and the latest message logged at LOG_ERR or worse (NULL if none), e.g. to tell a client why rtd
 * could not start. */
const char *log_first_error(void);
const char *log_last_error(void);

/* Returns -abs(error) so callers can `return log_error_errno(r, ...)`. %m prints strerror(error). */
int log_internal(int level, int error, const char *file, int line, const char *func, const char *fmt, ...)
        _printf_(6, 7);

/*
 * A structured journal entry for a state change: a fixed MESSAGE_ID (see messages.h), extra fields as one
 * string of "RTD_FIELD=value" lines separated by '\n' (may be NULL), and the human message. On stderr only
 * the message is printed.
 */
int log_struct_internal(int level, const char *file, int line, const char *func, const char *msgid,
                        const char *fields, const char *fmt, ...) _printf_(7, 8);
#define log_full_errno(level, error, ...) log_internal(level, error, __FILE__, __LINE__, __func__, __VA_ARGS__)
#define log_full(level, ...) (void) log_internal(level, 0, __FILE__, __LINE__, __func__, __VA_ARGS__)

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

#define log_struct(level, msgid, fields, ...) \
        (void) log_struct_internal(level, __FILE__, __LINE__, __func__, msgid, fields, __VA_ARGS__)
