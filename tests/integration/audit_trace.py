# SPDX-License-Identifier: MIT
"""The kernel's own record of one CPU, for the audit tier (test-audit.py): an ftrace instance of its own
limited to that CPU (sched_switch/fork/exec, IRQ, softirq and irq_vectors events, CLOCK_MONOTONIC
stamps), parsed into per-window figures that are compared with rtd's. Nothing here asks rtd anything."""
import os
import re
import subprocess

TRACEFS = "/sys/kernel/tracing"
LINE = re.compile(r"^\s*(.*)-(\d+)\s+\[(\d+)\]\s+\S+\s+(\d+\.\d+): (\w+): (.*)$")
KV = re.compile(r"(\w+)=(\S+)")
# irq_vectors events -> /proc/interrupts rows (both call_function flavours are CAL there).
VECTOR_ROW = {"local_timer": "LOC", "reschedule": "RES", "call_function": "CAL", "call_function_single": "CAL",
              "irq_work": "IWI", "x86_platform_ipi": "PLT", "thermal_apic": "TRM", "spurious_apic": "SPU",
              "error_apic": "ERR"}


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


class Trace:
    """An ftrace instance recording CPU `cpu` only; stop() returns the parsed events."""

    def __init__(self, cpu, name, watch=()):
        """watch: tids whose switch-ins on the other CPUs are recorded too (see unseen_bounds())."""
        self.cpu = cpu
        self.mounted = False
        if not os.path.exists(os.path.join(TRACEFS, "instances")):
            subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
            self.mounted = True
        self.dir = os.path.join(TRACEFS, "instances", name)
        os.mkdir(self.dir)
        _write(os.path.join(self.dir, "tracing_on"), "0")
        _write(os.path.join(self.dir, "tracing_cpumask"), "%x" % (1 << cpu))
        _write(os.path.join(self.dir, "trace_clock"), "mono")    # the clock of rtd's sample stamps
        _write(os.path.join(self.dir, "buffer_size_kb"), "4096")
        _write(os.path.join(self.dir, f"per_cpu/cpu{cpu}/buffer_size_kb"), "524288")
        events = ["sched/sched_switch", "sched/sched_stat_runtime", "sched/sched_process_fork", "sched/sched_process_exec",
                  "irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry", "irq/softirq_exit"]
        vdir = os.path.join(TRACEFS, "events/irq_vectors")
        self.vectors = os.path.isdir(vdir)
        for v in VECTOR_ROW:
            for end in ("entry", "exit"):
                if os.path.isdir(os.path.join(vdir, f"{v}_{end}")):
                    events.append(f"irq_vectors/{v}_{end}")
        if os.path.isdir(os.path.join(TRACEFS, "events/tlb/tlb_flush")):
            events.append("tlb/tlb_flush")
        for e in events:
            _write(os.path.join(self.dir, "events", e, "enable"), "1")
        # One instance per scenario, read once stopped: no reader competes for the CPUs meanwhile (a reader
        # of trace_pipe on a loaded housekeeping CPU fell behind and the buffer overran), and the buffer's
        # stats say whether anything was lost.
        # update_curr() of this CPU's task also runs on other CPUs (a remote wakeup updates the target
        # runqueue's current task): its sched_stat_runtime lands in their buffers. A second instance takes
        # that event alone on the other CPUs; analyse() keeps what was about this CPU's current task.
        self.remote = self.dir + "-remote"
        os.mkdir(self.remote)
        _write(os.path.join(self.remote, "tracing_on"), "0")
        _write(os.path.join(self.remote, "tracing_cpumask"), "%x" % (((1 << os.cpu_count()) - 1) & ~(1 << cpu)))
        _write(os.path.join(self.remote, "trace_clock"), "mono")
        _write(os.path.join(self.remote, "buffer_size_kb"), "262144")
        _write(os.path.join(self.remote, "events/sched/sched_stat_runtime/enable"), "1")
        # A worker may fork its job on another CPU before the job moves here: forks everywhere.
        _write(os.path.join(self.remote, "events/sched/sched_process_fork/enable"), "1")
        # Where the watched tasks ran elsewhere (their switch-ins: see unseen_bounds()).
        if watch:
            _write(os.path.join(self.remote, "events/sched/sched_switch/filter"),
                   " || ".join(f"next_pid == {t}" for t in sorted(watch)))
            _write(os.path.join(self.remote, "events/sched/sched_switch/enable"), "1")
            # A watched task moved to or from any CPU may have run elsewhere (see unseen_bounds()).
            for d in (self.dir, self.remote):
                _write(os.path.join(d, "events/sched/sched_migrate_task/filter"),
                       " || ".join(f"pid == {t}" for t in sorted(watch)))
                _write(os.path.join(d, "events/sched/sched_migrate_task/enable"), "1")
        _write(os.path.join(self.remote, "tracing_on"), "1")
        _write(os.path.join(self.dir, "tracing_on"), "1")

    def stop(self):
        _write(os.path.join(self.dir, "tracing_on"), "0")
        _write(os.path.join(self.remote, "tracing_on"), "0")
        lost = 0
        events = []
        for d in (self.dir, self.remote):
            for c in range(os.cpu_count()):
                stats = open(os.path.join(d, f"per_cpu/cpu{c}/stats")).read()
                lost += sum(int(v) for k, v in re.findall(r"^(overrun|dropped events): (\d+)", stats, re.M))
            with open(os.path.join(d, "trace"), errors="replace") as f:
                text = f.read()
            for line in text.splitlines():
                m = LINE.match(line)
                if not m:
                    continue
                comm, pid, cpu, ts, name, rest = m.groups()
                if int(cpu) != self.cpu:
                    name = "remote_" + name
                events.append((float(ts), name, int(pid), rest))
        events.sort(key=lambda e: e[0])
        return events, lost

    def close(self):
        try:
            _write(os.path.join(self.dir, "tracing_on"), "0")
            os.rmdir(self.dir)
            _write(os.path.join(self.remote, "tracing_on"), "0")
            os.rmdir(self.remote)
        except OSError:
            pass
        if self.mounted:
            subprocess.run(["umount", TRACEFS])


