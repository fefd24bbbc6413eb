#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Re-exec in place (issue 13 point 1 and its bad input), for real, as root: rtd reserves CPU 1 with tuning
knobs set, in a private PID namespace, started from a copy of its binary in the test's directory so the test
can replace that binary as a package upgrade would. `rtctl reexec` must keep the pid, a running job (which ends
with its exit code and all its output, seen by a `rtctl wait` and a `rtctl logs -f` started before), queued jobs
in their order, and every knob unwritten (snapshot + knob_writes from the journal). A binary that is missing,
fails, is older than the job store or meets a bad config is refused with the reason, and the old rtd runs on; an
execve() that fails after the check leaves the same pid serving. Holds /tmp/rtd-knobs.lock."""
import importlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtdtest import BUILD, RTD, Knobs, Rtd, Skip, TestUser, knob_lock, knobs_as_found, need_root, run_tests, test  # noqa: E402
import rtdtest  # noqa: E402

_n = len(rtdtest._tests)
jobs = importlib.import_module("test-jobs")    # its HTTP helpers: api, submit, job, wait_final, output
del rtdtest._tests[_n:]                         # but not its tests

GROUP = "rtdreexecgrp"
CONF = (f"[Daemon]\nSocketGroup={GROUP}\n[Reserve]\nCheckIntervalSec=1\n[Jobs]\nKillGraceSec=1\n"
        f"[Access]\nSubmitGroup={GROUP}\n[Tuning]\nRTRuntimeUSec=980000\nTimerMigration=0\nStatIntervalSec=2\n")
WORKER = os.path.join(BUILD, "daemon/rtd-worker")


class ReexecRtd:
    """rtd reserving CPU 1, run from <dir>/sbin/rtd (a copy the test may replace); knobs checked at the end."""

    def __enter__(self):
        need_root()
        if os.cpu_count() < 2:
            raise Skip("needs 2 CPUs: CPU 0 for housekeeping, CPU 1 reserved")
        subprocess.run(["groupadd", "-f", GROUP], check=True)
        self.knobs = Knobs()
        self.rtd = Rtd(reserve="1", conf=CONF, name="reexec")
        os.makedirs(os.path.join(self.rtd.dir, "sbin"))
        self.binary = os.path.join(self.rtd.dir, "sbin/rtd")
        self.install(RTD)
        self.rtd.binary = self.binary
        env = dict(os.environ, RTD_WORKER=WORKER)
        try:
            self.rtd.start(env=env)
            rtdtest.wait_workers_ready(self.rtd)
        except BaseException:
            self.rtd.cleanup()
            raise
        return self

    def install(self, src=None, script=None):
        """Replace the binary as dpkg does: a new file renamed over the old one."""
        tmp = self.binary + ".new"
        if script is not None:
            with open(tmp, "w") as f:
                f.write(script)
        else:
            shutil.copy(src, tmp)
        os.chmod(tmp, 0o755)
        os.rename(tmp, self.binary)

    def status(self):
        st, _, s = jobs.api(self.rtd, "GET", "/v1/status")
        assert st == 200, (st, s)
        return s

    def __exit__(self, *exc):
        try:
            self.rtd.cleanup()
        finally:
            knobs_as_found(self.knobs, exc[0])


def wait_state(rtd, jid, state, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        j = jobs.job(rtd, jid)
        if j["state"] == state:
            return j
        time.sleep(0.05)
    raise AssertionError(f"job {jid} did not become {state}: {jobs.job(rtd, jid)}")


def tasks_affinity(pid):
    """Cpus_allowed_list of every task in rtd's PID namespace (seen from the host)."""
    out = {}
    ns = os.readlink(f"/proc/{pid}/ns/pid")
    for t in os.listdir("/proc"):
        if not t.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{t}/ns/pid") != ns:
                continue
            for line in open(f"/proc/{t}/status"):
                if line.startswith("Cpus_allowed_list:"):
                    out[int(t)] = line.split()[1]
        except OSError:
            pass
    return out


def zombies_of(pid):
    out = []
    for t in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{t}/stat").read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z" and int(fields[1]) == pid:
            out.append(stat)
    return out


