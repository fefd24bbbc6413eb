#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A job cannot leave its CPUs, and all of it dies (issue 11, points 1 and 2). rtd reserves CPU 1 in a private
PID namespace; an unprivileged member of the submit group tries to move its job (and a child spinner, and a
setsid'd double-forked grandchild) onto CPU 0. Checked from outside the job: every task's Cpus_allowed_list
and the CPU it last ran on (/proc/PID/stat), found by the RTD_JOB_ID in its environment, not through rtd.
Cancel, timeout and a cancel while rtd does not know the job's pid kill the grandchild too. With the cpuset
hierarchy hidden from rtd (a mount namespace without it), real-time jobs are refused and an escaped task is
put back by the job drift check, which the test times. Needs root and 2 CPUs; holds /tmp/rtd-knobs.lock."""
import json
import os
import signal
import subprocess
import time

from rtdtest import (RTD, Knobs, Rtd, Skip, TestUser, api, host_pid_of, job, knob_lock, knobs_as_found, need_root,
                     run_tests, test, wait_final, wait_for)

CPU = 1
GROUP = "rtdcpusetgrp"
USER = "rtdcpuset-u1"
BASE_CONF = (f"[Daemon]\nSocketGroup={GROUP}\n[Reserve]\nIRQs=keep\nCheckIntervalSec=0\n[Jobs]\nKillGraceSec=1\n"
             f"[Access]\nSubmitGroup={GROUP}\nMaxPriority=80\n")
V1 = "/sys/fs/cgroup/cpuset"
V2 = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") else "/sys/fs/cgroup"


def cpus_of(text):
    out = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            out |= set(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out


def job_pids(jid):
    """Processes whose environment says they belong to job jid: found from outside, not through rtd."""
    mark = b"RTD_JOB_ID=%d\0" % jid
    pids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                env = open(f"/proc/{p}/environ", "rb").read()
            except OSError:
                continue
            if env.startswith(mark) or b"\0" + mark in env:
                pids.append(int(p))
    return pids


def sample(jid):
    """{tid: (Cpus_allowed_list, CPU it last ran on)} of every thread of the job's processes."""
    seen = {}
    for pid in job_pids(jid):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for t in tids:
            try:
                status = open(f"/proc/{pid}/task/{t}/status").read()
                stat = open(f"/proc/{pid}/task/{t}/stat").read()
            except OSError:
                continue
            allowed = status.split("Cpus_allowed_list:")[1].split()[0]
            seen[int(t)] = (cpus_of(allowed), int(stat.rsplit(")", 1)[1].split()[36]))
    return seen


def alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def expected_enforcement():
    ctl = open(os.path.join(V2, "cgroup.controllers")).read().split() if os.path.exists(V2) else []
    if "cpuset" in ctl:
        return "cpuset (cgroup v2)"
    return "cpuset (cgroup v1)" if os.path.isdir(V1) else "affinity only (drift check)"


class NoCpusetRtd(Rtd):
    """rtd in a mount namespace without the cgroup v1 cpuset hierarchy: a host where no cpuset exists."""
    HIDE = [V1]

    def start(self, args=(), wait=True, env=None):
        hide = " && ".join(f"umount -l {d}" for d in self.HIDE)
        cmd = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL", "sh", "-c",
               hide + ' && exec "$@"', "sh", RTD, "--config", self.config, *args]
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        if wait:
            self.wait_ready()
        return self


class NoCgroupRtd(NoCpusetRtd):
    """... and without cgroup v2 either: no job cgroups at all (jobs are found below their worker)."""
    HIDE = [V1, V2]


