/* SPDX-License-Identifier: MIT */
/*
 * Handing the next job ahead: when every CPU is busy, the queue's head may wait in the worker of a CPU
 * whose short job runs, and start there the moment that job ends, without rtd's round trip. The worker
 * gives it back (WMSG_DROP/DROPPED) when rtd asks. See docs/jobs.md, "Handing the next job ahead".
 */
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "core/manager.h"
#include "jobs-internal.h"
#include "shared/fileio.h"
#include "shared/log.h"

/*
 * Handing ahead pays off for short jobs only; behind a long one the next job would wait in "starting"
 * instead of "queued". So only behind a job started less than AHEAD_WINDOW ago, and taken back once the
 * job in front has run AHEAD_LIMIT.
 */
#define AHEAD_WINDOW_USEC (20 * 1000ULL)
#define AHEAD_LIMIT_USEC (100 * 1000ULL)

/* A worker that can hold the next job: it runs a one-CPU job it forked itself, started just now. */
static bool slot_takes_ahead(JobManager *jm, unsigned cpu, uint64_t now) {
        WorkerSlot *s = &jm->slots[cpu];

        return s->job && !s->next && worker_is_ready(s->worker) && !s->job->adopted &&
               s->job->worker_cpu == cpu && cpuset_count(&s->job->cpus) == 1 && !s->job->cancel_requested &&
               !s->job->timed_out && cpuset_isset(&jm->reserved, cpu) && s->job->handed_mono + AHEAD_WINDOW_USEC > now;
}

static int ahead_cpu(JobManager *jm, uint64_t now) {
        CPUSET_FOREACH(cpu, &jm->reserved)
                if (slot_takes_ahead(jm, cpu, now))
                        return (int) cpu;
        return -1;
}

/*
 * A worker answers DROP at once: it never waits for its child. One that has not within this is stuck
 * (stopped, or starved on its CPU): it is killed, so the job it held cannot start behind rtd's back, and
 * on_worker_died() settles both of its jobs and starts a new worker.
 */
#define DROP_ANSWER_USEC (2 * 1000 * 1000ULL)

static int on_drop_unanswered(sd_event_source *s, uint64_t usec, void *userdata) {
        Job *j = userdata;
        JobManager *jm = j->jm;
        Worker *w = jm->slots[j->worker_cpu].worker;

        j->ahead_src = sd_event_source_disable_unref(j->ahead_src);
        if (!job_is_ahead(jm, j) || !j->drop_requested || !w)
                return 0;
        log_warning("The worker for CPU %u (pid %d) did not give back job %" PRIu64 " within %llu ms; killing "
                    "the worker", j->worker_cpu, (int) worker_pid(w), j->id, DROP_ANSWER_USEC / 1000);
        (void) kill(worker_pid(w), SIGKILL);
        return 0;
}

void job_take_back(JobManager *jm, Job *j) {
        if (!job_is_ahead(jm, j) || j->drop_requested ||
            worker_drop_job(jm->slots[j->worker_cpu].worker, j->id) < 0)
                return;
        j->drop_requested = true;
        j->ahead_src = sd_event_source_disable_unref(j->ahead_src);
        (void) sd_event_add_time_relative(jm->manager->event, &j->ahead_src, CLOCK_MONOTONIC, DROP_ANSWER_USEC,
                                          0, on_drop_unanswered, j);
}

static int on_ahead_limit(sd_event_source *s, uint64_t usec, void *userdata) {
        Job *j = userdata;

        j->ahead_src = sd_event_source_disable_unref(j->ahead_src);
        job_take_back(j->jm, j);        /* on_worker_dropped() queues it again */
        return 0;
}

void job_ahead_arm_limit(JobManager *jm, Job *j, const Job *front) {
        (void) sd_event_add_time(jm->manager->event, &j->ahead_src, CLOCK_MONOTONIC,
                                 front->handed_mono + AHEAD_LIMIT_USEC, 1000, on_ahead_limit, j);
}

/*
 * Every CPU the queue's head could use is busy: hand it to a worker that runs a one-CPU job, to start the
 * moment that job ends. For tiny jobs this takes rtd's round trip (hear of the exit, write the next job,
 * send it) off the reserved CPU's path. Only one-core jobs without explicit CPUs go ahead, one per worker;
 * if a CPU it could use comes free first, the job is taken back (job_take_back_ahead()).
 */
void job_hand_ahead(JobManager *jm) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        /* Under Policy=priority a later job may overtake: nothing is promised to a worker early. */
        while (jm->queue_head && jm->manager->config->queue_policy == QUEUE_FCFS) {
                Job *j = job_queue_pick(jm);
                if (!j)
                        return;         /* every queued job's user holds MaxCoresPerUser= already */
                int cpu = j->spec.cores == 1 && !j->spec.has_cpus ? ahead_cpu(jm, now) : -1;
                CpuSet one;

                if (cpu < 0)
                        return;
                cpuset_zero(&one);
                cpuset_set(&one, (unsigned) cpu);
                (void) job_start(jm, j, &one, false, true);
        }
}

/*
 * A job waits in a worker while a CPU it could use is free: take it back, to be placed again from the
 * queue. Until it is back (or has started there after all) nothing else is dispatched, so it stays first
 * in line. Returns whether a job is on its way back.
 */
bool job_take_back_ahead(JobManager *jm) {
        bool returning = false;

        CPUSET_FOREACH(cpu, &jm->ahead_cpus) {
                Job *n = jm->slots[cpu].next;
                CpuSet room;

                if (!n->drop_requested && job_place(jm, &n->spec, &room) >= 0)
                        job_take_back(jm, n);
                returning |= n->drop_requested;
        }
        return returning;
}