class Figures:
    """The kernel's figures for the window (t0, t1] and the counts of events in the ambiguous spans
    [a0, t0] and (t1, b1], where rtd's reading was in progress (an event there may be on either side)."""

    def __init__(self):
        self.switches = 0               # switches away from a non-idle task
        self.intrusions = 0             # switch-ins of tasks that are not rtd's workers or jobs
        self.intrusion_s = 0.0
        self.by_pid = {}                # pid -> [runs, seconds, last comm]
        self.irqs = {}                  # irq number -> count
        self.softirqs = {}              # vector name -> count
        self.vectors = {}               # row -> [count, seconds]
        self.job = {"s": 0.0, "LOC": 0, "irqs": 0, "softirqs": 0}
        self.tlb = 0                    # remote TLB flush requests handled that reached a tlb_flush event
        self.ambiguous = 0              # events of any kind in the ambiguous spans
        self.ambiguous_s = 0.0          # intruder time that straddles a boundary
        self.ambiguous_by_pid = {}      # ... by task


def analyse(events, a0, t0, t1, b1, exempt, job_pids=(), watch=()):
    """exempt: pids of rtd's workers; their descendants (fork events) are jobs, exempt too. watch: tids whose
    every sched_stat_runtime (any CPU) and switch-in elsewhere is kept, for unseen_bounds().

    Blind spot of ftrace on this kernel: a sched_switch whose prev is the idle task is never recorded
    (rtd's BPF program sees them). Each is reconstructed exactly as a count, since the next switch names
    its prev: the task the idle task switched to. Its time is not needed from the switches: CPU time is
    taken from sched_stat_runtime, the kernel's own update_curr() deltas on this CPU (the clock that
    sum_exec_runtime, and so rtd, adds up).
    """
    f = Figures()
    two_cpus = os.cpu_count() == 2
    exempt = set(exempt)
    job_pids = set(job_pids)
    cur = None                          # the CPU's current task as the trace knows it
    last_switch = 0.0
    on_cpu = None                       # the task this CPU's last event was stamped with
    idle_seen = None                    # last event stamped while the idle task was current
    running_at = {}                     # pid -> whether it was running across t0 / t1
    vec_open = None                     # (row, entry stamp) of the vector being handled
    f.vectors_edge = {}                 # row -> seconds of vectors that ended in rtd's reading spans
    f.vectors_straddle = {}             # row -> seconds of those that began before t0 and ended inside
    f.spans = (t0 - a0, b1 - t1)
    f.reconstructed = 0
    f.unseen = []                       # (pid, after, before): a switch away from pid the trace never shows
    f.watch = {t: {"runtime": [], "elsewhere": []} for t in watch}
    f.unwatched = set()                 # tasks with such a switch that were not watched
    # The task the trace last saw on the CPU (by its switch-in or an event under it), and up to when its
    # CPU time is surely in the trace's updates; last_local: the stamp of the CPU's last event.
    occ, occ_upd, last_local = None, 0.0, 0.0
    last_tick = last_switch_ts = 0.0    # the last tick and switch on this CPU

    def remote_here(p, stamp):
        """Whether an update_curr() of task p, made on another CPU (whose current task is stamp), was of this
        CPU's current task: a remote update is always of a runqueue's running task, so with two CPUs of
        anything but the other CPU's own; with more, only of the task this CPU last showed."""
        return p != stamp if two_cpus else p == on_cpu

    def intruder(pid):
        return pid and pid not in exempt

    def switch_in(pid, lo, hi, comm):
        """pid came in somewhere in [lo, hi]."""
        if lo > t1 or hi <= t0:
            if (a0 <= hi and lo <= t0) or (t1 < hi and lo <= b1):
                f.ambiguous += 1
            return
        if not (t0 < lo and hi <= t1):
            f.ambiguous += 1            # it came in across a boundary: either side
            return
        if intruder(pid):
            f.intrusions += 1
            e = f.by_pid.setdefault(pid, [0, 0.0, ""])
            e[0] += 1
            e[2] = comm

    for ts, name, pid, rest in events:
        inside = t0 < ts <= t1
        edge = a0 <= ts <= t0 or t1 < ts <= b1
        kv = dict(KV.findall(rest))
        if name in ("sched_stat_runtime", "remote_sched_stat_runtime"):
            p = int(kv["pid"])
            if p in f.watch:
                f.watch[p]["runtime"].append((ts, int(kv["runtime"])))
            if name == "remote_sched_stat_runtime" and remote_here(p, pid) and p != occ:
                # This CPU's current task, updated from another CPU: the trace learns of a switch it
                # never showed (as for an event under another task, below).
                if occ:
                    f.unseen.append((occ, occ_upd, ts))
                    f.watch.setdefault(occ, {"runtime": [], "elsewhere": []})
                    f.unwatched |= {occ} - set(watch)
                occ, occ_upd = p, last_local
            if p == occ:
                occ_upd = ts            # occ's CPU time is accounted up to here
        if name == "tlb_flush":
            # Also traced inside a switch (switch_mm), stamped with the task switched away from: no mark of
            # what runs. flush_tlb_func() counts TLB on entry for a remote request; it reports one of these
            # two reasons unless it returns early (the CPU lazy or in init_mm), which no event shows.
            f.tlb += inside and ("reason:remote shootdown" in rest or "reason:remote wrong CPU" in rest)
            continue
        if name in ("sched_migrate_task", "remote_sched_migrate_task"):
            p = int(kv["pid"])
            if p in f.watch:
                f.watch[p]["elsewhere"].append(ts)
            continue
        if name.startswith("remote_"):
            if name == "remote_sched_switch":
                p = int(kv["next_pid"])
                if p in f.watch:
                    f.watch[p]["elsewhere"].append(ts)
                continue
            if name == "remote_sched_process_fork":
                name = "sched_process_fork"
            elif name != "remote_sched_stat_runtime":
                continue
        else:
            on_cpu = pid
            if name == "local_timer_entry":
                last_tick = ts
            # An event under another task than the one the trace last saw here: a switch the trace never
            # showed happened since that one's last event (from the idle task, or away from a task whose
            # switch-outs are never reported, chains of them included: 75->69->75). The task left's last
            # update_curr() is at that switch: a piece of its CPU time the trace lacks, in (occ_upd, ts].
            # Any run that left no event at all lies inside such a piece too.
            if pid != occ:
                if occ:
                    f.unseen.append((occ, occ_upd, ts))
                    f.watch.setdefault(occ, {"runtime": [], "elsewhere": []})
                    f.unwatched |= {occ} - set(watch)
                occ, occ_upd = pid, last_local
            last_local = ts
        if pid == 0 and not name.startswith("remote_") and name != "sched_process_fork":
            idle_seen = ts
        if name == "sched_process_fork":
            # What a worker forks is a job; what a job forks belongs to it.
            parent, child = int(kv["pid"]), int(kv["child_pid"])
            if parent in exempt:
                exempt.add(child)
                job_pids.add(child)
            continue
        if name == "sched_process_exec":
            continue
        if name in ("sched_stat_runtime", "remote_sched_stat_runtime"):
            p, ns = int(kv["pid"]), int(kv["runtime"])
            # Only updates of this CPU's current task: on this CPU the line's task is current; from
            # elsewhere, the task this CPU last showed as current.
            if p != pid if name == "sched_stat_runtime" else not remote_here(p, pid):
                continue
            if edge and intruder(p):
                # CPU time in the spans where rtd was reading: on either side of its sample (its table of
                # intruders is read at the start of the span, the totals later).
                f.ambiguous_s += ns / 1e9
                f.ambiguous_by_pid[p] = f.ambiguous_by_pid.get(p, 0.0) + ns / 1e9
            if not inside:
                continue
            if p in job_pids:
                f.job["s"] += ns / 1e9
            if intruder(p):
                f.intrusion_s += ns / 1e9
                f.by_pid.setdefault(p, [0, 0.0, kv["comm"]])[1] += ns / 1e9
                # An intruder running across a boundary: rtd's sample holds it up to its last tick.
                if running_at.get(p) and ts - t0 <= 0.004:
                    f.ambiguous_s += ns / 1e9
                    f.ambiguous_by_pid[p] = f.ambiguous_by_pid.get(p, 0.0) + ns / 1e9
            continue
        if edge:
            f.ambiguous += 1
        if name == "sched_switch":
            prev, nxt = int(kv["prev_pid"]), int(kv["next_pid"])
            if cur is not None and prev != cur and prev != 0:
                # The unrecorded switch to prev: from the idle task (after its last stamp), or one the
                # tracepoint itself never fired for (rtd's program misses the same: its missed_events).
                f.reconstructed += 1    # its time: a piece of f.unseen (above)
                lo = idle_seen if cur == 0 and idle_seen is not None else last_switch
                switch_in(prev, lo, ts, kv["prev_comm"])
            if inside and prev:
                f.switches += 1
            switch_in(nxt, ts, ts, kv["next_comm"])
            cur, last_switch, on_cpu = nxt, ts, nxt
            # Its CPU time runs from the runqueue clock's value at its pick, which may be older than this
            # event: a __schedule() after a wakeup preemption skips the clock update. So from the last update
            # surely before: a tick, or the switch before this one.
            occ, occ_upd = nxt, max(last_tick, last_switch_ts)
            last_switch_ts = ts
            if ts <= t0:
                running_at = {nxt: True}
            continue
        # A vector's time is where its exit is, as in rtd (its count is at the entry, its time added at the
        # exit): a handler that began before t0 (in rtd's reading span, where rtd's own sampling IPI wakes an
        # idle CPU) and ended inside is the window's time; one that ended in a reading span may be on either
        # side (slack), its count likewise.
        if name.endswith("_entry") and name[:-6] in VECTOR_ROW:
            vec_open = (VECTOR_ROW[name[:-6]], ts)
        elif name.endswith("_exit") and name[:-5] in VECTOR_ROW and vec_open:
            row, d = vec_open[0], ts - vec_open[1]
            vec_open = None
            if inside:
                f.vectors.setdefault(row, [0, 0.0])[1] += d
                if not t0 < ts - d:
                    f.vectors_straddle[row] = f.vectors_straddle.get(row, 0.0) + d
            elif edge:
                f.vectors_edge[row] = f.vectors_edge.get(row, 0.0) + d
        if not inside:
            continue
        on_job = pid in job_pids
        if name == "irq_handler_entry":
            n = int(kv["irq"])
            f.irqs[n] = f.irqs.get(n, 0) + 1
            f.job["irqs"] += on_job
        elif name == "softirq_entry":
            a = kv["action"].rstrip("]")
            f.softirqs[a] = f.softirqs.get(a, 0) + 1
            f.job["softirqs"] += on_job
        elif name.endswith("_entry") and name[:-6] in VECTOR_ROW:
            row = VECTOR_ROW[name[:-6]]
            f.vectors.setdefault(row, [0, 0.0])[0] += 1
            if row == "LOC":
                f.job["LOC"] += on_job
    return f


