#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The audit tier (issue 18): rtd's figures for a reserved CPU checked against the kernel's own on the same
run, taken from outside rtd: an ftrace instance limited to that CPU (audit_trace.py), /proc/TID/schedstat
of intruders the test pins there from outside rtd's PID namespace, /proc/interrupts and /proc/softirqs.
One rtd reserves the last CPU; each scenario is a window between two of rtd's samples (their
CLOCK_MONOTONIC reading spans, which the trace's mono clock shares). Counts must agree exactly (an event
inside a span where rtd was reading may fall on either side: such events are counted and allowed),
times within 2%. Other engineers may load this machine meanwhile: the audit compares two records of the
same run, so outside intruders are figures like any other."""
import json
import os
import subprocess
import tempfile
import time

from audit_trace import Trace, analyse, unseen_bounds
from rtdtest import Knobs, Rtd, Skip, knob_lock, need_root, run_tests, test

CPU = os.cpu_count() - 1
HK = "0"
BUSY = "import time\nend = time.process_time() + %f\nwhile time.process_time() < end: pass\n"
SLEEPY = "import time\nfor _ in range(%d): time.sleep(0.001)\n"
ROWS = []


def mono():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def metrics(rtd):
    status, _, body = rtd.http("GET", "/v1/metrics")
    assert status == 200, (status, body)
    return json.loads(body)


def sample_around(rtd, t, tids):
    """The first of rtd's samples whose reading began after t, with run_times(tids) read as close around its
    reading as polling allows: (the last read before it began, the sample, the first read after it ended)."""
    reads = [run_times(tids)]
    end = time.time() + 5
    while time.time() < end:
        m = metrics(rtd)
        if m["sample_monotonic"]["start"] > t:
            before = [r for r in reads if all(a < m["sample_monotonic"]["start"] for _, _, a in r.values())]
            if before:
                return before[-1], m, run_times(tids)
            # The sample began while the reads were under way: the next one, with a read before it.
            t = m["sample_monotonic"]["start"]
        reads = reads[-1:] + [run_times(tids)]
        time.sleep(0.02)
    raise AssertionError("rtd took no sample in 5 s")


def proc_rows(name, keys):
    """CPU's column of /proc/interrupts or /proc/softirqs, for the rows in keys (or all)."""
    out = {}
    for line in open(f"/proc/{name}"):
        k, _, rest = line.partition(":")
        k = k.strip()
        cols = rest.split()
        if keys is not None and k not in keys or len(cols) <= CPU or not cols[CPU].isdigit():
            continue
        out[k] = int(cols[CPU])
    return out


def schedstat(pid):
    run_ns, _, slices = open(f"/proc/{pid}/schedstat").read().split()
    return int(run_ns), int(slices)


def pid1_threads():
    """Threads of the VM's PID 1 (outside rtd's PID namespace): their switch-outs are never traced here."""
    return {int(t) for t in os.listdir("/proc/1/task")}


def run_times(tids):
    """{tid: (run ns from /proc/TID/schedstat, CLOCK_MONOTONIC just before and just after the read)}"""
    out = {}
    for t in tids:
        try:
            before = mono()
            out[t] = (schedstat(f"1/task/{t}")[0], before, mono())
        except (OSError, ValueError):
            pass
    return out


def worker_pids(rtd):
    """rtd's workers (kernel pids): the processes rtd forked. Jobs are their children (fork events)."""
    kids = set()
    for t in os.listdir(f"/proc/{rtd.pid}/task"):
        kids |= {int(p) for p in open(f"/proc/{rtd.pid}/task/{t}/children").read().split()}
    return kids


