#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# bench/report.py: turns bench/run's results.json into the "Task-manager experiment" and "Jitter"
# sections of docs/benchmarks.md and their gnuplot PNGs in docs/img/. Other sections of the file
# (written by other benchmarks) are left as they are.
"""Usage: bench/report.py RESULTS.json [DOC.md]   (regenerate the report from a kept run)"""

import json
import re
import os
import statistics
import subprocess
import sys
import tempfile

LOAD_NAMES = {'none': 'no load', 'cpu': 'load 1 (CPU)', 'mem': 'load 2 (memory)', 'msg': 'load 3 (messaging)'}
PLOT_LOADS = {'none': 'no load', 'cpu': 'load 1 cpu', 'mem': 'load 2 mem', 'msg': 'load 3 msg'}
CFG_NAMES = {'D': 'D plain', 'M': 'M taskset+chrt', 'R': 'R rtd', 'plain': 'plain'}
SECTIONS = ('Task-manager experiment', 'Jitter')
CONFIGS = ('D', 'M', 'R')
IMG_MEMWALK = 'bench-memwalk.png'
IMG_JITTER = 'bench-jitter.png'
NOISE = 0.02            # relative differences below this are noise on a VM, whatever the ranges say


# ------------------------------------------------------------------------------------------ figures
def job_metric(job, *names):
        """A figure from rtd's per-job metrics; the metrics module nests them under "metrics"."""
        if not isinstance(job, dict):
                return None
        for where in (job.get('metrics'), job.get('sched'), job):
                if isinstance(where, dict):
                        for n in names:
                                v = where.get(n)
                                if isinstance(v, (int, float)) and not isinstance(v, bool):
                                        return v
        return None


def cpu_counter(metrics, cpu, key):
        """A cumulative per-CPU counter from rtctl --json metrics (GET /v1/metrics)."""
        if not isinstance(metrics, dict):
                return None
        for c in metrics.get('cpus') or []:
                if isinstance(c, dict) and c.get('cpu') == cpu:
                        v = c.get(key)
                        return v if isinstance(v, (int, float)) else None
        return None


def run_figures(r, cpu=None):
        mw, perf, job = r.get('memwalk') or {}, r.get('perf') or {}, r.get('job')
        vol = job_metric(job, 'voluntary_switches')
        invol = job_metric(job, 'involuntary_switches')
        f = {
                'time': mw.get('seconds'),
                'cs': perf.get('context-switches'),
                'migr': perf.get('cpu-migrations'),
                'rtd_cs': vol + invol if vol is not None and invol is not None else
                job_metric(job, 'context_switches'),
                'rtd_invol': invol,
                'rtd_migr': job_metric(job, 'migrations'),
                'rtd_irqs': job_metric(job, 'hardirqs'),
        }
        # Intrusions are counted per reserved CPU, not per job: the difference across the job's run.
        b, a = r.get('cpu_metrics_before'), r.get('cpu_metrics_after')
        for key, name in (('intrusions', 'rtd_intr'), ('intrusion_seconds', 'rtd_intr_s')):
                x, y = cpu_counter(b, cpu, key), cpu_counter(a, cpu, key)
                f[name] = y - x if x is not None and y is not None else None
        if r.get('irqs_before') and r.get('irqs_after'):
                f['irqs'] = r['irqs_after'][1] - r['irqs_before'][1]
                f['timer'] = r['irqs_after'][0] - r['irqs_before'][0]
        return f


class Stat:
        def __init__(self, values):
                self.v = sorted(x for x in values if isinstance(x, (int, float)))

        def __bool__(self):
                return bool(self.v)

        @property
        def med(self):
                return statistics.median(self.v) if self.v else None

        @property
        def lo(self):
                return self.v[0] if self.v else None

        @property
        def hi(self):
                return self.v[-1] if self.v else None

        def fmt(self, digits=0):
                if not self.v:
                        return '–'

                def f(x):
                        return f'{x:.{digits}f}'
                if self.lo == self.hi:
                        return f(self.med)
                return f'{f(self.med)} ({f(self.lo)}–{f(self.hi)})'


def cell(res, load, cfg, key):
        return Stat(run_figures(r, res.get('reserved_cpu')).get(key) for r in res['runs']
                    if r['load'] == load and r['config'] == cfg and r.get('rc') == 0)


