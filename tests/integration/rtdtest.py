# SPDX-License-Identifier: MIT
"""Harness for integration tests: start the real rtd on a temporary socket, drive it with rtctl and curl.

Tests are plain functions registered with @test; run() executes them, prints one line each and the closing
"N passed, N failed, N skipped" line, and exits 0 (all passed), 1 (a failure) or 77 (nothing could run).
rtd runs in a private PID namespace (unshare --pid --fork --mount-proc) so its affinity backend sees only
the test's own processes. Everything the harness starts is stopped by pid.
"""
import fcntl
import json
import os
import pwd
import http.client
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

BUILD = os.environ.get("RTD_BUILD_DIR") or os.path.join(os.path.dirname(__file__), "../../build")
SOURCE = os.environ.get("RTD_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
RTD = os.path.join(BUILD, "daemon/rtd")
RTCTL = os.path.join(BUILD, "client/rtctl")
KNOB_LOCK = "/tmp/rtd-knobs.lock"

_tests = []


class Skip(Exception):
    pass


def test(fn):
    _tests.append(fn)
    return fn


def need_root():
    if os.geteuid() != 0:
        raise Skip("needs root")


class Knobs:
    """Snapshot of the global knobs rtd may touch, to prove the machine is left as found."""

    SYSCTLS = ["kernel/sched_rt_runtime_us", "kernel/timer_migration", "vm/stat_interval"]

    def __init__(self):
        self.state = self.read()

    @staticmethod
    def read():
        s = {}
        for d in sorted(os.listdir("/proc/irq")):
            p = f"/proc/irq/{d}/smp_affinity_list"
            if d.isdigit() and os.path.exists(p):
                try:
                    s["irq" + d] = open(p).read().strip()
                except OSError:
                    pass
        s["default_smp_affinity"] = open("/proc/irq/default_smp_affinity").read().strip()
        for k in Knobs.SYSCTLS:
            try:
                s[k] = open("/proc/sys/" + k).read().strip()
            except OSError:
                pass
        try:
            s["wq"] = open("/sys/devices/virtual/workqueue/cpumask").read().strip()
        except OSError:
            pass
        return s

    def diff(self):
        now = self.read()
        return {k: (v, now.get(k)) for k, v in self.state.items() if now.get(k) != v}

    def restore(self):
        """Last resort after a failed test: write back what differs (IRQs may vanish: ignore those)."""
        for k, (old, _new) in self.diff().items():
            if k.startswith("irq"):
                path = f"/proc/irq/{k[3:]}/smp_affinity_list"
            elif k == "default_smp_affinity":
                path = "/proc/irq/default_smp_affinity"
            elif k == "wq":
                path = "/sys/devices/virtual/workqueue/cpumask"
            else:
                path = "/proc/sys/" + k
            try:
                with open(path, "w") as f:
                    f.write(old)
            except OSError:
                pass


class Rtd:
    """One rtd under test, with its own config, socket, state and runtime directories."""

    def __init__(self, conf="", reserve="none", pidns=True, metrics_port=None, name="rtd"):
        self.dir = tempfile.mkdtemp(prefix=f"rtd-test-{name}-")
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "rtd.sock")
        self.config = os.path.join(self.dir, "rtd.conf")
        self.log = os.path.join(self.dir, "rtd.log")
        self.pidns = pidns
        self.proc = None
        self.binary = RTD       # a test may run a copy it replaces (test-reexec.py)
        listen = f"127.0.0.1:{metrics_port}" if metrics_port else "no"
        self.write_config(
            f"[Daemon]\nSocket={self.socket}\nMetricsListen={listen}\nStateDirectory={self.dir}/state\n"
            f"RuntimeDirectory={self.dir}/run\nLogLevel=debug\n[Reserve]\nCPUs={reserve}\n" + conf
        )

    def write_config(self, text):
        with open(self.config, "w") as f:
            f.write(text)

    def start(self, args=(), wait=True, env=None):
        cmd = [self.binary, "--config", self.config, *args]
        if self.pidns:
            cmd = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL", *cmd]
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"rtd exited with {self.proc.returncode}:\n{self.read_log()}")
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.socket)
                s.close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("rtd did not listen within %ss:\n%s" % (timeout, self.read_log()))

    def read_log(self):
        try:
            return open(self.log, errors="replace").read()
        except OSError:
            return ""

    @property
    def pid(self):
        """Host pid of rtd itself (the child of unshare when in a PID namespace)."""
        if not self.pidns:
            return self.proc.pid
        for _ in range(100):
            try:
                kids = open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read().split()
                if kids:
                    return int(kids[0])
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("cannot find rtd's pid")

    def signal(self, sig):
        os.kill(self.pid, sig)

    def stop(self, sig=None, timeout=30):
        sig = sig or signal.SIGTERM
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        try:
            self.signal(sig)
        except (ProcessLookupError, AssertionError):
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("rtd did not stop within %ss" % timeout)
        return self.proc.returncode

    def kill9(self):
        """Crash rtd: SIGKILL to rtd itself; the namespace (and its workers) go with it."""
        self.signal(signal.SIGKILL)
        self.proc.wait(30)

    def cleanup(self):
        try:
            if self.proc and self.proc.poll() is None:
                self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def ctl(self, *args, user=None, check=None, input=None, timeout=60, env=None):
        cmd = [RTCTL, "--socket", self.socket, *args]
        return run(cmd, user=user, check=check, input=input, timeout=timeout, env=env)

    def ctl_json(self, *args, user=None):
        p = self.ctl("--json", *args, user=user)
        assert p.returncode == 0, f"rtctl {' '.join(args)} failed ({p.returncode}): {p.stderr}"
        return json.loads(p.stdout)

    def http(self, method, path, body=None, user=None, headers=()):
        """Raw HTTP with curl --unix-socket. Returns (status, headers dict, body text)."""
        cmd = ["curl", "-s", "-i", "--unix-socket", self.socket, "-X", method, "http://rtd" + path]
        for h in headers:
            cmd += ["-H", h]
        if body is not None:
            cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
        p = run(cmd, user=user, input=body if isinstance(body, (str, bytes)) or body is None else json.dumps(body))
        return parse_http(p.stdout)


