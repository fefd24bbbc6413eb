/* SPDX-License-Identifier: MIT */
/* Test helpers for the reservation modules: a fixture tree (tests/fixtures/irq-*) copied to a temp dir,
 * dirfds for its proc/ and sys/, a journal directory, and a write hook that injects kernel refusals. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/restore.h"
#include "host/undo.h"
#include "shared/fileio.h"
#include "shared/macro.h"

#ifndef RTD_FIXTURES_DIR
#define RTD_FIXTURES_DIR "tests/fixtures"
#endif

typedef struct KnobFixture {
        char dir[64];
        int proc_fd, sys_fd, run_fd;
        Journal *journal;
        KnobCtx k;
} KnobFixture;

static inline const char *fixtures_dir(void) {
        return getenv("RTD_FIXTURES") ?: RTD_FIXTURES_DIR;
}

static inline KnobFixture *knob_fixture_new(const char *name) {
        KnobFixture *f = calloc(1, sizeof *f);
        char cmd[512];

        assert_non_null(f);
        host_register_undos();  /* as rtd's main() does: the owners of task/unit/irqbalance entries undo them */
        snprintf(f->dir, sizeof f->dir, "/tmp/rtd-unit-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(cmd, sizeof cmd, "cp -a '%s/%s/.' '%s/' && mkdir -p '%s/proc' '%s/sys' '%s/run'", fixtures_dir(),
                 name, f->dir, f->dir, f->dir, f->dir);
        assert_int_equal(system(cmd), 0);
        snprintf(cmd, sizeof cmd, "%s/proc", f->dir);
        f->proc_fd = open(cmd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        snprintf(cmd, sizeof cmd, "%s/sys", f->dir);
        f->sys_fd = open(cmd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        snprintf(cmd, sizeof cmd, "%s/run", f->dir);
        f->run_fd = open(cmd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(f->proc_fd >= 0 && f->sys_fd >= 0 && f->run_fd >= 0);
        f->journal = journal_new(f->run_fd);
        assert_non_null(f->journal);
        f->k = (KnobCtx){ .proc_fd = f->proc_fd, .sys_fd = f->sys_fd, .journal = f->journal };
        return f;
}

static inline void knob_fixture_free(KnobFixture *f) {
        char cmd[128];

        if (!f)
                return;
        journal_free(f->journal);
        safe_close(f->proc_fd);
        safe_close(f->sys_fd);
        safe_close(f->run_fd);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", f->dir);
        free(f);
}

/* The first line of a fixture file, without the newline (static buffer). */
static inline const char *fx_read(int dir_fd, const char *path) {
        static char buf[4096];
        char *s = NULL;

        if (read_one_line_at(dir_fd, path, &s) < 0)
                return NULL;
        snprintf(buf, sizeof buf, "%s", s);
        free(s);
        return buf;
}

static inline void fx_write(int dir_fd, const char *path, const char *value) {
        _cleanup_close_ int fd = openat(dir_fd, path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, value, strlen(value)), (ssize_t) strlen(value));
}

/* Writing a regular file appends; the kernel replaces. Do what the kernel does. */
static inline int fx_kernel_write(int dir_fd, const char *path, const char *value) {
        int fd = openat(dir_fd, path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, value, strlen(value));
        int r = n < 0 ? -errno : 0;
        close(fd);
        return r;
}
