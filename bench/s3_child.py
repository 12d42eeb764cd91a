"""A Spark process of its own for the S3 workloads: ``python -m bench.s3_child CONF_JSON``.

Started once per workload by bench/s3_scan.py with S3A pointed at the test S3 server (the
main bench session has no S3A on its classpath). It reads one command per line on stdin,
``lance URL`` or ``parquet URL``, runs the aggregation of every column of that dataset
(every value decoded) and answers one JSON line: the query's seconds, its result and, for
Lance, the scan's "read requests" metric. Both formats run alternately in this one JVM, so
both are equally warm.
"""
from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    conf = json.loads(sys.argv[1])
    from bench import env
    from bench.scan_child import aggregates, last_execution_metric

    env.use_in_tree_package()
    env.ensure_jar()
    from lance_spark.testing import local_session

    spark = local_session(conf, app="bench-s3", cores="2", driver_memory="4g")
    print("READY", flush=True)
    for line in sys.stdin:
        fmt, url = line.split()
        out: dict = {}
        try:
            df = spark.read.format(fmt).load(url)
            t0 = time.perf_counter()
            row = df.agg(*aggregates(df.schema)).collect()[0]
            out = {"ok": True, "seconds": time.perf_counter() - t0, "result": [v if isinstance(v, (int, float)) or v is None else str(v) for v in row]}
            if fmt == "lance":
                out["read_requests"] = last_execution_metric(spark, "read requests to Lance files")
        except Exception as e:  # noqa: BLE001 - reported to the parent
            out = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        print("RESULT " + json.dumps(out), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
