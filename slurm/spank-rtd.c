/* SPDX-License-Identifier: MIT */
/*
 * SPANK plugin: `srun --rt[=PRIO]` / `--rt-quiet` lease the step's CPUs on each node from that node's rtd
 * (POST /v1/leases on its control socket) before the tasks exec, give the tasks SCHED_FIFO (or rr) at PRIO,
 * and release the lease when the step ends (slurm_spank_exit; rtd also ends it when slurmstepd exits).
 *
 * Where each part runs (Slurm 22.05, SlurmdUser=root): the options are parsed in srun (local context, so a bad
 * value fails at once) and again in slurmstepd (remote). slurm_spank_task_post_fork runs in slurmstepd as
 * root once per task after all tasks are forked and bound by the task plugin (task/affinity) but before any
 * of them may exec: the last call sees every task's affinity, leases their union and sets each task's policy
 * (the tasks are the user's already, waiting for slurmstepd's go; the policy survives exec).
 * The tasks then run slurm_spank_task_init (as the user, right before exec) and fail when the lease was not
 * granted. The verdict reaches them through a shared page mapped before the fork: a failure in task_post_fork
 * itself would stop the step but leave srun's exit status 0, while a task that fails exits 1 and srun says so.
 * (task_init_privileged is no use here: in 22.05 the tasks run it before slurmstepd binds them.)
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "rtlease-conn.h"
#include "rtlease.h"
#include "shared/macro.h"

SPANK_PLUGIN(rtd, 1);

static RtOptions opts;
static RtPluginArgs args = { .socket = RTLEASE_DEFAULT_SOCKET, .timeout_ms = RTLEASE_DEFAULT_TIMEOUT_MS };
static uint64_t lease_id;
static char lease_owner[RTLEASE_OWNER_MAX];
static cpu_set_t step_cpus;
static uint32_t n_tasks_seen;
static pid_t *task_pids;

/* Written by slurmstepd in task_post_fork, read by the forked tasks: MAP_SHARED survives their fork. */
typedef enum Verdict { VERDICT_PENDING, VERDICT_LEASED, VERDICT_UNQUIETED, VERDICT_FAILED } Verdict;
typedef struct Shared {
        volatile Verdict verdict;
        int priority;
        char message[1024];
} Shared;
static Shared *shared;

static int opt_rt(int val, const char *optarg, int remote) {
        int r = rtlease_parse_priority(optarg, &opts.priority);
        if (r < 0) {
                slurm_error("rtd: --rt=%s: the priority must be a number from 1 to 99 (--rt alone means %d)",
                            optarg, RTLEASE_DEFAULT_PRIORITY);
                return -1;
        }
        opts.rt_asked = true;
        return 0;
}

static int opt_quiet(int val, const char *optarg, int remote) {
        opts.quiet_asked = true;
        return 0;
}

static int opt_optional(int val, const char *optarg, int remote) {
        opts.optional = true;
        return 0;
}

static int opt_policy(int val, const char *optarg, int remote) {
        if (rtlease_parse_policy(optarg, &opts.rr) < 0) {
                slurm_error("rtd: --rt-policy=%s: expected fifo or rr", optarg ?: "");
                return -1;
        }
        opts.policy_asked = true;
        return 0;
}

/* Fields: name, arginfo, usage, has_arg (2 = optional argument), val, callback. */
static struct spank_option options[] = {
        { "rt", "PRIO",
          "Quiet the step's CPUs with rtd and run its tasks SCHED_FIFO at PRIO (1-99, default 50)", 2, 0, opt_rt },
        { "rt-quiet", NULL, "Quiet the step's CPUs with rtd, without a real-time policy", 0, 0, opt_quiet },
        { "rt-optional", NULL, "With --rt/--rt-quiet: run un-quieted where rtd is not running", 0, 0, opt_optional },
        { "rt-policy", "fifo|rr", "With --rt: the real-time policy (default fifo)", 1, 0, opt_policy },
        SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av) {
        const char *bad = NULL;

        if (rtlease_parse_plugin_args(ac, av, &args, &bad) < 0) {
                slurm_error("rtd: plugstack.conf: unknown or bad argument '%s' (expected socket=/path or "
                            "timeout=SECONDS)", strempty(bad));
                return -1;
        }
        for (struct spank_option *o = options; o->name; o++)
                if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
                        slurm_error("rtd: cannot register option --%s", o->name);
                        return -1;
                }
        return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
        const char *why;

        why = rtlease_options_resolve(&opts);
        if (why) {
                slurm_error("rtd: %s", why);
                return -1;
        }
        if (opts.mode != RT_MODE_OFF && spank_remote(sp) == 1) {
                shared = mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
                if (shared == MAP_FAILED) {
                        shared = NULL;
                        slurm_error("rtd: cannot map the page the tasks read the lease's verdict from: %m");
                        return -1;
                }
        }
        return 0;
}

