#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A job cannot stall dispatch (issue 11, point 3): rtd reserves CPU 1 in a private PID namespace; an
unprivileged user's job whose working directory (or PATH) lies on a FUSE file system that never answers
(hangfs.py) fails after [Jobs] StartTimeoutSec= naming the step, while later jobs still run on that CPU; a
job handed ahead to a worker that does not answer is settled in bounded time. Needs root, 2 CPUs and
/dev/fuse; holds /tmp/rtd-knobs.lock while rtd runs."""
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time

from rtdtest import (FINAL, RTCTL, Knobs, Rtd, Skip, TestUser, api, job, knob_lock, knobs_as_found, need_root, run,
                     run_tests, test, wait_final, wait_workers_ready)

CPU = 1
GROUP = "rtdstalltest"
BASE_CONF = (f"[Daemon]\nSocketGroup={GROUP}\n[Reserve]\nIRQs=keep\nCheckIntervalSec=0\n[Jobs]\nKillGraceSec=1\n"
             f"[Access]\nSubmitGroup={GROUP}\n")
HANGFS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hangfs.py")


def uctl(rtd, u, *args):
    cmd = ["setpriv", f"--reuid={u.uid}", f"--regid={pwd.getpwuid(u.uid).pw_gid}", "--init-groups", "--",
           RTCTL, "--socket", rtd.socket, *args]
    return run(cmd)


def submit_as(rtd, u, *args):
    p = uctl(rtd, u, "submit", "-E", "-e", "PATH=/usr/bin:/bin", *args)
    assert p.returncode == 0, p
    return int(p.stdout.strip())


def uid_pids(uid):
    pids = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and os.stat(f"/proc/{d}").st_uid == uid:
                pids.append(int(d))
        except OSError:
            pass
    return pids


def sigkill_pending(pid):
    """SIGKILL queued for the task (thread or process), to be taken when its system call returns."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & (1 << (signal.SIGKILL - 1)):
                return True
    except OSError:
        return True     # gone: it was killed and has died
    return False


def worker_host_pid(rtd):
    kids = open(f"/proc/{rtd.pid}/task/{rtd.pid}/children").read().split()
    for k in kids:
        try:
            if open(f"/proc/{k}/comm").read().strip() == "rtd-worker":
                return int(k)
        except OSError:
            pass
    raise AssertionError(f"no rtd-worker among rtd's children {kids}")


