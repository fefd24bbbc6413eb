#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reservation for real, as root, on the host: rtd (affinity backend) in a private PID namespace whose init
is a plain `sleep`, so tasks survive a crashed rtd. Every test snapshots every knob (IRQ masks, sysctls,
workqueue masks, task affinities of the namespace) first and proves it is back exactly afterwards: after
rtctl release, SIGTERM, kill -9 + rtd --restore, kill -9 + restart + stop. A failed test still puts the
knobs back itself (rtd --restore in the namespace, then the snapshot). Holds /tmp/rtd-knobs.lock."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from rtdtest import RTCTL, RTD, Knobs, Skip, TestUser, knob_lock, need_root, run, run_tests, test

RESERVED = "1"
HOUSEKEEPING = "0"
CONF = ("[Reserve]\nCheckIntervalSec=1\n"
        "[Tuning]\nRTRuntimeUSec=980000\nTimerMigration=0\nStatIntervalSec=2\n")
WQ = "/sys/devices/virtual/workqueue"


def cpulist(s):
    out = set()
    for part in s.strip().split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def mask_cpus(s):
    v = int(s.strip().replace(",", ""), 16)
    return {i for i in range(v.bit_length()) if v >> i & 1}


class AllKnobs(Knobs):
    """rtdtest.Knobs plus every workqueue cpumask."""

    @staticmethod
    def read():
        s = Knobs.read()
        for d in sorted(os.listdir(WQ)):
            p = f"{WQ}/{d}/cpumask"
            if os.path.isfile(p):
                s["wq/" + d] = open(p).read().strip()
        return s

    def restore(self):
        for k, (old, _new) in self.diff().items():
            if k.startswith("wq/"):
                try:
                    open(f"{WQ}/{k[3:]}/cpumask", "w").write(old)
                except OSError:
                    pass
        super().restore()


def starttime(pid):
    st = open(f"/proc/{pid}/stat").read()
    return int(st[st.rindex(")") + 2:].split()[19])


def ns_inode(pid):
    return os.stat(f"/proc/{pid}/ns/pid").st_ino


