"""A real Spark standalone cluster on localhost for the cluster tests: one
master and N workers, each a separate JVM started from the pyspark package's
own `bin/spark-class`, so that executors are separate processes that share
nothing with the driver but the table directory (as on a real cluster, where
they are separate machines).

Every daemon runs in its own process group: killing a worker's group kills
its executors too (they are the worker's children), which is what losing a
machine looks like to the driver. Daemons also get SIGKILL if the test
process dies (where setpriv is installed), so a crashed run leaves no JVMs.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Small on purpose: the test machine has 2 cores shared with other work.
WORKER_CORES = 1
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "512m"
DAEMON_MEMORY = "256m"
LOCALHOST = "127.0.0.1"
#: JVM options for every cluster process: short-lived JVMs on a small shared
#: machine spend most of their CPU on JIT compilation and parallel GC threads;
#: C1 only and the serial collector start faster there.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_home() -> Path:
    """pyspark's install directory: its bin/ has spark-class and spark-submit."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOCALHOST, 0))
        return s.getsockname()[1]


def _die_with_parent() -> list[str]:
    """A command prefix that gives the daemon SIGKILL when the test process exits
    (the parent-death signal survives exec), so no daemon outlives a crashed
    test run. setpriv (util-linux) sets it without running Python code in the
    forked child (preexec_fn would, and pylance warns about forks)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL"] if setpriv else []


def daemon_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for Spark processes: loopback only, pyspark as SPARK_HOME,
    the driver's Python (spark-submit's) and any Python workers running this
    interpreter, whose venv has pyspark and lance_spark."""
    env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": LOCALHOST,
           "SPARK_DAEMON_MEMORY": DAEMON_MEMORY, "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM,
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("SPARK_CONF_DIR", None)
    env.update(extra or {})
    return env


def group_pids(pgid: int) -> list[int]:
    """Live processes of process group `pgid` (the daemon and its executors)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()   # after "pid (comm) "
        if fields[0] != "Z" and int(fields[2]) == pgid:
            pids.append(int(entry.name))
    return pids


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kill_group(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGKILL a daemon's whole process group and wait until none of it is left."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + timeout
    while group_pids(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


@dataclass
class Worker:
    """One worker JVM; its executors live in its process group."""
    index: int
    process: subprocess.Popen
    webui_port: int
    work_dir: Path
    local_dir: Path
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def executor_pids(self) -> list[int]:
        """Executor JVMs this worker launched (CoarseGrainedExecutorBackend in its group)."""
        return [p for p in group_pids(self.pid) if "CoarseGrainedExecutorBackend" in command_line(p)]

    def lose(self) -> None:
        """A machine lost mid-job: SIGKILL the worker and its executors at once,
        and wipe their local disk. On one host the other executors could
        otherwise still read the dead one's shuffle files from disk (Spark's
        host-local reads), which a lost machine does not allow."""
        kill_group(self.process)
        shutil.rmtree(self.local_dir, ignore_errors=True)


@dataclass
class SparkCluster:
    """A running standalone cluster. `master_url` is what drivers connect to."""
    root: Path
    master: subprocess.Popen
    master_port: int
    master_ui_port: int
    master_log: Path
    workers: list[Worker] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{LOCALHOST}:{self.master_port}"

    def state(self) -> dict:
        """The master's view (web UI /json/): workers, their state, applications."""
        return get_json(f"http://{LOCALHOST}:{self.master_ui_port}/json/")

    def alive_worker_ports(self) -> set[int]:
        """Web UI ports of the workers the master lists as ALIVE."""
        return {int(w["webuiaddress"].rsplit(":", 1)[1]) for w in self.state()["workers"] if w["state"] == "ALIVE"}

    def start_worker(self, index: int) -> Worker:
        """Starts worker `index` (again, after a kill: a fresh work dir, new ports)."""
        stamp = time.strftime("%H%M%S") + f"-{time.monotonic_ns() % 10**6}"
        work = self.root / f"worker-{index}-{stamp}"
        (work / "local").mkdir(parents=True)
        port = free_port()
        log = work / "worker.log"
        proc = _spawn(["org.apache.spark.deploy.worker.Worker", self.master_url, "--host", LOCALHOST,
                       "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY, "--webui-port", str(port),
                       "--work-dir", str(work / "work")],
                      log, {"SPARK_WORKER_DIR": str(work / "work"), "SPARK_LOCAL_DIRS": str(work / "local")})
        worker = Worker(index, proc, port, work / "work", work / "local", log)
        if index < len(self.workers):
            self.workers[index] = worker
        else:
            self.workers.append(worker)
        return worker

    def wait_for_workers(self, timeout: float = 120.0) -> None:
        """Until the master lists every live worker of ours as ALIVE: only then
        will an application get executors on all of them."""
        deadline = time.monotonic() + timeout
        while True:
            for p, log in [(self.master, self.master_log)] + [(w.process, w.log) for w in self.workers]:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited ({p.returncode}) during startup; "
                                       f"its log ({log}) ends:\n{log_tail(log)}")
            want = {w.webui_port for w in self.workers if w.alive}
            try:
                if want <= self.alive_worker_ports():   # (an empty `want`: the master is up)
                    return
            except (OSError, urllib.error.URLError, ValueError, KeyError):
                pass   # the master's UI is not up yet
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {log}\n{log_tail(log, 1500)}"
                                  for log in [self.master_log] + [w.log for w in self.workers])
                raise RuntimeError(f"workers {sorted(want)} not registered with {self.master_url} "
                                   f"after {timeout:.0f}s:\n{tails}")
            time.sleep(0.3)

    def ensure_workers(self) -> None:
        """Restarts any worker that was killed, so the next test has the whole cluster."""
        for w in list(self.workers):
            if not w.alive:
                self.start_worker(w.index)
        self.wait_for_workers()

    def stop(self) -> None:
        """Kills every daemon's process group (workers first, so executors go too)."""
        for w in self.workers:
            kill_group(w.process)
        kill_group(self.master)


def spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.Popen:
    """Starts a Spark process (daemon or driver) with its output in `log`, in a
    session of its own (it and its children are one process group, for
    kill_group), and dying with the test process."""
    with open(log, "wb") as out:
        return subprocess.Popen([*_die_with_parent(), *cmd], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=daemon_env(env), cwd=cwd, start_new_session=True)


def _spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return spawn([str(spark_home() / "bin" / "spark-class"), *args], log, env)


def start_cluster(root: Path, workers: int = 2, timeout: float = 120.0) -> SparkCluster:
    """A master and `workers` workers under `root`; returns once all are ALIVE.
    On failure everything started is killed and the error carries the logs' tails."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("no java on PATH and no JAVA_HOME: the cluster needs Java 17")
    root.mkdir(parents=True, exist_ok=True)
    port, ui = free_port(), free_port()
    log = root / "master.log"
    master = _spawn(["org.apache.spark.deploy.master.Master", "--host", LOCALHOST, "--port", str(port),
                     "--webui-port", str(ui)], log)
    cluster = SparkCluster(root, master, port, ui, log)
    try:
        cluster.wait_for_workers(timeout)   # none yet: until the master answers, so workers register at once
        for i in range(workers):
            cluster.start_worker(i)
        cluster.wait_for_workers(timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster
