/* SPDX-License-Identifier: MIT */
/* Leveled logging: stderr with a level prefix, or structured journal entries via sd_journal_send(). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include "log.h"

static int max_level = LOG_INFO;
static bool use_journal;
/* The first and the latest error logged: why rtd could not start, for the clients that were waiting. */
static char first_error[512], last_error[512];

static const char *const level_names[] = {
        [LOG_EMERG] = "emerg", [LOG_ALERT] = "alert",   [LOG_CRIT] = "crit", [LOG_ERR] = "err",
        [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice", [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

int log_level_from_string(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(level_names); i++)
                if (streq(s, level_names[i]))
                        return (int) i;
        if (streq(s, "error"))
                return LOG_ERR;
        if (streq(s, "warn"))
                return LOG_WARNING;
        return -EINVAL;
}

const char *log_level_to_string(int level) {
        if (level < 0 || level >= (int) ELEMENTSOF(level_names))
                return "?";
        return level_names[level];
}

/* True when systemd connected our stderr to the journal ($JOURNAL_STREAM matches fd 2). */
static bool stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        struct stat st;
        unsigned long long dev, ino;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return st.st_dev == dev && st.st_ino == ino;
}

void log_open(bool force_journal) {
        use_journal = force_journal || stderr_is_journal();
}

bool log_use_journal(void) {
        return use_journal;
}

static void log_to_stderr(int level, const char *msg) {
        fprintf(stderr, "rtd[%s]: %s\n", log_level_to_string(level), msg);
}

static void copy_truncated(char *dst, size_t size, const char *src) {
        size_t n = strnlen(src, size - 1);

        memcpy(dst, src, n);
        dst[n] = 0;
}

int log_internal(int level, int error, const char *file, int line, const char *func, const char *fmt, ...) {
        char buf[2048];
        va_list ap;
        int saved = errno;

        error = error < 0 ? -error : error;
        if (level > max_level)
                return -error;

        errno = error;  /* so %m prints the error we were given */
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        errno = saved;

        if (level <= LOG_ERR) {
                if (!first_error[0])
                        copy_truncated(first_error, sizeof first_error, buf);
                copy_truncated(last_error, sizeof last_error, buf);
        }
        if (use_journal)
                sd_journal_send("MESSAGE=%s", buf, "PRIORITY=%i", level, "CODE_FILE=%s", file, "CODE_LINE=%i",
                                line, "CODE_FUNC=%s", func, error ? "ERRNO=%i" : NULL, error, NULL);
        else
                log_to_stderr(level, buf);
        return -error;
}

int log_struct_internal(int level, const char *file, int line, const char *func, const char *msgid,
                        const char *fields, const char *fmt, ...) {
        struct iovec iov[40];
        char *owned[40];
        size_t n = 0;
        char msg[2048];
        va_list ap;

        if (level > max_level)
                return 0;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);

        if (!use_journal) {
                log_to_stderr(level, msg);
                return 0;
        }

        if (asprintf(&owned[n++], "MESSAGE=%s", msg) < 0 || asprintf(&owned[n++], "PRIORITY=%i", level) < 0 ||
            asprintf(&owned[n++], "MESSAGE_ID=%s", msgid) < 0 || asprintf(&owned[n++], "CODE_FILE=%s", file) < 0 ||
            asprintf(&owned[n++], "CODE_LINE=%i", line) < 0 || asprintf(&owned[n++], "CODE_FUNC=%s", func) < 0) {
                n--;
                goto out;
        }

        for (const char *p = fields; p && *p && n < ELEMENTSOF(owned);) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t) (nl - p) : strlen(p);

                if (len > 0 && !(owned[n] = strndup(p, len)))
                        break;
                if (len > 0)
                        n++;
                p += len + (nl ? 1 : 0);
        }

        for (size_t i = 0; i < n; i++)
                iov[i] = (struct iovec){ .iov_base = owned[i], .iov_len = strlen(owned[i]) };
        (void) sd_journal_sendv(iov, (int) n);
out:
        for (size_t i = 0; i < n; i++)
                free(owned[i]);
        return 0;
}

const char *log_first_error(void) {
        return first_error[0] ? first_error : NULL;
}

const char *log_last_error(void) {
        return last_error[0] ? last_error : NULL;
}