class Audit:
    def __init__(self, scenario, f, A, B, lost):
        self.scenario, self.f, self.lost = scenario, f, lost
        self.a, self.b = A["cpus"][CPU], B["cpus"][CPU]
        self.rows, self.bad = [], []

    def count(self, figure, rtd, kernel, missed=0, over=0):
        """rtd's delta may hold events of the spans where it read: kernel <= rtd <= kernel + ambiguous. Events
        rtd's programs never saw and rtd shows (`missed`) are the only shortfall (`over`: or excess)."""
        ok = kernel - missed <= rtd <= kernel + self.f.ambiguous + over
        self.rows.append((figure, rtd, kernel, f"{rtd - kernel}" + (f" (rtd shows {missed} missed)" if missed else ""), ok))
        if not ok:
            self.bad.append(figure)

    def within(self, figure, rtd, lo, hi, note=""):
        ok = lo <= rtd <= hi
        self.rows.append((figure, rtd, f"{lo}..{hi}", ("within" if ok else "outside") + (f" ({note})" if note else ""), ok))
        if not ok:
            self.bad.append(figure)

    def between(self, figure, rtd, lo, hi, slack=0.0):
        """rtd within 2% of the kernel's figure, which the trace bounds to [lo, hi] (an unseen switch)."""
        if hi - lo < 1e-9:
            return self.seconds(figure, rtd, lo, slack)
        ok = lo - 0.02 * lo - slack <= rtd <= hi + 0.02 * hi + slack
        self.rows.append((figure, "%.6f" % rtd, "%.6f..%.6f" % (lo, hi), "within" if ok else "outside", ok))
        if not ok:
            self.bad.append(figure)

    def seconds(self, figure, rtd, kernel, slack=0.0, floor=0.0):
        ok = abs(rtd - kernel) <= 0.02 * kernel + slack + floor
        self.rows.append((figure, "%.6f" % rtd, "%.6f" % kernel,
                          "%+.2f%%" % (100 * (rtd - kernel) / kernel) if kernel else "%+.6f" % (rtd - kernel), ok))
        if not ok:
            self.bad.append(figure)

    def report(self):
        print(f"  {self.scenario}: rtd's reading spans {self.f.spans[0] * 1e6:.0f} us and {self.f.spans[1] * 1e6:.0f} us, "
              f"events in them {self.f.ambiguous} ({self.f.ambiguous_s * 1e3:.3f} ms of intruder time), switches from idle "
              f"ftrace did not record (reconstructed) {self.f.reconstructed}, trace lost "
              f"{self.lost}, rtd missed events {self.b['missed_events'] - self.a['missed_events']} "
              f"(unrecovered {self.b['missed_unrecovered'] - self.a['missed_unrecovered']}), rtd's sampling program run on "
              f"the CPU {self.b.get('sampled_on_cpu', 0) - self.a.get('sampled_on_cpu', 0)} times")
        unpaired = {r: v["unpaired"] - self.a["vectors"][r]["unpaired"] for r, v in self.b["vectors"].items()
                    if "unpaired" in v and v["unpaired"] != self.a["vectors"][r]["unpaired"]}
        if unpaired:
            print("    vector handlers whose exit (or entry) rtd's programs missed, their time left out: " +
                  ", ".join(f"{r} {n}" for r, n in sorted(unpaired.items())))
        if self.f.vectors_straddle:
            print("    vectors begun before the window and ended in it (their time is the window's, as in rtd): " +
                  ", ".join(f"{r} {s * 1e6:.1f} us" for r, s in sorted(self.f.vectors_straddle.items())))
        n, gaps = getattr(self, "unseen", (0, {}))
        if n:
            print(f"    switches away from a task no tracepoint reported: {n}; the kernel's time the trace lacks, "
                  "bounded by schedstat and the trace's gaps: " +
                  ", ".join(f"{p} {lo * 1e3:.3f}..{hi * 1e3:.3f} ms" for p, (lo, hi) in sorted(gaps.items())))
        top = sorted(self.f.by_pid.items(), key=lambda kv: -kv[1][1])[:5]
        print("    kernel's top intruders: " + ", ".join(f"{c}/{p} {r} runs {s * 1e3:.3f} ms" for p, (r, s, c) in top))
        print(f"    {'figure':34} | {'rtd':>12} | {'kernel':>12} | difference")
        for r in self.rows:
            print(f"    {r[0]:34} | {r[1]!s:>12} | {r[2]!s:>12} | {r[3]!s}{'' if r[4] else '   <-- FAIL'}")
        ROWS.append((self.scenario, self.rows))