class Namespace:
    """A PID namespace with `sleep` as init; rtd and helper tasks enter it with nsenter."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rtd-test-reserve-")
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "rtd.sock")
        self.config = os.path.join(self.dir, "rtd.conf")
        self.runtime = os.path.join(self.dir, "run")
        self.log = os.path.join(self.dir, "rtd.log")
        self.holder = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL",
                                        "sleep", "infinity"], start_new_session=True)
        self.init = self._child(self.holder.pid)
        self.inode = ns_inode(self.init)
        self.rtd = None
        self.helpers = []

    @staticmethod
    def _child(pid):
        for _ in range(200):
            try:
                kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
                if kids:
                    return int(kids[0])
            except OSError:
                pass
            time.sleep(0.02)
        raise AssertionError(f"no child of {pid}")

    def cmd(self, *argv):
        return ["nsenter", "-t", str(self.init), "-p", "-m", "--", *argv]

    def write_config(self, reserve="none", extra=CONF, daemon=""):
        with open(self.config, "w") as f:
            f.write(f"[Daemon]\nSocket={self.socket}\nMetricsListen=no\nStateDirectory={self.dir}/state\n"
                    f"RuntimeDirectory={self.runtime}\nLogLevel=debug\n{daemon}[Reserve]\nCPUs={reserve}\n{extra}")

    def spawn(self, *argv):
        """A helper task inside the namespace; returns its host pid."""
        p = subprocess.Popen(self.cmd(*argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        self.helpers.append(p)
        return self._child(p.pid)

    def start_rtd(self, argv=None):
        logf = open(self.log, "ab")
        self.rtd = subprocess.Popen(self.cmd(*(argv or [RTD, "--config", self.config])), stdout=logf,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self.rtd_pid = self._child(self.rtd.pid)
        except AssertionError:
            raise AssertionError(f"rtd did not start (exit {self.rtd.poll()}):\n{self.read_log()}")
        end = time.time() + 30
        while time.time() < end:
            if self.rtd.poll() is not None:
                raise AssertionError(f"rtd exited with {self.rtd.returncode}:\n{self.read_log()}")
            if os.path.exists(self.socket) and self.ctl("status").returncode == 0:
                return
            time.sleep(0.05)
        raise AssertionError("rtd did not come up:\n" + self.read_log())

    def read_log(self, tail=6000):
        """rtd's log, its last tail characters (for a failure's message) or whole (tail=None, to search it)."""
        try:
            text = open(self.log, errors="replace").read()
        except OSError:
            return ""
        return text[-tail:] if tail else text

    def stop_rtd(self, sig=signal.SIGTERM):
        if not self.rtd or self.rtd.poll() is not None:
            return None
        os.kill(self.rtd_pid, sig)
        try:
            self.rtd.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(self.rtd_pid, signal.SIGKILL)
            self.rtd.wait(10)
            raise AssertionError("rtd did not stop within 30s")
        return self.rtd.returncode

    def restore(self):
        return run(self.cmd(RTD, "--config", self.config, "--restore"))

    def ctl(self, *args, user=None):
        return run([RTCTL, "--socket", self.socket, *args], user=user)

    def ctl_json(self, *args):
        p = self.ctl("--json", *args)
        assert p.returncode == 0, f"rtctl {' '.join(args)}: {p.returncode} {p.stderr}"
        return json.loads(p.stdout)

    def tasks(self):
        """{(host tid, starttime): (comm, allowed CPUs)} of every live task in the namespace."""
        out = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                if ns_inode(d) != self.inode:
                    continue
                for t in os.listdir(f"/proc/{d}/task"):
                    status = open(f"/proc/{d}/task/{t}/status").read()
                    if "\nState:\tZ" in status:
                        continue        # a zombie (the namespace's init never reaps) runs nowhere
                    allowed = [l.split(":", 1)[1].strip() for l in status.splitlines()
                               if l.startswith("Cpus_allowed_list:")][0]
                    comm = open(f"/proc/{d}/task/{t}/comm").read().strip()
                    out[(int(t), starttime(t))] = (comm, allowed, int(d))
            except (OSError, IndexError):
                continue
        return out

    def descendants(self, pid):
        """pid's descendants (host pids): rtd's workers and jobs."""
        kids, todo = set(), [pid]
        while todo:
            p = todo.pop()
            try:
                for t in os.listdir(f"/proc/{p}/task"):
                    for c in open(f"/proc/{p}/task/{t}/children").read().split():
                        if int(c) not in kids:
                            kids.add(int(c))
                            todo.append(int(c))
            except OSError:
                pass
        return kids

    def journal(self):
        return os.path.join(self.runtime, "restore.json")

    def close(self):
        try:
            self.stop_rtd()
        except Exception:
            pass
        for p in self.helpers:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.killpg(self.holder.pid, signal.SIGKILL)
        except OSError:
            pass
        self.holder.wait(10)
        subprocess.run(["rm", "-rf", self.dir])


class Scenario:
    """Lock, namespace with helper tasks, snapshot; on exit: put everything back whatever happened."""

    def __enter__(self):
        need_root()
        if os.cpu_count() < 2:
            raise Skip("needs at least 2 CPUs")
        if not os.path.exists("/proc/irq/default_smp_affinity"):
            raise Skip("no /proc/irq")
        self.lock = knob_lock()
        self.ns = Namespace()
        ns = self.ns
        # Tasks that exist before the reservation: free, pinned to the CPU to reserve, multi-threaded.
        ns.spawn("sleep", "1000")
        ns.spawn("taskset", "-c", RESERVED, "sleep", "1000")
        ns.spawn("/usr/bin/python3", "-c",
                 "import threading,time\n"
                 "ts=[threading.Thread(target=time.sleep,args=(1000,)) for _ in range(3)]\n"
                 "[t.start() for t in ts]\ntime.sleep(1000)")
        # Wait for the helpers to be up (python's threads take a while on a loaded machine).
        end = time.time() + 20
        while time.time() < end:
            comms = [v[0] for v in ns.tasks().values()]
            if len(comms) >= 7 and comms.count("sleep") >= 2:   # and taskset has pinned its sleep
                break
            time.sleep(0.1)
        self.knobs = AllKnobs()
        self.tasks = ns.tasks()
        assert len(self.tasks) >= 7, self.tasks
        return self

    def __exit__(self, *exc):
        try:
            self.ns.stop_rtd()
            if AllKnobs.read() != self.knobs.state and os.path.exists(self.ns.journal()):
                self.ns.restore()
            if self.knobs.diff():
                print("test-reserve: putting back by hand:", self.knobs.diff(), flush=True)
                self.knobs.restore()
        finally:
            self.ns.close()
            self.lock.close()
        return False

    def assert_restored(self, what):
        diff = self.knobs.diff()
        assert not diff, f"after {what}, knobs differ from the snapshot: {diff}"
        now = self.ns.tasks()
        # A task that exec'd since the snapshot (taskset, nsenter) is another program, pinned as it chose.
        changed = {k: (v, now[k]) for k, v in self.tasks.items()
                   if k in now and now[k][0] == v[0] and now[k][1] != v[1]}
        assert not changed, f"after {what}, task affinities differ: {changed}"
        survivors = [k for k in self.tasks if k in now]
        assert len(survivors) >= 6, f"helper tasks died: {survivors}"
        assert not os.path.exists(self.ns.journal()), f"journal left after {what}"

    def assert_reserved(self):
        ns = self.ns
        hk = cpulist(HOUSEKEEPING)
        st = ns.ctl_json("status")
        res = st["reservation"]
        assert res["state"] == "active" and res["reserved"] == RESERVED and res["housekeeping"] == HOUSEKEEPING, res
        assert res["backend"] == "affinity", res
        # IRQs: every movable one on housekeeping CPUs, every other one listed as unmovable.
        unmovable = {u["irq"] for u in res["irqs"]["unmovable"]}
        for d in os.listdir("/proc/irq"):
            p = f"/proc/irq/{d}/smp_affinity_list"
            if d.isdigit() and os.path.exists(p):
                cpus = cpulist(open(p).read())
                assert cpus <= hk or int(d) in unmovable, f"IRQ {d} on {cpus}, not listed unmovable: {res['irqs']}"
        for u in res["irqs"]["unmovable"]:
            assert u["reason"] and u["remedy"] and "reserved_cpus_hit" in u, u
        assert mask_cpus(open("/proc/irq/default_smp_affinity").read()) <= hk
        # Sysctls as configured, and the knob report says original → current.
        assert open("/proc/sys/kernel/sched_rt_runtime_us").read().strip() == "980000"
        assert open("/proc/sys/kernel/timer_migration").read().strip() == "0"
        assert open("/proc/sys/vm/stat_interval").read().strip() == "2"
        knobs = {k["name"]: k for k in res["knobs"]}
        k = knobs["kernel.sched_rt_runtime_us"]
        assert k["original"] == self.knobs.state["kernel/sched_rt_runtime_us"] and k["current"] == "980000", k
        assert knobs["fair_server.runtime"]["why"], knobs       # left alone here, and says why
        # Workqueue masks on housekeeping CPUs.
        assert mask_cpus(open(f"{WQ}/cpumask").read()) <= hk
        # Every task of the namespace but rtd's workers and jobs is on housekeeping CPUs.
        own = ns.descendants(ns.rtd_pid)
        for (tid, _), (comm, allowed, tgid) in ns.tasks().items():
            if tgid in own:
                continue
            assert cpulist(allowed) <= hk, f"task {tid} ({comm}) allowed on {allowed}"
        assert os.path.exists(ns.journal())
        j = json.load(open(ns.journal()))
        assert j["version"] == 1 and j["entries"], j
        return res


FORKER = """import os, time
for i in range(300):
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
    time.sleep(0.002)
