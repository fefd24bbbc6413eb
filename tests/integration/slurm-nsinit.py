# SPDX-License-Identifier: MIT
"""PID 1 of the Slurm test cluster's PID namespace (slurmtest.py): starts munged, rtd, slurmctld and one slurmd
per node, reaps every orphan (slurmstepd daemonizes), and on SIGTERM stops the Slurm daemons, then rtd (which puts
the knobs back), then munged. rtd shares the namespace with slurmstepd so the pid a lease names is one it sees,
and its affinity backend moves only the cluster's own processes."""
import os
import signal
import subprocess
import sys
import time

D = sys.argv[1]
env = dict(os.environ, SLURM_CONF=f"{D}/slurm.conf")
log = open(f"{D}/log/nsinit.log", "ab", buffering=0)
children = {}
stop = False


def spawn(name, cmd):
    p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    children[name] = p
    return p


def wait_path(path, proc, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
m = f"{D}/munge"
munged = spawn("munged", ["runuser", "-u", "munge", "--", "/usr/sbin/munged", "-F", "--force",
                          f"--socket={m}/munge.sock", f"--key-file={m}/munge.key", f"--pid-file={m}/munged.pid",
                          f"--log-file={m}/munged.log", f"--seed-file={m}/seed"])
wait_path(f"{m}/munge.sock", munged)
if os.path.exists(f"{D}/rtd.cmd"):
    rtd = spawn("rtd", open(f"{D}/rtd.cmd").read().split("\0"))
    wait_path(open(f"{D}/rtd.sock-path").read(), rtd)
spawn("slurmctld", ["slurmctld", "-D", "-i"])
time.sleep(0.5)
for node in open(f"{D}/nodes").read().split():
    spawn(f"slurmd-{node}", ["slurmd", "-D", "-N", node])
open(f"{D}/ready", "w").close()

while not stop:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:      # orphans: slurmstepd, nsenter'ed helpers
            pass
    except ChildProcessError:
        pass
    time.sleep(0.1)

for name in [n for n in children if n.startswith("slurm")] + ["rtd", "munged"]:
    p = children.get(name)
    if not p or p.poll() is not None:
        continue
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    log.write(f"nsinit: {name} exited {p.returncode}\n".encode())
