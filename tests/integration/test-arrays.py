#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Job arrays (issue 14, part 2), as an unprivileged member of the submit group: rtctl submit --array and
--each make N jobs in one request with RTD_ARRAY_ID/RTD_ARRAY_INDEX (and {} substituted when asked), wait
exits with the first failure's code and prints a summary, --max-running caps the array's running tasks,
cancel stops what is left, a refused array (queue limits counted per task, MaxArraySize=, huge ranges,
malformed --each files) creates nothing, and arrays survive an rtd restart. rtd reserves CPU 1 in a private
PID namespace. Needs root and 2 CPUs; holds /tmp/rtd-knobs.lock while it runs."""
import os
import pwd
import re
import subprocess
import tempfile
import time

from rtdtest import (RTCTL, SubmitGroupRtd, TestUser, api, assert_refusal, knob_lock, n_jobs, output, run_pty,
                     run_tests, test, uapi)

GROUP = "rtdarrgrp"


class ArrayRtd(SubmitGroupRtd):
    def __init__(self, conf="", state_tmpfs=None):
        super().__init__(GROUP, conf, state_tmpfs, name="arrays")


ENV = {"PATH": "/usr/bin:/bin"}


def uctl(rtd, u, *args, input=None, check=None):
    """rtctl as u, with a small environment (its whole environment would go into every task)."""
    return rtd.ctl(*args, user=u.name, input=input, check=check, env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"})


def tasks(rtd, aid):
    st, j = api(rtd, "GET", f"/v1/jobs?array={aid}&limit=1000")
    assert st == 200, j
    return sorted(j["jobs"], key=lambda t: t["array"]["index"])


@test
def array_env_subst_wait_and_show():
    with TestUser("rtdarr-u1", groups=[GROUP]) as u, ArrayRtd() as rtd:
        p = uctl(rtd, u, "submit", "-E", "--array", "1-9:4,20", "--array-subst", "--",
                 "/bin/sh", "-c", 'echo "$RTD_ARRAY_ID $RTD_ARRAY_INDEX {}"; exit $(( {} == 5 ? 3 : 0 ))', "x{}")
        assert p.returncode == 0, p.stderr
        aid = p.stdout.strip()
        assert aid.startswith("a") and aid[1:].isdigit(), p.stdout
        p = uctl(rtd, u, "wait", aid)
        assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)       # index 5 exited 3
        assert "3 of 4 succeeded, 1 failed" in p.stdout and "first failure: index 5" in p.stdout, p.stdout
        ts = tasks(rtd, aid[1:])
        assert [t["array"]["index"] for t in ts] == [1, 5, 9, 20], ts
        for t in ts:
            i = t["array"]["index"]
            assert t["spec"]["argv"][-1] == f"x{i}", t["spec"]["argv"]
            assert output(rtd, t["id"]).strip() == f"{aid} {i} {i}", output(rtd, t["id"])
        show = uctl(rtd, u, "show", aid)
        assert show.returncode == 0 and "failed, 4 of 4 tasks ended" in show.stdout, show.stdout
        assert "First failure: index 5" in show.stdout and "1-9:4,20" in show.stdout, show.stdout
        # Without --array-subst, {} stays as it is.
        p = uctl(rtd, u, "submit", "-E", "--wait", "-q", "--array", "0-1", "--", "/bin/echo", "{}")
        assert p.returncode == 0, p.stderr
        st, j = api(rtd, "GET", "/v1/jobs?limit=1")
        assert j["jobs"][0]["spec"]["argv"] == ["/bin/echo", "{}"], j
        # An array id is never a job id: job 1 exists, "a1" is the array.
        assert uctl(rtd, u, "show", "--json", aid).returncode == 0
        p = uctl(rtd, u, "show", "a999")
        assert p.returncode == 1 and "No such array" in p.stderr, p.stderr


@test
def each_file_and_its_hostile_lines():
    with TestUser("rtdarr-u2", groups=[GROUP]) as u, ArrayRtd() as rtd, \
            tempfile.NamedTemporaryFile("w", dir="/tmp", delete=False) as f:
        f.write("# comment\nplain word\n\n'single quoted' \"double \\\"q\\\"\" back\\ slash\n")
        f.close()
        os.chmod(f.name, 0o644)
        p = uctl(rtd, u, "submit", "-E", "--wait", "--each", f.name, "--", "/usr/bin/printf", "[%s]")
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert "2 of 2 succeeded" in p.stdout, p.stdout
        aid = p.stderr.split()[1].rstrip(":")[1:]
        outs = [rtd.ctl("logs", str(t["id"])).stdout for t in tasks(rtd, aid)]
        assert outs == ["[plain][word]", "[single quoted][double \"q\"][back slash]"], outs
        # stdin, and a line for each task's index
        p = uctl(rtd, u, "submit", "-E", "--wait", "-q", "--each", "-", "--", "/bin/true", input="a\nb\nc\n")
        assert p.returncode == 0, p.stderr
        before = n_jobs(rtd)
        for content, why in ((b"ok\nbad\0nul\n", "line 2: it has a NUL byte"),
                             (b"x" * (70 * 1024) + b"\n", "line 1: it is longer than 64 KiB"),
                             (b"ok\n'open\n", "line 2: a quote is not closed"),
                             (b"\n# only a comment\n", "has no tasks")):
            p = subprocess.run(["setpriv", f"--reuid={u.uid}", f"--regid={pwd.getpwuid(u.uid).pw_gid}",
                                "--init-groups", "--",
                                RTCTL, "--socket", rtd.socket, "submit", "--each", "-", "--", "/bin/true"],
                               input=content, capture_output=True)
            assert p.returncode == 2 and why.encode() in p.stderr, (why, p.returncode, p.stderr)
        assert n_jobs(rtd) == before


@test
def refused_arrays_create_nothing():
    conf = "[Jobs]\nMaxArraySize=50\n[Access]\nMaxQueuedPerUser=20\n"
    with TestUser("rtdarr-u3", groups=[GROUP]) as u, ArrayRtd(conf) as rtd:
        st, blocker = api(rtd, "POST", "/v1/jobs", {"argv": ["/bin/sleep", "30"], "env": ENV})
        assert st == 201
        before = n_jobs(rtd)
        spec = {"argv": ["/bin/true"], "env": ENV}
        for body, status, words in (
                ({"spec": spec, "indices": "0-4294967296"}, 400, ("indices", "0 to 999999999")),
                ({"spec": spec, "indices": "0-999999999"}, 400, ("indices", "1000000000 tasks", "MaxArraySize=")),
                ({"spec": spec, "indices": "0-60"}, 400, ("indices", "61 tasks", "at most 50")),
                ({"spec": spec, "tasks": [["x"]] * 51}, 400, ("tasks", "51 tasks")),
                ({"spec": spec, "indices": "1,2,1"}, 400, ("indices", "index 1 twice")),
                ({"spec": spec, "indices": "5-1"}, 400, ("indices", "ends before it starts")),
                ({"spec": spec, "indices": "0-9:0"}, 400, ("indices",)),
                ({"spec": spec, "indices": "0-9", "tasks": [["x"]]}, 400, ("exactly one",)),
                ({"spec": spec, "indices": "0-9", "max_running": -1}, 400, ("max_running",)),
                ({"spec": spec, "indices": "0-9", "bogus": 1}, 400, ("bogus",)),
                ({"spec": {"argv": []}, "indices": "0-9"}, 400, ("spec", "argv")),
                ({"spec": spec, "indices": "0-20"}, 429, ("21 tasks", "MaxQueuedPerUser=")),
                ({"spec": {"argv": ["/bin/true"], "priority": 99}, "indices": "0-1"}, 403, ("priority",))):
            st, j = uapi(rtd, u, "POST", "/v1/arrays", body)
            assert_refusal(st, j, status, *words)
            assert j.get("type") and j.get("detail"), j                 # problem+json
        assert n_jobs(rtd) == before, "a refused array created jobs"
        # 15 fit; then 6 more would pass the per-user limit of 20: refused whole, nothing queued.
        st, a = uapi(rtd, u, "POST", "/v1/arrays", {"spec": spec, "indices": "0-14"})
        assert st == 201 and a["size"] == 15 and a["queued"] == 15, a
        st, j = uapi(rtd, u, "POST", "/v1/arrays", {"spec": spec, "indices": "0-5"})
        assert_refusal(st, j, 429, "15 queued jobs", "6 tasks")
        assert n_jobs(rtd) == before + 15
        # Someone else cannot cancel it; the owner can, and every queued task ends cancelled.
        st, j = uapi(rtd, u, "DELETE", f"/v1/arrays/{a['id']}")
        assert st == 200 and j["cancelled"] == 15 and j["state"] == "failed", j
        p = rtd.ctl("wait", f"a{a['id']}")
        assert p.returncode == 125 and "15 cancelled" in p.stdout, (p.returncode, p.stdout)
        api(rtd, "DELETE", f"/v1/jobs/{blocker['id']}")


@test
def max_running_and_restart():
    with TestUser("rtdarr-u4", groups=[GROUP]) as u, TestUser("rtdarr-u5", groups=[GROUP]) as other, \
            ArrayRtd() as rtd:
        # Tasks long enough that the one running at the stop cannot end while rtd stops (slow under ASan).
        spec = {"argv": ["/bin/sleep", "3"], "env": ENV, "policy": "other"}
        st, a = uapi(rtd, u, "POST", "/v1/arrays", {"spec": spec, "indices": "0-3", "max_running": 1})
        assert st == 201, a
        # another user's array may not be cancelled or followed
        st, j = uapi(rtd, other, "DELETE", f"/v1/arrays/{a['id']}")
        assert_refusal(st, j, 403, "another user")
        st, j = uapi(rtd, other, "GET", f"/v1/events?array={a['id']}")
        assert_refusal(st, j, 403, "owner")
        seen = 0
        end = time.time() + 30
        while time.time() < end:
            st, s = api(rtd, "GET", f"/v1/arrays/{a['id']}")
            assert s["running"] <= 1, s
            running = [t for t in tasks(rtd, a["id"]) if t["state"] in ("starting", "running")]
            assert len(running) <= 1, running
            seen = max(seen, s["ended"])
            # Stop while a task runs (not in the gap between two): that task is the one to be lost.
            if s["ended"] >= 1 and any(t["state"] == "running" for t in running):
                break
            time.sleep(0.05)
        # Restart in the middle: the array and its counts come back from the store. The test's rtd lives in a
        # PID namespace, so the task running when it stops dies with it: that one is "lost", the rest run.
        rtd.stop()
        rtd.start()
        st, s = api(rtd, "GET", f"/v1/arrays/{a['id']}")
        assert st == 200 and s["ended"] >= 1 and s["state"] == "running", s
        p = rtd.ctl("wait", f"a{a['id']}", timeout=60)
        assert p.returncode == 123 and "3 of 4 succeeded, 1 failed" in p.stdout, (p.returncode, p.stdout, p.stderr)
        assert "lost: rtd stopped while the job was" in p.stdout, p.stdout
        st, s = api(rtd, "GET", f"/v1/arrays/{a['id']}")
        assert s["state"] == "failed" and s["succeeded"] == 3 and s["lost"] == 1 and s["ended_at"], s
        # the tasks ran one after another: no two overlap
        ts = tasks(rtd, a["id"])
        spans = sorted((t["started_at"], t["ended_at"]) for t in ts)
        assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1)), spans


@test
def progress_bar_on_a_terminal_only():
    """--wait draws a progress bar on stderr when it is a terminal (done, failed, running, rate, ETA), and
    nothing of it when stderr is a pipe; the summary on stdout is the same either way."""
    with TestUser("rtdarr-u6", groups=[GROUP]) as u, ArrayRtd() as rtd:
        # One task at a time, each long enough that the bar is drawn between two ends: rate and ETA appear.
        args = ["submit", "-E", "--wait", "--max-running", "1", "--array", "0-5", "--array-subst", "--",
                "/bin/sh", "-c", "sleep 0.3; exit $(( {} == 2 ? 4 : 0 ))"]
        cmd = [RTCTL, "--socket", rtd.socket, *args]
        rc, out, tty = run_pty(cmd, user=u.name, env={**ENV, "NO_COLOR": "1"})
        assert rc == 4, (rc, out, tty)
        frames = [f for f in re.split(r"\r\x1b\[K|\r?\n", tty) if f.startswith("[")]
        bar = r"\[[#.]{40}\] (\d+)/6 done, (\d+) failed, (\d+) running, (\d+)/s"
        parsed = [re.match(bar, f) for f in frames]
        assert frames and all(parsed), tty
        # while it ran: one task running, a rate and an ETA once a task has ended
        assert any(m.group(3) == "1" for m in parsed), frames
        assert any(", ETA " in f and int(m.group(4)) > 0 for f, m in zip(frames, parsed)), frames
        # the last frame: everything ended, the failure counted, the bar full, no ETA left
        last = parsed[-1]
        assert (last.group(1), last.group(2), last.group(3)) == ("5", "1", "0"), frames[-1]
        assert frames[-1].startswith("[" + "#" * 40 + "]") and "ETA" not in frames[-1], frames[-1]
        assert "5 of 6 succeeded, 1 failed" in out and "first failure: index 2" in out, out
        assert "\x1b" not in out and "#" not in out, out        # the bar never goes to stdout
        # stderr a pipe: the same wait, the same summary, no bar
        p = uctl(rtd, u, *args)
        assert p.returncode == 4, (p.returncode, p.stdout, p.stderr)
        assert "5 of 6 succeeded, 1 failed" in p.stdout, p.stdout
        for s in (p.stdout, p.stderr):
            assert "\r" not in s and "\x1b" not in s and "ETA" not in s and "done," not in s, (p.stdout, p.stderr)


if __name__ == "__main__":
    _lock = knob_lock() if os.geteuid() == 0 else None
    run_tests()