time.sleep(60)
"""


@test
def tasks_forked_during_the_walk_are_caught():
    """A task forked while rtd walks /proc, by a parent it has not moved yet, inherits the old mask. rtd
    walks again until a pass finds nothing to move, so once `rtctl reserve` returns no task of the
    namespace may run on the reserved CPU, without waiting for the drift check (off here)."""
    with Scenario() as s:
        ns = s.ns
        ns.write_config("none", extra=CONF.replace("CheckIntervalSec=1", "CheckIntervalSec=0"))
        ns.start_rtd()
        forker = ns.spawn("/usr/bin/python3", "-c", FORKER)
        time.sleep(0.1)         # forking at ~400 tasks/s while rtd reserves
        p = ns.ctl("reserve", RESERVED)
        assert p.returncode == 0, p.stderr
        own = ns.descendants(ns.rtd_pid)
        tasks = ns.tasks()
        stray = {tid: (comm, allowed) for (tid, _), (comm, allowed, tgid) in tasks.items()
                 if tgid not in own and not cpulist(allowed) <= cpulist(HOUSEKEEPING)}
        born = len(ns.descendants(forker))
        assert born >= 20, f"the forker made only {born} tasks: the test did not exercise anything"
        assert not stray, f"{len(stray)} of {len(tasks)} tasks still allowed on reserved CPUs: {stray}"
        print(f"  {born} tasks forked around the reservation, none left on CPU {RESERVED}")
        os.kill(forker, signal.SIGKILL)
        p = ns.ctl("release")
        assert p.returncode == 0, p.stderr


@test
def release_restores_everything():
    with Scenario() as s:
        ns = s.ns
        ns.write_config("none")
        ns.start_rtd()
        assert ns.ctl_json("status")["reservation"]["state"] == "none"
        p = ns.ctl("reserve", RESERVED)
        assert p.returncode == 0, p.stderr
        assert f"active: CPU {RESERVED} reserved" in p.stdout and "Backend: affinity" in p.stdout, p.stdout
        s.assert_reserved()
        # Human status shows the reservation, knobs original → current, drift counts.
        p = ns.ctl("status")
        assert "active: CPU 1 reserved" in p.stdout and "kernel.sched_rt_runtime_us" in p.stdout, p.stdout
        assert "Drift check: every 1s" in p.stdout and "950000 → 980000" in p.stdout, p.stdout

        # A task started later from an unconfined parent (nsenter runs outside) lands on every CPU; the
        # drift check catches it within CheckIntervalSec=1.
        late = ns.spawn("sleep", "1000")
        assert cpulist(open(f"/proc/{late}/status").read().split("Cpus_allowed_list:")[1].split()[0]) == {0, 1}
        end = time.time() + 5
        while time.time() < end:
            allowed = open(f"/proc/{late}/status").read().split("Cpus_allowed_list:")[1].split()[0]
            if cpulist(allowed) <= cpulist(HOUSEKEEPING):
                break
            time.sleep(0.2)
        assert cpulist(allowed) <= cpulist(HOUSEKEEPING), allowed
        drift = ns.ctl_json("status")["reservation"]["drift"]
        assert drift["checks"] >= 1 and drift["tasks"] >= 1, drift

        p = ns.ctl("release")
        assert p.returncode == 0 and "Released:" in p.stdout, (p.stdout, p.stderr)
        assert ns.ctl_json("status")["reservation"]["state"] == "none"
        s.assert_restored("rtctl release")
        # The late task gets back what it had when rtd first saw it.
        allowed = open(f"/proc/{late}/status").read().split("Cpus_allowed_list:")[1].split()[0]
        assert cpulist(allowed) == {0, 1}, allowed
        assert ns.stop_rtd() == 0


@test
def sigterm_restores_everything():
    with Scenario() as s:
        s.ns.write_config(RESERVED)
        s.ns.start_rtd()
        s.assert_reserved()
        assert s.ns.stop_rtd(signal.SIGTERM) == 0, s.ns.read_log()
        s.assert_restored("SIGTERM")


@test
def kill9_then_restore():
    with Scenario() as s:
        s.ns.write_config(RESERVED)
        s.ns.start_rtd()
        s.assert_reserved()
        s.ns.stop_rtd(signal.SIGKILL)
        assert s.knobs.diff(), "a crashed rtd should have left its changes behind"
        p = s.ns.restore()
        assert p.returncode == 0, p.stderr
        s.assert_restored("kill -9 + rtd --restore")
        # Nothing left to do the second time.
        p = s.ns.restore()
        assert p.returncode == 0 and "nothing to restore" in p.stderr.lower(), p.stderr


@test
def kill9_then_restart_and_stop():
    with Scenario() as s:
        s.ns.write_config(RESERVED)
        s.ns.start_rtd()
        s.assert_reserved()
        s.ns.stop_rtd(signal.SIGKILL)
        during = AllKnobs.read()
        tasks = s.ns.tasks()
        s.ns.start_rtd()
        res = s.assert_reserved()
        # The same reservation is adopted, not restored and applied again: no knob written, no task moved,
        # every knob and affinity exactly as the dead rtd left them.
        start = res["start"]
        now = s.ns.tasks()
        moved = {k: (v, now[k]) for k, v in tasks.items() if k in now and now[k][1] != v[1]}
        assert not moved, f"task affinities changed across the restart: {moved}"
        assert AllKnobs.read() == during, "knobs changed across the restart"
        assert start["mode"] == "adopted" and start["knob_writes"] == 0 and start["tasks_moved"] == 0, start
        assert start["previous_pid"] > 0, start
        assert "last_restore" not in res, res
        human = s.ns.ctl("status").stdout
        assert "Started: adopted from the journal of pid" in human and "0 knobs written, 0 tasks moved" in human, human
        assert s.ns.stop_rtd() == 0
        s.assert_restored("kill -9 + restart + stop")


@test
def kill9_then_restart_adopts_and_fixes_only_drift():
    """While no rtd runs, someone changes one sysctl and pins one task onto the reserved CPU: the next rtd
    adopts the reservation and writes exactly those two back; a stop still restores the first originals."""
    with Scenario() as s:
        s.ns.write_config(RESERVED)
        s.ns.start_rtd()
        s.assert_reserved()
        s.ns.stop_rtd(signal.SIGKILL)
        with open("/proc/sys/vm/stat_interval", "w") as f:
            f.write("5")
        pinned = s.ns.spawn("taskset", "-c", RESERVED, "sleep", "1000")
        time.sleep(0.2)
        # The new task, pinned to CPU 1, is part of the machine as found: a stop gives it CPU 1 back.
        new = {k: v for k, v in s.ns.tasks().items() if k[0] == pinned}
        assert new and all(v[1] == RESERVED for v in new.values()), new
        s.tasks.update(new)
        s.ns.start_rtd()
        res = s.assert_reserved()
        start = res["start"]
        assert start["mode"] == "adopted" and start["knob_writes"] == 1 and start["tasks_moved"] == 1, start
        knobs = {k["name"]: k for k in res["knobs"]}
        k = knobs["vm.stat_interval"]
        assert k["original"] == s.knobs.state["vm/stat_interval"] and k["current"] == "2", k
        assert s.ns.stop_rtd() == 0
        s.assert_restored("kill -9 + drift + restart + stop")


@test
def bad_requests_change_nothing():
    with Scenario() as s, TestUser("rtdresv", groups=["rtdresvgrp"]) as u:
        ns = s.ns
        ns.write_config("none", daemon="SocketGroup=rtdresvgrp\nSocketMode=0660\n",
                        extra=CONF + "[Access]\nSubmitGroup=rtdresvgrp\n")
        ns.start_rtd()
        p = ns.ctl("reserve", "0-1")
        assert p.returncode == 1 and "housekeeping" in p.stderr, p.stderr
        p = ns.ctl("reserve", "7")
        assert p.returncode == 1 and ("not online" in p.stderr or "does not exist" in p.stderr), p.stderr
        p = ns.ctl("reserve", "x")
        assert p.returncode == 1 and "cpus" in p.stderr, p.stderr
        p = ns.ctl("reserve")
        assert p.returncode == 2, p.stderr
        # The plan prints every write and what needs a reboot, and changes nothing.
        p = ns.ctl("plan", RESERVED)
        assert p.returncode == 0, p.stderr
        assert "/proc/irq/default_smp_affinity" in p.stdout and "affinity of task" in p.stdout, p.stdout
        assert "nohz_full=1" in p.stdout and "rcu_nocbs=1" in p.stdout and "isolcpus=managed_irq,1" in p.stdout
        assert "/proc/sys/kernel/sched_rt_runtime_us" in p.stdout, p.stdout
        plan = ns.ctl_json("plan", RESERVED)
        assert plan["writes"] and plan["tasks"]["would_move"] >= 5, plan
        # Users may read status, but only admins reserve or release.
        assert ns.ctl_json("status")["caller"]["role"] == "admin"
        p = ns.ctl("reserve", RESERVED, user=u.name)
        assert p.returncode == 1 and "admin" in p.stderr.lower(), (p.stdout, p.stderr)
        p = ns.ctl("release", user=u.name)
        assert p.returncode == 1 and "admin" in p.stderr.lower(), (p.stdout, p.stderr)
        assert ns.ctl_json("status")["reservation"]["state"] == "none"
        s.assert_restored("refused requests")
        assert ns.stop_rtd() == 0


@test
def release_with_running_job_needs_force():
    with Scenario() as s:
        ns = s.ns
        ns.write_config(RESERVED)
        ns.start_rtd()
        p = ns.ctl("--json", "submit", "--", "sleep", "300")
        if p.returncode != 0:
            raise Skip(f"jobs cannot run here: {p.stderr.strip()}")
        job = json.loads(p.stdout)
        for _ in range(100):
            st = ns.ctl_json("show", str(job["id"]))["state"]
            if st == "running":
                break
            time.sleep(0.1)
        assert st == "running", st
        p = ns.ctl("release")
        assert p.returncode == 1 and "--force" in p.stderr, p.stderr
        assert ns.ctl_json("status")["reservation"]["state"] == "active"
        p = ns.ctl("release", "--force")
        assert p.returncode == 0, p.stderr
        for _ in range(100):
            st = ns.ctl_json("show", str(job["id"]))["state"]
            if st not in ("running", "starting"):
                break
            time.sleep(0.1)
        assert st == "cancelled", st
        assert ns.stop_rtd() == 0
        s.assert_restored("forced release")


# About 160 busy tasks (hackbench), forever: the load of issue 13 on the housekeeping CPU.
LOAD = "while :; do perf bench sched messaging -g 4 -l 2000 >/dev/null 2>&1; done\n"


def start_rtd_under_load(ns):
    """rtd and a hackbench loop started from one shell: one session, so one CFS autogroup, and one PID
    namespace, as a user's load from rtd's session would be. The subshell that starts the loop exits at
    once, so the load is not rtd's descendant: rtd moves it to the housekeeping CPU like any other task."""
    if not shutil.which("perf") or run(["perf", "bench", "sched", "messaging", "-g", "1", "-l", "1"]).returncode:
        raise Skip("perf bench sched messaging is not available")
    script = os.path.join(ns.dir, "load.sh")
    with open(script, "w") as f:
        f.write(LOAD)
    ns.start_rtd(["sh", "-c", f"(sh {script} </dev/null >/dev/null 2>&1 &); exec {RTD} --config {ns.config}"])
    end = time.time() + 10
    while time.time() < end:
        busy = sum(1 for (_, _), (comm, _, _) in ns.tasks().items() if comm.startswith("sched-messaging"))
        if busy >= 100:
            return busy
        time.sleep(0.2)
    raise AssertionError(f"the load did not start: {busy} hackbench tasks")


