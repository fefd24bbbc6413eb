#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Data in and out of rtd, as hostile local users see it (issue 12 points 4-6): job output streamed with
bounded memory (every byte, also while the job writes), the store and its state directory private, output
never handed to the owner of a recreated store's job with the same id, a started job never run twice, job
names without control characters and rtctl escaping what it prints. rtd reserves CPU 1 in a private PID
namespace; holds /tmp/rtd-knobs.lock for the whole run."""
import hashlib
import os
import pwd
import socket
import stat
import subprocess
import tempfile
import time

from rtdtest import (RTCTL, Knobs, Rtd, Skip, TestUser, api, knob_lock, knobs_as_found, need_root, run, run_tests,
                     test, wait_final, wait_for, wait_state, wait_workers_ready)

CPU = 1
GROUP = "rtddatagrp"
PATH_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
CONF = (f"[Daemon]\nSocketGroup={GROUP}\n[Reserve]\nIRQs=keep\nCheckIntervalSec=0\n[Jobs]\nKillGraceSec=1\n"
        f"[Access]\nSubmitGroup={GROUP}\n")
MiB = 1024 * 1024


class DataRtd:
    """rtd reserving CPU 1; knobs checked on exit. keep=True leaves the directory for a second start."""

    def __init__(self, rtd=None):
        self.rtd = rtd

    def __enter__(self):
        need_root()
        if os.cpu_count() < 2:
            raise Skip("needs 2 CPUs: CPU 0 for housekeeping, CPU 1 reserved")
        subprocess.run(["groupadd", "-f", GROUP], check=True)
        self.knobs = Knobs()
        self.rtd = self.rtd or Rtd(reserve=str(CPU), conf=CONF, name="data")
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


def as_user(u, *cmd):
    return ["setpriv", f"--reuid={u.uid}", f"--regid={pwd.getpwuid(u.uid).pw_gid}", "--init-groups", "--", *cmd]


def uctl(rtd, u, *args, check=None, binary=False):
    cmd = as_user(u, RTCTL, "--socket", rtd.socket, *args)
    if binary:
        return subprocess.run(cmd, capture_output=True, timeout=120)
    return run(cmd, check=check)


def usubmit(rtd, u, *argv, name=None):
    extra = ["--name", name] if name else []
    p = uctl(rtd, u, "submit", "-E", "-e", "PATH=" + PATH_ENV["PATH"], *extra, "--", *argv, check=0)
    return int(p.stdout)


def sha_of_logs(rtd, u, jid, *flags):
    """sha256 and length of what `rtctl logs` prints, streamed through a pipe (never held whole)."""
    p = subprocess.Popen(as_user(u, RTCTL, "--socket", rtd.socket, "logs", *flags, str(jid)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    h, n = hashlib.sha256(), 0
    while True:
        b = p.stdout.read(1 << 20)
        if not b:
            break
        h.update(b)
        n += len(b)
    err = p.stderr.read()
    assert p.wait(120) == 0, (p.returncode, err)
    return h.hexdigest(), n


def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
    return h.hexdigest()


def user_tmp(u):
    d = tempfile.mkdtemp(prefix="rtd-data-")
    os.chown(d, u.uid, -1)
    return d


# ---- point 4: output streamed, every byte, bounded memory ----

@test
def logs_of_50mib_match_the_file():
    with TestUser("rtddata-u1", groups=[GROUP]) as u, DataRtd() as rtd:
        d = user_tmp(u)
        try:
            copy = os.path.join(d, "copy")
            jid = usubmit(rtd, u, "/bin/sh", "-c", f"head -c {50 * MiB} /dev/urandom | tee {copy}")
            assert wait_final(rtd, jid)["state"] == "succeeded"
            want = sha_file(copy)
            assert sha_of_logs(rtd, u, jid) == (want, 50 * MiB)
            assert sha_of_logs(rtd, u, jid, "-f") == (want, 50 * MiB)
        finally:
            subprocess.run(["rm", "-rf", d])


@test
def logs_follow_a_growing_50mib_log_to_the_last_byte():
    with TestUser("rtddata-u1", groups=[GROUP]) as u, DataRtd() as rtd:
        d = user_tmp(u)
        try:
            copy = os.path.join(d, "copy")
            # 50 MiB in 1 MiB steps over ~3 s: rtctl logs -f starts while the job is still writing.
            jid = usubmit(rtd, u, "/bin/sh", "-c",
                          f"for i in $(seq 50); do head -c {MiB} /dev/urandom; sleep 0.05; done | tee {copy}")
            wait_state(rtd, jid, ("running",))
            got = sha_of_logs(rtd, u, jid, "-f")
            j = wait_final(rtd, jid)
            assert j["state"] == "succeeded", j
            assert got == (sha_file(copy), 50 * MiB), got
        finally:
            subprocess.run(["rm", "-rf", d])


def under_asan():
    """Whether the rtd under test was built with AddressSanitizer (its libasan shows in ldd)."""
    p = subprocess.run(["ldd", os.path.join(os.path.dirname(RTCTL), "../daemon/rtd")], capture_output=True, text=True)
    return "libasan" in p.stdout


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@test
def slow_readers_of_a_1gib_log_cost_a_fixed_buffer():
    with TestUser("rtddata-u1", groups=[GROUP]) as u, DataRtd() as rtd:
        # A sparse 1 GiB stdout: the job extends its own output file without writing it.
        jid = usubmit(rtd, u, "/bin/sh", "-c", "truncate -s 1G /proc/self/fd/1")
        assert wait_final(rtd, jid)["state"] == "succeeded"
        before = rss_kb(rtd.pid)
        socks = []
        for i in range(16):
            s = socket.socket(socket.AF_UNIX)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(rtd.socket)
            follow = "&follow=1" if i % 2 else ""
            s.sendall(f"GET /v1/jobs/{jid}/output?stream=stdout{follow} HTTP/1.1\r\nHost: rtd\r\n\r\n".encode())
            socks.append(s)
        try:
            time.sleep(1)
            for s in socks:             # each reads a little, then stalls
                s.settimeout(10)
                assert s.recv(4096).startswith(b"HTTP/1.1 200"), "no answer"
            time.sleep(2)
            after = rss_kb(rtd.pid)
            st, _ = api(rtd, "GET", "/v1/status")
            assert st == 200, "rtd stopped answering with 16 slow readers"
        finally:
            for s in socks:
                s.close()
        print(f"  rtd RSS {before} kB before, {after} kB with 16 slow readers of a 1 GiB log "
              f"(+{after - before} kB)", flush=True)
        assert after - before < 16 * 1024, f"RSS grew by {after - before} kB"


@test
def output_resumes_at_an_offset():
    """What rtctl logs -f asks for after a dropped connection: the rest of the file, nothing twice."""
    with TestUser("rtddata-u1", groups=[GROUP]) as u, DataRtd() as rtd:
        jid = usubmit(rtd, u, "/usr/bin/seq", "100000")
        wait_final(rtd, jid)
        data = "".join(f"{i}\n" for i in range(1, 100001)).encode()
        for q, want in (("offset=5000", data[5000:]), ("offset=5000&follow=1", data[5000:]),
                        (f"offset={len(data)}", b""), ("offset=99999999999", b""), ("offset=0", data)):
            st, body = api(rtd, "GET", f"/v1/jobs/{jid}/output?{q}")
            assert st == 200 and body == want, (q, st, len(body))
        for q in ("offset=-1", "offset=x", "offset=99999999999999999999"):
            st, p = api(rtd, "GET", f"/v1/jobs/{jid}/output?{q}")
            assert st == 400 and "offset" in p["detail"], (q, st, p)


@test
def memory_under_250_connections_holding_full_bodies_stays_within_the_documented_bound():
    """docs/service.md: MaxConnections × (48 KiB + max(MaxRequestBodyBytes, 256 KiB)) at worst."""
    if under_asan():
        raise Skip("rtd is built with AddressSanitizer: its redzones and quarantine make RSS no measure of "
                   "rtd's own bound (the plain build checks it)")
    with DataRtd() as rtd:
        before = rss_kb(rtd.pid)
        body = 1048576 - 1024          # just under MaxRequestBodyBytes= (1 MiB), all but the last byte sent
        socks = []
        try:
            for i in range(250):
                s = socket.socket(socket.AF_UNIX)
                s.connect(rtd.socket)
                s.sendall(f"POST /v1/jobs HTTP/1.1\r\nHost: rtd\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {body}\r\n\r\n".encode() + b" " * (body - 1))
                socks.append(s)
            time.sleep(2)
            after = rss_kb(rtd.pid)
        finally:
            for s in socks:
                s.close()
        print(f"  rtd RSS {before} kB before, {after} kB with 250 connections each holding a ~1 MiB body "
              f"(+{(after - before) // 1024} MiB)", flush=True)
        assert after - before < 250 * (48 + 1024) + 16 * 1024, f"RSS grew by {after - before} kB"

# ---- point 5: data at rest ----

def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def state_dir(rtd):
    return os.path.join(rtd.dir, "state")


def instance(rtd):
    st, s = api(rtd, "GET", "/v1/status")
    return s["jobs"]["store"]["instance"]


@test
def store_and_state_directory_are_private():
    with TestUser("rtddata-u1", groups=[GROUP]) as u, TestUser("rtddata-u2", groups=[GROUP]) as other, \
            DataRtd() as rtd:
        jid = usubmit(rtd, u, "/bin/echo", "u1-secret")
        wait_final(rtd, jid)
        # Another user of the group: not through the API, not through the file system.
        p = uctl(rtd, other, "logs", str(jid))
        assert p.returncode == 1 and "owner" in p.stderr and "u1-secret" not in p.stdout, p
        p = subprocess.run(as_user(other, "cat", os.path.join(state_dir(rtd), "output", instance(rtd),
                                                              f"{jid}.stdout")), capture_output=True, text=True)
        assert p.returncode != 0 and "u1-secret" not in p.stdout, p
        sd = state_dir(rtd)
        assert mode(sd) & 0o077 == 0o011 or mode(sd) & 0o077 == 0, oct(mode(sd))
        for f in ("jobs.db", "jobs.db-wal", "jobs.db-shm"):
            assert mode(os.path.join(sd, f)) == 0o600, (f, oct(mode(os.path.join(sd, f))))
        # What another local user gets: no listing, no reading, not even of the WAL.
        for cmd in (["ls", sd], ["cat", os.path.join(sd, "jobs.db")], ["cat", os.path.join(sd, "jobs.db-wal")]):
            p = subprocess.run(as_user(u, *cmd), capture_output=True, text=True)
            assert p.returncode != 0 and "Permission denied" in p.stderr, (cmd, p)
        # Their own output file is still theirs to open by name (the directories are traversable).
        p = subprocess.run(as_user(u, "cat", os.path.join(sd, "output", instance(rtd), f"{jid}.stdout")),
                           capture_output=True, text=True)
        assert p.returncode == 0, p


@test
def modes_of_an_older_rtd_are_fixed_on_start():
    with TestUser("rtddata-u1", groups=[GROUP]) as u:
        with DataRtd() as rtd:
            jid = usubmit(rtd, u, "/bin/true")
            wait_final(rtd, jid)
            rtd.kill9()         # leaves -wal and -shm behind, as a crash would
            sd = state_dir(rtd)
            for f in ("jobs.db", "jobs.db-wal", "jobs.db-shm"):
                os.chmod(os.path.join(sd, f), 0o644)
            os.chmod(sd, 0o755)
            rtd.start()
            wait_workers_ready(rtd)
            assert mode(sd) == 0o711, oct(mode(sd))
            for f in ("jobs.db", "jobs.db-wal", "jobs.db-shm"):
                assert mode(os.path.join(sd, f)) == 0o600, (f, oct(mode(os.path.join(sd, f))))
            assert api(rtd, "GET", f"/v1/jobs/{jid}")[1]["state"] == "succeeded"


@test
def output_of_an_older_rtd_is_adopted_only_by_its_owner():
    with TestUser("rtddata-u1", groups=[GROUP]) as u, DataRtd() as rtd:
        jid = usubmit(rtd, u, "/bin/sh", "-c", "echo mine; echo err >&2")
        wait_final(rtd, jid)
        inst = os.path.join(state_dir(rtd), "output", instance(rtd))
        legacy = os.path.join(state_dir(rtd), "output")
        rtd.stop()
        # The layout of an older rtd: <id>.stdout directly in output/. Its stderr file there is root's (not
        # the job owner's: from some other store), and job 99 does not exist in this store.
        os.rename(os.path.join(inst, f"{jid}.stdout"), os.path.join(legacy, f"{jid}.stdout"))
        os.unlink(os.path.join(inst, f"{jid}.stderr"))
        with open(os.path.join(legacy, f"{jid}.stderr"), "w") as f:
            f.write("root's old secret\n")
        with open(os.path.join(legacy, "99.stdout"), "w") as f:
            f.write("job 99 of another store\n")
        os.chown(os.path.join(legacy, "99.stdout"), u.uid, -1)
        rtd.start()
        wait_workers_ready(rtd)
        assert uctl(rtd, u, "logs", str(jid), check=0).stdout == "mine\n"
        assert uctl(rtd, u, "logs", "--stderr", str(jid), check=0).stdout == ""
        assert os.path.exists(os.path.join(legacy, f"{jid}.stderr"))
        assert os.path.exists(os.path.join(legacy, "99.stdout")) and not os.path.exists(os.path.join(inst, "99.stdout"))


@test
def a_recreated_store_never_hands_out_old_output():
    with TestUser("rtddata-u1", groups=[GROUP]) as a, TestUser("rtddata-u2", groups=[GROUP]) as b:
        with DataRtd() as rtd:
            for _ in range(2):
                wait_final(rtd, usubmit(rtd, a, "/bin/sh", "-c", "echo a-secret; echo a-secret >&2"))
            rtd.stop()
            for f in os.listdir(state_dir(rtd)):
                if f.startswith("jobs.db"):
                    os.unlink(os.path.join(state_dir(rtd), f))
            rtd.start()
            wait_workers_ready(rtd)
            # The new store's job 1 keeps the CPU busy; b's job 2 waits (queued or handed ahead).
            st, j1 = api(rtd, "POST", "/v1/jobs", {"argv": ["/bin/sleep", "3"], "env": PATH_ENV})
            assert st == 201 and j1["id"] == 1, j1
            j2 = usubmit(rtd, b, "/bin/echo", "b-output")
            assert j2 == 2
            for flags in ((), ("--stderr",)):
                p = uctl(rtd, b, "logs", *flags, str(j2), check=0)
                assert "a-secret" not in p.stdout and p.stdout == "", p.stdout
            st, body = api(rtd, "GET", "/v1/jobs/2/output?stream=stdout")
            assert st == 200 and b"a-secret" not in body, body
            wait_final(rtd, j2)
            assert uctl(rtd, b, "logs", str(j2), check=0).stdout == "b-output\n"


@test
def a_started_job_is_synced_before_it_runs():
    # A queued job's start reaches the disk before the job runs; a job that starts at once on submission is
    # stored once, as it starts, and reaches the disk with the next group sync (docs/jobs.md, "Power cut").
    with DataRtd() as rtd:
        d = tempfile.mkdtemp(prefix="rtd-data-")
        trace = os.path.join(d, "trace")
        st_ = subprocess.Popen(["strace", "-f", "-ttt", "-y", "-e", "trace=fsync,fdatasync", "-o", trace,
                                "-p", str(rtd.pid)], stderr=subprocess.DEVNULL)
        stamps = {k: os.path.join(d, k) for k in ("fresh", "queued")}
        try:
            time.sleep(1)       # strace attached to every thread
            submitted = time.time()
            st, fresh = api(rtd, "POST", "/v1/jobs", {"argv": ["/bin/sh", "-c", f"date +%s.%N > {stamps['fresh']}; "
                                                                "sleep 3"], "env": PATH_ENV})
            assert st == 201, fresh
            # Running, and past the window in which the next job would be handed ahead to the worker: the
            # next one waits in the queue. The fresh job runs 3 s: strace slows rtd's every system call, and
            # under the whole suite rtd saw a 1 s job "running" so late that it had ended before the next came.
            wait_state(rtd, fresh["id"], ("running",))
            wait_for(lambda: os.path.exists(stamps["fresh"]) or None, what="the fresh job's time stamp")
            time.sleep(0.2)
            st, queued = api(rtd, "POST", "/v1/jobs", {"argv": ["/bin/sh", "-c", f"date +%s.%N > {stamps['queued']}"],
                                                       "env": PATH_ENV})
            assert st == 201 and queued["state"] == "queued", \
                (queued, api(rtd, "GET", f"/v1/jobs/{fresh['id']}")[1], api(rtd, "GET", "/v1/status")[1].get("jobs"))
            assert wait_final(rtd, fresh["id"])["state"] == "succeeded"
            assert wait_final(rtd, queued["id"])["state"] == "succeeded"
            time.sleep(1)       # the group sync after the last start
        finally:
            st_.terminate()
            st_.wait(10)
        started = {k: float(open(v).read()) for k, v in stamps.items()}
        # (thread, time) of each flush of the WAL: rtd's loop is its main thread; the group sync another.
        syncs = [(int(l.split()[0]), float(l.split()[1])) for l in open(trace) if "jobs.db-wal" in l and "sync(" in l]
        subprocess.run(["rm", "-rf", d])
        assert [t for tid, t in syncs if tid == rtd.pid and submitted < t <= started["queued"]], \
            f"rtd did not flush the WAL before the queued job ran ({syncs}, {started}, rtd {rtd.pid})"
        assert [t for tid, t in syncs if tid != rtd.pid and t > submitted], \
            f"the fresh job's start was never synced by the group sync ({syncs}, {started}, rtd {rtd.pid})"


def sql(rtd, query, *args):
    import sqlite3
    c = sqlite3.connect(os.path.join(state_dir(rtd), "jobs.db"))
    try:
        r = c.execute(query, args).fetchall()
        c.commit()
        return r
    finally:
        c.close()


@test
def a_job_started_before_a_power_cut_never_runs_again():
    with DataRtd() as rtd:
        d = tempfile.mkdtemp(prefix="rtd-data-")
        ran = os.path.join(d, "ran")
        try:
            st, j = api(rtd, "POST", "/v1/jobs", {"argv": ["/bin/sh", "-c", f"echo ran >> {ran}"], "env": PATH_ENV})
            assert wait_final(rtd, j["id"])["state"] == "succeeded"
            rtd.stop()
            # What a power cut can leave: the store says "starting" (synced before the hand-over, in an
            # earlier boot), the files the job's child made were still in the page cache and are gone.
            sql(rtd, "UPDATE jobs SET state = 'starting', data = json_set(data, '$.state', 'starting', "
                "'$.boot_id', '00000000-0000-0000-0000-000000000000', '$.pid', 0) WHERE id = ?", j["id"])
            for top, _, files in os.walk(os.path.join(state_dir(rtd), "output")):
                for f in files:
                    if f.startswith(f"{j['id']}."):
                        os.unlink(os.path.join(top, f))
            rtd.start()
            wait_workers_ready(rtd)
            after = wait_final(rtd, j["id"])
            time.sleep(1)
            assert after["state"] == "lost", after
            assert open(ran).read() == "ran\n", "the job ran again"
        finally:
            subprocess.run(["rm", "-rf", d])



@test
def output_of_a_job_whose_record_a_power_cut_lost_is_never_served():
    # A job that starts at once on submission reaches the disk with the next group sync (docs/jobs.md, "Power
    # cut"): a power cut before it can take the job's record and leave its output files, and the job's id goes
    # to the next job. Here user 1's job ran and its record is gone, as such a cut leaves it.
    with TestUser("rtddata-u1", groups=[GROUP]) as u1, TestUser("rtddata-u2", groups=[GROUP]) as u2, \
            DataRtd() as rtd:
        jid = usubmit(rtd, u1, "/bin/sh", "-c", "echo secret-of-u1; echo secret-err >&2")
        assert wait_final(rtd, jid)["state"] == "succeeded"
        out = os.path.join(state_dir(rtd), "output", instance(rtd))
        assert sorted(f for f in os.listdir(out) if f.startswith(f"{jid}.")) == [f"{jid}.stderr", f"{jid}.stdout"]
        rtd.stop()
        sql(rtd, "DELETE FROM jobs WHERE id = ?", jid)
        rtd.start()
        wait_workers_ready(rtd)
        assert not [f for f in os.listdir(out) if f.startswith(f"{jid}.")], os.listdir(out)
        assert f"Removed {jid}.stdout: the store has no job {jid}" in rtd.read_log()
        # The id is given again, to user 2's job, which is served its own output only.
        jid2 = usubmit(rtd, u2, "/bin/true")
        assert jid2 == jid, (jid2, jid)
        assert wait_final(rtd, jid2)["state"] == "succeeded"
        for stream in ("stdout", "stderr"):
            p = uctl(rtd, u2, "logs", *(["--stderr"] if stream == "stderr" else []), str(jid2), check=0)
            assert "secret" not in p.stdout + p.stderr, (stream, p)

# ---- point 6: safe to print ----

@test
def control_characters_in_job_names_are_refused():
    with TestUser("rtddata-u1", groups=[GROUP]) as u, DataRtd() as rtd:
        for name in ("a\x1b[2Jb", "a\u009b2Jb", "a\u0085b", "tab\there", "a\x7fb"):
            st, p = api(rtd, "POST", "/v1/jobs", {"argv": ["/bin/true"], "name": name, "env": PATH_ENV})
            assert st == 400 and p["title"] == "Invalid job spec" and p["detail"].startswith("name:"), (name, st, p)
        p = uctl(rtd, u, "submit", "--name", "x\u009b31my", "--", "/bin/true")
        assert p.returncode == 1 and "name" in p.stderr, p
        st, page = api(rtd, "GET", "/v1/jobs")
        assert page["jobs"] == [], page         # nothing was created
        assert usubmit(rtd, u, "/bin/true", name="ünïcode ok") > 0


CONTROL = [bytes([c]) for c in range(0x20) if c != 0x0a] + [b"\x7f"] + [bytes([0xc2, c]) for c in range(0x80, 0xa0)]


def raw_controls(data):
    return [c for c in CONTROL if c in data]


@test
def rtctl_escapes_what_it_prints():
    with TestUser("rtddata-u1", groups=[GROUP]) as u, DataRtd() as rtd:
        d = user_tmp(u)
        try:
            # A command whose name, arguments and working directory carry terminal escapes.
            evil = os.path.join(d, "x\x1b]0;owned\x07\x1b[2J\u009b31m")
            os.mkdir(evil)
            os.chown(evil, u.uid, -1)
            prog = os.path.join(evil, "run\x1b[1;31m")
            os.symlink("/bin/echo", prog)
            jid = usubmit(rtd, u, prog, "arg\x1b[5m\u009b1m", "\x07bell")
            p = uctl(rtd, u, "submit", "-C", evil, "-E", "-e", "PATH=/bin", "--", prog, "cwd", check=0)
            jid2 = int(p.stdout)
            wait_final(rtd, jid)
            wait_final(rtd, jid2)
            for args in (("list",), ("show", str(jid)), ("show", str(jid2)), ("wait", str(jid2))):
                out = subprocess.run([RTCTL, "--socket", rtd.socket, *args], capture_output=True, timeout=60)
                assert out.returncode == 0, (args, out)
                assert not raw_controls(out.stdout + out.stderr), (args, raw_controls(out.stdout), out.stdout)
            show = subprocess.run([RTCTL, "--socket", rtd.socket, "show", str(jid2)], capture_output=True).stdout
            assert b"\\x1b]0;owned\\x07" in show and b"\\u009b31m" in show, show     # escaped, still legible
            # logs prints the job's bytes as they are.
            out = subprocess.run([RTCTL, "--socket", rtd.socket, "logs", str(jid)], capture_output=True).stdout
            assert out == "arg\x1b[5m\u009b1m \x07bell\n".encode(), out
        finally:
            subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    _lock = knob_lock() if os.geteuid() == 0 else None
    run_tests()