class JobRtd:
    """rtd reserving CPU 1 with a test user in the submit group; knobs checked on the way out."""

    def __init__(self, conf="", cls=Rtd):
        self.conf, self.cls = conf, cls

    def __enter__(self):
        need_root()
        if os.cpu_count() < 2:
            raise Skip("needs 2 CPUs: CPU 0 for housekeeping, CPU 1 reserved")
        self.user = TestUser(USER, groups=[GROUP]).__enter__()
        self.knobs = Knobs()
        self.rtd = self.cls(reserve=str(CPU), conf=BASE_CONF + self.conf, name="cpuset")
        os.chmod(self.rtd.dir, 0o755)
        try:
            self.rtd.start()
            wait_for(lambda: all(w["state"] == "idle" for w in api(self.rtd, "GET", "/v1/status")[1]["jobs"]
                                 ["workers"]) or None, what="the worker")
        except BaseException:
            self.rtd.cleanup()
            self.user.__exit__(None, None, None)
            raise
        return self.rtd

    def __exit__(self, *exc):
        try:
            self.rtd.cleanup()
            knobs_as_found(self.knobs, exc[0])
        finally:
            self.user.__exit__(None, None, None)


def submit_as_user(rtd, *args):
    p = rtd.ctl("submit", *args, user=USER)
    assert p.returncode == 0, p
    return int(p.stdout.strip())


# The job of the issue: move itself to CPU 0, then a child spinner and a setsid'd double-forked grandchild
# that keep trying too. The spinner is bounded (3 s), so even a broken build cannot hold CPU 0 for long.
SPIN = r"""
import os, sys, time
end = time.monotonic() + float(sys.argv[1])
refused = tries = 0
while time.monotonic() < end:
    tries += 1
    try:
        os.sched_setaffinity(0, {0})
    except OSError:
        refused += 1
print("spinner refused", refused, "of", tries, flush=True)
"""
ESCAPE = r"""
taskset -pc 0 $$; echo "taskset rc=$?"; grep Cpus_allowed_list /proc/self/status
python3 {dir}/spin.py 3 &
setsid sh -c 'sh -c "echo \$\$ >{dir}/gc.{tag}; while :; do taskset -pc 0 \$\$ >/dev/null 2>&1; sleep 0.01; done" &'
echo started
sleep 60
"""


def escape_job(rtd, tag, *opts):
    with open(os.path.join(rtd.dir, "spin.py"), "w") as f:
        f.write(SPIN)
    os.chmod(rtd.dir, 0o777)     # the job writes the grandchild's pid here
    jid = submit_as_user(rtd, *opts, "--", "/bin/sh", "-c", ESCAPE.format(dir=rtd.dir, tag=tag))
    gc_file = os.path.join(rtd.dir, f"gc.{tag}")
    gc = int(wait_for(lambda: os.path.exists(gc_file) and open(gc_file).read().strip(), what="the grandchild"))
    return jid, wait_for(lambda: host_pid(gc, job_pids(jid)), what="the grandchild's host pid")


def host_pid(ns_pid, candidates):
    """The host pid of the task that is ns_pid in rtd's PID namespace (the job wrote what it sees)."""
    for p in candidates:
        try:
            nspid = open(f"/proc/{p}/status").read().split("NSpid:")[1].split("\n")[0].split()
        except (OSError, IndexError):
            continue
        if int(nspid[-1]) == ns_pid:
            return p
    return None


def assert_gone(pids, what):
    wait_for(lambda: not any(alive(p) for p in pids), timeout=10, what=f"{what} to die: "
             f"{[p for p in pids if alive(p)]}")


def assert_cgroups_removed(j):
    name = j["cgroup"]
    assert name, j
    wait_for(lambda: not os.path.exists(os.path.join(V2, name)) and not os.path.exists(os.path.join(V1, name)),
             timeout=10, what=f"the job's cgroups {name} to be removed")