def rtd_threads(pid):
    return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))


@test
def control_plane_under_load():
    """Issue 13 point 5: with ~160 busy tasks in rtd's session and PID namespace on the housekeeping CPU,
    rtd's threads are real-time and on that CPU, `rtctl status` answers quickly (p99 printed; the assertion
    is generous), WAL checkpoints still run, and SIGTERM stops rtd with every knob restored within seconds."""
    with Scenario() as s:
        ns = s.ns
        ns.write_config(RESERVED)
        busy = start_rtd_under_load(ns)
        s.assert_reserved()
        tids = rtd_threads(ns.rtd_pid)
        assert len(tids) >= 2, tids            # the loop and the checkpoint thread at least
        prio = {}
        for t in tids:
            policy = os.sched_getscheduler(t) & ~getattr(os, "SCHED_RESET_ON_FORK", 0x40000000)
            prio[t] = (policy, os.sched_getparam(t).sched_priority)
            assert policy == os.SCHED_RR, f"rtd thread {t}: policy {policy}, not SCHED_RR ({prio})"
            assert os.sched_getaffinity(t) <= cpulist(HOUSEKEEPING), f"rtd thread {t} on {os.sched_getaffinity(t)}"
        assert prio[ns.rtd_pid][1] == 2 and min(p for _, p in prio.values()) == 1, prio
        # rtctl on the housekeeping CPU too, where the load is.
        times = []
        for _ in range(100):
            t0 = time.monotonic()
            p = run(["taskset", "-c", HOUSEKEEPING, RTCTL, "--socket", ns.socket, "status"], timeout=30)
            times.append(time.monotonic() - t0)
            assert p.returncode == 0, p.stderr
        times.sort()
        p50, p99 = times[49], times[98]
        print(f"  rtctl status under load ({busy} hackbench tasks): p50 {p50 * 1000:.1f} ms, "
              f"p99 {p99 * 1000:.1f} ms, max {times[-1] * 1000:.1f} ms over 100 calls")
        assert p99 < 1.0, f"rtctl status p99 {p99:.3f} s under load"
        # Checkpoints: rows of ~16 kB (the environment is stored with the job) fill the WAL past its
        # threshold in a few dozen jobs; the checkpoint thread must get a CPU to copy it back.
        env = dict(os.environ, RTD_TEST_PAD="x" * 16000)
        for i in range(80):
            p = run(["taskset", "-c", HOUSEKEEPING, RTCTL, "--socket", ns.socket, "submit", "--", "true"], env=env)
            assert p.returncode == 0, p.stderr
            store = ns.ctl_json("status")["jobs"]["store"]
            if store["checkpoints"] > 0:
                break
        assert store["checkpoints"] > 0, f"no WAL checkpoint after {i + 1} large jobs under load: {store}"
        print(f"  first WAL checkpoint after {i + 1} jobs of ~16 kB under load")
        t0 = time.monotonic()
        assert ns.stop_rtd(signal.SIGTERM) == 0, ns.read_log()
        took = time.monotonic() - t0
        print(f"  SIGTERM to exit under load: {took * 1000:.0f} ms")
        assert took < 5, f"SIGTERM took {took:.1f} s under load"
        s.assert_restored("SIGTERM under load")


