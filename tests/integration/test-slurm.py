#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Slurm (issue 16), single-host tier: the SPANK plugin (build/slurm/spank_rtd.so) in a real Slurm 22.05 cluster
(munged, slurmctld, two slurmd as nodes n1 and n2 from Debian 12) against the real rtd, all in one PID namespace
(slurmtest.py). Steps are submitted by an unprivileged user. Both nodes share this host's CPUs and one rtd, so a
step here leases CPU 1 (CPU 0 keeps the housekeeping); one rtd per node is the VM tier's (tests/vm)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rtdtest import Knobs, Skip, TestUser, knob_lock, need_root, run_tests, stop_process, test  # noqa: E402
from slurmtest import SlurmCluster, free_port, missing  # noqa: E402

USER = "rtdslurm-u1"
# What a user's program sees: its policy, its CPUs, its step; then it sleeps so the test looks while it runs.
PROBE = ("echo step=$SLURM_JOB_ID.$SLURM_STEP_ID; chrt -p $$; grep Cpus_allowed_list /proc/self/status; "
         "touch /tmp/rtdslurm-$SLURM_JOB_ID.$SLURM_STEP_ID.running; sleep {secs}; exit {rc}")
LEASED = "1"    # the CPU steps here bind to (--cpu-bind=map_cpu:1)


def need_cluster():
    need_root()
    if os.cpu_count() < 2:
        raise Skip("needs 2 CPUs (one stays housekeeping)")
    why = missing()
    if why:
        raise Skip(why)


def all_leases(c):
    st, _, body = c.rtd.http("GET", "/v1/leases")
    assert st == 200, (st, body)
    return json.loads(body)["leases"]


def leases(c):
    """The active leases (rtd also lists the last ones that ended)."""
    return [l for l in all_leases(c) if l["state"] == "active"]


def ended(c, step):
    ls = [l for l in all_leases(c) if l["owner"] == f"slurm:{step}" and l["state"] == "released"]
    assert len(ls) == 1, all_leases(c)
    return ls[0]


def need_lease_api(c):
    st, _, body = c.rtd.http("GET", "/v1/leases")
    if st == 404:
        raise Skip("this rtd has no /v1/leases (the lease API of issue 16 point 1 is not in this tree)")


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout} s")


def step_of(proc_or_out):
    m = re.search(r"step=(\d+\.\d+)", proc_or_out)
    assert m, proc_or_out
    return m.group(1)


def running_marker(proc, timeout=60):
    """The step id of the (only) step running the probe; fails with srun's words if srun ended first."""
    def find():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"srun exited {proc.returncode} before the step ran:\n{out}\n{err}")
        for f in os.listdir("/tmp"):
            if f.startswith("rtdslurm-") and f.endswith(".running"):
                return f[len("rtdslurm-"):-len(".running")]
        return None
    return wait_for(find, timeout, "the step did not start")


def clear_markers():
    for f in os.listdir("/tmp"):
        if f.startswith("rtdslurm-") and f.endswith(".running"):
            os.unlink("/tmp/" + f)


def irqs_on(cpu):
    """IRQs whose affinity includes cpu (the movable ones are rtd's to move)."""
    out = {}
    for d in os.listdir("/proc/irq"):
        p = f"/proc/irq/{d}/smp_affinity_list"
        if d.isdigit() and os.path.exists(p):
            try:
                out[d] = open(p).read().strip()
            except OSError:
                pass
    return {k for k, v in out.items() if int(cpu) in expand(v)}


def expand(lst):
    s = set()
    for part in lst.split(","):
        if "-" in part:
            a, b = part.split("-")
            s.update(range(int(a), int(b) + 1))
        elif part:
            s.add(int(part))
    return s