def jitter(res, load, cfg):
        """cyclictest runs of one cell pooled into one histogram: p50/p99/p99.9 of all wake-ups, the
        exact max, and the spread of the per-run p99 and max (the noise between runs)."""
        runs = [r['latency'] for r in res.get('jitter', [])
                if r['load'] == load and r['config'] == cfg and r.get('latency')]
        if not runs:
                return None
        hist = {}
        for lat in runs:
                for us, c in lat.get('buckets', []):
                        hist[us] = hist.get(us, 0) + c
        over = sum(lat.get('overflows', 0) for lat in runs)
        total = sum(hist.values()) + over
        mx = max(lat['max_us'] for lat in runs if lat.get('max_us') is not None)

        def pct(q):
                acc = 0
                for us in sorted(hist):
                        acc += hist[us]
                        if acc >= q * total:
                                return us
                return mx
        p99s = [lat['p99_us'] for lat in runs if lat.get('p99_us') is not None]
        maxs = [lat['max_us'] for lat in runs if lat.get('max_us') is not None]
        return {'runs': len(runs), 'samples': total, 'p50_us': pct(0.5), 'p99_us': pct(0.99),
                'p999_us': pct(0.999), 'max_us': mx, 'p99_lo': min(p99s), 'p99_hi': max(p99s),
                'max_lo': min(maxs), 'max_hi': max(maxs)}


def ratio(a, b):
        return a / b if a is not None and b else None


def fmt_ratio(x, digits=2):
        return '–' if x is None else f'{x:.{digits}f}'


# ------------------------------------------------------------------------------------------ markdown
def machine_line(m):
        caches = ', '.join(f'{k} {v}' for k, v in m.get('caches', {}).items())
        hv = f', {m["hypervisor"]} guest' if m.get('hypervisor') else ''
        return (f'{m["cpus"]} × {m["cpu_model"]}{hv} ({caches}), {m["mem_gib"]} GiB RAM; '
                f'Linux {m["kernel"]} ({m["kernel_version"]}), Debian {m["debian"]}; '
                f'{m["perf"]}, rt-tests {m["cyclictest"]}; {m["rtd_version"] or "rtd ?"} (git {m["git"]})')


def attribution(res, load):
        """rtd's per-interval attribution summed over the R runs (memwalk and cyclictest) of one load."""
        intr, irqs = {}, {}
        for r in res['runs'] + res.get('jitter', []):
                a = r.get('attribution') if r['load'] == load and r['config'] == 'R' else None
                if not a:
                        continue
                for k, v in a.get('intruders_seconds', {}).items():
                        intr[k or '?'] = intr.get(k or '?', 0.0) + v
                for k, v in a.get('irqs', {}).items():
                        irqs[k] = irqs.get(k, 0) + v
        top = sorted(intr.items(), key=lambda kv: -kv[1])[:4]
        topq = sorted(irqs.items(), key=lambda kv: -kv[1])[:3]
        return ', '.join(f'`{k}` {v * 1000:.1f} ms' for k, v in top) or 'none', \
                ', '.join(f'{k} ×{v}' for k, v in topq) or 'none'


KTHREAD_PREFIXES = ('kworker/', 'rcu', 'ksoftirqd/', 'migration/', 'kdamond', 'cpuhp/', 'idle_inject/',
                    'watchdog/', 'irq/', 'kcompactd', 'khugepaged', 'kswapd', 'khungtaskd', 'kthreadd', 'kauditd',
                    'oom_reaper', 'jbd2/', 'kblockd', 'pool_workqueue')


def per_cpu_kthread(comm):
        """Bound to one CPU by name: ksoftirqd/1, migration/1, kworker/1:0H (kworker/u… are unbound)."""
        return re.search(r'/\d+(:\d+H?)?$', comm) is not None


LOAD_COMMS = ('hog', 'sched-messaging')        # what bench/run's loads are called in /proc