def audit_window(rtd, scenario, run):
    """Run the scenario between two samples, traced by an instance of its own."""
    watch = pid1_threads()
    trace = Trace(CPU, f"rtd-audit-{os.getpid()}", watch)
    try:
        ints0, soft0 = proc_rows("interrupts", None), proc_rows("softirqs", None)
        # schedstat of PID 1's threads around each sample's reading: outside the window and inside it.
        rt0, A, in0 = sample_around(rtd, mono(), watch)
        ctx = run() or {}
        in1, B, rt1 = sample_around(rtd, mono(), watch)
        ints1, soft1 = proc_rows("interrupts", None), proc_rows("softirqs", None)
        events, lost = trace.stop()
    finally:
        trace.close()
    ctx["run_times"] = (rt0, rt1, in0, in1)
    return A, B, ctx, (ints0, soft0, ints1, soft1), events, lost


def check(rtd, events, lost, scenario, A, B, ctx, procs, exempt):
    jobs = ctx.get("jobs", [])
    job_pids = ctx.get("job_pids", set())
    rt0, rt1, in0, in1 = ctx["run_times"]
    t0, t1 = A["sample_monotonic"]["end"], B["sample_monotonic"]["start"]
    f = analyse(events, A["sample_monotonic"]["start"], t0, t1, B["sample_monotonic"]["end"], exempt, job_pids,
                watch=set(rt0) & set(rt1))
    # Switches away from a task that no tracepoint reported (threads of PID 1 here): the trace lacks the last
    # piece of those slices; the kernel's own clock of each (schedstat, read around and inside) bounds it.
    # The trace's blind spot, not rtd's: rtd's figures get no allowance.
    (lo, hi), gaps = unseen_bounds(f, {t: (rt0[t], rt1[t]) for t in set(rt0) & set(rt1)},
                                   {t: (in0[t], in1[t]) for t in set(in0) & set(in1)})
    # Unwatched tasks (not of PID 1): no schedstat, only the trace's gaps bound them.
    for pid in f.unwatched:
        gaps[pid] = (0.0, sum(b - a for p, a, b in f.unseen if p == pid and a < B["sample_monotonic"]["end"]
                              and b > A["sample_monotonic"]["start"]))
        hi += gaps[pid][1]
    au = Audit(scenario, f, A, B, lost)
    a, b = au.a, au.b
    def d(k):
        return b[k] - a[k]

    def switches(c):
        return c["context_switches"]["voluntary"] + c["context_switches"]["involuntary"]

    # Switches the tracepoint never fired for are missed by ftrace and rtd alike (the trace reconstructs
    # them); a switch only rtd's program missed is in rtd's missed_events: each can change one run.
    missed_sw = d("missed_events")
    au.count("context switches", switches(b) - switches(a), f.switches, missed_sw)
    au.count("intrusions (runs)", d("intrusions"), f.intrusions, missed_sw, over=missed_sw)
    # No allowance for rtd's own figure: only the kernel's record has a blind spot, bounded above.
    au.between("intrusion seconds", d("intrusion_seconds"), f.intrusion_s + lo, f.intrusion_s + hi,
               slack=f.ambiguous_s)
    au.within("slices rtd could not recover", d("missed_unrecovered"), 0, 0)
    # Counts: the kernel's own counter in rtd's sample must be exact; the count rtd's programs saw (with
    # their time) may fall short of it by events whose tracepoint never ran them, which rtd shows.
    au.count("hardirqs (numbered, kernel's count in rtd)", d("hardirqs_kernel"), sum(f.irqs.values()))
    au.count("hardirqs (numbered, traced by rtd)", d("hardirqs"), sum(f.irqs.values()),
             d("hardirqs_kernel") - d("hardirqs"))

    for v, n in sorted(f.softirqs.items()):
        kc = b["softirqs"][v]["kernel_count"] - a["softirqs"][v]["kernel_count"]
        tc = b["softirqs"][v]["count"] - a["softirqs"][v]["count"]
        au.count(f"softirq {v} (kernel's count in rtd)", kc, n)
        au.count(f"softirq {v} (traced by rtd)", tc, n, kc - tc)
    for row in ("LOC", "RES", "CAL", "IWI"):
        kn = f.vectors.get(row, [0, 0.0])
        kc = b["vectors"][row]["kernel_count"] - a["vectors"][row]["kernel_count"]
        tc = b["vectors"][row]["count"] - a["vectors"][row]["count"]
        au.count(f"vector {row} (kernel's count in rtd)", kc, kn[0])
        au.count(f"vector {row} (traced by rtd)", tc, kn[0], kc - tc)
        if kn[0] or kn[1]:
            # Handler time: both clocks stamp the same tracepoints, each after its own probe's cost. The
            # events rtd shows it did not see have no time in its figure: their mean time in the trace
            # (an entry it missed, and a handler whose exit it missed: `unpaired`).
            unpaired = b["vectors"][row]["unpaired"] - a["vectors"][row]["unpaired"]
            mean = kn[1] / kn[0] if kn[0] else 0.0
            au.seconds(f"vector {row} seconds", b["vectors"][row]["seconds"] - a["vectors"][row]["seconds"], kn[1],
                       slack=f.vectors_edge.get(row, 0.0),
                       floor=kn[0] * 2e-6 + (max(0, kc - tc) + unpaired) * mean)
    # /proc/interrupts brackets the window (read before A and after B): never below the trace's count.
    ints0, soft0, ints1, soft1 = procs
    # TLB: remote flush requests handled (several may share one CAL). No event marks each one (tlb_flush
    # reports some the row does not count, and misses the handler's early returns: 25 events against 22
    # here), so the row is checked against itself: /proc/interrupts read around the window holds it.
    kc = b["vectors"]["TLB"]["kernel_count"] - a["vectors"]["TLB"]["kernel_count"]
    au.within("TLB (kernel's count in rtd; /proc around)", kc, 0, ints1.get("TLB", 0) - ints0.get("TLB", 0),
              f"trace's tlb_flush remote: {f.tlb}")
    # Counted since the programs were attached, both of them: the programs never above the kernel.
    for row in ("LOC", "RES", "CAL", "IWI"):
        if b["vectors"][row]["count"] > b["vectors"][row]["kernel_count"]:
            au.bad.append(f"vector {row}: the programs' count since attach {b['vectors'][row]['count']} above "
                          f"the kernel's {b['vectors'][row]['kernel_count']}")
    for row in ("LOC", "RES", "CAL", "IWI"):
        if ints1.get(row, 0) - ints0.get(row, 0) < f.vectors.get(row, [0])[0]:
            au.bad.append(f"/proc/interrupts {row} below the trace")
    # Named intruders: every pid the trace saw run in the window is in rtd's table with the same runs.
    before = {(x["pid"], x["start_time_ns"]): x for x in a["intruders"]}
    after = {}
    for x in b["intruders"]:
        p = before.get((x["pid"], x["start_time_ns"]), {"runs": 0, "seconds": 0.0})
        e = after.setdefault(x["pid"], [0, 0.0, x["comm"], x["kind"]])
        e[0] += x["runs"] - p["runs"]
        e[1] += x["seconds"] - p["seconds"]
    other_runs = b["intruders_other"]["runs"] - a["intruders_other"]["runs"]
    for pid, (lo, hi) in sorted(gaps.items()):
        k = f.by_pid.get(pid, [0, 0.0, "?"])
        name = f"{after.get(pid, ['', '', k[2]])[2]}/{pid} seconds (unseen switch-outs)"
        if pid in f.unwatched:
            # Not a thread of PID 1 (the VM agent's short-lived shells): no schedstat read around the window
            # (most are born and gone inside it, and a dead task's clock is gone), and the trace's gaps do not
            # bound what a chain of unreported switches hides (docs/metrics.md). The kernel's figure is then
            # known from below only; rtd's total is still held to the window's bounds.
            au.within(name, round(after.get(pid, [0, 0.0])[1], 6), round(0.98 * k[1] - f.ambiguous_by_pid.get(pid, 0.0), 6),
                      float("inf"), "no upper bound: the trace's blind spot")
            continue
        au.between(name, after.get(pid, [0, 0.0])[1], k[1] + lo, k[1] + hi, slack=f.ambiguous_by_pid.get(pid, 0.0))
    au.unseen = (len(f.unseen), gaps)
    unnamed = [p for p, (runs, _, _) in f.by_pid.items() if runs and after.get(p, [0])[0] == 0]
    named_runs = sum(after.get(p, [0])[0] for p in f.by_pid)
    au.count("runs of named intruders + other", named_runs + other_runs,
             sum(r for r, _, _ in f.by_pid.values()), missed_sw, over=missed_sw)
    if unnamed and not other_runs:
        au.bad.append(f"intruders the trace saw but rtd did not name: {unnamed}")
    for pid, info in ctx.get("known", {}).items():
        e = after.get(pid, [0, 0.0, "", ""])
        au.count(f"known {info['comm']}/{pid} runs (schedstat)", e[0], info["slices"])
        au.count(f"known {info['comm']}/{pid} runs (trace)", e[0], f.by_pid.get(pid, [0])[0])
        au.seconds(f"known {info['comm']}/{pid} seconds (schedstat)", e[1], info["run_ns"] / 1e9)
        if e[2] != info["comm"] or e[3] != "user":
            au.bad.append(f"known intruder {pid} named {e[2]!r} ({e[3]}), expected {info['comm']!r} (user)")
    for j in jobs:
        m = j["metrics"]
        au.seconds(f"job {j['id']} on-CPU seconds", m["on_cpu_seconds"], f.job["s"], slack=f.ambiguous_s)
        au.count(f"job {j['id']} LOC while it ran", m["vectors"]["LOC"]["count"], f.job["LOC"])
        au.count(f"job {j['id']} hardirqs while it ran", m["hardirqs"], f.job["irqs"])
        au.count(f"job {j['id']} softirqs while it ran", m["softirqs"], f.job["softirqs"])
    au.report()
    missed = b["missed_events"] - a["missed_events"]
    assert lost == 0, f"{scenario}: the trace lost {lost} events: no audit possible"
    assert not au.bad, f"{scenario}: rtd disagrees with the kernel on {au.bad} (rtd missed events: {missed})"