static void fail(const char *fmt, ...) _printf_(1, 2);
static void fail(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(shared->message, sizeof shared->message, fmt, ap);
        va_end(ap);
        shared->verdict = VERDICT_FAILED;
}

static void lease_step(uint32_t n_local);

/* One call per task, in slurmstepd; the last one leases. Returns 0 even on failure: see the top comment. */
int slurm_spank_task_post_fork(spank_t sp, int ac, char **av) {
        uint32_t job = 0, step = 0, n_local = 0;
        int task_id = -1;
        pid_t pid = 0;
        cpu_set_t aff;

        if (opts.mode == RT_MODE_OFF || spank_remote(sp) != 1 || !shared)
                return 0;
        if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
            spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
            spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &n_local) != ESPANK_SUCCESS ||
            spank_get_item(sp, S_TASK_ID, &task_id) != ESPANK_SUCCESS ||
            spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS) {
                fail("rtd: cannot read the step's job id, task id or pid from Slurm");
                return 0;
        }
        if (rtlease_step_is_special(step)) {
                shared->verdict = VERDICT_UNQUIETED;
                return 0;
        }
        if (n_local == 0 || task_id < 0 || (uint32_t) task_id >= n_local) {
                fail("rtd: task %d of %" PRIu32 " local tasks makes no sense", task_id, n_local);
                return 0;
        }
        if (!task_pids) {
                task_pids = calloc(n_local, sizeof(pid_t));
                if (!task_pids) {
                        fail("rtd: out of memory");
                        return 0;
                }
                CPU_ZERO(&step_cpus);
        }
        task_pids[task_id] = pid;
        /* The task plugin bound the task already; without one (or --cpu-bind=none) this is the whole node's. */
        if (sched_getaffinity(pid, sizeof aff, &aff) < 0) {
                fail("rtd: cannot read task %d's CPU affinity: %m", task_id);
                return 0;
        }
        CPU_OR(&step_cpus, &step_cpus, &aff);
        if (++n_tasks_seen < n_local || shared->verdict != VERDICT_PENDING)
                return 0;
        if (rtlease_owner(job, step, lease_owner, sizeof lease_owner) < 0) {
                fail("rtd: cannot name the lease for step %" PRIu32 ".%" PRIu32, job, step);
                return 0;
        }
        lease_step(n_local);
        return 0;
}

/* rtd answers once every other task is off the CPUs, or after 5 s with "quieted": false while its walk over
 * /proc goes on (a crowded or slow node): the tasks must not start before it is done. Bounded by timeout=. */
static int wait_quieted(RtLease *lease, char **ret_error) {
        char path[64];
        int waited = 0;

        (void) snprintf(path, sizeof path, "/v1/leases/%" PRIu64, lease->id);
        while (!lease->quieted && !lease->ended) {
                RtReply reply = {};
                RtLease now;
                int r;

                if (waited >= args.timeout_ms)
                        return -ETIMEDOUT;
                (void) usleep(RTLEASE_QUIET_POLL_MS * 1000);
                waited += RTLEASE_QUIET_POLL_MS;
                r = rtlease_call(&args, "GET", path, NULL, &reply, ret_error);
                if (r < 0)
                        return r;
                r = reply.status == 200 ? rtlease_parse_lease(reply.body, &now) : -EBADMSG;
                rtlease_reply_done(&reply);
                if (r < 0)
                        return r;
                lease->quieted = now.quieted;
                lease->ended = now.ended;
        }
        return lease->ended ? -ESRCH : 0;
}