def intruder_kinds(res, load):
        """Split the tasks rtd attributed into per-CPU/kernel threads, rtd's own, the benchmark's own load
        (which rtd should have moved) and other processes."""
        kern, own, other, ours = set(), set(), set(), set()
        for r in res['runs'] + res.get('jitter', []):
                a = r.get('attribution') if r['load'] == load and r['config'] == 'R' else None
                for k in (a or {}).get('intruders_seconds', {}):
                        if k.startswith(KTHREAD_PREFIXES):
                                kern.add(k)
                        elif k.startswith('rtd'):
                                own.add(k)
                        elif k in LOAD_COMMS:
                                ours.add(k)
                        else:
                                other.add(k or '(no name)')
        return sorted(kern), sorted(own), sorted(other), sorted(ours)


def unmovable_irqs(res):
        st = res.get('rtd_status_start') or {}
        irqs = ((st.get('reservation') or {}).get('irqs') or {}).get('unmovable') or []
        return [f'IRQ {q.get("irq")} {q.get("name", "")} ({q.get("reason", "unmovable")})' for q in irqs]


def section_memwalk(res):
        m, loads, cfgs = res['meta'], res['meta']['loads'], res['meta']['configs']
        cpu = res['reserved_cpu']
        L = []
        L.append(f'Generated by `{m["command"]}` on {m["date"]} by bench/report.py from a real run; rerun '
                 f'`sudo bench/run` (about 20 min; `--quick` about 6) to refresh.\n')
        L.append(f'Machine: {machine_line(m)}.\n')
        L.append(f'Job: `bench/memwalk` (a 5 MiB array walked cyclically with a 16 KiB stride, incrementing each '
                 f'element visited; about 2.5 s on an idle core here). Each cell ran {m["repeats"]} times, the '
                 f'configurations interleaved D, M, R within each repeat. **D**: run plainly. **M**: `taskset -c {cpu} '
                 f'chrt -f 99`, nothing else. **R**: `rtctl submit --wait` to an rtd reserving CPU {cpu} (affinity '
                 f'backend inside the benchmark\'s PID namespace, IRQs to housekeeping, `RTRuntimeUSec=-1`, '
                 f'job at FIFO 99); the reservation is applied just before each R run and released right after '
                 f'it, so D and M see the unreserved machine with the load on every CPU. Counters: `perf stat -e '
                 f'context-switches,cpu-migrations,task-clock` around memwalk (inside the job for R), and rtd\'s '
                 f'own per-job figures (`rtctl show ID --json`, BPF) which cover the whole job, i.e. perf and '
                 f'memwalk. Intrusions: rtd\'s count of other tasks running on CPU {cpu} while it was reserved '
                 f'(the window includes the moments before the job started and after it ended). Cells: median '
                 f'(min–max).\n')
        rs = Stat(r.get('reserve_seconds') for r in res['runs'] + res.get('jitter', []))
        rl = Stat(r.get('release_seconds') for r in res['runs'] + res.get('jitter', []))
        if rs:
                L.append(f'Reserving CPU {cpu} (`rtctl reserve {cpu}`, round trip: tasks of the namespace, IRQs, '
                         f'workqueues, sysctl) took {rs.med * 1000:.0f} ms median ({rs.lo * 1000:.0f}–'
                         f'{rs.hi * 1000:.0f}); releasing and restoring everything {rl.med * 1000:.0f} ms '
                         f'({rl.lo * 1000:.0f}–{rl.hi * 1000:.0f}).' +
                         (f' The whole run took {m["duration_s"] / 60:.1f} min.' if m.get('duration_s') else '') + '\n')
        L.append('Loads (started before, stopped after each condition\'s runs): ' +
                 '; '.join(res['loads'][x] for x in loads if x in res.get('loads', {})) + '.\n')

        L.append('### Job time, context switches, migrations\n')
        L.append(f'| load | config | time (s) | perf: context switches | perf: migrations | rtd job: switches | '
                 f'rtd job: preemptions | rtd job: migrations | rtd: intrusions on CPU {cpu} | '
                 f'IRQs on CPU {cpu} during the job |')
        L.append('|---|---|---|---|---|---|---|---|---|---|')
        for load in loads:
                for cfg in cfgs:
                        def c(key, d=0, only=('R',)):
                                return cell(res, load, cfg, key).fmt(d) if cfg in only else ''
                        L.append(f'| {LOAD_NAMES[load]} | {CFG_NAMES[cfg]} | {c("time", 3, CONFIGS)} | '
                                 f'{c("cs", 0, CONFIGS)} | {c("migr", 0, CONFIGS)} | {c("rtd_cs")} | {c("rtd_invol")} | '
                                 f'{c("rtd_migr")} | {c("rtd_intr")} | {c("irqs", 0, ("M", "R"))} |')
        L.append('')

        L.append('### Ratios of median job time\n')
        L.append('| load | R/D | R/M | D/D(no load) | M/M(no load) | R/R(no load) |')
        L.append('|---|---|---|---|---|---|')
        for load in loads:
                t = {c: cell(res, load, c, 'time').med for c in cfgs}
                t0 = {c: cell(res, 'none', c, 'time').med for c in cfgs}
                L.append(f'| {LOAD_NAMES[load]} | {fmt_ratio(ratio(t.get("R"), t.get("D")))} | '
                         f'{fmt_ratio(ratio(t.get("R"), t.get("M")))} | {fmt_ratio(ratio(t.get("D"), t0.get("D")))} | '
                         f'{fmt_ratio(ratio(t.get("M"), t0.get("M")))} | {fmt_ratio(ratio(t.get("R"), t0.get("R")))} |')
        L.append('')
        L.append(f'![memwalk job time and context switches per load and configuration](img/{IMG_MEMWALK})\n')

        if 'R' in cfgs:
                L.append(f'### What else ran on CPU {cpu} during R runs (rtd\'s attribution)\n')
                L.append('Summed from `last_interval.top_intruders` and `.irqs` of `GET /v1/metrics`, polled while '
                         'each R job (memwalk and cyclictest) ran.\n')
                L.append('| load | intruding tasks (on-CPU time) | IRQs |')
                L.append('|---|---|---|')
                for load in loads:
                        t, q = attribution(res, load)
                        L.append(f'| {LOAD_NAMES[load]} | {t} | {q} |')
                L.append('')
                um = unmovable_irqs(res)
                if um:
                        L.append(f'rtd reported as unmovable from CPU {cpu}: ' + '; '.join(um) + '.\n')
        return L