# ---------------------------------------------------------------- the API as root, and jobs
FINAL = ("succeeded", "failed", "cancelled", "timed_out", "lost")


class UnixHTTP(http.client.HTTPConnection):
    """http.client over rtd's control socket (Content-Length and chunked replies alike)."""

    def __init__(self, path, timeout=30):
        super().__init__("rtd", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def api(rtd, method, path, body=None, timeout=30):
    """One request as root (an admin): (status, parsed JSON, or the raw bytes when not JSON)."""
    c = UnixHTTP(rtd.socket, timeout)
    try:
        c.request(method, path, body=None if body is None else json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data
    finally:
        c.close()


def job(rtd, jid):
    st, j = api(rtd, "GET", f"/v1/jobs/{jid}")
    assert st == 200, (st, j)
    return j


def wait_for(fn, timeout=10, what="condition", interval=0.02):
    """fn()'s first true value within timeout, else an AssertionError naming what was awaited."""
    end = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() >= end:
            raise AssertionError(f"{what} not reached within {timeout}s")
        time.sleep(interval)


def wait_state(rtd, jid, states, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        j = job(rtd, jid)
        if j["state"] in states:
            return j
        time.sleep(0.02)
    raise AssertionError(f"job {jid} not in {states} within {timeout}s: {job(rtd, jid)}")


def wait_final(rtd, jid, timeout=60):
    return wait_state(rtd, jid, FINAL, timeout)


# ---------------------------------------------------------------- the API as a user, an rtd open to a group
def uapi(rtd, u, method, path, body=None):
    """As the unprivileged user u (curl under setpriv): (status, parsed body)."""
    gid = pwd.getpwuid(u.uid).pw_gid
    cmd = ["setpriv", f"--reuid={u.uid}", f"--regid={gid}", "--init-groups", "--", "curl", "-s", "-w",
           "\n%{http_code}", "--unix-socket", rtd.socket, "-X", method, "http://rtd" + path]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
    p = run(cmd)
    text, _, code = p.stdout.rpartition("\n")
    try:
        data = json.loads(text)
    except ValueError:
        data = text
    return int(code or 0), data


def usubmit(rtd, u, spec, expect=201):
    spec.setdefault("env", {"PATH": "/usr/bin:/bin"})
    st, j = uapi(rtd, u, "POST", "/v1/jobs", spec)
    assert st == expect, f"POST {spec} as {u.name} → {st} {j}"
    return j


def output(rtd, jid, stream="stdout"):
    st, data = api(rtd, "GET", f"/v1/jobs/{jid}/output?stream={stream}")
    assert st == 200, (st, data)
    return data.decode() if isinstance(data, bytes) else json.dumps(data)


def n_jobs(rtd):
    st, j = api(rtd, "GET", "/v1/jobs?limit=1000")
    assert st == 200, j
    return len(j["jobs"])


def assert_refusal(st, body, status, *words):
    assert st == status, (st, body)
    text = json.dumps(body)
    for w in words:
        assert w in text, f"{w!r} not in refusal {text}"


class SubmitGroupRtd:
    """rtd reserving CPU 1 in a private PID namespace, its socket and submissions open to group, IRQs kept, its
    workers ready; optionally its state directory on a tmpfs of that size (a disk that fills). The global
    knobs must be as found at the end (restored and reported otherwise)."""

    def __init__(self, group, conf="", state_tmpfs=None, name="rtd"):
        self.group = group
        self.conf = conf
        self.state_tmpfs = state_tmpfs
        self.name = name

    def __enter__(self):
        need_root()
        if os.cpu_count() < 2:
            raise Skip("needs 2 CPUs: CPU 0 for housekeeping, CPU 1 reserved")
        subprocess.run(["groupadd", "-f", self.group], check=True)
        self.knobs = Knobs()
        conf = (f"[Daemon]\nSocketGroup={self.group}\n[Reserve]\nIRQs=keep\nCheckIntervalSec=0\n[Jobs]\n"
                f"KillGraceSec=1\n[Access]\nSubmitGroup={self.group}\n")
        self.rtd = Rtd(reserve="1", conf=conf + self.conf, name=self.name)
        self.mounted = None
        try:
            if self.state_tmpfs:
                self.mounted = os.path.join(self.rtd.dir, "state")
                os.makedirs(self.mounted)
                subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.state_tmpfs},mode=0755", self.name,
                                self.mounted], check=True)
            self.rtd.start()
            wait_workers_ready(self.rtd)
        except BaseException:
            self.cleanup()
            raise
        return self.rtd

    def cleanup(self):
        try:
            self.rtd.stop()
        finally:
            if self.mounted:
                subprocess.run(["umount", "-l", self.mounted], capture_output=True)
            self.rtd.cleanup()

    def __exit__(self, *exc):
        self.cleanup()
        knobs_as_found(self.knobs, exc[0])


