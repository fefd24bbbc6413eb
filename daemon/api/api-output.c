/* SPDX-License-Identifier: MIT */
/*
 * GET /v1/jobs/ID/output[?stream=stdout|stderr][&follow=1][&offset=N]: a job's captured output, read from
 * its file with pread() only as fast as the client takes it (a pull stream, see http.h). Nothing is loaded
 * whole and nothing is queued for a slow reader: each such request costs one descriptor, this struct and
 * libmicrohttpd's connection buffer, whatever the size of the file. With follow=1 the body goes on until
 * the job has ended and every byte it wrote was sent; offset=N starts N bytes in (rtctl logs -f resumes
 * there after a dropped connection).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "core/manager.h"
#include "jobs/jobs.h"
#include "shared/macro.h"
#include "shared/parse-util.h"

#define FOLLOW_POLL_USEC 100000

typedef struct Output {
        Manager *manager;
        HttpStream *stream;
        uint64_t id;
        uint64_t offset;        /* file offset of body byte 0 */
        uint64_t size;          /* body length without follow */
        bool follow;
        char stream_name[8];
        int fd;
        sd_event_source *timer;
} Output;

static bool job_is_over(Manager *m, uint64_t id) {
        json_t *j = NULL;
        bool over;

        if (job_manager_get(m->jobs, id, false, &j, NULL) < 0)
                return true;    /* pruned meanwhile: nothing more will come */
        over = job_state_is_final(job_state_from_string(json_string_value(json_object_get(j, "state"))));
        json_decref(j);
        return over;
}

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata) {
        Output *o = userdata;
        http_stream_wake(o->stream);
        return 0;
}

/* Nothing new yet: look again in a while (the stream is parked until then). */
static ssize_t output_wait(Output *o) {
        int r;

        if (!o->timer)
                r = sd_event_add_time_relative(o->manager->event, &o->timer, CLOCK_MONOTONIC, FOLLOW_POLL_USEC,
                                               FOLLOW_POLL_USEC / 10, on_poll, o);
        else {
                r = sd_event_source_set_time_relative(o->timer, FOLLOW_POLL_USEC);
                if (r >= 0)
                        r = sd_event_source_set_enabled(o->timer, SD_EVENT_ONESHOT);
        }
        return r < 0 ? r : 0;
}

static ssize_t output_pull(void *userdata, uint64_t pos, char *buf, size_t max) {
        Output *o = userdata;
        ssize_t n;

        if (!o->follow) {
                if (pos >= o->size)
                        return HTTP_PULL_END;
                n = pread(o->fd, buf, MIN((uint64_t) max, o->size - pos), (off_t) (o->offset + pos));
                /* Shorter than it was (the job truncated it): cut the response, the client sees it short. */
                return n > 0 ? n : n < 0 ? -errno : -EIO;
        }
        if (o->fd < 0 && job_manager_open_output(o->manager->jobs, o->id, o->stream_name, &o->fd) < 0)
                return job_is_over(o->manager, o->id) ? HTTP_PULL_END : output_wait(o);
        n = pread(o->fd, buf, max, (off_t) (o->offset + pos));
        if (n != 0)
                return n > 0 ? n : -errno;
        /* At the end of the file. If the job is over, what it wrote last is in the file now: read once more,
         * so bytes written between the read above and the end are not lost. */
        if (!job_is_over(o->manager, o->id))
                return output_wait(o);
        n = pread(o->fd, buf, max, (off_t) (o->offset + pos));
        return n > 0 ? n : n == 0 ? HTTP_PULL_END : -errno;
}

static void on_output_close(HttpStream *s, void *userdata) {
        Output *o = userdata;
        sd_event_source_disable_unref(o->timer);
        safe_close(o->fd);
        free(o);
}

static int output(Request *req, Response *resp) {
        const char *stream = request_query(req, "stream") ?: "stdout", *follow = request_query(req, "follow"),
                   *offset = request_query(req, "offset");
        Output *o;
        HttpStream *s;
        uint64_t id, off = 0;
        json_t *job;
        uid_t uid;
        int r;

        if (req->n_segments < 3 || safe_atou64(req->segments[2], &id) < 0 || id == 0)
                return reply_problem(resp, 404, "No such job", "'%s' is not a job id (a positive integer)",
                                     req->n_segments >= 3 ? req->segments[2] : "");
        if (!streq(stream, "stdout") && !streq(stream, "stderr"))
                return reply_problem(resp, 400, "Invalid parameter", "stream: must be stdout or stderr");
        if (offset && (safe_atou64(offset, &off) < 0 || off > INT64_MAX))
                return reply_problem(resp, 400, "Invalid parameter", "offset: must be a byte count (0 or more)");
        r = job_manager_get(req->manager->jobs, id, false, &job, &uid);
        if (r == -ENOENT)
                return reply_problem(resp, 404, "No such job", "job %" PRIu64 " does not exist", id);
        if (r < 0)
                return r;
        json_decref(job);
        if (req->caller.role != ROLE_ADMIN && uid != req->caller.uid)
                return reply_problem(resp, 403, "Not your job", "only the owner of job %" PRIu64 " or an "
                                     "administrator can read its output", id);

        o = calloc(1, sizeof *o);
        if (!o)
                return -ENOMEM;
        *o = (Output){ .manager = req->manager, .id = id, .offset = off, .fd = -EBADF,
                       .follow = follow && parse_boolean(follow) > 0 };
        snprintf(o->stream_name, sizeof o->stream_name, "%s", stream);
        if (!o->follow) {
                struct stat st = {};
                /* Not started yet, or pruned: no output. The length is what the file holds now. */
                r = job_manager_open_output(req->manager->jobs, id, stream, &o->fd);
                if (r >= 0 && fstat(o->fd, &st) < 0)
                        r = -errno;
                if (r < 0 && r != -ENOENT) {
                        on_output_close(NULL, o);
                        return r;
                }
                o->size = r >= 0 && (uint64_t) st.st_size > off ? (uint64_t) st.st_size - off : 0;
        }
        r = http_stream_start_pull(resp, "text/plain; charset=utf-8", o->follow ? UINT64_MAX : o->size,
                                   output_pull, on_output_close, o, &s);
        if (r < 0) {
                on_output_close(NULL, o);
                return r;
        }
        o->stream = s;
        return 0;
}

const Route api_output_routes[] = {
        { "GET", "/v1/jobs/*/output", ROLE_USER, output },
        {},
};