def section_jitter(res):
        m, loads = res['meta'], res['meta']['loads']
        cpu = res['reserved_cpu']
        cfgs = [c for c in ('plain', 'M', 'R') if any(r['config'] == c for r in res.get('jitter', []))]
        L = []
        if not cfgs:
                return ['Not measured in this run (`--no-jitter`).\n']
        reps, secs = m.get('jitter_repeats', 1), m['jitter_seconds']
        L.append(f'Generated by `{m["command"]}` on {m["date"]}; same machine, loads and rtd configuration as '
                 f'the task-manager experiment above.\n')
        L.append(f'`cyclictest -m -t1 -i 1000 -D {secs}s -h {20000}` (one wake-up per ms), {reps} run(s) of '
                 f'{secs} s per cell, interleaved plain, M, R. **plain**: SCHED_OTHER, unpinned, as a user would '
                 f'start it. **M**: `taskset -c {cpu} chrt -f 99 cyclictest -a {cpu} -p 99`. **R**: the same '
                 f'cyclictest submitted to rtd (`rtctl submit --wait`) on reserved CPU {cpu}. Wake-up latency '
                 f'in µs: p50/p99/p99.9 of all runs\' wake-ups pooled (1 µs histogram), max exact; in brackets '
                 f'the range of the per-run values.\n')
        L.append('| load | config | p50 (µs) | p99 (µs) | p99.9 (µs) | max (µs) | wake-ups |')
        L.append('|---|---|---|---|---|---|---|')
        for load in loads:
                for cfg in cfgs:
                        j = jitter(res, load, cfg)
                        if not j:
                                L.append(f'| {LOAD_NAMES[load]} | {CFG_NAMES[cfg]} | – | – | – | – | – |')
                                continue
                        rng = (lambda lo, hi: f' ({lo}–{hi})' if lo != hi else '')
                        L.append(f'| {LOAD_NAMES[load]} | {CFG_NAMES[cfg]} | {j["p50_us"]} | '
                                 f'{j["p99_us"]}{rng(j["p99_lo"], j["p99_hi"])} | {j["p999_us"]} | '
                                 f'{j["max_us"]}{rng(j["max_lo"], j["max_hi"])} | {j["samples"]} |')
        L.append('')
        L.append('| load | p99 M/R | p99 plain/R | max M/R | max plain/R |')
        L.append('|---|---|---|---|---|')
        for load in loads:
                j = {c: jitter(res, load, c) or {} for c in cfgs}
                r = j.get('R', {})
                L.append(f'| {LOAD_NAMES[load]} | {fmt_ratio(ratio(j.get("M", {}).get("p99_us"), r.get("p99_us")), 1)} | '
                         f'{fmt_ratio(ratio(j.get("plain", {}).get("p99_us"), r.get("p99_us")), 1)} | '
                         f'{fmt_ratio(ratio(j.get("M", {}).get("max_us"), r.get("max_us")), 1)} | '
                         f'{fmt_ratio(ratio(j.get("plain", {}).get("max_us"), r.get("max_us")), 1)} |')
        L.append('')
        L.append(f'![cyclictest wake-up latency p99 and max per load and configuration](img/{IMG_JITTER})\n')
        return L


