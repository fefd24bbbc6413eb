/* SPDX-License-Identifier: MIT */
/*
 * A finished job's cgroups (v2, v1 cpuset, v1 pids and memory) are removed a little after it ended, not at
 * once. The kernel releases a removed cgroup when its last reference goes, and queues that work
 * (css_release_work_fn, then css_free_rwork_fn) on the CPU that dropped it. Removed at once, that is the
 * job's reserved CPU: the last reference belongs to the job's task, which is freed there an RCU grace period
 * after its reap (perf, arrays of /bin/true: about 20 µs of the reserved CPU a task). Removed after that,
 * the rmdir on rtd's own CPU drops the last reference.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/manager.h"
#include "jobs-internal.h"
#include "shared/fileio.h"

#define REMOVE_LATER_USEC (50 * 1000ULL)

struct CgroupLater {
        CgroupLater *next;
        uint64_t due;           /* CLOCK_MONOTONIC */
        bool cgroups;           /* its v2 cgroup and v1 cpuset too, not only its v1 limit cgroups */
        char name[];
};

static void remove_now(JobManager *jm, const char *name, bool cgroups) {
        job_limits_remove(&jm->limits, name);
        if (cgroups && job_cgroups_remove(jm, name) < 0) {
                /* Whatever the job left behind goes with it; what is still dying, the sweep removes later. */
                job_cgroups_signal(jm, name, SIGKILL);
                if (job_cgroups_remove(jm, name) < 0)
                        jm->cgroups_dirty = true;
        }
}

static CgroupLater *pop(JobManager *jm) {
        CgroupLater *c = jm->later_head;

        jm->later_head = c->next;
        if (!jm->later_head)
                jm->later_tail = NULL;
        return c;
}

static int on_later(sd_event_source *s, uint64_t usec, void *userdata) {
        JobManager *jm = userdata;
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        while (jm->later_head && jm->later_head->due <= now) {
                CgroupLater *c = pop(jm);
                remove_now(jm, c->name, c->cgroups);
                free(c);
        }
        if (jm->later_head) {
                (void) sd_event_source_set_time(s, jm->later_head->due);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        }
        return 0;
}

void job_cgroups_remove_later(JobManager *jm, const char *name, bool cgroups) {
        size_t l = strlen(name) + 1;
        CgroupLater *c = malloc(sizeof *c + l);
        bool idle = !jm->later_head;

        if (!c) {
                remove_now(jm, name, cgroups);
                return;
        }
        *c = (CgroupLater){ .due = now_usec(CLOCK_MONOTONIC) + REMOVE_LATER_USEC, .cgroups = cgroups };
        memcpy(c->name, name, l);
        if (jm->later_tail)
                jm->later_tail->next = c;
        else
                jm->later_head = c;
        jm->later_tail = c;
        if (!idle)
                return;
        /* Due within 10 ms of its time: several jobs' cgroups go in one turn. */
        if (!jm->later_src) {
                if (sd_event_add_time(jm->manager->event, &jm->later_src, CLOCK_MONOTONIC, c->due, 10000, on_later,
                                      jm) < 0)
                        job_cgroups_remove_pending(jm);
                return;
        }
        (void) sd_event_source_set_time(jm->later_src, c->due);
        (void) sd_event_source_set_enabled(jm->later_src, SD_EVENT_ONESHOT);
}

void job_cgroups_remove_pending(JobManager *jm) {
        while (jm->later_head) {
                CgroupLater *c = pop(jm);
                remove_now(jm, c->name, c->cgroups);
                free(c);
        }
        jm->later_src = sd_event_source_disable_unref(jm->later_src);
}
