"""A Spark Connect server in a process of its own, for tests: pyspark's spark-submit running
org.apache.spark.sql.connect.service.SparkConnectServer on a free localhost port (what
sbin/start-connect-server.sh of a Spark distribution runs; pyspark's wheel ships no sbin
script for it but has the server's jar, spark-connect_<scala>-<version>.jar, in pyspark/jars).

    with ConnectServer(jars=[bundle], conf={...}, workdir=tmp) as server:
        spark = SparkSession.builder.remote(server.url).getOrCreate()
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, Mapping, Optional

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def connect_packages(home: Path) -> list[str]:
    """--packages for the server: none when the distribution has the spark-connect jar (pyspark
    4.x wheels do), else org.apache.spark:spark-connect_<scala>:<version> (pyspark 3.5's)."""
    jars = home / "jars"
    if any(p.name.startswith("spark-connect_") for p in jars.iterdir()):
        return []
    import pyspark

    from lance_spark._spark import scala_version_of

    scala = scala_version_of(jars) or "2.12"
    return [f"org.apache.spark:spark-connect_{scala}:{pyspark.__version__}"]


class ConnectServer:
    """Starts at construction, stops with stop() (or the with block); `url` is sc://127.0.0.1:<port>."""

    def __init__(self, jars: Iterable[str] = (), conf: Optional[Mapping[str, str]] = None,
                 workdir: Optional[Path] = None, name: str = "lance-spark-connect",
                 driver_memory: str = "1g"):
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.workdir = Path(workdir or Path.cwd())
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / f"{name}.log"
        home = spark_home()
        settings = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.warehouse.dir": str(self.workdir / "spark-warehouse"),
        }
        settings.update(conf or {})
        cmd = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", "local[2]",
               "--name", name, "--driver-memory", driver_memory]
        jars = [str(j) for j in jars]
        if jars:
            cmd += ["--jars", ",".join(jars)]
        packages = connect_packages(home)
        if packages:
            cmd += ["--packages", ",".join(packages)]
        for k, v in settings.items():
            cmd += ["--conf", f"{k}={v}"]
        self.command = cmd
        env = dict(os.environ)
        env.setdefault("SPARK_HOME", str(home))
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env["TZ"] = "UTC"
        for k in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE"):
            env.pop(k, None)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=self.workdir, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)

    def wait_ready(self, timeout: float = 120.0) -> "ConnectServer":
        """Returns once the server accepts connections on its port; RuntimeError (with the end
        of its log) if it exits or the timeout passes first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"the Spark Connect server did not listen within {timeout:.0f}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)   # the group this server was started in
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=timeout)
        if not self._log.closed:
            self._log.close()

    def __enter__(self) -> "ConnectServer":
        return self.wait_ready()

    def __exit__(self, *exc) -> None:
        self.stop()


def main() -> None:
    """python integration-tests/connect_server.py [JAR...]: a server in the foreground, for trying things."""
    server = ConnectServer(jars=sys.argv[1:], workdir=Path.cwd() / "connect-server")
    server.wait_ready()
    print(f"Spark Connect server at {server.url} (log: {server.log_path}); Ctrl-C stops it", flush=True)
    try:
        server.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
