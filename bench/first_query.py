"""``spark_first_query_*``: the first query of a fresh JVM, Lance vs Parquet.

Each run starts a Spark process of its own (bench/scan_child.py, ``local[2]``, 4 GiB) and
times its first query alone (its JVM start and the DataFrame's creation are not counted):
every column of a table aggregated, the code of both readers still interpreted or being
compiled by the JIT. What a user's first query on a new executor, or a short job, sees.
"""
from __future__ import annotations

from .harness import Context, Prepared, Timed, workload
from .memory_scan import _child

HEAP = "4g"


def _first_query(kind: str) -> None:
    @workload(f"spark_first_query_{kind}", kind="python",
              this="Spark on Lance 2.2 (Spark-written), fresh JVM",
              comparator="Spark on Parquet, fresh JVM", target=1.0, target_text="<= 1.0x Parquet",
              description=f"The first query of a fresh Spark process (`local[2]`, {HEAP}): every "
                          f"column of the `{kind}` table aggregated, over the rows Spark wrote at "
                          "file version 2.2 vs the same rows in Parquet. Only the query is timed "
                          "(not the JVM's start); each run is a new process.")
    def prepare(ctx: Context) -> Prepared:
        from . import data
        from .workloads import _check_rows, _spark_lance

        lance_path = str(_spark_lance(ctx, kind))
        pq_path = str(data.parquet_dataset(ctx.spark, kind, ctx.mode.spark_rows, ctx.log))

        def run(fmt: str, path: str) -> Timed:
            res = _child(fmt, path, ctx.log, heap=HEAP, batch=None)
            return Timed(res["seconds"], tuple(res["result"]),
                         {"jvm_heap_peak": res["jvm_heap_peak"], "jvm_rss_peak": res["jvm_rss_peak"]})

        return Prepared(this=lambda: run("lance", lance_path), other=lambda: run("parquet", pq_path),
                        rows=ctx.mode.spark_rows, check=_check_rows, self_timed=True)


for _kind in ("events", "lineitem"):
    _first_query(_kind)
