# SPDX-License-Identifier: MIT
"""A Slurm test cluster on one host (issue 16): munged, slurmctld and one slurmd per node from Debian 12 and the
rtd under test, all in one private PID namespace (slurm-nsinit.py is its PID 1), configured in a temporary
directory through SLURM_CONF (nothing in /etc is touched). The nodes share this host's CPUs and one rtd: what
needs one rtd per node is the VM tier's."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from rtdtest import BUILD, Rtd, run

HERE = os.path.dirname(os.path.abspath(__file__))
# RTD_SPANK_PLUGIN: the plugin from another build than the rtd under test (RTD_BUILD_DIR).
PLUGIN = os.environ.get("RTD_SPANK_PLUGIN") or os.path.join(BUILD, "slurm/spank_rtd.so")


def missing():
    """Why this host cannot run the cluster, or None."""
    for b in ("slurmctld", "slurmd", "srun", "munged", "unshare", "nsenter"):
        if not shutil.which(b) and not os.path.exists("/usr/sbin/" + b):
            return f"{b} missing (Debian packages slurmctld slurmd slurm-client munge; tools/setup-deps)"
    if not os.path.exists(PLUGIN):
        return (f"{PLUGIN} not built (libslurm-dev missing at meson setup, -Dslurm=disabled, or a sanitizer build, "
                "whose plugin could not load into slurmstepd)")
    return None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class SlurmCluster:
    def __init__(self, nodes=("n1", "n2"), rtd_conf="", metrics_port=None, cpus=None):
        self.nodes = list(nodes)
        self.dir = tempfile.mkdtemp(prefix="rtd-test-slurm-")
        os.chmod(self.dir, 0o755)
        d = self.dir
        for sub in ("state", "spool", "log"):
            os.makedirs(f"{d}/{sub}")
            shutil.chown(f"{d}/{sub}", "slurm", "slurm")
        os.makedirs(f"{d}/munge", mode=0o755)
        with open(f"{d}/munge/munge.key", "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(f"{d}/munge/munge.key", 0o400)
        for p in (f"{d}/munge", f"{d}/munge/munge.key"):
            shutil.chown(p, "munge", "munge")
        self.rtd = Rtd(conf=rtd_conf, pidns=False, metrics_port=metrics_port, name="slurm")
        self.env = dict(os.environ, SLURM_CONF=f"{d}/slurm.conf")
        ncpu = cpus or os.cpu_count()
        ctld = free_port()
        ports = [free_port() for _ in self.nodes]
        with open(f"{d}/slurm.conf", "w") as f:
            f.write(f"""ClusterName=rtdtest
SlurmctldHost=localhost
SlurmctldPort={ctld}
AuthType=auth/munge
AuthInfo=socket={d}/munge/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=slurm
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/ctld.pid
SlurmdPidFile={d}/d.%n.pid
SlurmctldLogFile={d}/log/ctld.log
SlurmdLogFile={d}/log/d.%n.log
SlurmdDebug=info
PlugStackConfig={d}/plugstack.conf
ReturnToService=2
KillWait=5
""")
            for n, port in zip(self.nodes, ports):
                f.write(f"NodeName={n} NodeHostname=localhost Port={port} CPUs={ncpu} Sockets=1 "
                        f"CoresPerSocket={ncpu} ThreadsPerCore=1 State=UNKNOWN\n")
            f.write(f"PartitionName=p Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP "
                    "OverSubscribe=FORCE:4\n")
        with open(f"{d}/nodes", "w") as f:
            f.write(" ".join(self.nodes))
        self.plugstack(self.rtd.socket)
        self.proc = None

    def plugstack(self, socket_path, extra=""):
        """Point the plugin at an rtd socket; each new step's slurmstepd reads this file."""
        with open(f"{self.dir}/plugstack.conf", "w") as f:
            f.write(f"required {PLUGIN} socket={socket_path} timeout=10 {extra}\n")

    def start(self, with_rtd=True, rtd_env=()):
        """rtd_env: VAR=value words for rtd's environment (through env(1), which execs rtd)."""
        if with_rtd:
            with open(f"{self.dir}/rtd.cmd", "w") as f:
                f.write("\0".join([*(["env", *rtd_env] if rtd_env else []), os.path.join(BUILD, "daemon/rtd"),
                                    "--config", self.rtd.config]))
            with open(f"{self.dir}/rtd.sock-path", "w") as f:
                f.write(self.rtd.socket)
        out = open(f"{self.dir}/log/ns.out", "ab")
        self.proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL", "/usr/bin/python3",
             os.path.join(HERE, "slurm-nsinit.py"), self.dir],
            stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        out.close()
        end = time.time() + 60
        while not os.path.exists(f"{self.dir}/ready"):
            assert self.proc.poll() is None, "cluster namespace exited:\n" + self.logs()
            assert time.time() < end, "cluster did not start within 60 s:\n" + self.logs()
            time.sleep(0.1)
        # Both slurmd registered and idle.
        end = time.time() + 60
        while True:
            p = run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env)
            states = dict(l.split() for l in p.stdout.splitlines() if l.strip())
            if all(states.get(n) == "idle" for n in self.nodes):
                break
            assert time.time() < end, f"nodes not idle within 60 s: {p.stdout}{p.stderr}\n" + self.logs()
            time.sleep(0.5)
        return self

    @property
    def init_pid(self):
        """Host pid of the namespace's PID 1 (slurm-nsinit.py)."""
        kids = open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read().split()
        return int(kids[0])

    def spawn_inside(self, cmd):
        """A process of the cluster's namespace (so rtd may move it), e.g. a task already on the CPUs."""
        return subprocess.Popen(["nsenter", "-t", str(self.init_pid), "-p", "-m", "--", *cmd],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def srun(self, *args, user=None, timeout=120):
        return run(["srun", *args], user=user, env=self.env, timeout=timeout)

    def sbatch(self, *args, user=None, timeout=60):
        return run(["sbatch", *args], user=user, env=self.env, timeout=timeout)

    def srun_bg(self, *args, user=None):
        cmd = ["srun", *args]
        if user is not None:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--", *cmd]
        return subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd="/tmp")

    def logs(self):
        out = []
        for name in sorted(os.listdir(f"{self.dir}/log")):
            out.append(f"--- {name}\n" + open(f"{self.dir}/log/{name}", errors="replace").read()[-3000:])
        return "\n".join(out)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.kill(self.init_pid, signal.SIGTERM)
                self.proc.wait(90)
            except (OSError, IndexError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def cleanup(self):
        try:
            self.stop()
        finally:
            self.rtd.cleanup()
            shutil.rmtree(self.dir, ignore_errors=True)