def targets(res):
        """Issue 7's targets, each with the measured figures and PASS/MISS, a one-line why for a miss,
        and one shared explanation of the causes the run found. Returns markdown lines."""
        loads, cfgs = res['meta']['loads'], res['meta']['configs']
        cpu = res['reserved_cpu']
        out, causes = [], set()
        if 'R' not in cfgs:
                return ['R was not run, so the targets could not be checked.\n']

        def line(ok, text, why=None, cause=None):
                out.append(f'- **{"PASS" if ok else "MISS"}** — {text}')
                if not ok:
                        if why:
                                out.append(f'  — {why}')
                        if cause:
                                causes.update(cause)
                return ok

        t0 = cell(res, 'none', 'R', 'time').med
        for load in loads:
                if load == 'none' or t0 is None:
                        continue
                t = cell(res, load, 'R', 'time')
                rr = ratio(t.med, t0)
                if rr is None:
                        continue
                pre, cs = cell(res, load, 'R', 'rtd_invol'), cell(res, load, 'R', 'cs')
                line(rr <= 1.05, f'R under {LOAD_NAMES[load]} within 5% of R with no load: '
                                 f'{t.med:.3f} s vs {t0:.3f} s ({(rr - 1) * 100:+.1f}%)',
                     f'the job kept its CPU (preempted {pre.fmt()} times per rtd, {cs.fmt()} switches per perf); '
                     f'the time went to hardware both cores share (causes 2, 3)', {2, 3})
        for load in loads:
                cs, migr = cell(res, load, 'R', 'cs'), cell(res, load, 'R', 'migr')
                rcs, rmigr = cell(res, load, 'R', 'rtd_cs'), cell(res, load, 'R', 'rtd_migr')
                rpre = cell(res, load, 'R', 'rtd_invol')
                if cs:
                        extra = (f'; rtd: {rcs.fmt()} switches of the whole job (perf and memwalk), '
                                 f'{rpre.fmt()} preemptions' if rcs else '')
                        line(cs.hi <= 5, f'R context switches per run ≤ 5 under {LOAD_NAMES[load]}: perf '
                                         f'{cs.fmt()}{extra}', 'see cause 4 for what ran there', {4})
                if migr:
                        extra = f'; rtd: {rmigr.fmt()}' if rmigr else ''
                        line(migr.hi == 0 and (not rmigr or rmigr.hi == 0),
                             f'R migrations 0 under {LOAD_NAMES[load]}: perf {migr.fmt()}{extra}')
        for load in loads:
                if load == 'none':
                        continue
                j = {c: jitter(res, load, c) or {} for c in ('plain', 'M', 'R')}
                r99, r50 = j['R'].get('p99_us'), j['R'].get('p50_us')
                for other, factor in (('M', 5), ('plain', 10)):
                        o99 = j[other].get('p99_us')
                        if r99 is None or o99 is None:
                                continue
                        rr = o99 / max(r99, 1)  # a p99 of 0 µs is below the histogram's resolution
                        why = f'R\'s p99 is {r99 / max(r50, 1):.1f}× its own median of {r50} µs (cause 1)'
                        cause = {1, 4, 5}
                        if other == 'M':
                                why += '; M at FIFO 99 already preempts the load at once (cause 6)'
                                cause.add(6)
                        line(rr >= factor, f'cyclictest p99 under {LOAD_NAMES[load]} ≥ {factor}× lower through rtd '
                                           f'than {CFG_NAMES[other]}: {r99} µs vs {o99} µs ({rr:.1f}×)', why, cause)
        worse = []
        for load in loads:
                for key, what, d in (('time', 'job time', 3), ('cs', 'context switches', 0),
                                     ('migr', 'migrations', 0)):
                        r, mm = cell(res, load, 'R', key), cell(res, load, 'M', key)
                        slack = 0 if key == 'time' else 1       # counts: one switch is not a difference
                        if r and mm and r.med > mm.hi + slack and r.med > mm.med * (1 + NOISE):
                                worse.append(f'{what} under {LOAD_NAMES[load]}: R {r.fmt(d)} vs M {mm.fmt(d)}')
                jr, jm = jitter(res, load, 'R'), jitter(res, load, 'M')
                if jr and jm:
                        for key, lo, hi in (('p99_us', 'p99_lo', 'p99_hi'), ('max_us', 'max_lo', 'max_hi')):
                                if jr[key] > jm[hi] * (1 + NOISE) + 1:
                                        worse.append(f'cyclictest {key[:-3]} under {LOAD_NAMES[load]}: R {jr[key]} µs '
                                                     f'vs M {jm[key]} µs (M\'s runs {jm[lo]}–{jm[hi]})')
        line(not worse, 'R never worse than M beyond noise (noise: R\'s median beyond the whole range of M\'s '
                        f'runs and more than {NOISE * 100:.0f}% off)' + ('' if not worse else ': worse on ' + '; '.join(worse)),
             'see causes 4 and 5: what ran on the reserved CPU during those R runs', {4, 5})
        out.append('')
        if causes:
                out.extend(explain(res, sorted(causes)))
        return out


