#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Jobs for real: rtd reserves CPU 1 (IRQs and tuning left alone) in a private PID namespace and runs jobs
there on its SCHED_FIFO worker. Checks what a user would: policy, priority and affinity seen from inside the
job, identity and permissions, limits, cancel/timeout, queue order, crash recovery, the bad-input table and
10,000 jobs from 100 clients. Needs root and at least 2 CPUs; holds /tmp/rtd-knobs.lock while rtd runs."""
import contextlib
import http.client
import pwd
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

from rtdtest import (BUILD, RTCTL, RTD, Knobs, Rtd, Skip, TestUser, host_pid_of, knob_lock, knobs_as_found, need_root,
                     run, run_tests, test, wait_workers_ready)
CPU = 1
GROUP = "rtdjobtest"
BASE_CONF = (f"[Daemon]\nSocketGroup={GROUP}\n[Reserve]\nIRQs=keep\nCheckIntervalSec=0\n[Jobs]\nKillGraceSec=1\n"
             f"[Access]\nSubmitGroup={GROUP}\nMaxPriority=80\n")


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("rtd", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def api(rtd, method, path, body=None):
    c = UnixHTTP(rtd.socket)
    try:
        c.request(method, path, body=None if body is None else json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        return r.status, dict(r.getheaders()), (json.loads(data) if data[:1] in (b"{", b"[") else data)
    finally:
        c.close()


def submit(rtd, spec, expect=201):
    spec.setdefault("env", {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    st, h, j = api(rtd, "POST", "/v1/jobs", spec)
    assert st == expect, f"POST {spec} → {st} {j}"
    return j


def job(rtd, jid):
    st, _, j = api(rtd, "GET", f"/v1/jobs/{jid}")
    assert st == 200, (st, j)
    return j


def wait_final(rtd, jid, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        j = job(rtd, jid)
        if j["state"] in ("succeeded", "failed", "cancelled", "timed_out", "lost"):
            return j
        time.sleep(0.05)
    raise AssertionError(f"job {jid} did not finish within {timeout}s: {job(rtd, jid)}")


def output(rtd, jid, stream="stdout"):
    st, _, body = api(rtd, "GET", f"/v1/jobs/{jid}/output?stream={stream}")
    assert st == 200, (st, body)
    return body.decode() if isinstance(body, bytes) else json.dumps(body)


class JobRtd:
    """rtd reserving CPU 1 (the file holds the knob lock); stopped and cleaned up on exit, knobs checked."""

    def __init__(self, conf="", **kw):
        self.conf, self.kw = conf, kw

    def __enter__(self):
        need_root()
        if os.cpu_count() < 2:
            raise Skip_("needs 2 CPUs: CPU 0 for housekeeping, CPU 1 reserved")
        subprocess.run(["groupadd", "-f", GROUP], check=True)
        self.knobs = Knobs()
        self.rtd = Rtd(reserve=str(CPU), conf=BASE_CONF + self.conf, **self.kw)
        try:
            self.rtd.start()
            wait_workers_ready(self.rtd)
        except BaseException:
            self.rtd.cleanup()
            raise
        return self.rtd

    def __exit__(self, *exc):
        try:
            self.rtd.cleanup()
            knobs_as_found(self.knobs, exc[0])
        finally:
            pass


def Skip_(msg):
    from rtdtest import Skip
    return Skip(msg)


def output_dir(rtd):
    """Where this store's output files are: state/output/<the store's instance id>."""
    st, _, s = api(rtd, "GET", "/v1/status")
    return os.path.join(rtd.dir, "state/output", s["jobs"]["store"]["instance"])


PROBE = r"""
import os, json
t = 0
for i in range(3000000):
    t += i
fds = {}
for fd in os.listdir('/proc/self/fd'):
    try:
        fds[fd] = os.readlink('/proc/self/fd/' + fd)
    except OSError:
        pass    # the listing's own descriptor, closed by now