@test
def escape_attempt_is_refused_by_the_kernel():
    with JobRtd() as rtd:
        s = api(rtd, "GET", "/v1/status")[1]["jobs"]
        assert s["cpu_enforcement"] == expected_enforcement(), s
        human = rtd.ctl("status", user=USER).stdout
        assert f"Job CPUs: enforced by {expected_enforcement()}" in human, human
        jid, gc = escape_job(rtd, "cancel", "--timeout", "30")
        # Sampled from outside for 2 s: every task of the job may use CPU 1 only, and ran there.
        tasks, end = {}, time.time() + 2
        while time.time() < end:
            for tid, (allowed, cpu) in sample(jid).items():
                assert allowed == {CPU} and cpu == CPU, f"task {tid}: allowed {allowed}, last ran on CPU {cpu}"
                tasks[tid] = allowed
            time.sleep(0.02)
        pids = job_pids(jid)
        assert gc in pids and len(pids) >= 3, (gc, pids)
        # The grandchild left the job's session and process group, not its cgroups (checked while both live:
        # the job's first task may end before the spinner reports).
        assert os.getsid(gc) != os.getsid(pids[0]) or gc == pids[0]
        # From inside: taskset failed, and the spinner (3 s) was refused every time.
        out = wait_for(lambda: (lambda o: "spinner refused" in o and o)(
            api(rtd, "GET", f"/v1/jobs/{jid}/output?stream=stdout")[1].decode()), what="the spinner's report")
        err = api(rtd, "GET", f"/v1/jobs/{jid}/output?stream=stderr")[1].decode()
        assert "taskset rc=1" in out and "Cpus_allowed_list:\t1\n" in out, out
        refused, tries = map(int, out.split("spinner refused ")[1].split()[0:3:2])
        assert refused == tries > 0, out
        assert "Invalid argument" in err, err
        j = job(rtd, jid)
        p = rtd.ctl("cancel", str(jid), user=USER)
        assert p.returncode == 0, p
        assert wait_final(rtd, jid)["state"] == "cancelled"
        assert_gone(pids, "every task of the cancelled job")
        assert_cgroups_removed(j)


@test
def setsid_grandchild_dies_on_timeout():
    with JobRtd() as rtd:
        # (Its spinner holds CPU 1 for its first 3 s: the grandchild starts after it.)
        jid, gc = escape_job(rtd, "timeout", "--timeout", "6")
        pids = job_pids(jid)
        assert alive(gc) and gc in pids, (gc, pids)
        j = wait_final(rtd, jid)
        assert j["state"] == "timed_out", j
        assert_gone(pids + [gc], "every task of the timed-out job")
        assert_cgroups_removed(j)


@test
def cancel_before_rtd_knows_the_pid():
    with JobRtd() as rtd:
        worker = host_pid_of(rtd, "rtd-worker")
        os.kill(worker, signal.SIGSTOP)      # the START waits in its socket: no child, no pid yet
        try:
            with open(os.path.join(rtd.dir, "spin.py"), "w") as f:
                f.write(SPIN)
            os.chmod(rtd.dir, 0o777)
            jid = submit_as_user(rtd, "--", "/bin/sh", "-c", ESCAPE.format(dir=rtd.dir, tag="nopid"))
            j = job(rtd, jid)
            assert j["state"] == "starting" and j["pid"] is None, j
            st, body = api(rtd, "DELETE", f"/v1/jobs/{jid}")
            assert st == 202 and job(rtd, jid)["pid"] is None, (st, body)
        finally:
            os.kill(worker, signal.SIGCONT)
        j = wait_final(rtd, jid)
        assert j["state"] == "cancelled", j
        gc_file = os.path.join(rtd.dir, "gc.nopid")
        left = job_pids(jid)
        if os.path.exists(gc_file):
            left.append(host_pid(int(open(gc_file).read()), left) or -1)
        assert_gone(left, "the job cancelled before its pid was known")
        assert_cgroups_removed(j)


@test
def leftovers_of_a_crashed_rtd_are_removed():
    if expected_enforcement() != "cpuset (cgroup v1)":
        raise Skip("the v1 cpuset hierarchy is not there")
    with JobRtd() as rtd:
        jid = submit_as_user(rtd, "--", "/bin/true")
        name = wait_final(rtd, jid)["cgroup"]
        rtd.stop()
        # What an rtd killed mid-job leaves: a job cpuset in v1 and a job cgroup in v2, with a task in each.
        stray = name.rsplit("-", 1)[0] + "-424242"
        sleeper = subprocess.Popen(["sleep", "1000"])
        try:
            for root in (V1, V2):
                os.mkdir(os.path.join(root, stray))
            for f, v in (("cpuset.mems", open(f"{V1}/cpuset.effective_mems").read()), ("cpuset.cpus", "1")):
                open(os.path.join(V1, stray, f), "w").write(v)
            for root in (V2, V1):
                open(os.path.join(root, stray, "cgroup.procs"), "w").write(str(sleeper.pid))
            rtd.start()
            wait_for(lambda: sleeper.poll() is not None, what="the stray task to be killed")
            wait_for(lambda: not any(os.path.exists(os.path.join(r, stray)) for r in (V1, V2)),
                     what="the stray cgroups to be removed")
        finally:
            if sleeper.poll() is None:
                sleeper.kill()
            sleeper.wait()
            for root in (V1, V2):
                try:
                    os.rmdir(os.path.join(root, stray))
                except OSError:
                    pass


