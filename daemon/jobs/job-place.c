/* SPDX-License-Identifier: MIT */
/* Where and which job runs next: topology-aware placement and the queue policies (fcfs, priority with aging). */
#include <errno.h>
#include <stdint.h>

#include "core/config.h"
#include "core/manager.h"
#include "host/topology.h"
#include "jobs-internal.h"

/* ---- placement ---- */

/* CPUs a new job may use now: reserved, with a ready worker, not held; under SMT=exclusive no busy sibling. */
static void free_cpus(JobManager *jm, CpuSet *ret) {
        const Topology *t = jm->manager->topology;
        CpuSet busy = {};

        cpuset_zero(ret);
        CPUSET_FOREACH(cpu, &jm->reserved) {
                if (jm->slots[cpu].job)
                        cpuset_set(&busy, cpu);
                else if (worker_is_ready(jm->slots[cpu].worker) || jm->assume_workers_ready)
                        cpuset_set(ret, cpu);
        }
        if (t && jm->manager->config->smt == SMT_EXCLUSIVE) {
                CpuSet shadow;
                topology_with_siblings(t, &busy, &shadow);
                cpuset_andnot(ret, ret, &shadow);
        }
}

/* A CPU whose whole physical core is free is worth more: another job will not share its core. */
static bool core_free(JobManager *jm, const CpuSet *avail, unsigned cpu) {
        const TopologyCpu *c = jm->manager->topology ? topology_cpu(jm->manager->topology, cpu) : NULL;
        if (!c)
                return true;
        CPUSET_FOREACH(s, &c->siblings)
                if ((unsigned) s != cpu && !cpuset_isset(avail, s) && cpuset_isset(&jm->reserved, s))
                        return false;
        return true;
}

static bool sibling_picked(JobManager *jm, const CpuSet *picked, unsigned cpu) {
        const TopologyCpu *c = jm->manager->topology ? topology_cpu(jm->manager->topology, cpu) : NULL;
        return c && cpuset_intersects(&c->siblings, picked);
}

/*
 * k CPUs of domain: first one thread of each wholly free core (so a 2-core job gets two physical cores,
 * not the two threads of one), then, unless whole_cores_only, whatever is left.
 */
static bool pick_in(JobManager *jm, const CpuSet *avail, const CpuSet *domain, unsigned k, bool whole_cores_only,
                    CpuSet *ret) {
        CpuSet in;
        unsigned n = 0;

        cpuset_and(&in, avail, domain);
        if (cpuset_count(&in) < k)
                return false;
        cpuset_zero(ret);
        for (int pass = 0; pass < (whole_cores_only ? 1 : 2) && n < k; pass++)
                CPUSET_FOREACH(cpu, &in) {
                        if (n >= k)
                                break;
                        if (cpuset_isset(ret, cpu))
                                continue;
                        if (pass == 0 && (!core_free(jm, avail, cpu) || sibling_picked(jm, ret, cpu)))
                                continue;
                        cpuset_set(ret, cpu);
                        n++;
                }
        return n == k;
}

/* The smallest LLC domain, else NUMA node, where k CPUs can be picked; false if none. */
static bool pick_smallest_domain(JobManager *jm, const CpuSet *avail, unsigned k, bool whole_cores_only,
                                 CpuSet *ret) {
        const Topology *t = jm->manager->topology;

        for (int level = 0; t && level < 2; level++) {
                size_t n = level == 0 ? t->n_llcs : t->n_node_slots;
                const CpuSet *doms = level == 0 ? t->llcs : t->nodes;
                unsigned best_size = UINT32_MAX;
                CpuSet pick;

                for (size_t i = 0; i < n; i++) {
                        CpuSet in;
                        cpuset_and(&in, avail, &doms[i]);
                        unsigned size = cpuset_count(&in);
                        if (size < k || size >= best_size)
                                continue;
                        if (pick_in(jm, avail, &doms[i], k, whole_cores_only, &pick)) {
                                *ret = pick;
                                best_size = size;
                        }
                }
                if (best_size != UINT32_MAX)
                        return true;
        }
        return pick_in(jm, avail, avail, k, whole_cores_only, ret);
}

/*
 * Where a job would run now: an explicit list as given, else k CPUs on k whole free cores in the smallest
 * LLC domain (then NUMA node, then anywhere) that has them; only when no domain has enough whole cores, the
 * smallest domain that fits at all. -EAGAIN: not now.
 */
int job_place(JobManager *jm, const JobSpec *spec, CpuSet *ret) {
        CpuSet avail;

        free_cpus(jm, &avail);
        if (spec->has_cpus) {
                if (!cpuset_is_subset(&spec->cpus, &avail))
                        return -EAGAIN;
                *ret = spec->cpus;
                return 0;
        }
        if (cpuset_count(&avail) < spec->cores)
                return -EAGAIN;
        if (pick_smallest_domain(jm, &avail, spec->cores, true, ret) ||
            pick_smallest_domain(jm, &avail, spec->cores, false, ret))
                return 0;
        return -EAGAIN;
}

/* ---- queue policy ---- */

/*
 * fcfs: the oldest job. priority: the highest effective queue priority, which is queue_priority plus one
 * for every AgingSec= seconds waited (so nothing starves), ties broken by submission order.
 */
Job *job_queue_pick(JobManager *jm) {
        const RtdConfig *cfg = jm->manager->config;
        Job *best = NULL;
        int64_t best_prio = INT64_MIN;
        uint64_t now;

        /* A job whose user holds MaxCoresPerUser= already is passed over; the others keep their order. */
        if (cfg->queue_policy == QUEUE_FCFS) {
                for (Job *j = jm->queue_head; j; j = j->next)
                        if (job_user_has_room(jm, j))
                                return j;
                return NULL;
        }
        now = now_usec(CLOCK_REALTIME);
        for (Job *j = jm->queue_head; j; j = j->next) {
                if (!job_user_has_room(jm, j))
                        continue;
                int64_t p = job_effective_queue_priority(j, now, cfg->aging_sec);
                if (p > best_prio) {
                        best = j;
                        best_prio = p;
                }
        }
        return best;
}

int64_t job_effective_queue_priority(const Job *j, uint64_t now_realtime, unsigned aging_sec) {
        int64_t waited = now_realtime > j->submit_usec ? (int64_t) ((now_realtime - j->submit_usec) / 1000000) : 0;
        return j->spec.queue_priority + (aging_sec > 0 ? waited / aging_sec : 0);
}