f = open('/proc/self/stat').read().rsplit(')', 1)[1].split()
sched = dict(map(str.strip, l.split(':', 1)) for l in open('/proc/self/sched').read().splitlines()[2:] if ':' in l)
print(json.dumps({
    'policy': os.sched_getscheduler(0), 'priority': os.sched_getparam(0).sched_priority,
    'affinity': sorted(os.sched_getaffinity(0)), 'cpu': int(f[36]), 'rt_priority': int(f[37]),
    'stat_policy': int(f[38]), 'migrations': int(sched['se.nr_migrations']),
    'uid': os.getuid(), 'gid': os.getgid(), 'groups': sorted(os.getgroups()),
    'env': {k: v for k, v in os.environ.items() if k.startswith(('RTD_', 'OMP_'))},
    'sid': os.getsid(0) == os.getpid(), 'nnp': open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0],
    'stdin': os.readlink('/proc/self/fd/0'), 'fds': fds,
}))
"""


@test
def fifo_priority_affinity_from_inside():
    with JobRtd() as rtd:
        j = submit(rtd, {"argv": ["/usr/bin/python3", "-c", PROBE], "priority": 42})
        assert j["state"] in ("queued", "starting", "running", "succeeded"), j
        j = wait_final(rtd, j["id"])
        assert j["state"] == "succeeded", j
        seen = json.loads(output(rtd, j["id"]))
        assert seen["policy"] == os.SCHED_FIFO and seen["stat_policy"] == os.SCHED_FIFO, seen
        assert seen["priority"] == 42 and seen["rt_priority"] == 42, seen
        assert seen["affinity"] == [CPU] and seen["cpu"] == CPU, seen
        assert seen["migrations"] == 0, seen
        assert seen["env"]["RTD_JOB_ID"] == str(j["id"]) and seen["env"]["RTD_CPUS"] == str(CPU), seen
        assert seen["env"]["OMP_NUM_THREADS"] == "1" and seen["env"]["OMP_PLACES"] == "{%d}" % CPU, seen
        assert seen["sid"] and seen["nnp"] == "1" and seen["stdin"] == "/dev/null", seen
        # Nothing of rtd's or the worker's (the job's cgroup, spare files, sockets) is left open in the job;
        # its stdout and stderr are its own files under their final names.
        out_dir = output_dir(rtd)
        assert sorted(seen["fds"]) == ["0", "1", "2"], seen["fds"]
        assert seen["fds"]["1"] == f"{out_dir}/{j['id']}.stdout", seen["fds"]
        assert seen["fds"]["2"] == f"{out_dir}/{j['id']}.stderr", seen["fds"]
        # What the daemon recorded about it.
        assert j["cpus"] == str(CPU) and j["exit_code"] == 0 and j["priority"] == 42, j
        assert j["dispatch_latency_us"] is not None and j["cpu_time_s"] > 0, j
        assert j["voluntary_ctxt_switches"] is not None and j["started_at"] and j["ended_at"], j
        # rr, seen by a child of the job's shell (children inherit policy and affinity); the user's OMP
        # settings are kept.
        with open(os.path.join(rtd.dir, "probe.py"), "w") as f:
            f.write(PROBE)
        os.chmod(rtd.dir, 0o755)
        j = wait_final(rtd, submit(rtd, {"argv": ["/bin/sh", "-c", f"/usr/bin/python3 {rtd.dir}/probe.py; true"],
                                         "policy": "rr", "env": {"OMP_NUM_THREADS": "7"}})["id"])
        seen = json.loads(output(rtd, j["id"]))
        assert seen["policy"] == os.SCHED_RR and seen["priority"] == 50 and seen["env"]["OMP_NUM_THREADS"] == "7"
        assert seen["affinity"] == [CPU] and seen["migrations"] == 0 and not seen["sid"], seen
        j = wait_final(rtd, submit(rtd, {"argv": ["/usr/bin/python3", "-c", PROBE], "policy": "other"})["id"])
        seen = json.loads(output(rtd, j["id"]))
        assert seen["policy"] == os.SCHED_OTHER and seen["affinity"] == [CPU], seen
        # The worker itself: pinned, SCHED_FIFO at WorkerPriority=, memory locked.
        wait_workers_ready(rtd)
        wpid = host_pid_of(rtd, "rtd-worker")
        assert os.sched_getaffinity(wpid) == {CPU} and os.sched_getscheduler(wpid) == os.SCHED_FIFO
        assert os.sched_getparam(wpid).sched_priority == 99
        status = open(f"/proc/{wpid}/status").read()
        # (An AddressSanitizer build maps terabytes of shadow memory, which mlockall cannot lock.)
        asan = "libasan" in run(["ldd", os.path.join(BUILD, "daemon/rtd-worker")]).stdout
        assert asan or int(status.split("VmLck:")[1].split()[0]) > 0, status
        # The daemon's own loop is real-time just above the lowest priority, reset on fork (main.c says why).
        assert os.sched_getscheduler(rtd.pid) == os.SCHED_RR | 0x40000000 and os.sched_getparam(rtd.pid).sched_priority == 2


@test
def runs_as_the_caller():
    with TestUser("rtdjob-user", groups=[GROUP]) as u, JobRtd() as rtd:
        secret_dir = tempfile.mkdtemp(prefix="rtd-rootonly-")
        root_file = os.path.join(secret_dir, "root-file")
        open(root_file, "w").write("root's\n")
        os.chmod(secret_dir, 0o755)
        os.chmod(root_file, 0o644)
        try:
            p = uctl(rtd, u, "submit", "--wait", "--", "/usr/bin/python3", "-c", PROBE)
            assert p.returncode == 0, p
            seen = json.loads(p.stdout)
            assert seen["uid"] == u.uid and seen["gid"] == pwd.getpwnam(u.name).pw_gid, seen
            assert grpgid(GROUP) in seen["groups"], seen
            assert seen["policy"] == os.SCHED_FIFO and seen["affinity"] == [CPU], seen
            p = uctl(rtd, u, "submit", "--wait", "--", "/bin/sh", "-c", f"echo pwned >> {root_file}")
            assert p.returncode != 0 and "Permission denied" in p.stderr, p
            assert open(root_file).read() == "root's\n"
            # Its output files: the user's, mode 0600.
            jid = int(uctl(rtd, u, "submit", "--", "/bin/echo", "hi", check=0).stdout)
            wait_final(rtd, jid)
            st = os.stat(os.path.join(output_dir(rtd), f"{jid}.stdout"))
            assert st.st_uid == u.uid and st.st_mode & 0o777 == 0o600, st
            assert uctl(rtd, u, "logs", str(jid), check=0).stdout == "hi\n"
            # Root's job is visible to the user without its command line; not cancellable, output hidden.
            rj = submit(rtd, {"argv": ["/bin/sleep", "30"], "env": {"SECRET": "x"}})
            other = json.loads(uctl(rtd, u, "--json", "show", str(rj["id"]), check=0).stdout)
            assert "argv" not in other["spec"] and "env" not in other["spec"] and other["user"] == "root", other
            listed = json.loads(uctl(rtd, u, "--json", "list", check=0).stdout)["jobs"]
            assert [x for x in listed if x["id"] == rj["id"] and "argv" not in x["spec"]], listed
            p = uctl(rtd, u, "cancel", str(rj["id"]))
            assert p.returncode == 1 and "another user" in p.stderr, p
            p = uctl(rtd, u, "logs", str(rj["id"]))
            assert p.returncode == 1 and "owner" in p.stderr, p
            assert rtd.ctl("cancel", str(rj["id"]), check=0)
            assert wait_final(rtd, rj["id"])["state"] == "cancelled"
        finally:
            subprocess.run(["rm", "-rf", secret_dir])


def uctl(rtd, u, *args, check=None):
    """rtctl as user u; setpriv gets numbers (its name lookups raced with other suites' useradd/userdel)."""
    cmd = ["setpriv", f"--reuid={u.uid}", f"--regid={pwd.getpwuid(u.uid).pw_gid}", "--init-groups", "--",
           RTCTL, "--socket", rtd.socket, *args]
    return run(cmd, check=check)


def grpgid(name):
    import grp
    return grp.getgrnam(name).gr_gid


@test
def non_admin_limits_and_impossible_requests():
    with TestUser("rtdjob-user", groups=[GROUP]) as u, JobRtd() as rtd:
        p = uctl(rtd, u, "submit", "-p", "90", "--", "/bin/true")
        assert p.returncode == 1 and "priority" in p.stderr and "MaxPriority=80" in p.stderr, p
        p = uctl(rtd, u, "submit", "--wait", "-p", "80", "--", "/bin/true")
        assert p.returncode == 0, p
        # Root may go above the cap.
        assert rtd.ctl("submit", "--wait", "-p", "90", "--", "/bin/true").returncode == 0
        p = uctl(rtd, u, "submit", "-c", "2", "--", "/bin/true")
        assert p.returncode == 1 and "cores" in p.stderr and "only 1 CPU" in p.stderr, p
        p = rtd.ctl("submit", "--cpus", "0", "--", "/bin/true")
        assert p.returncode == 1 and "cpus" in p.stderr and "not all reserved" in p.stderr, p


@test
def bad_input_table():
    bad = [
        ({}, 400, "argv"),
        ({"argv": []}, 400, "argv"),
        ({"argv": "true"}, 400, "argv"),
        ({"argv": [""]}, 400, "argv"),
        ({"argv": ["/bin/true", 5]}, 400, "argv"),
        ({"argv": ["/bin/true"], "bogus": 1}, 400, "bogus"),
        ({"argv": ["/bin/true"], "env": ["A=B"]}, 400, "env"),
        ({"argv": ["/bin/true"], "env": {"A=B": "x"}}, 400, "env"),
        ({"argv": ["/bin/true"], "env": {"A": 1}}, 400, "env"),
        ({"argv": ["/bin/true"], "cwd": "relative"}, 400, "cwd"),
        ({"argv": ["/bin/true"], "cores": 0}, 400, "cores"),
        ({"argv": ["/bin/true"], "cores": "1"}, 400, "cores"),
        ({"argv": ["/bin/true"], "cores": 2}, 400, "cores"),
        ({"argv": ["/bin/true"], "cpus": "0"}, 400, "cpus"),
        ({"argv": ["/bin/true"], "cpus": "1-x"}, 400, "cpus"),
        ({"argv": ["/bin/true"], "cpus": "1", "cores": 2}, 400, "cores"),
        ({"argv": ["/bin/true"], "policy": "batch"}, 400, "policy"),
        ({"argv": ["/bin/true"], "priority": 0}, 400, "priority"),
        ({"argv": ["/bin/true"], "priority": 100}, 400, "priority"),
        ({"argv": ["/bin/true"], "priority": 5, "policy": "other"}, 400, "priority"),
        ({"argv": ["/bin/true"], "timeout_s": -1}, 400, "timeout_s"),
        ({"argv": ["/bin/true"], "timeout_s": "5"}, 400, "timeout_s"),
        ({"argv": ["/bin/true"], "queue_priority": 5000}, 400, "queue_priority"),
        ({"argv": ["/bin/true"], "name": ""}, 400, "name"),
        ('{"argv":["/bin/true"],"argv":["x"]}', 400, "duplicate"),     # raw: a dict cannot hold it twice
        ("[1,2]", 400, "object"),
        ("{\"argv\": [\"/bin/tr\\u0000ue\"]}", 400, "JSON"),
    ]
    with JobRtd() as rtd:
        for spec, code, word in bad:
            if isinstance(spec, str):
                st, h, raw = rtd.http("POST", "/v1/jobs", body=spec)
                p = json.loads(raw)
            else:
                st, h, p = api(rtd, "POST", "/v1/jobs", spec)
                h = {k.lower(): v for k, v in h.items()}
            assert st == code, f"{spec}: expected {code}, got {st} {p}"
            assert h.get("content-type") == "application/problem+json", (spec, h)
            assert word in p["detail"], f"{spec}: '{word}' not named in {p['detail']}"
        st, _, listed = api(rtd, "GET", "/v1/jobs")
        assert st == 200 and listed["jobs"] == [], listed
        st, _, p = api(rtd, "GET", "/v1/jobs/999")
        assert st == 404, p
        st, _, p = api(rtd, "DELETE", "/v1/jobs/abc")
        assert st == 404, p
        st, _, p = api(rtd, "GET", "/v1/jobs?state=nope")
        assert st == 400 and "state" in p["detail"], p
        j = submit(rtd, {"argv": ["/bin/true"]})
        assert j["id"] == 1, j
        assert wait_final(rtd, j["id"])["state"] == "succeeded"


@test
def location_and_exit_codes():
    with JobRtd() as rtd:
        st, h, raw = rtd.http("POST", "/v1/jobs", body=json.dumps({"argv": ["/bin/true"]}))
        assert st == 201 and h["location"] == "/v1/jobs/%d" % json.loads(raw)["id"], (st, h)
        p = rtd.ctl("submit", "--wait", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 3")
        assert p.returncode == 3 and p.stdout == "out\n" and "err" in p.stderr, p
        p = rtd.ctl("submit", "--wait", "--", "/bin/sh", "-c", "kill -KILL $$")
        assert p.returncode == 128 + 9, p
        p = rtd.ctl("submit", "--wait", "--", "/nonexistent/cmd")
        assert p.returncode == 127 and "execve" in p.stderr, p
        p = rtd.ctl("submit", "--wait", "--cwd", "/nonexistent", "--", "/bin/true")
        assert p.returncode != 0 and "chdir" in p.stderr, p
        p = rtd.ctl("submit", "--wait", "--", "true")       # found through PATH
        assert p.returncode == 0, p
        p = rtd.ctl("submit", "--wait", "-q", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 5")
        assert p.returncode == 5 and p.stdout == "" and p.stderr == "", p
        jid = int(rtd.ctl("submit", "--", "/bin/sh", "-c", "for i in 1 2 3; do echo line$i; sleep 0.3; done",
                          check=0).stdout)
        p = rtd.ctl("logs", "-f", str(jid), timeout=20)
        assert p.returncode == 0 and p.stdout == "line1\nline2\nline3\n", p
        p = rtd.ctl("wait", str(jid))
        assert p.returncode == 0 and "succeeded" in p.stdout, p
        p = rtd.ctl("--json", "wait", str(jid))
        assert json.loads(p.stdout)["state"] == "succeeded"
        p = rtd.ctl("logs", "--stderr", str(jid))
        assert p.returncode == 0 and p.stdout == "", p


@test
def cancel_and_timeout():
    with JobRtd() as rtd:
        # A job that ignores SIGTERM dies by SIGKILL after KillGraceSec=1.
        jid = int(rtd.ctl("submit", "--", "/bin/sh", "-c",
                          "trap '' TERM; echo ready; while :; do sleep 0.05; done", check=0).stdout)
        end = time.time() + 10
        while output(rtd, jid) != "ready\n" and time.time() < end:
            time.sleep(0.05)
        t = time.time()
        p = rtd.ctl("cancel", str(jid))
        assert p.returncode == 0 and "stopping" in p.stdout, p
        p = rtd.ctl("wait", str(jid))
        took = time.time() - t
        assert p.returncode == 125, p
        j = job(rtd, jid)
        assert j["state"] == "cancelled" and j["signal"] == 9 and "cancelled by root" in j["reason"], j
        assert 0.9 <= took < 5, took
        p = rtd.ctl("cancel", str(jid))
        assert p.returncode == 1 and "already ended" in p.stderr, p
        # Its whole tree went: the background child too.
        jid = int(rtd.ctl("submit", "--", "/bin/sh", "-c", "sleep 100 & echo $!; wait", check=0).stdout)
        end = time.time() + 10
        while not output(rtd, jid).strip() and time.time() < end:
            time.sleep(0.05)
        assert rtd.ctl("cancel", str(jid)).returncode == 0
        assert rtd.ctl("wait", str(jid)).returncode == 125
        # Timeout: SIGTERM at the deadline.
        t = time.time()
        p = rtd.ctl("submit", "--wait", "--timeout", "0.5", "--", "/bin/sleep", "10")
        assert p.returncode == 124 and 0.4 < time.time() - t < 5, p
        # A job waiting for its CPU is cancelled without ever running: at once (200) while it is queued, or
        # a moment later (202) when rtd had handed it to the busy worker to start next.
        blocker = submit(rtd, {"argv": ["/bin/sleep", "2"]})
        q = submit(rtd, {"argv": ["/bin/true"]})
        st, _, body = api(rtd, "DELETE", f"/v1/jobs/{q['id']}")
        assert (st, body["state"]) in ((200, "cancelled"), (202, "starting")), (st, body)
        body = wait_final(rtd, q["id"], timeout=1)
        assert body["state"] == "cancelled" and body["started_at"] is None and body["pid"] is None, body
        assert wait_final(rtd, blocker["id"])["state"] == "succeeded"
        # Queued behind a job that has run for a while (nothing is handed ahead then), at once.
        blocker = submit(rtd, {"argv": ["/bin/sleep", "10"]})
        time.sleep(0.3)
        q = submit(rtd, {"argv": ["/bin/true"]})
        st, _, body = api(rtd, "DELETE", f"/v1/jobs/{q['id']}")
        assert st == 200 and body["state"] == "cancelled" and body["started_at"] is None, body
        assert api(rtd, "DELETE", f"/v1/jobs/{blocker['id']}")[0] == 202


@contextlib.contextmanager
def ran_log(prefix):
    """A file that jobs append their RTD_JOB_ID to (in a directory every user can reach), removed after."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    os.chmod(tmp, 0o755)
    try:
        yield os.path.join(tmp, "ran")
    finally:
        subprocess.run(["rm", "-rf", tmp])


def hand_ahead(rtd, front_argv, next_argv, tries=5):
    """Submit a job and at once the next: the next is handed to the busy worker only while the one in front
    started under 20 ms ago, which a loaded machine (ASan, other builds) can miss. Then both are cancelled
    (the next never ran: the CPU was taken) and it is tried again."""
    for _ in range(tries):
        front = submit(rtd, {"argv": front_argv})
        nxt = submit(rtd, {"argv": next_argv})
        if job(rtd, nxt["id"])["state"] == "starting":
            return front, nxt
        for j in (nxt, front):
            api(rtd, "DELETE", f"/v1/jobs/{j['id']}")
            wait_final(rtd, j["id"])
    raise AssertionError(f"the next job was not handed ahead in {tries} tries")


@test
def next_job_waits_in_the_worker():
    """Behind a job that just started, the next one-core job is handed to the busy worker to start the
    moment the running one ends ("starting" meanwhile); behind a job that runs on, it is taken back to the
    queue, and runs once, in order; its timeout counts from its own start."""
    with JobRtd() as rtd, ran_log("rtd-ahead-") as log:
        front, nxt = hand_ahead(rtd, ["/bin/sleep", "3"], ["/bin/sh", "-c", f'echo "$RTD_JOB_ID" >> {log}'])
        # Taken back once the job in front has run 100 ms: queued again, not started. The worker answers
        # while that job still runs (it is woken for the request, not only when its job ends).
        end = time.time() + 5
        while job(rtd, nxt["id"])["state"] != "queued" and time.time() < end:
            time.sleep(0.02)
        j = job(rtd, nxt["id"])
        assert j["state"] == "queued" and j["pid"] is None, j
        assert job(rtd, front["id"])["state"] == "running", "given back only when the job in front ended"
        assert wait_final(rtd, nxt["id"])["state"] == "succeeded"
        assert wait_final(rtd, front["id"])["state"] == "succeeded"
        assert open(log).read().split() == [str(nxt["id"])]         # it ran once
        # The two output files handed with it while it waited were removed when it was taken back: only
        # rtd's pool of files made ahead (64) is left, none leaks.
        out_dir = output_dir(rtd)
        spares = lambda: sorted(f for f in os.listdir(out_dir) if f.startswith("spare-"))
        end = time.time() + 5
        while len(spares()) < 64 and time.time() < end:
            time.sleep(0.05)
        assert len(spares()) == 64, spares()
        # Behind short jobs each waits its turn in the worker; a 0.3 s timeout counts from its own start,
        # not from the moment it was handed over behind the 0.2 s job in front.
        a = submit(rtd, {"argv": ["/bin/sleep", "0.2"]})
        b = submit(rtd, {"argv": ["/bin/sleep", "0.15"], "timeout_s": 0.3})
        assert wait_final(rtd, b["id"])["state"] == "succeeded", job(rtd, b["id"])
        assert job(rtd, a["id"])["state"] == "succeeded"
        assert job(rtd, b["id"])["started_at"] >= job(rtd, a["id"])["ended_at"]


@test
def job_waiting_in_the_worker_survives_a_crash():
    """kill -9 of rtd (its workers die with it, PID 1 of its namespace) while a job waits in a worker behind
    the running one: after the restart it is queued again and runs once, it is not lost."""
    with JobRtd() as rtd, ran_log("rtd-ahead-crash-") as log:
        front, nxt = hand_ahead(rtd, ["/bin/sleep", "30"], ["/bin/sh", "-c", f'echo "$RTD_JOB_ID" >> {log}'])
        rtd.kill9()
        rtd.start()
        wait_workers_ready(rtd)
        assert wait_final(rtd, front["id"])["state"] == "lost"
        j = wait_final(rtd, nxt["id"])
        assert j["state"] == "succeeded", j
        assert open(log).read().split() == [str(nxt["id"])]
        assert "never ran: queued again" in rtd.read_log(), rtd.read_log()[-2000:]


@test
def job_that_ran_while_rtd_was_stuck_is_not_run_again():
    """A job waits in the worker behind a short one; rtd is stopped (SIGSTOP) before it hears anything, the
    job starts, runs and ends meanwhile, and rtd is then killed (kill -9: its workers die with it, their
    messages unread). The store still calls it "starting" with no pid, but it did run: after the restart it
    is lost (whether it ran is unknown to rtd), never run a second time (its cgroup's CPU time is the proof,
    rtd names the output files itself)."""
    with JobRtd() as rtd, ran_log("rtd-ahead-stuck-") as log:
        front, nxt = hand_ahead(rtd, ["/bin/sleep", "0.3"], ["/bin/sh", "-c", f'echo "$RTD_JOB_ID" >> {log}'])
        rtd.signal(signal.SIGSTOP)
        end = time.time() + 10
        while not (os.path.exists(log) and open(log).read()) and time.time() < end:
            time.sleep(0.05)
        time.sleep(0.2)
        rtd.kill9()
        assert open(log).read().split() == [str(nxt["id"])], "the job did not run while rtd was stopped"
        rtd.start()
        wait_workers_ready(rtd)
        j = wait_final(rtd, nxt["id"])
        assert j["state"] == "lost", j
        time.sleep(0.5)
        assert open(log).read().split() == [str(nxt["id"])]        # once, not again
        assert wait_final(rtd, front["id"])["state"] in ("lost", "succeeded")


@test
def what_a_job_leaves_behind_dies_with_it():
    """A job that starts a process in a session of its own and exits: when its main process ends, whatever
    it left in its cgroup is killed (the worker writes the cgroup's cgroup.kill, which rtd opened for it),
    also when it ran in an array of short tasks, one after the other on the same worker."""
    with JobRtd() as rtd:
        tmp = tempfile.mkdtemp(prefix="rtd-leftover-")
        os.chmod(tmp, 0o777)
        try:
            loop = "while :; do date +%s%N > {f}; sleep 0.05; done"
            ids = [submit(rtd, {"argv": ["/bin/sh", "-c", f"setsid sh -c '{loop.format(f=f)}' </dev/null >/dev/null 2>&1 & "
                                         f"while [ ! -s {f} ]; do sleep 0.01; done; exit 0"]})["id"]
                   for f in (os.path.join(tmp, f"t{i}") for i in range(3))]
            for jid in ids:
                assert wait_final(rtd, jid)["state"] == "succeeded"
            time.sleep(1)
            before = {f: os.stat(os.path.join(tmp, f)).st_mtime_ns for f in os.listdir(tmp)}
            assert len(before) == 3, before     # each left its loop running, for a while at least
            time.sleep(0.5)
            after = {f: os.stat(os.path.join(tmp, f)).st_mtime_ns for f in os.listdir(tmp)}
            assert after == before, "a process a finished job left behind still runs"
        finally:
            subprocess.run(["rm", "-rf", tmp])


def started_order(rtd, ids):
    jobs = [wait_final(rtd, i) for i in ids]
    assert all(j["state"] == "succeeded" for j in jobs), [j for j in jobs if j["state"] != "succeeded"][:3]
    return [j["id"] for j in sorted(jobs, key=lambda j: (j["started_at"], j["id"]))]


@test
def fcfs_order_200():
    with JobRtd() as rtd:
        blocker = submit(rtd, {"argv": ["/bin/sleep", "1"]})
        ids = [submit(rtd, {"argv": ["/bin/true"]})["id"] for _ in range(200)]
        assert wait_final(rtd, blocker["id"])["state"] == "succeeded"
        assert started_order(rtd, ids) == ids


@test
def priority_policy_with_aging():
    with JobRtd(conf="[Jobs]\nPolicy=priority\nAgingSec=1\n") as rtd:
        blocker = submit(rtd, {"argv": ["/bin/sleep", "4"]})
        old_low = submit(rtd, {"argv": ["/bin/true"], "queue_priority": 0})
        time.sleep(3)
        new_mid = submit(rtd, {"argv": ["/bin/true"], "queue_priority": 2})
        new_high = submit(rtd, {"argv": ["/bin/true"], "queue_priority": 10})
        new_mid2 = submit(rtd, {"argv": ["/bin/true"], "queue_priority": 2})
        wait_final(rtd, blocker["id"])
        # high (10) first; the old job waited >= 4 s so its 0 aged past the mid jobs' 2; equals in order.
        order = started_order(rtd, [old_low["id"], new_mid["id"], new_high["id"], new_mid2["id"]])
        assert order == [new_high["id"], old_low["id"], new_mid["id"], new_mid2["id"]], order


@test
def crash_with_queued_and_running_jobs():
    with JobRtd() as rtd:
        tmp = tempfile.mkdtemp(prefix="rtd-runs-")
        log = os.path.join(tmp, "ran")
        try:
            running = submit(rtd, {"argv": ["/bin/sleep", "30"]})
            ids = [submit(rtd, {"argv": ["/bin/sh", "-c", f'echo "$RTD_JOB_ID" >> {log}']})["id"]
                   for _ in range(20)]
            end = time.time() + 10
            while job(rtd, running["id"])["state"] != "running" and time.time() < end:
                time.sleep(0.05)
            # rtd is PID 1 of its namespace: kill -9 takes its workers and the running job with it.
            rtd.kill9()
            rtd.start()
            wait_workers_ready(rtd)
            j = wait_final(rtd, running["id"])
            assert j["state"] == "lost" and "rtd stopped while the job was running" in j["reason"], j
            for i in ids:
                assert wait_final(rtd, i)["state"] == "succeeded"
            ran = open(log).read().split()
            assert sorted(map(int, ran)) == ids, ran         # every one ran, none twice
            assert [int(x) for x in ran] == ids               # and in their order
            # New ids continue after the old ones.
            assert submit(rtd, {"argv": ["/bin/true"]})["id"] == ids[-1] + 1
        finally:
            subprocess.run(["rm", "-rf", tmp])


@test
def running_job_readopted_after_crash():
    """rtd is not PID 1 of its namespace here, so its worker and job outlive a kill -9."""
    need_root()
    subprocess.run(["groupadd", "-f", GROUP], check=True)
    rtd = Rtd(reserve=str(CPU), conf=BASE_CONF, pidns=False)
    knobs = Knobs()
    init = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL",
                             "/bin/sleep", "infinity"], start_new_session=True)
    procs = []

    def start():
        time.sleep(0.2)
        ns_init = int(open(f"/proc/{init.pid}/task/{init.pid}/children").read().split()[0])
        logf = open(rtd.log, "ab")
        p = subprocess.Popen(["nsenter", "-t", str(ns_init), "-p", "-m", "--", RTD, "--config", rtd.config],
                             stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        rtd.proc = p
        rtd.wait_ready()
        wait_workers_ready(rtd)
        return p

    def rtd_pid(p):
        return int(open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()[0])

    try:
        p = start()
        j = submit(rtd, {"argv": ["/bin/sh", "-c", "sleep 2; echo done; exit 7"]})
        end = time.time() + 10
        while job(rtd, j["id"])["state"] != "running" and time.time() < end:
            time.sleep(0.05)
        os.kill(rtd_pid(p), signal.SIGKILL)
        p.wait(10)
        start()
        j2 = job(rtd, j["id"])
        assert j2["state"] == "running" and j2.get("adopted"), j2
        j2 = wait_final(rtd, j["id"], timeout=20)
        assert j2["state"] == "failed" and j2["exit_code"] == 7 and j2.get("adopted"), j2
        assert output(rtd, j["id"]) == "done\n"
        # The CPU is free again afterwards.
        assert rtd.ctl("submit", "--wait", "--", "/bin/true").returncode == 0

        # A job whose `started` never reached the store (rtd died right after the fork): the store says
        # "starting" without a pid; its cgroup names its process, which is re-adopted and finished. The job
        # also starts a session of its own in its cgroup: the job is still told from that descendant.
        j = submit(rtd, {"argv": ["/bin/sh", "-c", "setsid sleep 60 </dev/null >/dev/null 2>&1 & sleep 4; echo late; exit 3"]})
        end = time.time() + 10
        while job(rtd, j["id"])["state"] != "running" and time.time() < end:
            time.sleep(0.05)
        if not job(rtd, j["id"]).get("cgroup"):
            raise Skip("no job cgroups here: the pid of a job whose start was not recorded is not found")
        pid_before = job(rtd, j["id"])["pid"]
        os.kill(rtd_pid(p := procs[-1]), signal.SIGKILL)
        p.wait(10)
        import sqlite3
        db = sqlite3.connect(os.path.join(rtd.dir, "state", "jobs.db"))
        data = json.loads(db.execute("SELECT data FROM jobs WHERE id = ?", (j["id"],)).fetchone()[0])
        for k in ("pid", "boottime_usec", "start_usec"):
            data.pop(k, None)
        data["state"] = "starting"
        db.execute("UPDATE jobs SET state = 'starting', data = ? WHERE id = ?", (json.dumps(data), j["id"]))
        db.commit()
        db.close()
        start()
        j2 = job(rtd, j["id"])
        assert j2["state"] == "running" and j2.get("adopted") and j2["pid"] == pid_before, (j2, pid_before)
        assert "found by its cgroup" in rtd.read_log()
        j2 = wait_final(rtd, j["id"], timeout=20)
        assert j2["state"] == "failed" and j2["exit_code"] == 3 and j2.get("adopted"), j2
        assert output(rtd, j["id"]) == "late\n"
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.kill(rtd_pid(p), signal.SIGTERM)
                except (OSError, IndexError, ValueError):
                    pass
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
        os.killpg(init.pid, signal.SIGKILL)
        init.wait()
        rtd.cleanup()
        diff = knobs.diff()
        knobs.restore()
    assert not diff, f"rtd left global knobs changed: {diff}"


@test
def worker_death_fails_its_job_and_restarts():
    with JobRtd() as rtd:
        j = submit(rtd, {"argv": ["/bin/sleep", "30"]})
        end = time.time() + 10
        while job(rtd, j["id"])["state"] != "running" and time.time() < end:
            time.sleep(0.05)
        old = host_pid_of(rtd, "rtd-worker")
        os.kill(old, signal.SIGKILL)
        j = wait_final(rtd, j["id"])
        assert j["state"] == "failed" and "worker for CPU 1" in j["reason"], j
        wait_workers_ready(rtd)
        assert host_pid_of(rtd, "rtd-worker") != old
        st, _, s = api(rtd, "GET", "/v1/status")
        assert s["jobs"]["worker_restarts"] == 1, s["jobs"]
        assert rtd.ctl("submit", "--wait", "--", "/bin/true").returncode == 0


@test
def events_stream():
    with JobRtd() as rtd:
        c = UnixHTTP(rtd.socket, timeout=20)
        c.request("GET", "/v1/events")
        r = c.getresponse()
        assert r.status == 200 and r.getheader("content-type") == "text/event-stream"
        j = submit(rtd, {"argv": ["/bin/true"]})
        states = []
        while "succeeded" not in states:
            line = r.fp.readline().decode()
            assert "\x00" not in line, f"a NUL byte in the stream: {line!r}"
            if line.startswith("data: "):
                ev = json.loads(line[6:])
                if ev["id"] == j["id"]:
                    states.append(ev["state"])
        c.close()
        assert states == ["queued", "starting", "running", "succeeded"], states
        # libmicrohttpd's complaints that a unix socket takes no TCP options came some fifteen times per
        # submit and wait (writes on the way to the answers, journal entries under systemd): none in rtd's log.
        noise = [ln for ln in rtd.read_log().splitlines()
                 if "libmicrohttpd" in ln or ("option to" in ln and "state failed" in ln) or "Failed to push" in ln]
        assert not noise, noise[:3]


@test
def ten_thousand_jobs_from_100_clients():
    with JobRtd() as rtd:
        ids, errors = [], []
        lock = threading.Lock()

        def client(n):
            c = UnixHTTP(rtd.socket)
            mine = []
            try:
                for _ in range(n):
                    c.request("POST", "/v1/jobs", body='{"argv":["/bin/true"],"env":{}}',
                              headers={"Content-Type": "application/json"})
                    r = c.getresponse()
                    body = json.loads(r.read())
                    if r.status != 201:
                        raise AssertionError(f"{r.status} {body}")
                    mine.append(body["id"])
            except Exception as e:
                errors.append(repr(e))
            finally:
                c.close()
            with lock:
                ids.extend(mine)

        threads = [threading.Thread(target=client, args=(100,)) for _ in range(100)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:5]
        assert len(ids) == 10000 and len(set(ids)) == 10000
        end = time.time() + 120
        while True:
            st, _, s = api(rtd, "GET", "/v1/status")
            js = s["jobs"]["jobs"]
            if js["succeeded"] + js["failed"] + js["lost"] + js["cancelled"] >= 10000 or time.time() > end:
                break
            time.sleep(0.5)
        assert js["succeeded"] == 10000 and s["jobs"]["queue_depth"] == 0, js
        # The store agrees: every id listed once, all succeeded.
        seen, cursor = {}, ""
        while True:
            st, _, page = api(rtd, "GET", f"/v1/jobs?limit=1000{cursor}")
            for x in page["jobs"]:
                seen[x["id"]] = x["state"]
            if not page["next_cursor"]:
                break
            cursor = "&cursor=" + page["next_cursor"]
        assert set(seen) == set(ids) and set(seen.values()) == {"succeeded"}, len(seen)


if __name__ == "__main__":
    # Every test here runs rtd with a reservation: hold the knob lock for the whole file (one wait, not one
    # per test behind other suites).
    _lock = knob_lock() if os.geteuid() == 0 else None
    run_tests()
