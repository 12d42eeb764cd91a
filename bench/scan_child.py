"""One scan in a Spark process of its own, with a small heap: ``python -m bench.scan_child``.

Run by the ``spark_scan_larger_than_memory`` workload (bench/memory_scan.py) so that the
main bench session keeps its settings. Aggregates every column of a dataset (so every value
is decoded) and prints one JSON line: seconds of the query, its result, the JVM's heap limit
and peaks, and, for Lance, the scan node's "peak reader memory per task" metric.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Dict, List, Optional

PEAK_METRIC = "peak reader memory per task"   # ScanMetrics.PeakTaskMemory's description


def aggregates(schema) -> List:
    """sum of every number, max(length) of every string, max of anything else (dates,
    timestamps): every value is read."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import NumericType, StringType

    out = [F.count(F.lit(1))]
    for f in schema.fields:
        if isinstance(f.dataType, StringType):
            out.append(F.max(F.length(f.name)))
        else:
            out.append(F.sum(f.name) if isinstance(f.dataType, NumericType) else F.max(f.name))
    return out


def last_execution_metric(spark, description: str) -> Optional[str]:
    """The aggregated value (as the Spark UI shows it) of a SQL metric of the last SQL
    execution, read from the session's SQL status store."""
    jsc = spark.sparkContext._jsc.sc()
    jsc.listenerBus().waitUntilEmpty(10_000)
    store = spark._jsparkSession.sharedState().statusStore()
    execs = store.executionsList()
    if execs.size() == 0:
        return None
    last = execs.apply(execs.size() - 1)
    ms = last.metrics()
    ids = {int(ms.apply(i).accumulatorId()) for i in range(ms.size())
           if ms.apply(i).name() == description}
    values = store.executionMetrics(last.executionId())
    it = values.iterator()
    while it.hasNext():
        kv = it.next()
        if int(kv._1()) in ids:
            return str(kv._2())
    return None


def metric_bytes(text: Optional[str]) -> Optional[int]:
    """The byte count in "max 3.2 MiB (3355443 bytes) over 20 tasks"."""
    if not text or "(" not in text:
        return None
    return int(text.split("(", 1)[1].split(" ", 1)[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", choices=["lance", "parquet"], required=True)
    ap.add_argument("--path", required=True)
    ap.add_argument("--heap", default="512m")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=None, help="Lance batchSize option")
    args = ap.parse_args(argv)

    from bench import env

    env.use_in_tree_package()   # the same lance_spark (and jar) as the parent measures
    from lance_spark.testing import local_session

    spark = local_session({"spark.sql.shuffle.partitions": str(args.cores)}, app="bench-scan-child",
                          cores=str(args.cores), driver_memory=args.heap)
    out: Dict[str, object] = {"format": args.format, "heap_setting": args.heap}
    try:
        jvm = spark._jvm
        mf = jvm.java.lang.management.ManagementFactory
        pools = [p for p in mf.getMemoryPoolMXBeans() if str(p.getType().name()) == "HEAP"]
        for p in pools:
            p.resetPeakUsage()
        out["heap_max"] = int(jvm.java.lang.Runtime.getRuntime().maxMemory())
        reader = spark.read.format(args.format)
        if args.batch_size and args.format == "lance":
            reader = reader.option("batchSize", args.batch_size)
        df = reader.load(args.path)
        t0 = time.perf_counter()
        row = df.agg(*aggregates(df.schema)).collect()[0]
        out["seconds"] = time.perf_counter() - t0
        out["result"] = list(row)
        out["rows"] = int(row[0])
        out["ok"] = True
        out["jvm_heap_peak"] = sum(int(p.getPeakUsage().getUsed()) for p in pools)
        out["jvm_rss_peak"] = env.peak_rss(int(jvm.java.lang.ProcessHandle.current().pid()))
        out["batch_size"] = args.batch_size or int(
            spark.conf.get("spark.sql.parquet.columnarReaderBatchSize", "4096")
            if args.format == "parquet" else 8192)
        if args.format == "lance":
            text = last_execution_metric(spark, PEAK_METRIC)
            out["peak_task_metric"] = text
            out["peak_task_bytes"] = metric_bytes(text)
    except Exception as e:  # reported, not raised: the parent records the failure
        out["ok"] = False
        out["error"] = f"{type(e).__name__}: {e}"[:2000]
    finally:
        spark.stop()
    print("RESULT " + json.dumps(out, default=str), flush=True)   # (dates, decimals: as text)
    return 0 if out.get("ok") else 1


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
