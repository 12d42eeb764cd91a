"""``spark_scan_larger_than_memory``: a full scan of a dataset several times larger than the
JVM heap it runs in, in a Spark process of its own (bench/scan_child.py), so the main bench
session keeps its settings. Shows that the scan succeeds and that the reader's memory per task
follows the batch size, not the file or fragment size.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import data
from .env import REPO
from .harness import Context, Prepared, Timed, workload

HEAP = "512m"          # spark.driver.memory of the child (local[2]: driver = executor)
CORES = 2
LANCE_BATCH = 8192     # the connector's default batchSize (LanceOptions)
ROWS = {"full": 20_000_000, "quick": 10_000_000}   # wide table: ~3.6 GB / ~1.8 GB of Lance


def _child(fmt: str, path: str, log, heap: str = HEAP, batch: Optional[int] = LANCE_BATCH) -> Dict[str, Any]:
    """The child's JSON result: one query of every column of `path` in a fresh local[2] JVM."""
    cmd = [sys.executable, "-m", "bench.scan_child", "--format", fmt, "--path", path,
           "--heap", heap, "--cores", str(CORES)]
    if fmt == "lance" and batch:
        cmd += ["--batch-size", str(batch)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        tail = (proc.stderr or "")[-3000:]
        raise RuntimeError(f"scan child ({fmt}) exited {proc.returncode} without a result:\n{tail}")
    res = json.loads(lines[-1][len("RESULT "):])
    if not res.get("ok"):
        raise RuntimeError(f"scan child ({fmt}) failed: {res.get('error')}")
    log(f"    {fmt}: query {res['seconds']:.2f}s, heap max {res['heap_max'] / 2**20:.0f} MiB, "
        f"heap peak {res['jvm_heap_peak'] / 2**20:.0f} MiB"
        + (f", {res['peak_task_metric']}" if res.get("peak_task_metric") else ""))
    return res


def _arrow_row_bytes(schema) -> float:
    """Bytes of one row in Arrow vectors: fixed widths, strings as 4-byte offsets (their
    characters are added from the data), a validity bit per column."""
    import pyarrow as pa

    width = 0.0
    for f in schema:
        if pa.types.is_string(f.type) or pa.types.is_binary(f.type):
            width += 4
        else:
            width += f.type.bit_width / 8
        width += 1 / 8
    return width


@workload("spark_scan_larger_than_memory", kind="python",
          this=f"Spark on Lance, {HEAP} heap", comparator=f"Spark on Parquet, {HEAP} heap",
          target=None, target_text="(succeeds; memory per task ~ batch)",
          description=f"Every column of the 20-column wide table aggregated (sums, max(length)) "
                      f"by a Spark process of its own (`local[{CORES}]`, "
                      f"`spark.driver.memory={HEAP}`) on a dataset several times larger than that "
                      "heap. Times are of the child's query alone (its JVM start is not "
                      "counted). Peak reader memory per task is the scan node's SQL metric: the "
                      "peak of the task's Arrow allocator plus the heap buffers of one batch's "
                      "storage reads (the reader's reusable read buffer), the maximum over tasks.")
def spark_scan_larger_than_memory(ctx: Context) -> Prepared:
    import pyarrow.compute as pc

    rows = ROWS.get(ctx.mode.name, ctx.mode.spark_rows)
    lance_path = str(data.lance_dataset("wide", rows, ctx.log))
    pq_path = str(data.parquet_dataset(ctx.spark, "wide", rows, ctx.log))
    lance_bytes = data.tree_bytes(Path(lance_path))
    first = next(data.batches("wide", 100_000))
    chars = sum(pc.sum(pc.binary_length(first[c])).as_py() for c in first.schema.names
                if str(first.schema.field(c).type) == "string") / first.num_rows
    row_bytes = _arrow_row_bytes(first.schema) + chars
    results: Dict[str, List[Dict[str, Any]]] = {"lance": [], "parquet": []}

    def run(fmt: str, path: str):
        res = _child(fmt, path, ctx.log)
        results[fmt].append(res)
        return Timed(res["seconds"], tuple(res["result"]),
                     {"jvm_heap_peak": res["jvm_heap_peak"], "jvm_rss_peak": res["jvm_rss_peak"]})

    def derive(_this_s: float, _other_s: float) -> Dict[str, Any]:
        lance, pq = results["lance"], results["parquet"]
        peak = max(r["peak_task_bytes"] for r in lance)
        heap_max = lance[0]["heap_max"]
        return {
            "dataset_bytes": lance_bytes,
            "parquet_bytes": data.tree_bytes(Path(pq_path)),
            "heap_max_bytes": heap_max,
            "dataset_to_heap": round(lance_bytes / heap_max, 2),
            "runs_succeeded": f"{len(lance)} Lance, {len(pq)} Parquet",
            "lance_query_s": statistics.median(r["seconds"] for r in lance),
            "parquet_query_s": statistics.median(r["seconds"] for r in pq),
            "peak_task_bytes": peak,
            "batch_rows": LANCE_BATCH,
            "batch_bytes": int(LANCE_BATCH * row_bytes),
            "peak_to_batch": round(peak / (LANCE_BATCH * row_bytes), 2),
            "child_heap_peak_bytes": {"lance": max(r["jvm_heap_peak"] for r in lance),
                                      "parquet": max(r["jvm_heap_peak"] for r in pq)},
            "child_rss_peak_bytes": {"lance": max(r["jvm_rss_peak"] or 0 for r in lance),
                                     "parquet": max(r["jvm_rss_peak"] or 0 for r in pq)},
        }

    def check(a, b) -> str:
        from .workloads import _check_rows

        return _check_rows(a, b)

    return Prepared(this=lambda: run("lance", lance_path), other=lambda: run("parquet", pq_path),
                    rows=rows, check=check, derive=derive, self_timed=True,
                    facts={"heap_setting": HEAP, "cores": CORES})
