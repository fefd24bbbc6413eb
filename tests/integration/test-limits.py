#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Job limits (issue 11, points 4 and 6), tried as an unprivileged member of the submit group: the output cap
(the job sees EFBIG, rtd records it, the file stays within the cap), pids.max and memory.max (cgroup v1 on a
hybrid host, v2 where the job's cgroup has the controllers), the login-like rlimits a job sees, a full state
directory (the store write fails and is surfaced, nothing is lost), MaxCoresPerUser= (further jobs wait),
MaxQueuePriority=, and a user removed from the submit group while their job waited. rtd reserves CPU 1 in a
private PID namespace. Needs root and 2 CPUs; holds /tmp/rtd-knobs.lock while it runs."""
import os
import re
import subprocess
import time

from rtdtest import (FINAL, Skip, SubmitGroupRtd, TestUser, api, assert_refusal, job, knob_lock, n_jobs, output,
                     run_tests, test, uapi, usubmit, wait_final, wait_state)

CPU = 1
GROUP = "rtdlimgrp"
ENV = {"PATH": "/usr/bin:/bin"}


class JobRtd(SubmitGroupRtd):
    def __init__(self, conf="", state_tmpfs=None):
        super().__init__(GROUP, conf, state_tmpfs, name="limits")


def status_limits(rtd):
    st, s = api(rtd, "GET", "/v1/status")
    assert st == 200, s
    return s["jobs"]["limits"]


def output_dir(rtd):
    """Where this store's output files are: state/output/<the store's instance id>."""
    return os.path.join(rtd.dir, "state/output", rtd.ctl_json("status")["jobs"]["store"]["instance"])

@test
def output_cap():
    with TestUser("rtdlim-u1", groups=[GROUP]) as u, JobRtd("[Jobs]\nMaxOutputBytes=64K\n") as rtd:
        # 200 KB to stdout: the write past 64 KiB fails (EFBIG) and the job goes on to say so on stderr.
        j = usubmit(rtd, u, {"argv": ["/bin/sh", "-c", "head -c 200000 /dev/zero; echo head=$? >&2; echo done >&2"]})
        j = wait_final(rtd, j["id"])
        size = os.path.getsize(os.path.join(output_dir(rtd), f"{j['id']}.stdout"))
        err = output(rtd, j["id"], "stderr")
        assert size == 65536, size
        assert "File too large" in err and "head=1" in err and "done" in err, err
        assert j["limits_hit"]["output_capped"] == ["stdout"], j
        assert j["spec"]["max_output_bytes"] == 65536, j["spec"]
        # rtctl show says so too.
        p = rtd.ctl("show", str(j["id"]))
        assert p.returncode == 0 and "Limits hit: output capped (stdout)" in p.stdout, p.stdout
        # The job cannot lift the cap: the hard limit is the cap as well.
        j2 = usubmit(rtd, u, {"argv": ["/bin/sh", "-c", "ulimit -f unlimited; echo rc=$?; head -c 100000 /dev/zero "
                                       ">/dev/null; ulimit -f"]})
        j2 = wait_final(rtd, j2["id"])
        out2 = output(rtd, j2["id"])
        assert "rc=2" in out2 or "rc=1" in out2, out2
        assert out2.strip().endswith("128"), out2       # 64 KiB in 512-byte blocks (dash)
        # A non-admin may lower it, not raise it; a refusal changes nothing.
        before = n_jobs(rtd)
        st, body = uapi(rtd, u, "POST", "/v1/jobs", {"argv": ["/bin/true"], "max_output_bytes": 1 << 20, "env": ENV})
        assert_refusal(st, body, 403, "max_output_bytes", "MaxOutputBytes=65536", "at most 65536")
        assert n_jobs(rtd) == before
        j3 = usubmit(rtd, u, {"argv": ["/bin/sh", "-c", "head -c 20000 /dev/zero"], "max_output_bytes": 8192})
        j3 = wait_final(rtd, j3["id"])
        assert os.path.getsize(os.path.join(output_dir(rtd), f"{j3['id']}.stdout")) == 8192
        assert j3["limits_hit"]["output_capped"] == ["stdout"], j3
        # Under the cap: not reported.
        j4 = wait_final(rtd, usubmit(rtd, u, {"argv": ["/bin/echo", "small"]})["id"])
        assert j4["state"] == "succeeded" and j4["limits_hit"]["output_capped"] == [], j4
        print(f"  200000 bytes to stdout kept {size}; stderr: {err.strip()!r}", flush=True)


@test
def login_like_rlimits():
    with TestUser("rtdlim-u2", groups=[GROUP]) as u, JobRtd("[Jobs]\nMaxOutputBytes=1G\n") as rtd:
        # The worker (and rtd) have their starter's limits (a service's LimitNOFILE= and the like): the job
        # must get a login's instead.
        worker = [k for k in open(f"/proc/{rtd.pid}/task/{rtd.pid}/children").read().split()
                  if open(f"/proc/{k}/comm").read().strip() == "rtd-worker"][0]
        wl = {l[:26].strip(): l[26:].split() for l in open(f"/proc/{worker}/limits").read().splitlines()[1:]}
        assert wl["Max open files"][:2] != ["1024", "4096"], wl["Max open files"]
        # RLIMIT_RTPRIO may rise above rtd's own only with CAP_SYS_RESOURCE (a confined root lacks it: the
        # job then keeps rtd's hard limit, never more).
        cap_resource = int(open("/proc/self/status").read().split("CapEff:")[1].split()[0], 16) & (1 << 24)
        rt_hard = wl["Max realtime priority"][1]
        want_r = "7" if cap_resource or rt_hard == "unlimited" or int(rt_hard) >= 7 else rt_hard
        j = usubmit(rtd, u, {"argv": ["/bin/bash", "-c", "ulimit -a; echo Hn=$(ulimit -Hn) Hr=$(ulimit -Hr) "
                                      "Hf=$(ulimit -Hf); chrt -f -p 31 $$ && echo raised; chrt -f -p 5 $$ && "
                                      "echo lowered"], "priority": 7})
        j = wait_final(rtd, j["id"])
        out = output(rtd, j["id"])
        lim = {}
        for line in out.splitlines():
            m = re.search(r"-(\w)\)\s+(\S+)$", line)
            if m:
                lim[m.group(1)] = m.group(2)
        assert lim.get("n") == "1024" and "Hn=4096" in out, out       # open files
        assert lim.get("r") == want_r and f"Hr={want_r}" in out, out      # real-time priority = the job's
        assert lim.get("f") == str(1 << 20) and f"Hf={1 << 20}" in out, out     # file size (1 KiB blocks)
        assert lim.get("l") == "8192", out                              # locked memory, KiB
        assert lim.get("c") == "0", out                                 # core
        assert lim.get("s") == "8192", out                              # stack, KiB
        assert "raised" not in out, out                                 # above its RTPRIO: refused
        print("  " + " ".join(f"-{k} {v}" for k, v in sorted(lim.items())) +
              ("" if want_r == "7" else f" (RTPRIO kept at rtd's hard limit {rt_hard}: no CAP_SYS_RESOURCE here)"),
              flush=True)


@test
def tasks_and_memory_limits():
    with TestUser("rtdlim-u3", groups=[GROUP]) as u, \
            JobRtd("[Jobs]\nMaxTasks=40\nMaxMemory=64M\n") as rtd:
        lim = status_limits(rtd)
        if lim["tasks"].startswith("not enforced") or lim["memory"].startswith("not enforced"):
            raise Skip(f"no pids/memory controller for job cgroups here: {lim}")
        # A fork bomb, bounded: at most 40 tasks at once in the job.
        bomb = ("import os, time\nkids, err = [], None\nfor i in range(200):\n    try:\n        p = os.fork()\n"
                "    except OSError as e:\n        err = e.strerror\n        break\n    if p == 0:\n"
                "        time.sleep(3)\n        os._exit(0)\n    kids.append(p)\n"
                "print('started=%d %s' % (len(kids), err), flush=True)\nfor p in kids:\n    os.waitpid(p, 0)\n")
        j = usubmit(rtd, u, {"argv": ["/usr/bin/python3", "-c", bomb]})
        j = wait_final(rtd, j["id"], timeout=60)
        out = output(rtd, j["id"])
        assert "started=" in out, (j, out, output(rtd, j["id"], "stderr"))
        started = int(out.split("started=")[1].split()[0])
        assert started < 40 and "Resource temporarily unavailable" in out, out
        assert j["limits_hit"]["tasks_refused"] > 0, j
        assert j["spec"]["max_tasks"] == 40
        # A memory hog: killed by the OOM killer within the job, and said so.
        j = usubmit(rtd, u, {"argv": ["/usr/bin/python3", "-c", "a = b'x' * (400 << 20); print('survived')"]})
        j = wait_final(rtd, j["id"], timeout=60)
        assert j["state"] == "failed" and j["signal"] == 9, j
        assert j["limits_hit"]["oom_kills"] >= 1 and "OOM killer" in j["reason"] and "MaxMemory=" in j["reason"], j
        assert "survived" not in output(rtd, j["id"])
        # A job under both limits runs.
        ok = wait_final(rtd, usubmit(rtd, u, {"argv": ["/usr/bin/python3", "-c", "a = b'x' * (8 << 20)"]})["id"])
        assert ok["state"] == "succeeded", ok
        # Downward only for non-admins; an admin may go above.
        st, body = uapi(rtd, u, "POST", "/v1/jobs", {"argv": ["/bin/true"], "max_tasks": 1000, "env": ENV})
        assert_refusal(st, body, 403, "max_tasks", "MaxTasks=40")
        st, body = uapi(rtd, u, "POST", "/v1/jobs", {"argv": ["/bin/true"], "max_memory_bytes": 1 << 30,
                                                     "env": ENV})
        assert_refusal(st, body, 403, "max_memory_bytes", "MaxMemory=67108864")
        st, a = api(rtd, "POST", "/v1/jobs", {"argv": ["/bin/true"], "max_tasks": 1000, "env": ENV})
        assert st == 201 and wait_final(rtd, a["id"])["state"] == "succeeded", a
        print(f"  tasks: {lim['tasks']}; memory: {lim['memory']}; bomb started {started} of 200", flush=True)


@test
def disk_full_store_write_surfaced():
    with TestUser("rtdlim-u4", groups=[GROUP]) as u, JobRtd("", state_tmpfs="6m") as rtd:
        state = os.path.join(rtd.dir, "state")
        running = usubmit(rtd, u, {"argv": ["/bin/sleep", "2"]})
        wait_state(rtd, running["id"], ("running",))
        filler = os.path.join(state, "filler")
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        # The running job ends while the disk is full: its final state cannot be stored yet.
        ended = wait_final(rtd, running["id"])
        assert ended["state"] == "succeeded", ended
        store = api(rtd, "GET", "/v1/status")[1]["jobs"]["store"]
        assert store["pending_writes"] == 1 and store["last_write_error"] == "No space left on device", store
        assert f"Failed to write job {running['id']} (succeeded) to the store" in rtd.read_log()
        # Submissions: refused with 507 once the store cannot take them, never accepted and lost.
        codes, refused, accepted = [], None, []
        for _ in range(400):
            st, body = uapi(rtd, u, "POST", "/v1/jobs", {"argv": ["/bin/true"], "name": "x" * 120, "env": ENV})
            codes.append(st)
            if st == 201:
                accepted.append(body["id"])
            else:
                refused = body
                break
        assert codes[-1] == 507, codes[-5:]
        assert_refusal(507, refused, 507, "jobs.db", "No space left", "nothing was queued")
        st, s = api(rtd, "GET", "/v1/status")
        assert s["jobs"]["store"]["write_failures"] >= 1, s["jobs"]["store"]
        assert "Failed to store new job" in rtd.read_log()
        os.unlink(filler)
        # Space again: rtd goes on, and what it could not write is written now.
        end = time.time() + 10
        while time.time() < end and api(rtd, "GET", "/v1/status")[1]["jobs"]["store"]["pending_writes"]:
            time.sleep(0.2)
        assert api(rtd, "GET", "/v1/status")[1]["jobs"]["store"]["pending_writes"] == 0
        j = usubmit(rtd, u, {"argv": ["/bin/echo", "after"]})
        assert wait_final(rtd, j["id"])["state"] == "succeeded"
        for jid in accepted[-3:]:
            wait_final(rtd, jid)
        # The store tells the truth after a restart: every accepted job is there, the refused one is not.
        rtd.stop()
        rtd.start()
        assert job(rtd, running["id"])["state"] == "succeeded"
        for jid in accepted:
            assert job(rtd, jid)["state"] in FINAL + ("queued",), jid
        print(f"  {len(accepted)} submissions stored before the disk was full; then 507: "
              f"{refused.get('detail', refused)!r}", flush=True)


@test
def per_user_cores_queue_then_run():
    with TestUser("rtdlim-u5", groups=[GROUP]) as u, JobRtd("[Access]\nMaxCoresPerUser=1\n") as rtd:
        a = usubmit(rtd, u, {"argv": ["/bin/sleep", "1.5"]})
        b = usubmit(rtd, u, {"argv": ["/bin/echo", "second"]})     # waits in the queue, not refused
        wait_state(rtd, a["id"], ("running",))
        assert job(rtd, b["id"])["state"] == "queued"
        assert wait_final(rtd, b["id"], timeout=20)["state"] == "succeeded"
        ja, jb = job(rtd, a["id"]), job(rtd, b["id"])
        assert jb["started_at"] >= ja["ended_at"], (ja, jb)
        # One job above the limit alone could never start: refused, naming the key and the fix.
        st, body = uapi(rtd, u, "POST", "/v1/jobs", {"argv": ["/bin/true"], "cores": 2, "env": ENV})
        assert st in (400, 403), (st, body)


@test
def queue_priority_capped():
    with TestUser("rtdlim-u6", groups=[GROUP]) as u, JobRtd("[Access]\nMaxQueuePriority=2\n") as rtd:
        before = n_jobs(rtd)
        st, body = uapi(rtd, u, "POST", "/v1/jobs", {"argv": ["/bin/true"], "queue_priority": 5, "env": ENV})
        assert_refusal(st, body, 403, "queue_priority", "MaxQueuePriority=2", "at most 2")
        assert n_jobs(rtd) == before
        usubmit(rtd, u, {"argv": ["/bin/true"], "queue_priority": 2})
        usubmit(rtd, u, {"argv": ["/bin/true"], "queue_priority": -100})
        st, a = api(rtd, "POST", "/v1/jobs", {"argv": ["/bin/true"], "queue_priority": 500, "env": ENV})
        assert st == 201, a                                         # admins are not capped


@test
def removed_from_group_before_dispatch():
    with TestUser("rtdlim-u7", groups=[GROUP]) as u, JobRtd() as rtd:
        st, blocker = api(rtd, "POST", "/v1/jobs", {"argv": ["/bin/sleep", "2"], "env": ENV})
        assert st == 201, blocker
        wait_state(rtd, blocker["id"], ("running",))
        time.sleep(0.3)         # past the moment a job would be handed ahead to its worker
        j = usubmit(rtd, u, {"argv": ["/usr/bin/id"]})
        assert job(rtd, j["id"])["state"] == "queued"
        subprocess.run(["gpasswd", "-d", u.name, GROUP], check=True, capture_output=True)
        j = wait_final(rtd, j["id"], timeout=20)
        assert j["state"] == "failed" and j["pid"] is None, j
        assert "no longer a member of the submit group" in j["reason"] and GROUP in j["reason"], j
        assert "SubmitGroup=" in j["reason"], j
        print(f"  reason: {j['reason']}", flush=True)


if __name__ == "__main__":
    _lock = knob_lock() if os.geteuid() == 0 else None
    run_tests()
