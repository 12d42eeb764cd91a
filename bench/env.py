"""The environment of a run: repository paths, which lance_spark is measured, machine facts,
per-process peak memory, the Spark session and its JVM metrics."""
from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
from pathlib import Path
from typing import Dict, Optional

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
DATA_DIR = BENCH / "data"
RESULTS_DIR = BENCH / "results"
JAR_NAME = "lance-spark-bundle-4.2_2.13-0.1.0.jar"  # the line of the pyspark pin
BUILT_JAR = REPO / "target" / "bundles" / JAR_NAME


def use_in_tree_package() -> str:
    """Measure the repository's python/lance_spark when it is built (protobuf modules generated,
    as `make python` does), else the installed package.  Returns where lance_spark comes from."""
    src = REPO / "python"
    if (src / "lance_spark" / "_proto").is_dir() and str(src) not in sys.path:
        sys.path.insert(0, str(src))
    import lance_spark

    return str(Path(lance_spark.__file__).resolve().parent)


def ensure_jar() -> str:
    """The connector jar for Spark: $LANCE_SPARK_JAR, else the package's jar, else the sbt build's."""
    import lance_spark

    if not os.environ.get("LANCE_SPARK_JAR"):
        try:
            return lance_spark.jar_path()
        except FileNotFoundError:
            if not BUILT_JAR.is_file():
                raise
            os.environ["LANCE_SPARK_JAR"] = str(BUILT_JAR)
    return lance_spark.jar_path()


# -- machine ---------------------------------------------------------------------------------

def machine() -> Dict[str, object]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    import numpy
    import pyarrow

    versions = {"python": platform.python_version(), "numpy": numpy.__version__,
                "pyarrow": pyarrow.__version__}
    for mod in ("pyspark", "lance"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # pragma: no cover
            pass
    return {"nproc": os.cpu_count(), "memory_bytes": mem, "cpu_model": cpu,
            "kernel": platform.release(), "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
            "versions": versions}


# -- peak resident memory of a process (Linux: VmHWM, reset through clear_refs) --------------

def reset_peak_rss(pid: int | str = "self") -> bool:
    """Reset the kernel's peak-RSS counter of a process to its current RSS (Linux >= 4.0)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def current_rss(pid: int | str = "self") -> Optional[int]:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss(pid: int | str = "self") -> Optional[int]:
    """Peak resident set size in bytes since the last reset (None off Linux)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    if pid == "self":
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return None


# -- Spark -----------------------------------------------------------------------------------

#: Delta Lake, the comparator of the DML workloads: its jars come from Maven Central through Ivy
#: (cached under ~/.cache/lance-spark/ivy); Delta is the session catalog, Lance is `lance`.
def spark_session(driver_memory: str, cores: str = "*"):
    """local[*] session with the connector and Delta Lake; the driver JVM is also the only executor."""
    from lance_spark.testing import delta_settings, local_session

    ensure_jar()
    spark = local_session({**delta_settings(), "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "true"},
                          app="lance-spark-bench", cores=cores, driver_memory=driver_memory)
    spark.sparkContext.setLogLevel("WARN")
    return spark


class JvmMemory:
    """Peak heap used (sum of the heap pools' peaks) and peak RSS of the driver/executor JVM."""

    def __init__(self, spark):
        jvm = spark._jvm
        mf = jvm.java.lang.management.ManagementFactory
        self.pools = [p for p in mf.getMemoryPoolMXBeans() if str(p.getType().name()) == "HEAP"]
        self.pid = int(jvm.java.lang.ProcessHandle.current().pid())
        self.max_heap = int(mf.getMemoryMXBean().getHeapMemoryUsage().getMax())

    def reset(self) -> None:
        for p in self.pools:
            p.resetPeakUsage()
        reset_peak_rss(self.pid)

    def read(self) -> Dict[str, Optional[int]]:
        return {"jvm_heap_peak": sum(int(p.getPeakUsage().getUsed()) for p in self.pools),
                "jvm_rss_peak": peak_rss(self.pid)}


class StageInput:
    """Input bytes/records of the stages run since mark() (Spark's task inputMetrics, read from
    the application status store through py4j)."""

    def __init__(self, spark):
        self.sc = spark.sparkContext._jsc.sc()
        gw = spark.sparkContext._gateway
        self._no_quantiles = gw.new_array(gw.jvm.double, 0)
        self._seen = set()

    def _stages(self):
        self.sc.listenerBus().waitUntilEmpty(10_000)
        # stageList(statuses, details, withSummaries, unsortedQuantiles, taskStatus) in Spark 4
        seq = self.sc.statusStore().stageList(None, False, False, self._no_quantiles, None)
        return [seq.apply(i) for i in range(seq.length())]

    def mark(self) -> None:
        self._seen = {(int(s.stageId()), int(s.attemptId())) for s in self._stages()}

    def since_mark(self) -> Dict[str, int]:
        b = r = 0
        for s in self._stages():
            if (int(s.stageId()), int(s.attemptId())) not in self._seen:
                b += int(s.inputBytes())
                r += int(s.inputRecords())
        return {"input_bytes": b, "input_records": r}