@test
def kill9_under_load_leaves_no_zombie():
    """Issue 13 point 5: kill -9 under the same load: every thread of rtd exits at once (a starved thread kept
    a killed rtd a zombie for as long as the load ran); `rtd --restore` then puts every knob back."""
    with Scenario() as s:
        ns = s.ns
        ns.write_config(RESERVED)
        start_rtd_under_load(ns)
        s.assert_reserved()
        pid = ns.rtd_pid
        t0 = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        while time.monotonic() - t0 < 5:
            try:
                left = rtd_threads(pid)
            except OSError:
                left = []
            if not left:
                break
            time.sleep(0.02)
        assert not left, f"rtd's threads {left} still there 5 s after kill -9 under load"
        print(f"  rtd gone {1000 * (time.monotonic() - t0):.0f} ms after kill -9 under load")
        ns.rtd.wait(10)
        p = ns.restore()
        assert p.returncode == 0, p.stderr
        s.assert_restored("kill -9 under load + rtd --restore")


def ns_cat(ns, path):
    """A file as rtd's mount namespace shows it: (exit status, text, error)."""
    p = run(ns.cmd("cat", path))
    return p.returncode, p.stdout.strip(), p.stderr.strip()


@test
def fair_server_setting_not_applied_is_named_and_the_knob_is_back_as_found():
    # Issue 18: a floor run that asked for FairServerRuntimeUSec=0 still lost 33 ms/s to CFS tasks: rtd had
    # recorded the knob "unavailable" (debugfs not mounted here) and said nothing else. A setting asked for
    # and not applied is a failure named in status and the log, with the real cause and its remedy.
    fs_path = f"/sys/kernel/debug/sched/fair_server/cpu{RESERVED}/runtime"
    with Scenario() as s:
        ns = s.ns
        ns.write_config(reserve=RESERVED, extra=CONF + "FairServerRuntimeUSec=0\n")
        for mounted in (False, True):
            if mounted:
                # debugfs in rtd's own mount namespace only (unshare's default propagation is private).
                run(ns.cmd("mount", "-t", "debugfs", "none", "/sys/kernel/debug"), check=0)
            elif run(ns.cmd("test", "-e", "/sys/kernel/debug/sched")).returncode == 0:
                continue        # a host that mounts debugfs itself: only the second round applies
            rc, original, err = ns_cat(ns, fs_path)
            ns.start_rtd()
            res = ns.ctl_json("status")["reservation"]
            knobs = {k["name"]: k for k in res["knobs"]}
            fair = [r for r in res["residual"] if r["source"] == "fair server"]
            human = ns.ctl("status").stdout
            if rc == 0:
                # Writable here: set on the reserved CPU only, and put back at the stop below.
                k = knobs[f"fair_server.cpu{RESERVED}.runtime_ns"]
                assert k["state"] == "set" and k["original"] == original and k["current"] == "0", k
                assert ns_cat(ns, fs_path)[1] == "0"
                assert fair and not fair[0]["reaches"], fair
                what = "fair server set"
            else:
                k = knobs["fair_server.runtime"]
                cause = "debugfs is not mounted" if not mounted else "kernel lockdown restricts debugfs"
                assert not mounted or "Operation not permitted" in err, err     # the only other cause here
                assert k["state"] == "failed" and f"FairServerRuntimeUSec=0 not applied: {cause}" in k["why"], k
                assert "! fair_server.runtime" in human and cause in human, human
                warned = [l for l in open(ns.log, errors="replace")
                          if "FairServerRuntimeUSec=0 cannot be applied to the reserved CPUs" in l and cause in l]
                assert warned, "no warning in rtd's log"
                assert fair and fair[0]["reaches"] and cause in fair[0]["evidence"], fair
                assert ("boot without kernel lockdown" if mounted else "mount debugfs") in fair[0]["remedy"], fair
                what = f"fair server not applied ({cause})"
            print(f"  {what}: {k['name']} {k['state']}: {k.get('why') or k['current']}")
            assert ns.stop_rtd() == 0, ns.read_log()
            s.assert_restored(f"the stop ({what})")
            assert ns_cat(ns, fs_path)[:2] == (rc, original), "the fair server's runtime is not back as found"


if __name__ == "__main__":
    run_tests()
