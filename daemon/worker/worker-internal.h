/* SPDX-License-Identifier: MIT */
/* What rtd-worker's loop (worker-main.c) and its job child (worker-child.c) share; nothing else includes it. */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "worker-proto.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

typedef union StartBuf {
        WorkerStart start;
        char raw[sizeof(WorkerStart) + 65536 * sizeof(gid_t) + 256 * 1024];
} StartBuf;

/* A message from rtd with the file descriptors that came with it (see WORKER_START_CGROUP). */
typedef struct Inbox {
        StartBuf b;
        size_t size;
        int fds[WORKER_START_MAX_FDS];
        unsigned n_fds;
} Inbox;

/* What a START's descriptors are for; -1 where none came. */
typedef struct JobFds {
        int cgroup, cpuset, out, err;
        int join[WORKER_START_MAX_JOIN];        /* cgroup v1 directories to join */
        unsigned n_join;
        int kill;                               /* the cgroup's cgroup.kill (WORKER_START_KILL) */
} JobFds;

/* The steps a child may hang in, as it writes them to its pipe and as rtd is told. */
#define STEP_SETUP 's'
#define STEP_CHDIR 'c'
#define STEP_PATH 'p'
#define STEP_EXEC 'e'
const char *step_name(char step);

typedef struct ChildArgs {
        const WorkerStart *st;
        const gid_t *groups;
        char *strings;
        JobFds fds;
        int step_fd;            /* the pipe's write end, close-on-exec */
        bool born_in_cgroup;
} ChildArgs;

extern int worker_sock;                 /* the socket to rtd */
extern int worker_devnull;              /* /dev/null, opened at start (close-on-exec), or -1 */
extern cpu_set_t worker_mask;           /* the worker's own CPU: a job on exactly it inherits the mask */

/* The job's pid, born in its cgroup when it has one and the kernel can (else the child joins it), or -1
 * (errno set). m: the START; a: filled in here, the caller's copy for a forked child. */
pid_t spawn_job(const Inbox *m, ChildArgs *a);
/* The child pid left the memory it shared with the worker (exec'd or died): its area is free again. */
void area_release(pid_t pid);
/* Write s to dir/path with raw system calls (safe in the child); 0 or -errno. */
int write_str_at(int dir, const char *path, const char *s);