static void lease_step(uint32_t n_local) {
        _cleanup_free_ char *body = NULL, *err = NULL, *problem = NULL;
        const char *step = lease_owner + strlen("slurm:");
        RtReply reply = {};
        RtLease lease;
        char cpus[256];
        int r;

        if (rtlease_format_cpus(&step_cpus, cpus, sizeof cpus) < 0 ||
            rtlease_request_body(cpus, lease_owner, (int) getpid(), &opts, &body) < 0)
                return fail("rtd: cannot build the lease request for step %s", step);
        r = rtlease_call(&args, "POST", "/v1/leases", body, &reply, &err);
        if (r < 0) {
                if (opts.optional && rtlease_error_is_absent(r)) {
                        (void) snprintf(shared->message, sizeof shared->message,
                                        "rtd: warning: %s; step %s runs un-quieted as --rt-optional asks",
                                        strempty(err), step);
                        shared->verdict = VERDICT_UNQUIETED;
                        return;
                }
                return fail("rtd: cannot lease CPUs %s for step %s: %s%s", cpus, step, strempty(err),
                            rtlease_error_is_absent(r) ? " (start rtd there, or add --rt-optional to run un-quieted)"
                                                       : "");
        }
        if (reply.status != 201) {
                problem = rtlease_problem_text(reply.status, reply.body);
                fail("rtd refused to lease CPUs %s for step %s (HTTP %d): %s", cpus, step, reply.status,
                     strempty(problem));
                return rtlease_reply_done(&reply);
        }
        r = rtlease_parse_lease(reply.body, &lease);
        rtlease_reply_done(&reply);
        if (r < 0)
                return fail("rtd answered 201 without a lease id for step %s", step);
        lease_id = lease.id;
        r = wait_quieted(&lease, &err);
        if (r == -ETIMEDOUT)
                return fail("rtd: lease %" PRIu64 " of CPUs %s for step %s: rtd had not moved every other task off "
                            "them after %d s (timeout= in plugstack.conf); not running un-quieted", lease_id, cpus,
                            step, args.timeout_ms / 1000);
        if (r == -ESRCH)
                return fail("rtd: lease %" PRIu64 " of CPUs %s for step %s ended before the CPUs were quiet "
                            "(GET /v1/leases/%" PRIu64 " says why)", lease_id, cpus, step, lease_id);
        if (r < 0)
                return fail("rtd: lease %" PRIu64 " of CPUs %s for step %s: cannot ask rtd whether they are quiet "
                            "yet: %s", lease_id, cpus, step, err ? err : strerror(-r));
        slurm_info("rtd: lease %" PRIu64 " quiets CPUs %s for step %s", lease_id, cpus, step);
        if (opts.mode == RT_MODE_RT) {
                struct sched_param param = {};

                if (rtlease_task_priority(&opts, &lease, &param.sched_priority) < 0)
                        return fail("rtd: --rt=%d is above this node's MaxPriority=%d", opts.priority,
                                    lease.max_priority);
                for (uint32_t i = 0; i < n_local; i++)
                        if (sched_setscheduler(task_pids[i], opts.rr ? SCHED_RR : SCHED_FIFO, &param) < 0)
                                return fail("rtd: cannot run task %" PRIu32 " SCHED_%s at priority %d: %m", i,
                                            opts.rr ? "RR" : "FIFO", param.sched_priority);
        }
        shared->verdict = VERDICT_LEASED;
}

/* In each task, as the user, right before exec: a step whose lease failed must not run. */
int slurm_spank_task_init(spank_t sp, int ac, char **av) {
        int task_id = -1;

        if (opts.mode == RT_MODE_OFF || !shared)
                return 0;
        (void) spank_get_item(sp, S_TASK_ID, &task_id);
        switch (shared->verdict) {
        case VERDICT_LEASED:
                return 0;
        case VERDICT_UNQUIETED:
                if (task_id == 0 && shared->message[0])
                        slurm_error("%s", shared->message);
                return 0;
        case VERDICT_FAILED:
                slurm_error("%s", shared->message);
                return -1;
        default:
                slurm_error("rtd: the lease for this step was never decided; not running un-quieted");
                return -1;
        }
}

/* Step end, failure or scancel: slurmstepd calls this once before it exits. rtd would also end the lease on
 * slurmstepd's exit; releasing here makes the CPUs free at once and logs the end under the step's name. */
int slurm_spank_exit(spank_t sp, int ac, char **av) {
        _cleanup_free_ char *err = NULL, *problem = NULL;
        char path[64];
        RtReply reply = {};
        int r;

        free(task_pids);
        task_pids = NULL;
        if (lease_id == 0 || spank_remote(sp) != 1)
                return 0;
        (void) snprintf(path, sizeof path, "/v1/leases/%" PRIu64, lease_id);
        r = rtlease_call(&args, "DELETE", path, NULL, &reply, &err);
        if (r < 0)
                slurm_error("rtd: cannot release lease %" PRIu64 " of step %s (rtd ends it when this step's "
                            "slurmstepd exits): %s", lease_id, lease_owner + 6, strempty(err));
        else if (reply.status != 200 && reply.status != 404) {
                problem = rtlease_problem_text(reply.status, reply.body);
                slurm_error("rtd: releasing lease %" PRIu64 " of step %s: HTTP %d: %s", lease_id, lease_owner + 6,
                            reply.status, strempty(problem));
        } else
                slurm_info("rtd: lease %" PRIu64 " of step %s released", lease_id, lease_owner + 6);
        rtlease_reply_done(&reply);
        lease_id = 0;
        return 0;
}