class HangFs:
    """hangfs.py mounted on a fresh directory, before rtd starts (rtd's mount namespace copies it)."""

    def __enter__(self):
        if not os.path.exists("/dev/fuse"):
            raise Skip("needs /dev/fuse")
        self.dir = tempfile.mkdtemp(prefix="rtd-test-hangfs-")
        os.chmod(self.dir, 0o755)
        self.proc = subprocess.Popen([sys.executable, HANGFS, self.dir], stdout=subprocess.PIPE, text=True,
                                     start_new_session=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.__exit__(None, None, None)
            raise AssertionError(f"hangfs did not start: {line!r}, exit {self.proc.poll()}")
        return self

    def stop(self):
        """Kill the server: its /dev/fuse closes, the connection aborts and every waiting request ends."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def __exit__(self, *exc):
        self.stop()
        subprocess.run(["umount", "-l", self.dir], capture_output=True)
        os.rmdir(self.dir)


class JobRtd:
    def __init__(self, conf=""):
        self.conf = conf

    def __enter__(self):
        need_root()
        if os.cpu_count() < 2:
            raise Skip("needs 2 CPUs: CPU 0 for housekeeping, CPU 1 reserved")
        subprocess.run(["groupadd", "-f", GROUP], check=True)
        self.knobs = Knobs()
        self.rtd = Rtd(reserve=str(CPU), conf=BASE_CONF + self.conf, name="stall")
        try:
            self.rtd.start()
            wait_workers_ready(self.rtd)
        except BaseException:
            self.rtd.cleanup()
            raise
        return self.rtd

    def __exit__(self, *exc):
        self.rtd.cleanup()
        knobs_as_found(self.knobs, exc[0])


@test
def blocked_start_fails_and_queue_goes_on():
    with TestUser("rtdstall-user", groups=[GROUP]) as u, HangFs() as fs, \
            JobRtd("[Jobs]\nStartTimeoutSec=2\n") as rtd:
        worker = worker_host_pid(rtd)
        t0 = time.monotonic()
        a = submit_as(rtd, u, "-C", fs.dir + "/dir", "--", "/bin/true")
        b = submit_as(rtd, u, "-C", "/", "-e", f"PATH={fs.dir}/bin:/usr/bin", "--", "true")
        c = submit_as(rtd, u, "-C", "/", "--", "/bin/echo", "still running")
        # rtd and the worker answer while the child hangs in the FUSE lookup.
        time.sleep(0.5)
        st, s = api(rtd, "GET", "/v1/status")
        assert st == 200 and job(rtd, a)["state"] == "starting", job(rtd, a)

        ja = wait_final(rtd, a)
        took_a = time.monotonic() - t0
        assert ja["state"] == "failed" and "chdir" in ja["reason"] and "StartTimeoutSec=2" in ja["reason"] \
            and fs.dir in ja["reason"], ja
        assert 1.9 <= took_a < 6, took_a
        jb = wait_final(rtd, b)
        assert jb["state"] == "failed" and "PATH lookup" in jb["reason"] and "true" in jb["reason"], jb
        jc = wait_final(rtd, c)
        assert jc["state"] == "succeeded", jc
        st, out = api(rtd, "GET", f"/v1/jobs/{c}/output?stream=stdout")
        assert st == 200 and out.strip() == b"still running", out
        print(f"  blocked start failed after {took_a:.2f} s (StartTimeoutSec=2)", flush=True)

        # Same worker throughout: it never waited for the hanging children.
        assert worker_host_pid(rtd) == worker, "the worker was restarted"
        # The killed children still wait in the kernel for the file system...
        stuck = uid_pids(u.uid)
        assert stuck, "the killed children are expected to wait until the FUSE request ends"
        assert all(sigkill_pending(p) for p in stuck), \
            f"a hung child was left without SIGKILL: {[p for p in stuck if not sigkill_pending(p)]}"
        # ...and die as soon as its server does.
        fs.stop()
        end = time.time() + 10
        while uid_pids(u.uid) and time.time() < end:
            time.sleep(0.05)
        assert not uid_pids(u.uid), f"left behind: {uid_pids(u.uid)}"
        # And the CPU still takes jobs.
        d = submit_as(rtd, u, "-C", "/", "--", "/bin/true")
        assert wait_final(rtd, d)["state"] == "succeeded"


@test
def job_ahead_of_a_stuck_worker_is_taken_back():
    with JobRtd() as rtd:
        worker = worker_host_pid(rtd)
        env = {"PATH": "/usr/bin:/bin"}
        st, x = api(rtd, "POST", "/v1/jobs", {"argv": ["sleep", "30"], "env": env})
        assert st == 201, x
        st, y = api(rtd, "POST", "/v1/jobs", {"argv": ["echo", "ran once"], "env": env})
        assert st == 201, y
        t0 = time.monotonic()
        os.kill(worker, signal.SIGSTOP)     # a worker that never answers
        try:
            if job(rtd, y["id"])["state"] != "starting":
                raise Skip("the second job was not handed ahead (the first one started too long before)")
            # Behind a long job rtd asks for it back (docs/jobs.md, "Handing the next job ahead"); the worker
            # does not answer, so rtd kills it and settles both of its jobs.
            end = time.time() + 10
            while time.time() < end and job(rtd, x["id"])["state"] not in FINAL:
                time.sleep(0.02)
            took = time.monotonic() - t0
        finally:
            try:
                os.kill(worker, signal.SIGCONT)
            except ProcessLookupError:
                pass
        assert took < 5, took
        print(f"  job ahead of a stuck worker taken back after {took:.2f} s", flush=True)
        # Provably never started (no stdout file made): back in the queue, and it runs once, on the
        # new worker.
        jy = wait_final(rtd, y["id"], timeout=15)
        assert jy["state"] == "succeeded", jy
        st, out = api(rtd, "GET", f"/v1/jobs/{y['id']}/output?stream=stdout")
        assert st == 200 and out == b"ran once\n", out
        assert worker_host_pid(rtd) != worker, "the stuck worker was not replaced"
        jx = wait_final(rtd, x["id"], timeout=10)
        assert jx["state"] in ("failed", "cancelled"), jx


if __name__ == "__main__":
    _lock = knob_lock() if os.geteuid() == 0 else None
    run_tests()