def explain(res, causes):
        """The causes behind missed targets, with this run's evidence."""
        cpu, loads = res['reserved_cpu'], res['meta']['loads']
        floor = [jitter(res, ld, 'R') for ld in loads]
        floor = [j['p50_us'] for j in floor if j]
        kern, own, other, ours = set(), set(), set(), set()
        for ld in loads:
                k, o, x, y = intruder_kinds(res, ld)
                kern.update(k)
                own.update(o)
                other.update(x)
                ours.update(y)
        percpu = sorted(k for k in kern if per_cpu_kthread(k))
        unbound = sorted(k for k in kern if not per_cpu_kthread(k))
        um = unmovable_irqs(res)
        text = {
                1: (f'The wake-up floor of this VM: a FIFO 99 cyclictest alone on its CPU still has a median '
                    f'latency of {min(floor) if floor else "?"}–{max(floor) if floor else "?"} µs, because arming '
                    f'the timer and waking the vCPU cost VM exits; every percentile of R and M sits on top of it, '
                    f'so ratios between them are bounded by the hypervisor, not by what runs on the CPU.'),
                2: ('Shared caches: both cores share one L3 (see the machine line); the loads on the housekeeping '
                    'CPU evict the job\'s 5 MiB array from it and compete for memory bandwidth. A reservation '
                    'isolates scheduling, not caches (no resctrl/CAT in this VM).'),
                3: ('The host: this is a KVM guest; its vCPUs share the host\'s physical CPUs, so two busy vCPUs '
                    'run slower than one busy and one idle vCPU, whatever the guest does.'),
                4: ('Tasks rtd attributed to the reserved CPU (table above):\n' + '\n'.join('   - ' + x for x in filter(None, [
                    f'per-CPU kernel threads {", ".join(percpu)} — they cannot be moved at run time '
                    f'(`rtctl status` lists the boot options, nohz_full/rcu_nocbs, that would)' if percpu else '',
                    f'unbound kernel threads {", ".join(unbound)} — movable, and rtd moves them when it runs in the '
                    f'initial PID namespace (as under systemd), but in the benchmark\'s private PID namespace /proc '
                    f'does not show them to rtd' if unbound else '',
                    f'processes of other users of this shared VM ({", ".join(sorted(other)[:8])}) — they run '
                    f'outside the benchmark\'s private PID namespace, so rtd\'s affinity backend does not see them; '
                    f'this is the benchmark\'s choice (it never re-pins processes it did not start); rtd with the '
                    f'systemd or cgroup backend on a dedicated host keeps them off' if other else '',
                    'each runnable CFS task there preempts even the FIFO 99 job through the fair server (the '
                    'deadline server that guarantees CFS 5% of every CPU since Linux 6.12); rtd\'s '
                    '`FairServerRuntimeUSec=` would take that away on reserved CPUs, but debugfs refuses it on this '
                    'kernel (EPERM)' if (kern or other) else '',
                    f'tasks of the benchmark\'s own load ({", ".join(sorted(ours))}) that rtd did not move: '
                    f'forked with the old mask by a parent rtd had not moved yet; rtd walks /proc until a pass moves '
                    f'nothing, and the drift check catches later ones every CheckIntervalSec' if ours else '',
                    f'rtd\'s own {", ".join(sorted(own))} (the idle worker of the reserved CPU, woken by the '
                    f'job hand-over) — reported to the metrics owner, it should count as rtd\'s, not as an '
                    f'intrusion' if own else '',
                ]))),
                5: (f'IRQs on the reserved CPU: rtd moved every movable IRQ to housekeeping; '
                    + ('it reported as unmovable ' + '; '.join(um) + '. Its handler and the block softirq still run '
                       f'on CPU {cpu} whenever the disk is busy (other users\' builds and the memory load\'s '
                       f'page faults).' if um else 'none were unmovable.')),
                6: ('M is a strong baseline on this kernel: `chrt -f 99` preempts CFS tasks at once, so with a '
                    'user-space CPU hog on the same CPU the wake-up latency barely changes; the difference R makes '
                    '(load moved away) shows where the load spends time in the kernel (load 3: messaging) and in '
                    'the p99.9 and max.'),
        }
        L = ['### Why targets are missed here\n']
        for c in causes:
                L.append(f'{c}. {text[c]}')
        L.append('')
        return L