def submit(rtd, *cmd):
    job = rtd.ctl_json("submit", "--wait", "--", *cmd)
    assert job["state"] == "succeeded", job
    return job


def pinned(code):
    """A task the test pins onto the reserved CPU from outside rtd's PID namespace. Forked while the test
    itself sits there, so every run of it is on that CPU and its schedstat is the whole truth."""
    os.sched_setaffinity(0, {CPU})
    try:
        return subprocess.Popen(["/usr/bin/python3", "-c", code])
    finally:
        os.sched_setaffinity(0, {int(HK)})


def reap_known(p, comm):
    """Wait for p to exit without reaping it: a zombie's schedstat is its final CPU time and slices."""
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    run_ns, slices = schedstat(p.pid)
    p.wait()
    assert p.returncode == 0, p.returncode
    return p.pid, {"comm": comm, "run_ns": run_ns, "slices": slices}


@test
def audit_reserved_cpu_against_the_kernel():
    # RTD_AUDIT_REPEAT=N: N rounds in a row under one hold of the knob lock (each with its own rtd).
    rounds = int(os.environ.get("RTD_AUDIT_REPEAT", "1"))
    failed = []
    for i in range(rounds):
        if rounds > 1:
            print(f"round {i + 1} of {rounds}", flush=True)
        try:
            audit_round()
        except AssertionError as e:
            if rounds == 1:
                raise
            print(f"round {i + 1} failed: {e}", flush=True)
            failed.append(i + 1)
    assert not failed, f"rounds {failed} of {rounds} failed"