def _missing(w, reads, wide):
    """What the trace lacks of a task between two reads of its schedstat (run_ns, before, after each):
    its run time's growth less the trace's updates of it. wide: count updates from before the first read
    to after the second (the least it can lack), else only between them (the most)."""
    (run0, b0, a0), (run1, b1, a1) = reads
    lo, hi = (b0, a1) if wide else (a0, b1)
    return max(0, run1 - run0 - sum(ns for ts, ns in w["runtime"] if lo < ts <= hi)) / 1e9


def unseen_bounds(f, outer, inner):
    """Bounds (lo, hi) in seconds of the CPU time the trace lacks, in the window between rtd's samples, of
    the tasks whose switch-outs it never shows: ((lo, hi) of them all, {pid: (lo, hi)} of each seen here).
    outer: {pid: ((run_ns, before, after), (run_ns, before, after))}, /proc/TID/schedstat read just before
    the first sample's reading and just after the second's; inner: just after the first's and just before
    the second's, so inside the window (test-audit.py polls rtd and reads them each time).

    Blind spot of this kernel (6.18, a Firecracker guest): no tracepoint fires while a thread of the VM's
    PID 1 is switched out (sched_switch and the sched_stat_runtime of its last update_curr() alike), though
    the runqueue's nr_switches counts the switch. So the trace lacks the last piece of each such slice, and
    a thread switched in by another one and out again (75->69->75) may leave no event at all: the pieces the
    trace can place (analyse()'s f.unseen) do not always hold what is missing (one window: 13.9 ms missing,
    12.0 ms of pieces). What a thread lacks between two reads is exact: its sum_exec_runtime's growth less
    every update the trace has of it on any CPU. The trace's blind spot in the window is then
    - at most what all of PID 1's threads lack between the outer reads;
    - at least what they lack between the inner reads, counting only threads seen on this CPU in the span
      (a piece or an update) and nowhere else in the whole trace (no switch-in on another CPU, no
      migration, both traced on every CPU)."""
    span = (min((r[0][1] for r in outer.values()), default=0.0), max((r[1][2] for r in outer.values()), default=0.0))
    here = ({p for p, a, b in f.unseen if a <= span[1] and b > span[0]} | set(f.by_pid)) & set(outer) & set(f.watch)
    # Nowhere else: not in the span only (a thread seen here before it may have moved away before the
    # span and run in chains there, unseen), but in the whole trace, which starts before the span.
    only_here = {p for p in here if p in inner and not f.watch[p]["elsewhere"]}
    most = {p: _missing(f.watch[p], outer[p], False) for p in outer if p in f.watch}
    least = {p: _missing(f.watch[p], inner[p], True) for p in only_here}
    lo = sum(least.values())
    each = {p: (least.get(p, 0.0), max(least.get(p, 0.0), most[p])) for p in here if most[p] or least.get(p)}
    return (lo, max(lo, sum(most.values()))), each
