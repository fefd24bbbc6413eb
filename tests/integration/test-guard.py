#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Runaway real-time jobs do not starve the kernel (issue 11, point 5): with [Tuning] RTRuntimeUSec=-1 an
unprivileged user's SCHED_FIFO job that never sleeps holds reserved CPU 1, and
 - a machine-wide operation that needs CPU 1's kworker (reading /proc/sys/vm/stat_refresh queues work on
   every CPU and waits for all of it: schedule_on_each_cpu()) completes soon with the starvation guard on,
   which boosts the kworker to SCHED_DEADLINE and names it; with the guard off it waits for the kernel's fair
   server (6.12+: CFS gets 50 ms late in every second), and the guard boosts nothing;
 - a real-time task below the job's priority on that CPU, which no fair server saves, stays stuck with the
   guard off and runs with it on.
The guard can only boost tasks rtd can name, i.e. in its PID namespace: kworkers live in the initial one. So
rtd runs in the initial PID namespace here, with a /proc that is not procfs (symlinks to the real /proc's
non-task entries), so that it moves no task of this machine (its affinity backend walks only a real procfs),
while /proc/sys, /sys and sched_setattr() are the real ones. Every starved window is bounded: the spinner has
RLIMIT_RTTIME 7 s, a 9 s job timeout, is cancelled in a finally, and rtd puts RTRuntimeUSec back on stop.
Needs root, 2 CPUs and BPF; holds /tmp/rtd-knobs.lock for its whole run."""
import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time

from rtdtest import RTCTL, Knobs, Rtd, Skip, TestUser, job, knob_lock, knobs_as_found, need_root, run, run_tests, test
CPU = 1
GROUP = "rtdguardgrp"
SPIN_PRIO = 50


def host_root():
    """A --root whose proc/ holds symlinks to every non-task entry of /proc and whose sys is /sys."""
    d = tempfile.mkdtemp(prefix="rtd-test-guardroot-")
    os.mkdir(d + "/proc")
    for e in os.listdir("/proc"):
        if not e.isdigit():
            os.symlink("/proc/" + e, f"{d}/proc/{e}")
    os.symlink("/sys", d + "/sys")
    return d


class GuardRtd:
    def __init__(self, guard, threshold="0.1", extra=""):
        self.conf = (f"[Daemon]\nSocketGroup={GROUP}\n[Reserve]\nIRQs=keep\nCheckIntervalSec=0\n"
                     f"[Tuning]\nRTRuntimeUSec=-1\nStarvationGuard={guard}\n"
                     f"StarvationThresholdSec={threshold}\n{extra}[Jobs]\nKillGraceSec=0\n"
                     f"[Access]\nSubmitGroup={GROUP}\n")

    def __enter__(self):
        need_root()
        if os.cpu_count() < 2:
            raise Skip("needs 2 CPUs: CPU 0 for housekeeping, CPU 1 reserved")
        subprocess.run(["groupadd", "-f", GROUP], check=True)
        self.knobs = Knobs()
        self.root = host_root()
        self.rtd = Rtd(reserve=str(CPU), conf=self.conf, pidns=False, name="guard")
        self.rtd.root = self.root
        try:
            self.rtd.start(args=["--root", self.root])
            m = metrics(self.rtd)
            if not m["collector"].get("bpf_enabled"):
                raise Skip(f"the guard needs the BPF collector: {m['collector']}")
        except BaseException:
            self.cleanup()
            raise
        return self.rtd

    def cleanup(self):
        try:
            self.rtd.cleanup()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __exit__(self, *exc):
        self.cleanup()
        knobs_as_found(self.knobs, exc[0])


def metrics(rtd):
    st, _, body = rtd.http("GET", "/v1/metrics")
    assert st == 200, (st, body)
    return json.loads(body)


def guard_cpu(rtd):
    g = metrics(rtd)["starvation_guard"]
    return g, next(c for c in g["cpus"] if c["cpu"] == CPU)


class Spinner:
    """The unprivileged user's FIFO job that never sleeps, on CPU 1; cancelled however the test ends."""

    def __init__(self, rtd, user):
        self.rtd, self.user = rtd, user

    def __enter__(self):
        p = run(["setpriv", f"--reuid={self.user.uid}", f"--regid={pwd.getpwuid(self.user.uid).pw_gid}",
                 "--init-groups", "--", RTCTL, "--socket", self.rtd.socket, "submit", "-E", "-e", "PATH=/usr/bin:/bin",
                 "-C", "/", "-p", str(SPIN_PRIO), "-t", "9", "--", "prlimit", "--rttime=7000000:7000000", "--",
                 "sh", "-c", "while :; do :; done"])
        assert p.returncode == 0, p
        self.id = p.stdout.strip()
        try:
            end = time.time() + 10
            while time.time() < end:
                j = job(self.rtd, self.id)
                if j["state"] == "running":
                    break
                time.sleep(0.05)
            else:
                raise AssertionError(f"the spinner did not start: {j}")
            time.sleep(0.3)     # let it settle as the only thing on CPU 1
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        self.rtd.ctl("cancel", self.id)
        end = time.time() + 10
        while time.time() < end and job(self.rtd, self.id)["state"] in ("running", "starting"):
            time.sleep(0.05)