def audit_round():
    need_root()
    if os.cpu_count() < 2:
        raise Skip("needs 2 CPUs: one to reserve, one for housekeeping")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        raise Skip("kernel has no BTF: no BPF collector to audit")
    knobs = Knobs()
    # A table big enough for a machine that others load meanwhile: every intruder of the run named.
    rtd = Rtd(reserve=str(CPU), pidns=True, name="audit", conf="[Metrics]\nIntruderTableSize=16384\n")
    load = None
    tmp = tempfile.mkdtemp(prefix="rtd-audit-")
    try:
        ints_before = proc_rows("interrupts", ("LOC", "CAL", "TLB"))
        rtd.start()
        first = metrics(rtd)
        ints_started = proc_rows("interrupts", ("LOC", "CAL", "TLB"))
        st = first["collector"]
        if not st["bpf_enabled"]:
            raise Skip(f"BPF collector unavailable: {st.get('reason')}")
        # The kernel's counts in rtd are since its programs were attached: within what /proc/interrupts
        # counted since before rtd started (a count since boot, the old TLB row, is far above).
        for row in ("LOC", "CAL", "TLB"):
            got = first["cpus"][CPU]["vectors"][row]["kernel_count"]
            assert got <= ints_started[row] - ints_before[row], (row, got, ints_before, ints_started)
        # The test stays on the housekeeping CPU: rtd in its PID namespace cannot move it.
        os.sched_setaffinity(0, {int(HK)})
        windows = []
        exempt = worker_pids(rtd)

        def idle():
            time.sleep(2)

        def job_busy():
            return {"jobs": [submit(rtd, "/usr/bin/python3", "-c", BUSY % 1.5)]}

        def job_sleepy():
            return {"jobs": [submit(rtd, "/usr/bin/python3", "-c", SLEEPY % 800)]}

        def io_on_housekeeping():
            out = os.path.join(tmp, "io")
            subprocess.run(["taskset", "-c", HK, "dd", "if=/dev/zero", f"of={out}", "bs=4k", "count=6000",
                            "oflag=direct,sync"], check=True, capture_output=True)
            os.unlink(out)

        def known_intruders():
            # A CFS hog that execs into sh (its name must follow), and a sleeper: both pinned onto the
            # reserved CPU by the test, whose PID namespace is not rtd's.
            hog = pinned(BUSY % 0.3 + "import os\nos.execv('/bin/sh', ['sh', '-c', "
                         "'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done'])\n")
            sleeper = pinned(SLEEPY % 200)
            known = dict([reap_known(hog, "sh"), reap_known(sleeper, "python3")])
            return {"known": known}

        def tlb_shootdowns():
            # A process of two threads from outside rtd's PID namespace: one spins on the reserved CPU, the
            # other unmaps pages on the housekeeping CPU, so each unmap sends the reserved CPU a TLB flush.
            storm = os.environ.get("RTD_TLB_STORM") or os.path.join(os.environ["RTD_BUILD_DIR"], "tests/integration/tlb-storm")
            p = subprocess.run([storm, "1.5", HK, str(CPU)], check=True,
                               capture_output=True, text=True)
            return {"unmaps": int(p.stdout)}

        scenarios = [("idle reservation", idle), ("CPU-bound job, machine idle", job_busy)]
        scenarios += [("sleep-heavy job", job_sleepy), ("IRQ-heavy I/O on housekeeping", io_on_housekeeping),
                      ("intruders pinned from outside rtd's PID namespace", known_intruders),
                      ("TLB shootdowns from a process on both CPUs", tlb_shootdowns)]
        for name, fn in scenarios:
            exempt |= worker_pids(rtd)          # rtd replaces workers: take them before each window
            windows.append((name,) + audit_window(rtd, name, fn))
            exempt |= worker_pids(rtd)
        # The CPU-bound job again, with housekeeping load (busy loops on the housekeeping CPU).
        load = subprocess.Popen(["taskset", "-c", HK, "/usr/bin/python3", "-c", BUSY % 30])
        exempt |= worker_pids(rtd)
        windows.append(("CPU-bound job, housekeeping load",) + audit_window(rtd, "load", job_busy))
        exempt |= worker_pids(rtd)
        load.kill()
        load.wait()
        load = None
        # Jobs are forked by their worker on the reserved CPU: the trace's fork events name them.
        failures = []
        for name, A, B, ctx, procs, events, lost in windows:
            try:
                check(rtd, events, lost, name, A, B, ctx, procs, exempt)
            except AssertionError as e:
                failures.append(str(e))
        # RTD_AUDIT_DUMP=PATH: the failed windows' records, for a second look (PATH.n, PATH.n.n, ... after the first).
        if failures and os.environ.get("RTD_AUDIT_DUMP"):
            path = os.environ["RTD_AUDIT_DUMP"]
            while os.path.exists(path):
                path += ".n"
            with open(path, "w") as f:
                json.dump({"exempt": sorted(exempt), "windows": [w for w in windows if any(w[0] + ":" in x for x in failures)]}, f)
            subprocess.run(["cp", rtd.log, path + ".rtd.log"])
        assert not failures, "\n".join(failures)
    finally:
        if load:
            load.kill()
            load.wait()
        rtd.cleanup()
        subprocess.run(["rm", "-rf", tmp])
        diff = knobs.diff()
        if diff:
            knobs.restore()
            raise AssertionError(f"knobs not restored by rtd: {diff}")


if __name__ == "__main__":
    _lock = knob_lock()
    run_tests()