def wait_workers_ready(rtd, timeout=10):
    """rtd's workers, once every one is idle or busy (started and pinned)."""
    end = time.time() + timeout
    s = None
    while time.time() < end:
        st, s = api(rtd, "GET", "/v1/status")
        ws = (s.get("jobs") or {}).get("workers", []) if st == 200 else []
        if ws and all(w["state"] in ("idle", "busy") for w in ws):
            return ws
        time.sleep(0.05)
    raise AssertionError(f"no worker became ready: {s}")


def knobs_as_found(knobs, exc_type):
    """Put back every global knob rtd left changed; a test that passed otherwise fails for it."""
    diff = knobs.diff()
    if diff:
        knobs.restore()
        if not exc_type:
            raise AssertionError(f"rtd left global knobs changed: {diff}")


def parse_http(raw):
    raw = raw.replace("\r\n", "\n")
    head, _, body = raw.partition("\n\n")
    lines = head.split("\n")
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    headers = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body


def as_user(cmd, user):
    """cmd run as user (with the user's groups), or as it is when user is None."""
    if user is None:
        return cmd
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--", *cmd]


def run(cmd, user=None, check=None, input=None, timeout=60, env=None):
    cmd = as_user(cmd, user)
    p = subprocess.run(cmd, capture_output=True, text=True, input=input, timeout=timeout, env=env)
    if check is not None and p.returncode != check:
        raise AssertionError(f"{cmd} exited {p.returncode}, expected {check}\nstdout: {p.stdout}\n"
                             f"stderr: {p.stderr}")
    return p