def affinity(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("Cpus_allowed_list:"):
            return l.split()[1]
    return None


class Env:
    """One cluster (with rtd) and the test user for a test; the knobs checked as found afterwards."""

    def __init__(self, metrics_port=None, with_rtd=True, rtd_env=()):
        self.knobs = Knobs()
        self.user = TestUser(USER)
        self.user.__enter__()
        self.c = SlurmCluster(metrics_port=metrics_port)
        clear_markers()
        try:
            self.c.start(with_rtd=with_rtd, rtd_env=rtd_env)
        except BaseException:
            self.close()
            raise

    def close(self):
        try:
            self.c.cleanup()
        finally:
            self.user.__exit__(None, None, None)
            clear_markers()
            diff = self.knobs.diff()
            if diff:
                self.knobs.restore()
            assert not diff, f"knobs not as found after the cluster stopped: {diff}"


@test
def rt_step_quiets_its_cpu_and_gives_back():
    need_cluster()
    e = Env()
    hog = None
    try:
        c = e.c
        need_lease_api(c)
        # A task of the node already running on every CPU: rtd must move it off the leased CPU and back.
        hog = c.spawn_inside(["sleep", "300"])
        hog_pid = wait_for(lambda: [int(p) for p in open(
            f"/proc/{hog.pid}/task/{hog.pid}/children").read().split()] or None, 10, "no hog")[0]
        assert expand(affinity(hog_pid)) == set(range(os.cpu_count())), affinity(hog_pid)
        before = Knobs.read()
        irqs_before = irqs_on(LEASED)
        p = c.srun_bg("-w", "n1", "-n1", "-c2", "--rt=60", f"--cpu-bind=map_cpu:{LEASED}", "sh", "-c",
                      PROBE.format(secs=6, rc=0), user=USER)
        step = running_marker(p)
        during = Knobs.read()
        ls = leases(c)
        assert [(l["owner"], l["cpus"], l["state"]) for l in ls] == [(f"slurm:{step}", LEASED, "active")], ls
        hog_during = affinity(hog_pid)
        assert int(LEASED) not in expand(hog_during), hog_during
        irqs_during = irqs_on(LEASED)
        moved = {k for k in before if k.startswith("irq") and during.get(k) != before[k]}
        assert all(int(LEASED) not in expand(during[k]) for k in moved), (moved, during)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, (p.returncode, out, err)
        assert "SCHED_FIFO" in out and "priority: 60" in out, out
        assert re.search(r"Cpus_allowed_list:\s+1\b", out), out
        wait_for(lambda: leases(c) == [], 15, "the lease was not released after the step")
        gone = ended(c, step)
        assert "DELETE" in gone["end_reason"], gone          # the plugin's slurm_spank_exit released it
        after = Knobs.read()
        assert after == before, {k: (before.get(k), after.get(k)) for k in before if before.get(k) != after.get(k)}
        assert expand(affinity(hog_pid)) == set(range(os.cpu_count())), affinity(hog_pid)
        print(f"  step {step}: IRQs with CPU {LEASED} in their mask before/during/after: {len(irqs_before)}/"
              f"{len(irqs_during)}/{len(irqs_on(LEASED))}; {len(moved)} IRQ masks moved and put back; "
              f"other task's CPUs during: {hog_during}; lease metrics at its end: {gone.get('metrics')}")
    finally:
        if hog:
            hog.kill()
            hog.wait()
        e.close()


@test
def failing_step_and_scancel_release_the_lease():
    need_cluster()
    e = Env()
    try:
        c = e.c
        need_lease_api(c)
        p = c.srun("-w", "n1", "-n1", "-c2", "--rt=40", f"--cpu-bind=map_cpu:{LEASED}", "sh", "-c",
                   PROBE.format(secs=1, rc=3), user=USER)
        assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
        assert "SCHED_FIFO" in p.stdout, p.stdout
        wait_for(lambda: leases(c) == [], 15, "a failed step's lease was not released")
        failed = step_of(p.stdout)
        assert "DELETE" in ended(c, failed)["end_reason"], ended(c, failed)
        clear_markers()

        p = c.srun_bg("-w", "n2", "-n1", "-c2", "--rt-quiet", f"--cpu-bind=map_cpu:{LEASED}", "sh", "-c",
                      PROBE.format(secs=120, rc=0), user=USER)
        step = running_marker(p)
        ls = leases(c)
        assert [l["owner"] for l in ls] == [f"slurm:{step}"], ls
        assert "priority" not in ls[0] or ls[0]["priority"] in (None, 0), ls     # --rt-quiet: no policy
        r = subprocess.run(["scancel", step.split(".")[0]], env=c.env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        out, err = p.communicate(timeout=60)
        assert f"STEP {step} ON n2 CANCELLED" in err, (out, err)
        assert "SCHED_OTHER" in out, out
        wait_for(lambda: leases(c) == [], 20, "a cancelled step's lease was not released")
        print(f"  failed step {failed}: {ended(c, failed)['end_reason']}; cancelled step {step}: "
              f"{ended(c, step)['end_reason']}")
    finally:
        e.close()


@test
def overlapping_steps_are_refused_cleanly():
    need_cluster()
    e = Env()
    try:
        c = e.c
        need_lease_api(c)
        a = c.srun_bg("-w", "n1", "-n1", "-c2", "--rt=50", f"--cpu-bind=map_cpu:{LEASED}", "sh", "-c",
                      PROBE.format(secs=8, rc=0), user=USER)
        step_a = running_marker(a)
        # Node n2 is this same host: its step asks for CPU 1 too, which step A's lease holds.
        t0 = time.time()
        b = c.srun("-w", "n2", "-n1", "-c2", "--rt=50", f"--cpu-bind=map_cpu:{LEASED}", "sh", "-c",
                   "echo RAN", user=USER)
        assert b.returncode != 0 and "RAN" not in b.stdout, (b.returncode, b.stdout, b.stderr)
        assert "rtd refused to lease CPUs 1" in b.stderr and "409" in b.stderr, b.stderr
        assert f"slurm:{step_a}" in b.stderr, b.stderr           # the reason names the holder
        assert time.time() - t0 < 60
        assert [l["owner"] for l in leases(c)] == [f"slurm:{step_a}"]
        out, err = a.communicate(timeout=60)
        assert a.returncode == 0 and "SCHED_FIFO" in out, (out, err)
        wait_for(lambda: leases(c) == [], 15, "lease A was not released")
        print("  step B: " + next(l for l in b.stderr.splitlines() if "refused" in l).strip())
    finally:
        e.close()


@test
def node_without_rtd_fails_the_step_clearly():
    need_cluster()
    e = Env(with_rtd=False)
    try:
        c = e.c
        t0 = time.time()
        p = c.srun("-N2", "-n2", "--rt=60", "sh", "-c", "echo RAN", user=USER)
        took = time.time() - t0
        assert p.returncode != 0 and "RAN" not in p.stdout, (p.returncode, p.stdout, p.stderr)
        assert "rtd is not running on this node" in p.stderr, p.stderr
        assert "--rt-optional" in p.stderr, p.stderr
        assert took < 60, took
        first = p.stderr.strip().splitlines()
        p = c.srun("-N2", "-n2", "--rt=60", "--rt-optional", "sh", "-c", "chrt -p $$", user=USER)
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert p.stdout.count("SCHED_OTHER") == 2, p.stdout
        assert "runs un-quieted as --rt-optional asks" in p.stderr, p.stderr
        # An rtd that accepts and never answers: a bounded wait (timeout=2 here), then the same clear failure.
        import socket as so
        silent = so.socket(so.AF_UNIX)
        path = os.path.join(c.dir, "silent.sock")
        silent.bind(path)
        os.chmod(path, 0o666)
        silent.listen(16)
        c.plugstack(path, "timeout=2")
        t0 = time.time()
        p = c.srun("-w", "n1", "-n1", "--rt", "sh", "-c", "echo RAN", user=USER)
        assert p.returncode != 0 and "did not answer within 2 s" in p.stderr, (p.stdout, p.stderr)
        assert time.time() - t0 < 60
        silent.close()
        print(f"  no rtd: srun exited {took:.2f} s after start: " + " | ".join(first))
    finally:
        e.close()


@test
def step_never_starts_on_cpus_not_yet_quiet():
    """rtd's walk over /proc never coming round (RTD_LEASE_WALK_BUDGET_USEC=1; in life a crowd of processes no
    pass can list within its budget): rtd answers the lease after 5 s with "quieted": false, the plugin asks on
    for its timeout= (10 s) and then fails the step clearly instead of starting it; the lease goes."""
    need_cluster()
    e = Env(rtd_env=["RTD_LEASE_WALK_BUDGET_USEC=1"])
    try:
        c = e.c
        t0 = time.time()
        p = c.srun("-w", "n1", "-n1", "--rt=60", "sh", "-c", "echo RAN", user=USER)
        took = time.time() - t0
        assert p.returncode != 0 and "RAN" not in p.stdout, (p.returncode, p.stdout, p.stderr)
        assert "had not moved every other task off them after 10 s" in p.stderr, p.stderr
        assert "not running un-quieted" in p.stderr, p.stderr
        wait_for(lambda: not leases(c), 30, "the lease gone after the failed step")
        print(f"  srun failed {took:.1f} s after start: "
              + next(l for l in p.stderr.splitlines() if "had not moved" in l).strip())
    finally:
        e.close()


@test
def bad_options_fail_in_srun():
    need_cluster()
    e = Env(with_rtd=False)
    try:
        c = e.c
        for args, msg in [(["--rt=0"], "1 to 99"), (["--rt=high"], "1 to 99"),
                          (["--rt", "--rt-quiet"], "exclude each other"), (["--rt-optional"], "goes with"),
                          (["--rt", "--rt-policy=idle"], "fifo or rr")]:
            p = c.srun("-n1", *args, "true", user=USER, timeout=60)
            assert p.returncode != 0 and msg in p.stderr, (args, p.stderr)
    finally:
        e.close()


@test
def sbatch_options_reach_its_steps():
    need_cluster()
    e = Env()
    out = None
    try:
        c = e.c
        need_lease_api(c)
        out = f"/tmp/rtdslurm-sbatch-{os.getpid()}.out"
        p = c.sbatch("-w", "n1", "-c2", "--rt=60", "-o", out, "--wrap",
                     f"srun -n1 -c2 --cpu-bind=map_cpu:{LEASED} sh -c 'echo step=$SLURM_JOB_ID.$SLURM_STEP_ID; "
                     "chrt -p $$'", user=USER)
        assert p.returncode == 0, (p.stdout, p.stderr)
        job = p.stdout.split()[-1]
        wait_for(lambda: run_squeue_empty(c), 60, f"batch job {job} did not finish")
        text = wait_for(lambda: os.path.exists(out) and open(out).read(), 10, "no batch output")
        assert "SCHED_FIFO" in text and "priority: 60" in text, text
        step = step_of(text)
        assert step == f"{job}.0", text
        assert "DELETE" in ended(c, step)["end_reason"]
        # The batch script's own step holds the whole allocation: it leases nothing.
        assert [l["owner"] for l in all_leases(c)] == [f"slurm:{step}"], all_leases(c)
    finally:
        if out and os.path.exists(out):
            os.unlink(out)
        e.close()


def run_squeue_empty(c):
    p = subprocess.run(["squeue", "-h"], env=c.env, capture_output=True, text=True)
    return p.returncode == 0 and not p.stdout.strip()


@test
def prometheus_scrapes_the_step_series():
    need_cluster()
    prom = shutil.which("prometheus")
    if not prom:
        raise Skip("prometheus missing (Debian package prometheus; tools/setup-deps installs it)")
    port, prom_port = free_port(), free_port()
    e = Env(metrics_port=port)
    tmp = tempfile.mkdtemp(prefix="rtd-test-slurm-prom-")
    proc = None
    try:
        c = e.c
        need_lease_api(c)
        # docs/prometheus/fleet.yml's scrape job: targets from file_sd, "node" from the targets file.
        os.makedirs(f"{tmp}/targets")
        with open(f"{tmp}/targets/compute.yml", "w") as f:
            f.write(f"- targets: ['127.0.0.1:{port}']\n  labels: {{node: n1, cluster: rtdtest}}\n")
        with open(f"{tmp}/prometheus.yml", "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                    "  - job_name: rtd\n    scrape_interval: 1s\n    file_sd_configs:\n"
                    f"      - files: ['{tmp}/targets/*.yml']\n")
        log = open(f"{tmp}/prometheus.log", "wb")
        proc = subprocess.Popen([prom, f"--config.file={tmp}/prometheus.yml", f"--storage.tsdb.path={tmp}/data",
                                 f"--web.listen-address=127.0.0.1:{prom_port}"],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        p = c.srun_bg("-w", "n1", "-n1", "-c2", "--rt=60", f"--cpu-bind=map_cpu:{LEASED}", "sh", "-c",
                      PROBE.format(secs=12, rc=0), user=USER)
        step = running_marker(p)

        def query(q):
            u = f"http://127.0.0.1:{prom_port}/api/v1/query?query=" + urllib.parse.quote(q)
            try:
                with urllib.request.urlopen(u, timeout=5) as r:
                    return json.load(r)["data"]["result"]
            except OSError:
                return []
        sel = f'{{owner="slurm:{step}"}}'
        intr = wait_for(lambda: query("rtd_lease_intrusion_seconds_total" + sel), 30,
                        "Prometheus has no rtd_lease_intrusion_seconds_total for the step")
        irqs = query("sum by (node) (rtd_lease_hardirqs_total" + sel + ")")
        assert {s["metric"].get("cpu") for s in intr} == {LEASED}, intr
        assert all(s["metric"]["node"] == "n1" for s in intr), intr
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, (out, err)
        print(f"  PromQL for slurm:{step}: intrusion_seconds " +
              ", ".join(f"cpu{s['metric']['cpu']}={s['value'][1]}" for s in intr) +
              "; hardirqs " + ", ".join(f"{s['metric'].get('node')}={s['value'][1]}" for s in irqs))
    finally:
        stop_process(proc)
        e.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    _lock = knob_lock() if os.geteuid() == 0 else None
    run_tests()
