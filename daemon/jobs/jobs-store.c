/* SPDX-License-Identifier: MIT */
/*
 * Job store writes that must not be lost: a state change the store refused (a full disk, an I/O error) is
 * kept and written again every second until it goes through, so the store ends up telling the truth; until
 * then GET /v1/jobs/ID shows the kept state and /v1/status counts what is pending. A new job that cannot
 * be stored is refused instead (507), never queued in memory only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/manager.h"
#include "jobs-internal.h"
#include "shared/log.h"
#include "store/store.h"

struct PendingWrite {
        uint64_t id, seq;
        uid_t uid;
        char *state;
        json_t *data;
        PendingWrite *next;
};

static PendingWrite *pending_find(JobManager *jm, uint64_t id) {
        for (PendingWrite *p = jm->pending_writes; p; p = p->next)
                if (p->id == id)
                        return p;
        return NULL;
}

static void pending_drop(JobManager *jm, PendingWrite *w) {
        for (PendingWrite **p = &jm->pending_writes; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        break;
                }
        free(w->state);
        json_decref(w->data);
        free(w);
        jm->n_pending_writes--;
}

static int on_store_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        JobManager *jm = userdata;
        unsigned done = 0;
        int r = 0;

        for (PendingWrite *p = jm->pending_writes, *next; p; p = next) {
                StoreJob sj = { .id = p->id, .state = p->state, .uid = p->uid, .seq = p->seq, .data = p->data };
                next = p->next;
                r = store_update(jm->store, &sj);
                if (r < 0)
                        break;
                pending_drop(jm, p);
                done++;
        }
        if (done > 0 && !jm->pending_writes) {
                log_notice("The job store is writable again: %u delayed write%s done", done, done == 1 ? "" : "s");
                job_manager_schedule(jm);       /* queued jobs held back by the full store may start now */
        }
        if (jm->pending_writes) {
                jm->store_last_error = r;
                (void) sd_event_source_set_time_relative(s, 1000000);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        }
        return 0;
}

int job_store_write(JobManager *jm, const StoreJob *sj, bool insert, bool durable) {
        PendingWrite *w = pending_find(jm, sj->id);
        int r;

        /*
         * An array's tasks share their start's disk flush, a batch at a time (docs/jobs.md, "Power cut"). So
         * does a job stored for the first time as it starts (insert): a power cut before the flush loses the
         * whole job, never leaves it queued, so it cannot run twice; only a queued job's start needs a flush
         * of its own before it runs. That flush was half a millisecond of every `rtctl submit --wait`.
         */
        r = durable && (sj->array_id || insert) ? store_write_synced_soon(jm->store, sj, insert)
          : durable ? store_write_durable(jm->store, sj, insert)
                    : insert ? store_insert(jm->store, sj) : store_update(jm->store, sj);
        if (r >= 0) {
                if (w)
                        pending_drop(jm, w);    /* this write supersedes it */
                return r;
        }
        jm->store_failures++;
        jm->store_last_error = r;
        if (insert)
                return log_error_errno(r, "Failed to store new job %" PRIu64 ", refusing it: %m", sj->id);

        /* Keep the newest state and write it again until the store takes it. */
        if (!w) {
                w = calloc(1, sizeof *w);
                if (!w)
                        return log_error_errno(r, "Failed to write job %" PRIu64 " (%s) to the store, and out of "
                                               "memory to keep it for later: %m", sj->id, sj->state);
                w->next = jm->pending_writes;
                jm->pending_writes = w;
                jm->n_pending_writes++;
        }
        free(w->state);
        json_decref(w->data);
        *w = (PendingWrite){ .id = sj->id, .seq = sj->seq, .uid = sj->uid, .state = strdup(sj->state),
                             .data = json_deep_copy(sj->data), .next = w->next };
        if (!jm->store_retry_src)
                (void) sd_event_add_time_relative(jm->manager->event, &jm->store_retry_src, CLOCK_MONOTONIC,
                                                  1000000, 0, on_store_retry, jm);
        else {
                (void) sd_event_source_set_time_relative(jm->store_retry_src, 1000000);
                (void) sd_event_source_set_enabled(jm->store_retry_src, SD_EVENT_ONESHOT);
        }
        return log_error_errno(r, "Failed to write job %" PRIu64 " (%s) to the store: %m; keeping it and trying "
                               "again every second (%u pending)", sj->id, sj->state, jm->n_pending_writes);
}

/* A job whose latest state is still waiting to be stored: that state, as the API shows it. */
json_t *job_store_pending_get(JobManager *jm, uint64_t id, uid_t *ret_uid) {
        PendingWrite *w = pending_find(jm, id);

        if (!w || !w->state || !w->data)
                return NULL;
        if (ret_uid)
                *ret_uid = w->uid;
        return json_deep_copy(w->data);
}

json_t *job_store_status_json(JobManager *jm) {
        return json_pack("{s:i,s:I,s:s?}", "pending_writes", jm->n_pending_writes, "write_failures",
                         (json_int_t) jm->store_failures, "last_write_error",
                         jm->store_last_error < 0 ? strerror(-jm->store_last_error) : NULL);
}

void job_store_done(JobManager *jm) {
        /* A last try: what still fails is lost with this rtd, and the next one recovers from the store. */
        if (jm->store_retry_src && jm->store)
                (void) on_store_retry(jm->store_retry_src, 0, jm);
        while (jm->pending_writes)
                pending_drop(jm, jm->pending_writes);
        jm->store_retry_src = sd_event_source_disable_unref(jm->store_retry_src);
}