PUT_BACK = r"""
import json, os, random, time
lat = []
for i in range(20):
    os.sched_setaffinity(0, {0})
    t = time.monotonic()
    while os.sched_getaffinity(0) == {0} and time.monotonic() - t < 5:
        pass
    lat.append(time.monotonic() - t)
    time.sleep(random.uniform(0.01, 0.15))     # escape at any phase of the check
print(json.dumps(lat))
"""


def put_back(rtd):
    """A job that moves itself to CPU 0 twenty times; each time, how long until it is back on CPU 1."""
    with open(os.path.join(rtd.dir, "putback.py"), "w") as f:
        f.write(PUT_BACK)
    jid = submit_as_user(rtd, "--policy", "other", "--timeout", "60", "--", "/usr/bin/python3",
                         os.path.join(rtd.dir, "putback.py"))
    j = wait_final(rtd, jid)
    assert j["state"] == "succeeded", j
    lat = sorted(api(rtd, "GET", f"/v1/jobs/{jid}/output?stream=stdout")[1])
    assert all(x < 5 for x in lat), lat
    print(f"  put back after: median {lat[len(lat) // 2] * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms "
          f"(n={len(lat)})", flush=True)
    s = api(rtd, "GET", "/v1/status")[1]["jobs"]
    assert s["tasks_put_back"] >= 20, s


@test
def without_any_cgroup_escapes_are_put_back():
    if not os.path.isdir(V1) or V2 == "/sys/fs/cgroup":
        raise Skip("needs the hybrid layout to hide")
    with JobRtd(cls=NoCgroupRtd) as rtd:
        s = api(rtd, "GET", "/v1/status")[1]["jobs"]
        assert s["cpu_enforcement"] == "affinity only (drift check)" and not s["cgroups"], s
        put_back(rtd)


@test
def without_cpuset_realtime_is_refused_and_escapes_are_put_back():
    if not os.path.isdir(V1):
        raise Skip("no v1 cpuset hierarchy to hide")
    with JobRtd(cls=NoCpusetRtd) as rtd:
        s = api(rtd, "GET", "/v1/status")[1]["jobs"]
        assert s["cpu_enforcement"] == "affinity only (drift check)", s
        assert "no cpuset" in s["cpu_enforcement_note"], s
        # Real-time: refused, naming the field, the reason, the key and the fix; nothing is queued.
        p = rtd.ctl("submit", "--", "/bin/true", user=USER)
        assert p.returncode != 0 and "policy" in p.stderr and "RealtimeWithoutCpuset" in p.stderr, p
        st, body = api(rtd, "POST", "/v1/jobs", {"argv": ["/bin/true"], "policy": "fifo"})
        assert st == 403 and "RealtimeWithoutCpuset" in json.dumps(body), (st, body)
        assert api(rtd, "GET", "/v1/status")[1]["jobs"]["queue_depth"] == 0
        # Not real-time: runs; each time it moves itself to CPU 0 the drift check puts it back.
        put_back(rtd)
    # The administrator's opt-in: real-time jobs run, held by their affinity and the drift check only.
    with JobRtd(conf="[Jobs]\nRealtimeWithoutCpuset=yes\n", cls=NoCpusetRtd) as rtd:
        j = wait_final(rtd, submit_as_user(rtd, "--", "/bin/sh", "-c", "chrt -p $$"))
        assert j["state"] == "succeeded" and j["priority"] == 50, j


if __name__ == "__main__":
    _lock = knob_lock() if os.geteuid() == 0 else None
    run_tests()