def timed(cmd, timeout):
    t = time.monotonic()
    try:
        subprocess.run(cmd, capture_output=True, timeout=timeout)
        return time.monotonic() - t
    except subprocess.TimeoutExpired:
        return None


def stat_refresh_times(n=3):
    """Each read of stat_refresh waits for vmstat work on every CPU; spaced so each one starts afresh."""
    times = []
    for _ in range(n):
        times.append(timed(["cat", "/proc/sys/vm/stat_refresh"], timeout=8))
        time.sleep(1.2)
    return times


def fmt(times):
    return ", ".join("stuck" if t is None else f"{t:.3f} s" for t in times)


@test
def guard_boosts_the_starved_kworker():
    with TestUser("rtdguard-u1", groups=[GROUP]) as u, GuardRtd(guard="kernel") as rtd:
        with Spinner(rtd, u):
            times = stat_refresh_times()
            g, c = guard_cpu(rtd)
        print(f"  guard on: stat_refresh took {fmt(times)}; CPU {CPU}: {c['boosts']} boosts, last "
              f"{c.get('last_boosted_comm')}", flush=True)
        assert g["active"], g
        assert all(t is not None and t < 5 for t in times), times
        assert c["boosts"] >= 1 and c["failures"] == 0, c
        boosted = re.findall(r"Starvation guard: (\S+) \(\d+\) waited [\d.]+ s on CPU 1, boosted", rtd.read_log())
        assert any(b.startswith(f"kworker/{CPU}:") for b in boosted), boosted
        # The boost is over: no task of the machine is left SCHED_DEADLINE by rtd.
        assert g["boosted_now"] >= 0
        time.sleep(1.5)
        assert guard_cpu(rtd)[0]["boosted_now"] == 0
        deadline = subprocess.run(["ps", "-eo", "pid,cls,comm"], capture_output=True, text=True).stdout
        assert not [l for l in deadline.splitlines() if l.split()[1:2] == ["DLN"] and "kworker/1:" in l], deadline


@test
def without_the_guard_the_kworker_waits_for_the_fair_server():
    with TestUser("rtdguard-u2", groups=[GROUP]) as u, GuardRtd(guard="no") as rtd:
        with Spinner(rtd, u):
            times = stat_refresh_times()
            g, c = guard_cpu(rtd)
        print(f"  guard off: stat_refresh took {fmt(times)}", flush=True)
        assert not g["active"] and c["boosts"] == 0, g
        # The kworker is starved: it waits for the fair server (6.12+: 50 ms late in each second), or, on a
        # kernel without one, until the spinner's timeout ends the job (the read then shows as stuck).
        assert any(t is None or t >= 0.3 for t in times), times