@test
def reexec_keeps_running_and_queued_jobs_and_writes_no_knob():
    with ReexecRtd() as x:
        rtd = x.rtd
        order = os.path.join(rtd.dir, "order")
        # 40 lines over about 4 s, then exit 3: the exit code and every line must come through the re-exec.
        a = jobs.submit(rtd, {"argv": ["/bin/sh", "-c", "for i in $(seq 1 40); do echo line $i; sleep 0.1; "
                                       "done; exit 3"]})
        wait_state(rtd, a["id"], "running")
        queued = [jobs.submit(rtd, {"argv": ["/bin/sh", "-c", f"echo {n} >> {order}"]})["id"] for n in range(3)]
        for q in queued:
            wait_state(rtd, q, "queued")     # a job handed ahead to the busy worker is taken back in 100 ms
        waiter = subprocess.Popen([os.path.join(BUILD, "client/rtctl"), "--socket", rtd.socket, "wait", str(a["id"])],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        follower = subprocess.Popen([os.path.join(BUILD, "client/rtctl"), "--socket", rtd.socket, "logs", "-f",
                                     str(a["id"])], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        before = x.status()
        knobs_before, aff_before = Knobs.read(), tasks_affinity(rtd.pid)

        p = rtd.ctl("reexec")
        assert p.returncode == 0, (p.returncode, p.stdout, p.stderr, rtd.read_log()[-3000:])
        assert "0 knob writes" in p.stdout and "adopted" in p.stdout, p.stdout

        after = x.status()
        assert after["pid"] == before["pid"], (before["pid"], after["pid"])   # same process: same pid
        assert after["reexec"]["count"] == 1 and after["reexec"]["failures"] == 0, after["reexec"]
        start = after["reservation"]["start"]
        assert start["mode"] == "adopted" and start["knob_writes"] == 0 and start["tasks_moved"] == 0, start
        assert Knobs.read() == knobs_before, "a knob changed across the re-exec"
        aff_after = tasks_affinity(rtd.pid)
        moved = {t: (v, aff_after[t]) for t, v in aff_before.items() if t in aff_after and aff_after[t] != v}
        assert not moved, f"task affinities changed across the re-exec: {moved}"
        j = jobs.job(rtd, a["id"])
        assert j["state"] == "running" and j.get("adopted"), j
        for q in queued:
            assert jobs.job(rtd, q)["state"] == "queued", jobs.job(rtd, q)

        j = jobs.wait_final(rtd, a["id"], timeout=30)
        assert j["state"] == "failed" and j["exit_code"] == 3, j
        want = "".join(f"line {i}\n" for i in range(1, 41))
        assert jobs.output(rtd, a["id"]) == want
        out, err = waiter.communicate(timeout=30)
        assert waiter.returncode == 3, (waiter.returncode, out, err)
        out, err = follower.communicate(timeout=30)
        assert follower.returncode == 0 and out == want, (follower.returncode, out[-200:], err)
        for q in queued:
            assert jobs.wait_final(rtd, q)["state"] == "succeeded"
        assert open(order).read().split() == ["0", "1", "2"]         # in their order, each once
        # The re-exec'd rtd still stops like any: every knob restored (checked by ReexecRtd).
        assert rtd.stop() == 0, rtd.read_log()[-2000:]
        assert not x.knobs.diff(), x.knobs.diff()


@test
def reexec_is_for_admins_and_takes_no_body():
    with ReexecRtd() as x, TestUser("rtdreexec-u1", groups=[GROUP]) as u:
        st, h, body = x.rtd.http("POST", "/v1/daemon/reexec", user=u.name)
        assert st == 403 and h.get("content-type") == "application/problem+json", (st, h, body)
        assert json.loads(body)["title"] == "Administrators only", body
        p = x.rtd.ctl("reexec", user=u.name)
        assert p.returncode == 1 and "Administrators only" in p.stderr, (p.returncode, p.stdout, p.stderr)
        st, h, body = x.rtd.http("POST", "/v1/daemon/reexec", body={"binary": "/bin/sh"})
        assert st == 400 and "takes no body" in json.loads(body)["detail"], (st, body)
        s = x.status()
        assert s["reexec"]["count"] == 0 and s["reexec"]["failures"] == 0, s["reexec"]
        # What the unit documents for an admin without rtctl: SIGUSR2 to the main process.
        x.rtd.signal(signal.SIGUSR2)
        end = time.time() + 20
        while x.status()["reexec"]["count"] == 0 and time.time() < end:
            time.sleep(0.1)
        s2 = x.status()
        assert s2["reexec"]["count"] == 1 and s2["pid"] == s["pid"], (s["pid"], s2["pid"], s2["reexec"])
        assert s2["reservation"]["start"]["mode"] == "adopted" and s2["reservation"]["start"]["knob_writes"] == 0


def refused(x, expect, pid):
    p = x.rtd.ctl("reexec")
    assert p.returncode == 1 and expect in p.stderr, (p.returncode, p.stdout, p.stderr)
    s = x.status()
    assert s["pid"] == pid and s["reexec"]["count"] == 0 and expect in s["reexec"]["last_failure"], s["reexec"]
    return s


@test
def bad_binaries_are_refused_and_the_old_rtd_runs_on():
    with ReexecRtd() as x:
        rtd = x.rtd
        a = jobs.submit(rtd, {"argv": ["/bin/sh", "-c", "sleep 3; echo done"]})
        wait_state(rtd, a["id"], "running")
        pid = x.status()["pid"]
        knobs = Knobs.read()

        os.unlink(x.binary)                                          # missing
        refused(x, "cannot be executed", pid)
        x.install(script="#!/bin/sh\necho 'broken build: cannot load libfoo.so' >&2\nexit 1\n")
        refused(x, "broken build: cannot load libfoo.so", pid)
        x.install(RTD)
        db = sqlite3.connect(os.path.join(rtd.dir, "state/jobs.db"))
        version = db.execute("PRAGMA user_version").fetchone()[0]
        db.execute("PRAGMA user_version = 99")                       # a store from a newer rtd
        db.commit()
        try:
            refused(x, "schema 99", pid)
        finally:
            db.execute(f"PRAGMA user_version = {version}")
            db.commit()
            db.close()
        conf = open(rtd.config).read()
        rtd.write_config(conf + "[Reserve]\nCPUs=banana\n")           # a bad config
        try:
            s = refused(x, "banana", pid)
        finally:
            rtd.write_config(conf)
        assert s["reexec"]["failures"] == 4, s["reexec"]
        assert s["reservation"]["start"]["mode"] == "new", s["reservation"]["start"]  # never restarted
        assert Knobs.read() == knobs
        assert jobs.wait_final(rtd, a["id"])["state"] == "succeeded"  # nothing lost
        assert jobs.output(rtd, a["id"]) == "done\n"
        # The fixed binary goes through, twice: the second leaves as many fds open as the first (no fd leaks
        # into the new image). Spare output files are left out: rtd keeps a pool of them filled ahead of
        # need, a few per turn of its loop, so their number depends on when the fds are read.
        fds = []
        for n in (1, 2):
            p = rtd.ctl("reexec")
            assert p.returncode == 0, (p.stdout, p.stderr)
            assert x.status()["reexec"]["count"] == n
            rtdtest.wait_workers_ready(rtd)
            names = (os.readlink(f"/proc/{rtd.pid}/fd/{f}").split(":")[0] for f in os.listdir(f"/proc/{rtd.pid}/fd"))
            fds.append(sorted(n for n in names if not re.search(r"/spare-\d+$", n)))
        assert fds[0] == fds[1], fds
        # The workers of the earlier images (still children of this pid) were reaped: no zombie stays.
        time.sleep(1)
        assert not zombies_of(rtd.pid), zombies_of(rtd.pid)


@test
def failed_execve_leaves_the_same_pid_serving():
    """The binary passes its check and is gone when execve() comes (removed in between): this image starts
    over from the same state, the job running on, the reservation adopted without a write."""
    with ReexecRtd() as x:
        rtd = x.rtd
        real = os.path.join(rtd.dir, "real-rtd")
        shutil.copy(RTD, real)
        x.install(script=f"#!/bin/sh\n\"{real}\" \"$@\"; rc=$?\nrm -f \"$0\"\nexit $rc\n")
        a = jobs.submit(rtd, {"argv": ["/bin/sh", "-c", "sleep 3; echo done; exit 5"]})
        wait_state(rtd, a["id"], "running")
        pid = x.status()["pid"]
        knobs = Knobs.read()
        p = rtd.ctl("reexec")
        assert p.returncode == 1 and "execve" in p.stderr, (p.returncode, p.stdout, p.stderr)
        s = x.status()
        assert s["pid"] == pid and s["reexec"]["count"] == 0 and s["reexec"]["failures"] == 1, s["reexec"]
        start = s["reservation"]["start"]
        assert start["mode"] == "adopted" and start["knob_writes"] == 0, start
        assert Knobs.read() == knobs
        j = jobs.job(rtd, a["id"])
        assert j["state"] == "running" and j.get("adopted"), j
        j = jobs.wait_final(rtd, a["id"])
        assert j["state"] == "failed" and j["exit_code"] == 5 and jobs.output(rtd, a["id"]) == "done\n", j
        # Its sockets are still served and new jobs run.
        assert rtd.ctl("submit", "--wait", "--", "/bin/true").returncode == 0


if __name__ == "__main__":
    _lock = knob_lock() if os.geteuid() == 0 else None
    run_tests()