class TestUser:
    """A throwaway unprivileged user, optionally in a group; removed afterwards."""

    def __init__(self, name, groups=()):
        self.name = name
        self.groups = list(groups)

    def __enter__(self):
        for g in self.groups:
            subprocess.run(["groupadd", "-f", g], check=True)
        subprocess.run(["userdel", "-r", self.name], capture_output=True)
        cmd = ["useradd", "-M", "-s", "/bin/sh", self.name]
        if self.groups:
            cmd += ["-G", ",".join(self.groups)]
        subprocess.run(cmd, check=True)
        self.uid = pwd.getpwnam(self.name).pw_uid
        return self

    def __exit__(self, *exc):
        subprocess.run(["userdel", self.name], capture_output=True)


def knob_lock():
    """Serialise everything that may change global knobs (other suites, benchmarks, parallel runs)."""
    f = open(KNOB_LOCK, "w")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def run_tests(name=None):
    only = sys.argv[1:]
    passed = failed = skipped = 0
    for t in _tests:
        if only and t.__name__ not in only:
            continue
        start = time.time()
        try:
            t()
            passed += 1
            print(f"PASS {t.__name__} ({time.time() - start:.1f}s)", flush=True)
        except Skip as e:
            skipped += 1
            print(f"SKIP {t.__name__}: {e}", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {t.__name__} ({time.time() - start:.1f}s)", flush=True)
            traceback.print_exc()
            sys.stdout.flush()
    print(f"{passed} passed, {failed} failed, {skipped} skipped", flush=True)
    if failed:
        sys.exit(1)
    if passed == 0 and skipped:
        sys.exit(77)
    sys.exit(0)


def run_pty(cmd, user=None, env=None, timeout=60):
    """cmd with its stderr on a pseudo-terminal and its stdout a pipe, as a person at a terminal who pipes the
    output somewhere: (exit code, stdout text, every byte the terminal got, as text)."""
    import pty
    import select
    master, slave = pty.openpty()
    p = subprocess.Popen(as_user(cmd, user), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                         env=env)
    os.close(slave)
    tty = b""
    end = time.time() + timeout
    try:
        while time.time() < end:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:         # EIO: the last holder of the terminal's other end is gone
                    break
                if not chunk:
                    break
                tty += chunk
            elif p.poll() is not None:
                break
        else:
            p.kill()
            p.wait()
            raise AssertionError(f"{cmd} did not end within {timeout} s; the terminal got {tty!r}")
        out = p.stdout.read().decode()
        return p.wait(timeout), out, tty.decode(errors="replace")
    finally:
        os.close(master)
        p.stdout.close()


def host_pid_of(rtd, comm):
    """The host pid of the process named comm in rtd's PID namespace."""
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if open(f"/proc/{p}/comm").read().strip() == comm and \
                        os.readlink(f"/proc/{p}/ns/pid") == os.readlink(f"/proc/{rtd.pid}/ns/pid"):
                    return int(p)
            except OSError:
                pass
    raise AssertionError(f"no {comm} in rtd's namespace")


def stop_process(proc, grace=30):
    """Ends a process the test started (a subprocess.Popen or None): SIGTERM, then SIGKILL after grace s."""
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