def victim_time(rtd, limit):
    """A FIFO task of lower priority than the spinner, pinned to CPU 1: seconds until it ran and exited."""
    p = subprocess.Popen(["chrt", "-f", "1", "taskset", "-c", str(CPU), "true"], start_new_session=True)
    t = time.monotonic()
    try:
        p.wait(limit)
        return time.monotonic() - t
    except subprocess.TimeoutExpired:
        return None
    finally:
        p.kill()        # runs once the spinner is gone (the Spinner's exit cancels it)
        p.poll()


@test
def user_task_is_not_boosted_with_the_kernel_scope():
    """StarvationGuard=kernel (the default) rescues kernel threads only: a FIFO 1 user task behind the
    spinner stays stuck, with the guard off and on alike. (Scope all, which boosts it, is checked in the VM
    tier, where every task is the test's own: here it could reschedule other people's tasks on CPU 1.)"""
    with TestUser("rtdguard-u3", groups=[GROUP]) as u, GuardRtd(guard="no") as rtd:
        with Spinner(rtd, u):
            off = victim_time(rtd, 3)
        subprocess.run(["sleep", "0.5"])
    with TestUser("rtdguard-u4", groups=[GROUP]) as u, GuardRtd(guard="kernel") as rtd:
        with Spinner(rtd, u):
            on = victim_time(rtd, 3)
            _, c = guard_cpu(rtd)
    print(f"  FIFO 1 user task behind a FIFO {SPIN_PRIO} spinner: guard off {'stuck 3 s' if off is None else off}, "
          f"guard kernel {'stuck 3 s' if on is None else on} ({c['boosts']} boosts, last {c['last_boosted_comm']})",
          flush=True)
    assert off is None, f"the FIFO 1 task ran within {off} s without the guard: nothing was starved"
    assert on is None, f"the FIFO 1 user task ran within {on} s: the kernel scope boosted it"


def deadline_kworkers():
    """CPU 1's kworkers and ksoftirqd that run SCHED_DEADLINE now (only the guard makes them so)."""
    out = subprocess.run(["ps", "-eo", "pid=,cls=,comm="], capture_output=True, text=True).stdout
    return [l.split() for l in out.splitlines()
            if l.split()[1:2] == ["DLN"] and re.match(rf"(kworker/{CPU}:|ksoftirqd/{CPU}$)", l.split()[2])]


def children(pid):
    try:
        return [int(k) for k in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


@test
def boosts_left_by_a_crash_are_given_back_at_the_next_start():
    with TestUser("rtdguard-u5", groups=[GROUP]) as u, \
            GuardRtd(guard="kernel", extra="StarvationBoostDurationSec=120\n") as rtd:
        workers = []
        try:
            with Spinner(rtd, u):
                times = stat_refresh_times(1)
                boosted = deadline_kworkers()
                assert times[0] is not None and boosted, (times, boosted)
                # kill -9: nothing gives the boosts back (the worker and the job outlive rtd here).
                workers = children(rtd.pid)
                rtd.kill9()
                # The job ends by its own RLIMIT_RTTIME/timeouts; end it now (the test's user, by pid).
                for pid in [int(d) for d in os.listdir("/proc") if d.isdigit()]:
                    try:
                        if os.stat(f"/proc/{pid}").st_uid == u.uid:
                            os.kill(pid, 9)
                    except OSError:
                        pass
                still = deadline_kworkers()
                assert still, "the boost ended although rtd died"
                rtd.start(args=["--root", rtd.root])
                end = time.time() + 5
                while deadline_kworkers() and time.time() < end:
                    time.sleep(0.1)
                left = deadline_kworkers()
                print(f"  boosted at the crash: {boosted}; after the restart: {left}", flush=True)
                assert not left, left
                assert "given their policy back" in rtd.read_log()
        finally:
            for w in workers:
                try:
                    os.kill(w, 9)
                except OSError:
                    pass


if __name__ == "__main__":
    _lock = knob_lock() if os.geteuid() == 0 else None
    run_tests()