def doc_sections(res):
        tm = section_memwalk(res)
        tm.append('### Targets (issue 7, point 6)\n')
        tm.extend(targets(res))
        notes = list(res.get('notes', []))
        for d in res.get('knobs_left_changed', []):
                notes.append('knob left changed after rtd stopped, put back by bench/run: ' + d)
        if notes:
                tm.append('### Notes from the run\n')
                tm.extend(f'- {n}' for n in notes)
                tm.append('')
        return {'Task-manager experiment': '\n'.join(tm), 'Jitter': '\n'.join(section_jitter(res))}


def splice(text, sections):
        """Replace each '## name' section (up to the next '## ' heading) of text, or append it."""
        lines = text.split('\n')
        for name, body in sections.items():
                head = f'## {name}'
                try:
                        start = lines.index(head)
                except ValueError:
                        while lines and lines[-1] == '':
                                lines.pop()
                        lines += ['', head, '', *body.rstrip('\n').split('\n'), '']
                        continue
                end = start + 1
                while end < len(lines) and not lines[end].startswith('## '):
                        end += 1
                lines[start:end] = [head, '', *body.rstrip('\n').split('\n'), '']
        return '\n'.join(lines).rstrip('\n') + '\n'


# ------------------------------------------------------------------------------------------ plots
def plot(res, imgdir):
        loads, cfgs = res['meta']['loads'], res['meta']['configs']
        with tempfile.TemporaryDirectory(prefix='rtd-bench-plot.') as td:
                mw = os.path.join(td, 'memwalk.dat')
                with open(mw, 'w') as f:
                        f.write('# load ' + ' '.join(f'{c}_t {c}_lo {c}_hi {c}_cs {c}_cslo {c}_cshi' for c in cfgs) + '\n')
                        for load in loads:
                                row = [f'"{PLOT_LOADS[load]}"']
                                for c in cfgs:
                                        t, cs = cell(res, load, c, 'time'), cell(res, load, c, 'cs')
                                        # log axis: draw 0 context switches as 0.5
                                        row += [str(t.med or 0), str(t.lo or 0), str(t.hi or 0),
                                                str(max(cs.med or 0, 0.5)), str(max(cs.lo or 0, 0.5)), str(max(cs.hi or 0, 0.5))]
                                f.write(' '.join(row) + '\n')
                colors = {'D': '#c0504d', 'M': '#f79646', 'R': '#4f81bd', 'plain': '#c0504d'}
                title = f'{res["meta"]["cpus"]} CPUs, Linux {res["meta"]["kernel"]}, {res["meta"]["date"]}'
                gp = [f'set terminal pngcairo size 1200,480 font "DejaVu Sans,10"',
                      f'set output "{os.path.join(imgdir, IMG_MEMWALK)}"',
                      'set multiplot layout 1,2 title "memwalk: D plain, M taskset+chrt, R rtd — ' + title + '"',
                      'set style data histogram', 'set style histogram errorbars gap 1 lw 1',
                      'set style fill solid 0.8 border -1', 'set key below horizontal', 'set grid ytics', 'set format y "%g"',
                      'set yrange [0:*]', 'set ylabel "job time (s), median, min–max"']
                parts = []
                for i, c in enumerate(cfgs):
                        base = 2 + 6 * i
                        parts.append(f'"{mw}" using {base}:{base + 1}:{base + 2}:xtic(1) title "{CFG_NAMES[c]}" '
                                     f'lc rgb "{colors[c]}"')
                gp.append('plot ' + ', '.join(parts))
                gp += ['set logscale y', 'set yrange [0.4:*]',
                       'set ylabel "context switches per run (perf), log; 0 drawn as 0.5"']
                parts = []
                for i, c in enumerate(cfgs):
                        base = 5 + 6 * i
                        parts.append(f'"{mw}" using {base}:{base + 1}:{base + 2}:xtic(1) title "{CFG_NAMES[c]}" '
                                     f'lc rgb "{colors[c]}"')
                gp.append('plot ' + ', '.join(parts))
                gp.append('unset multiplot')

                jcfgs = [c for c in ('plain', 'M', 'R') if any(r['config'] == c for r in res.get('jitter', []))]
                if jcfgs:
                        jd = os.path.join(td, 'jitter.dat')
                        with open(jd, 'w') as f:
                                for load in loads:
                                        row = [f'"{PLOT_LOADS[load]}"']
                                        for c in jcfgs:
                                                j = jitter(res, load, c) or {}
                                                row += [str(max(j.get('p99_us') or 0, 0.5)), str(max(j.get('max_us') or 0, 0.5))]
                                        f.write(' '.join(row) + '\n')
                        gp += [f'set output "{os.path.join(imgdir, IMG_JITTER)}"',
                               'set multiplot layout 1,2 title "cyclictest wake-up latency: plain, M taskset+chrt, R rtd — ' + title + '"',
                               'set style histogram clustered gap 1', 'set logscale y', 'set yrange [0.4:*]',
                               'set ylabel "p99 latency (µs), log"']
                        parts = [f'"{jd}" using {2 + 2 * i}:xtic(1) title "{CFG_NAMES[c]}" lc rgb "{colors[c]}"'
                                 for i, c in enumerate(jcfgs)]
                        gp.append('plot ' + ', '.join(parts))
                        gp.append('set ylabel "max latency (µs), log"')
                        parts = [f'"{jd}" using {3 + 2 * i}:xtic(1) title "{CFG_NAMES[c]}" lc rgb "{colors[c]}"'
                                 for i, c in enumerate(jcfgs)]
                        gp.append('plot ' + ', '.join(parts))
                        gp.append('unset multiplot')
                script = os.path.join(td, 'plot.gp')
                with open(script, 'w') as f:
                        f.write('\n'.join(gp) + '\n')
                subprocess.run(['gnuplot', script], check=True)


def write(results_path, doc_path):
        with open(results_path) as f:
                res = json.load(f)
        imgdir = os.path.join(os.path.dirname(os.path.abspath(doc_path)), 'img')
        os.makedirs(imgdir, exist_ok=True)
        plot(res, imgdir)
        try:
                with open(doc_path) as f:
                        text = f.read()
        except FileNotFoundError:
                text = ('# Benchmarks\n\nHow rtd measures up, on the project\'s own 2-CPU VM. Each section is '
                        'written by the benchmark that produced it; rerun it to refresh.\n')
        text = splice(text, doc_sections(res))
        tmp = doc_path + '.tmp'
        with open(tmp, 'w') as f:
                f.write(text)
        os.replace(tmp, doc_path)


if __name__ == '__main__':
        if len(sys.argv) not in (2, 3):
                sys.exit(__doc__)
        here = os.path.dirname(os.path.abspath(__file__))
        write(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else os.path.join(os.path.dirname(here), 'docs',
                                                                                'benchmarks.md'))
