#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Leases (issue 16 point 1), for real, as root: rtd (no reservation of its own) in a private PID namespace
whose init is a plain `sleep` (test-reserve.py's Namespace), a process tree started there that rtd did not
start, and CPU 1 leased for it. Proves: the other tasks, movable IRQs and workqueues leave CPU 1 while the
tree stays where it was; the tree's end releases the lease and every knob and affinity is back; overlaps with
another lease or rtd's reservation are refused naming it; an rtd restart re-adopts a live lease without writing
a knob and releases one whose tree ended meanwhile; bad bodies get 400 naming the field; unprivileged callers
are refused. Every test snapshots the knobs first and puts them back itself if it fails. Holds
/tmp/rtd-knobs.lock for the whole run."""
import importlib.util
import json
import os
import signal
import threading
import time

import rtdtest
from rtdtest import Skip, TestUser, knob_lock, need_root, parse_http, run, run_tests, test

# test-reserve.py's Namespace/AllKnobs, without registering its tests here.
_n = len(rtdtest._tests)
_spec = importlib.util.spec_from_file_location("test_reserve", os.path.join(os.path.dirname(__file__),
                                                                            "test-reserve.py"))
tr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tr)
del rtdtest._tests[_n:]

LEASED, HK = "1", "0"
GROUP = "rtdleasegrp"
U_NONE, U_LEASE, U_LEASE2 = "rtdlease-u1", "rtdlease-u2", "rtdlease-u3"
CONF = f"CheckIntervalSec=1\n[Access]\nLeaseGroup={GROUP}\nMaxPriority=70\n"


def ns_pid(host_pid):
    for line in open(f"/proc/{host_pid}/status"):
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    raise AssertionError("no NSpid")


class LeaseScenario:
    """Lock, namespace with helper tasks (one pinned to the CPU to lease), snapshot; puts everything back."""

    def __init__(self, conf=CONF, env=()):
        self.conf, self.env = conf, list(env)

    def __enter__(self):
        need_root()
        if os.cpu_count() < 2:
            raise Skip("needs at least 2 CPUs")
        if not os.path.exists("/proc/irq/default_smp_affinity"):
            raise Skip("no /proc/irq")
        self.ns = tr.Namespace()
        ns = self.ns
        ns.spawn("sleep", "1000")
        ns.spawn("taskset", "-c", LEASED, "sleep", "1000")
        # Wait until both helpers have become their sleep (nsenter and taskset exec'd): a snapshot taken
        # before taskset pins its sleep would see that pinning as a change.
        end = time.time() + 20
        while time.time() < end:
            comms = [v[0] for v in ns.tasks().values()]
            if len(comms) >= 3 and comms.count("sleep") >= 2:
                break
            time.sleep(0.1)
        self.knobs = tr.AllKnobs()
        self.tasks = ns.tasks()
        ns.write_config(extra=self.conf, daemon="SocketMode=0666\n")
        ns.start_rtd(["env", *self.env, tr.RTD, "--config", ns.config] if self.env else None)
        return self

    def __exit__(self, *exc):
        try:
            self.ns.stop_rtd()
            if tr.AllKnobs.read() != self.knobs.state:
                # A live leased tree keeps its lease through rtd --restore: end the trees first.
                for p in self.ns.helpers:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.2)
                self.ns.restore()
            if self.knobs.diff():
                print("test-lease: putting back by hand:", self.knobs.diff(), flush=True)
                self.knobs.restore()
        finally:
            self.ns.close()
        return False

    def http(self, method, path, body=None, user=None):
        cmd = ["curl", "-s", "-i", "--max-time", "30", "--unix-socket", self.ns.socket, "-X", method,
               "http://rtd" + path]
        if body is not None:
            cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
            body = body if isinstance(body, str) else json.dumps(body)
        status, _h, text = parse_http(run(cmd, user=user, input=body).stdout)
        try:
            return status, json.loads(text) if text else None
        except json.JSONDecodeError:
            return status, text

    def tree(self, *argv, user=None):
        """A process tree rtd did not start: returns (host pid, pid in the namespace)."""
        if user:
            argv = ("setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv)
        host = self.ns.spawn(*argv)
        return host, ns_pid(host)

    def lease(self, pid, cpus=LEASED, owner="test:1.0", user=None, **extra):
        return self.http("POST", "/v1/leases", {"cpus": cpus, "owner": owner, "pid": pid, **extra}, user=user)

    def wait_released(self, lid, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            st, j = self.http("GET", f"/v1/leases/{lid}")
            if st == 200 and j["state"] == "released":
                return j
            time.sleep(0.1)
        raise AssertionError(f"lease {lid} still active {timeout}s after its tree ended: {j}\n{self.ns.read_log()}")

    def assert_quiet(self, tree_hosts, tree_affinity):
        """Every task but the tree's and rtd's own on CPU 0; the tree's untouched; IRQs and workqueues off."""
        ns = self.ns
        hk = tr.cpulist(HK)
        st, j = self.http("GET", "/v1/leases")
        assert st == 200, j
        unmovable = {u["irq"] for u in j["quiet"]["irqs"]["unmovable"]}
        for d in os.listdir("/proc/irq"):
            p = f"/proc/irq/{d}/smp_affinity_list"
            if d.isdigit() and os.path.exists(p):
                cpus = tr.cpulist(open(p).read())
                assert cpus <= hk or int(d) in unmovable, f"IRQ {d} on {cpus}, not listed unmovable: {j['quiet']}"
        assert tr.mask_cpus(open("/proc/irq/default_smp_affinity").read()) <= hk
        assert tr.mask_cpus(open(f"{tr.WQ}/cpumask").read()) <= hk
        tree = set(tree_hosts)
        for h in tree_hosts:
            tree |= ns.descendants(h)
        for (tid, _), (comm, allowed, tgid) in ns.tasks().items():
            if tgid in tree:
                assert tr.cpulist(allowed) == tree_affinity[tgid], f"leased tree's {comm} moved: {allowed}"
            else:
                assert tr.cpulist(allowed) <= hk, f"{comm} ({tid}) still allowed on {allowed}"

    def assert_restored(self, what):
        diff = self.knobs.diff()
        assert not diff, f"after {what}, knobs differ from the snapshot: {diff}"
        now = self.ns.tasks()
        # A task that exec'd since the snapshot (taskset, nsenter) is another program, pinned as it chose.
        changed = {k: (v, now[k]) for k, v in self.tasks.items()
                   if k in now and now[k][0] == v[0] and now[k][1] != v[1]}
        assert not changed, f"after {what}, task affinities differ: {changed}"
        assert not os.path.exists(os.path.join(self.ns.runtime, "leases", "restore.json")), f"journal left after {what}"


def affinity(host):
    for line in open(f"/proc/{host}/status"):
        if line.startswith("Cpus_allowed_list:"):
            return tr.cpulist(line.split(":", 1)[1])


def cpu_seconds(host):
    """The task's on-CPU time from the scheduler's own clock (schedstat), in seconds."""
    return int(open(f"/proc/{host}/schedstat").read().split()[0]) / 1e9


@test
def lease_quiets_cpu_and_ends_with_tree():
    with LeaseScenario() as s:
        # The tree: a shell that starts a busy child pinned to the leased CPU, then waits.
        root, root_ns = s.tree("sh", "-c", f"taskset -c {LEASED} sh -c 'while :; do :; done' & wait")
        end = time.time() + 10
        while not s.ns.descendants(root) and time.time() < end:
            time.sleep(0.05)
        child = min(s.ns.descendants(root))
        before = {root: affinity(root), child: affinity(child)}
        t0, busy0 = time.monotonic(), cpu_seconds(child)
        st, j = s.lease(root_ns, priority=60)
        assert st == 201, (st, j)
        assert j["state"] == "active" and j["cpus"] == LEASED and j["owner"] == "test:1.0" and j["pid"] == root_ns, j
        assert j["priority"] == 60 and j["policy"] == "fifo" and j["max_priority"] == 70, j
        lid = j["id"]
        s.assert_quiet([root], before)
        # A task that lands on the leased CPU later (pinned there by its own parent) is an intruder: moved back
        # by the drift check and counted in the lease's figures; the tree's busy child is not.
        intruder = s.ns.spawn("taskset", "-c", LEASED, "sh", "-c", "while :; do :; done")
        end = time.time() + 10
        while time.time() < end and affinity(intruder) != tr.cpulist(HK):
            time.sleep(0.1)
        assert affinity(intruder) == tr.cpulist(HK), "drift check did not move the intruder off the leased CPU"
        time.sleep(1.5)         # one metrics interval after
        st, j = s.http("GET", f"/v1/leases/{lid}")
        m = j["metrics"]
        assert set(m["cpus"]) == {LEASED}, m
        assert m["context_switches"] > 0, m
        st2, status = s.http("GET", "/v1/status")
        if status["metrics"].get("collector") == "bpf" or m.get("bpf"):
            # The leased CPU's time since the lease began is the tree's plus the intruders': were the tree's own
            # time counted as intrusion, the two would add up to more than the CPU had (however loaded the host).
            busy, wall = cpu_seconds(child) - busy0, time.monotonic() - t0
            assert 0 < m["intrusion_seconds"] and m["intrusion_seconds"] + busy <= wall + 0.02, \
                f"intrusion {m['intrusion_seconds']} + tree's {busy:.3f} s > {wall:.3f} s of CPU {LEASED}: {m}"
            print(f"  lease {lid}: intrusion {m['intrusion_seconds']:.3f}s (tree ran {busy:.2f}s of {wall:.2f}s), "
                  f"{m['context_switches']} switches, {m['hardirqs']} hard IRQs on CPU {LEASED}")
        prom = run(["curl", "-s", "--unix-socket", s.ns.socket, "http://rtd/metrics"]).stdout
        assert f'rtd_lease_active{{owner="test:1.0",cpus="{LEASED}"}} 1' in prom, prom[-2000:]
        assert f'rtd_lease_intrusion_seconds_total{{owner="test:1.0",cpu="{LEASED}"}}' in prom
        assert 'rtd_lease_pid_alive{owner="test:1.0"} 1' in prom
        status_leases = s.ns.ctl_json("status")["leases"]
        assert [l["id"] for l in status_leases] == [lid], status_leases
        os.kill(intruder, signal.SIGKILL)
        # The tree ends: rtd notices through the pidfd, gives everything back.
        os.kill(child, signal.SIGKILL)
        os.kill(root, signal.SIGKILL)
        j = s.wait_released(lid)
        assert "exited" in j["end_reason"], j
        prom = run(["curl", "-s", "--unix-socket", s.ns.socket, "http://rtd/metrics"]).stdout
        assert "rtd_lease_active{" not in prom and "rtd_leases_active 0" in prom
        time.sleep(0.3)
        s.assert_restored("the leased tree ended")


def crowd(s, procs, threads=0):
    """procs ordinary processes (on every CPU) in the namespace, each with threads sleeping threads; returns the
    host pid of their shell. Threads make a walk over /proc long while its list of processes stays short."""
    prog = (f"/usr/bin/python3 -c 'import threading, time\n"
            f"for _ in range({threads}): threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()\n"
            f"time.sleep(1000)'") if threads else "sleep 1000"
    sh = s.ns.spawn("sh", "-c", f"for i in $(seq {procs}); do {prog} & done; wait")
    want = procs * (threads + 1)
    end = time.time() + 60

    def count():
        n = 0
        for p in s.ns.descendants(sh):
            try:
                n += len(os.listdir(f"/proc/{p}/task"))
            except OSError:
                pass
        return n
    while count() < want and time.time() < end:
        time.sleep(0.2)
    assert count() >= want, f"the crowd did not start: {count()} of {want} tasks"
    return sh


def ordinary_on_leased(s, tree_root):
    """Tasks outside the leased tree still allowed on the leased CPU."""
    hk = tr.cpulist(HK)
    tree = {tree_root} | s.ns.descendants(tree_root)
    return [(tid, comm, allowed) for (tid, _), (comm, allowed, tgid) in s.ns.tasks().items()
            if tgid not in tree and not tr.cpulist(allowed) <= hk]


@test
def lease_walk_cut_short_goes_on_at_once():
    """A walk over /proc cut short (10 processes of 100 threads; 1 ms a pass by RTD_LEASE_WALK_BUDGET_USEC) goes
    on at the next loop turns, not at the next drift check (an hour away here); the POST is answered once every
    task was walked: by then no ordinary task is left on the leased CPU."""
    conf = CONF.replace("CheckIntervalSec=1", "CheckIntervalSec=3600")
    with LeaseScenario(conf, env=["RTD_LEASE_WALK_BUDGET_USEC=1000"]) as s:
        sh = crowd(s, 10, threads=100)
        root, root_ns = s.tree("sleep", "1000")
        t0 = time.time()
        st, j = s.lease(root_ns, owner="slurm:12.0")
        took = time.time() - t0
        left = ordinary_on_leased(s, root)     # as the answer arrived
        assert st == 201 and j["quieted"], (st, j)
        st, all_ = s.http("GET", "/v1/leases")
        q = all_["quiet"]["tasks"]
        print(f"  1010 tasks: walk cut short {q['walks_cut_short']} times; POST answered after {took:.2f}s; "
              f"{q['moved']} tasks moved")
        assert q["walks_cut_short"] > 0, f"the walk was never cut short: the test proves nothing: {q}"
        assert not left, f"{len(left)} ordinary tasks still on CPU {LEASED} when the lease was answered: {left[:5]}"
        assert q["drift_checks"] == 0, q
        os.kill(root, signal.SIGKILL)
        s.wait_released(j["id"])
        os.killpg(os.getpgid(sh), signal.SIGKILL)
        time.sleep(0.5)
        s.assert_restored("the crowd's lease ended")


@test
def lease_answer_bounded_when_walk_never_ends():
    """A /proc that a pass can never list within its budget (1 µs here; a hostile crowd of processes in life)
    does not hold the answer: 201 within seconds, saying "quieted": false; meanwhile rtd answers other requests
    (the lease shows as not quieted yet), and keeps trying."""
    conf = CONF.replace("CheckIntervalSec=1", "CheckIntervalSec=3600")
    with LeaseScenario(conf, env=["RTD_LEASE_WALK_BUDGET_USEC=1"]) as s:
        sh = crowd(s, 100)
        root, root_ns = s.tree("sleep", "1000")
        post = {}
        t = threading.Thread(target=lambda: post.update(r=s.lease(root_ns, owner="slurm:13.0")))
        t0 = time.time()
        t.start()
        waiting = []           # GETs answered while the POST waited, showing its lease not yet quieted
        while t.is_alive() and time.time() < t0 + 40:
            st, j = s.http("GET", "/v1/leases")
            if st == 200 and t.is_alive() and any(not x["quieted"] for x in j["leases"] if x["state"] == "active"):
                waiting.append(time.time() - t0)
            time.sleep(0.05)
        t.join()
        took = time.time() - t0
        st, j = post["r"]       # curl gives up after 30 s
        assert st == 201 and j["quieted"] is False and j["state"] == "active", (st, j, took)
        assert "not every task walked off its CPUs" in s.ns.read_log(tail=None), s.ns.read_log()
        assert waiting, "no other request was answered while the lease's answer waited"
        st, all_ = s.http("GET", "/v1/leases")
        assert st == 200 and all_["quiet"]["tasks"]["walks_cut_short"] > 0, all_
        print(f"  answered after {took:.1f}s with quieted false; {len(waiting)} GETs answered meanwhile; "
              f"{all_['quiet']['tasks']['walks_cut_short']} passes cut short")
        st, j2 = s.http("DELETE", f"/v1/leases/{j['id']}")
        assert st == 200 and j2["state"] == "released", (st, j2)
        os.killpg(os.getpgid(sh), signal.SIGKILL)
        time.sleep(0.3)
        s.assert_restored("the lease that never quieted was released")


@test
def lease_conflicts_refused():
    with LeaseScenario() as s:
        a, a_ns = s.tree("sleep", "1000")
        b, b_ns = s.tree("sleep", "1000")
        st, j = s.lease(a_ns, owner="slurm:7.0")
        assert st == 201, j
        knobs_leased = tr.AllKnobs.read()
        st, p = s.lease(b_ns, owner="slurm:8.0")
        assert st == 409 and f"lease {j['id']}" in p["detail"] and "slurm:7.0" in p["detail"], (st, p)
        st, p = s.lease(b_ns, cpus="0-1", owner="slurm:8.0")
        assert st == 409, (st, p)
        # Leasing every CPU would leave none for housekeeping.
        st, p = s.lease(b_ns, cpus="0", owner="slurm:8.0")
        assert st == 409 and "housekeeping" in p["detail"], (st, p)
        # rtd's own reservation cannot take a leased CPU either.
        r = s.ns.ctl("reserve", LEASED)
        assert r.returncode != 0 and "lease" in r.stderr, (r.returncode, r.stderr)
        r = s.ns.ctl("reserve", HK)
        assert r.returncode != 0 and "housekeeping" in r.stderr, (r.returncode, r.stderr)
        assert tr.AllKnobs.read() == knobs_leased, "a refused request changed knobs"
        st, j2 = s.http("DELETE", f"/v1/leases/{j['id']}")
        assert st == 200 and j2["state"] == "released", j2
        st, j3 = s.http("DELETE", f"/v1/leases/{j['id']}")
        assert st == 200 and j3["state"] == "released", "DELETE again is not idempotent"
        s.assert_restored("DELETE")
        # Now with rtd's own reservation on the CPU: a lease is refused naming it.
        r = s.ns.ctl("reserve", LEASED)
        assert r.returncode == 0, r.stderr
        st, p = s.lease(b_ns, owner="slurm:8.0")
        assert st == 409 and "reservation" in p["detail"], (st, p)
        assert s.ns.ctl("release").returncode == 0
        s.assert_restored("release of the reservation")


@test
def lease_bad_bodies():
    with LeaseScenario() as s:
        a, a_ns = s.tree("sleep", "1000")
        cases = [
            ({"owner": "x", "pid": a_ns}, 400, "cpus:"),
            ({"cpus": "1-999", "owner": "x", "pid": a_ns}, 400, "cpus:"),
            ({"cpus": "", "owner": "x", "pid": a_ns}, 400, "cpus:"),
            ({"cpus": LEASED, "pid": a_ns}, 400, "owner:"),
            ({"cpus": LEASED, "owner": "a b\n", "pid": a_ns}, 400, "owner:"),
            ({"cpus": LEASED, "owner": "x" * 65, "pid": a_ns}, 400, "owner:"),
            ({"cpus": LEASED, "owner": "x"}, 400, "pid:"),
            ({"cpus": LEASED, "owner": "x", "pid": "1"}, 400, "pid:"),
            ({"cpus": LEASED, "owner": "x", "pid": 1}, 400, "pid:"),
            ({"cpus": LEASED, "owner": "x", "pid": a_ns, "priority": 100}, 400, "priority:"),
            ({"cpus": LEASED, "owner": "x", "pid": a_ns, "priority": 10, "policy": "batch"}, 400, "policy:"),
            ({"cpus": LEASED, "owner": "x", "pid": a_ns, "policy": "rr"}, 400, "policy:"),
            ({"cpus": LEASED, "owner": "x", "pid": a_ns, "colour": "red"}, 400, "colour:"),
            ({"cpus": LEASED, "owner": "x", "pid": 4000000}, 422, "pid:"),
            ({"cpus": LEASED, "owner": "x", "pid": a_ns, "priority": 80}, 403, "MaxPriority=70"),
        ]
        for body, want, field in cases:
            st, p = s.http("POST", "/v1/leases", body)
            assert st == want and field in p["detail"], (body, st, p)
            assert p.get("title") and p.get("status") == want, p
        st, p = s.http("POST", "/v1/leases", "{not json")
        assert st == 400, (st, p)
        st, j = s.http("GET", "/v1/leases")
        assert j["leases"] == [], j
        st, p = s.http("GET", "/v1/leases/12345")
        assert st == 404, (st, p)
        st, p = s.http("DELETE", "/v1/leases/abc")
        assert st == 404, (st, p)
        s.assert_restored("refused requests")


@test
def lease_access():
    with LeaseScenario() as s, TestUser(U_NONE), TestUser(U_LEASE, [GROUP]), TestUser(U_LEASE2, [GROUP]):
        mine, mine_ns = s.tree("sleep", "1000", user=U_LEASE)
        roots, roots_ns = s.tree("sleep", "1000")
        # No group at all: refused, nothing changes.
        st, p = s.lease(mine_ns, user=U_NONE)
        assert st == 403, (st, p)
        st, p = s.http("GET", "/v1/leases", user=U_NONE)
        assert st == 403, (st, p)
        # A LeaseGroup= member (not in SubmitGroup=) may lease for its own process, not for root's.
        st, p = s.lease(roots_ns, user=U_LEASE)
        assert st == 403 and "pid:" in p["detail"], (st, p)
        st, j = s.lease(mine_ns, user=U_LEASE, owner="slurm:9.0")
        assert st == 201 and j["user"] == U_LEASE, (st, j)
        # ... but nothing else: jobs and the reservation stay closed to it.
        st, p = s.http("GET", "/v1/status", user=U_LEASE)
        assert st == 403, (st, p)
        st, p = s.http("DELETE", "/v1/reservation", user=U_LEASE)
        assert st == 403, (st, p)
        # Another member may not release it; root may.
        st, p = s.http("DELETE", f"/v1/leases/{j['id']}", user=U_LEASE2)
        assert st == 403, (st, p)
        st, p = s.http("DELETE", f"/v1/leases/{j['id']}", user=U_NONE)
        assert st == 403, (st, p)
        st, j2 = s.http("GET", f"/v1/leases/{j['id']}")
        assert j2["state"] == "active", j2
        st, j2 = s.http("DELETE", f"/v1/leases/{j['id']}")
        assert st == 200 and j2["state"] == "released", (st, j2)
        s.assert_restored("root released the member's lease")
        # The member may release its own.
        st, j = s.lease(mine_ns, user=U_LEASE, owner="slurm:9.1")
        assert st == 201, (st, j)
        st, j2 = s.http("DELETE", f"/v1/leases/{j['id']}", user=U_LEASE)
        assert st == 200 and j2["state"] == "released", (st, j2)
        s.assert_restored("the member released its lease")


@test
def lease_survives_rtd_restart():
    with LeaseScenario() as s:
        root, root_ns = s.tree("sleep", "1000")
        st, j = s.lease(root_ns, owner="slurm:10.0")
        assert st == 201, j
        lid = j["id"]
        quiet = tr.AllKnobs.read()
        tasks = s.ns.tasks()
        journal = os.path.join(s.ns.runtime, "leases", "restore.json")
        # A clean stop leaves the lease in place (its job runs on); the next start adopts it, writing nothing.
        assert s.ns.stop_rtd() == 0
        assert tr.AllKnobs.read() == quiet, "rtd's stop undid the lease"
        s.ns.start_rtd()
        st, j = s.http("GET", f"/v1/leases/{lid}")
        assert st == 200 and j["state"] == "active" and j["adopted"], j
        assert tr.AllKnobs.read() == quiet, "adoption changed knobs"
        now = s.ns.tasks()
        moved = {k: (v, now[k]) for k, v in tasks.items() if k in now and now[k][1] != v[1]}
        assert not moved, f"adoption moved tasks: {moved}"
        st, all_ = s.http("GET", "/v1/leases")
        assert all_["start"] == {"adopted": 1, "released": 0, "knob_writes": 0}, all_["start"]
        assert os.path.exists(journal)
        assert "adopted" in s.ns.read_log(tail=None), s.ns.read_log()
        # A crash, and the tree ends while no rtd runs: the next start releases it and puts the knobs back.
        os.kill(s.ns.rtd_pid, signal.SIGKILL)
        s.ns.rtd.wait(10)
        # rtd --restore (systemd's ExecStopPost=) leaves a lease whose tree still runs in force.
        p = s.ns.restore()
        assert p.returncode == 0 and tr.AllKnobs.read() == quiet, (p.stderr, "rtd --restore ended a live lease")
        os.kill(root, signal.SIGKILL)
        time.sleep(0.2)
        s.ns.start_rtd()
        st, j = s.http("GET", f"/v1/leases/{lid}")
        assert st == 200 and j["state"] == "released" and "not running" in j["end_reason"], j
        s.assert_restored("restart after the tree ended")
        # New ids do not reuse the old one.
        other, other_ns = s.tree("sleep", "1000")
        st, j = s.lease(other_ns, owner="slurm:11.0")
        assert st == 201 and j["id"] > lid, j
        os.kill(other, signal.SIGKILL)
        s.wait_released(j["id"])
        s.assert_restored("second lease's tree ended")


if __name__ == "__main__":
    _lock = knob_lock()     # the whole run: every test changes global knobs through rtd
    run_tests()
