"""Structured Streaming sink throughput (issue 41): the same stream written by the Lance sink and
by Delta Lake's sink, one after the other in one Spark session (local[2]): Spark's
`rate-micro-batch` source gives exactly `--rows` rows a micro-batch (an event: id, user, score,
a 32-float embedding), with a processing-time trigger of `--trigger` seconds, for `--batches`
batches. Per batch, Spark's own progress figures: the end-to-end time of the trigger
(`triggerExecution`) and of the sink's write and commit (`addBatch`). Then, the cost of planning
a query (analysis, optimization and physical planning of a filtered scan, not running it) on
the table after the first batch and after the last one: the target is under 2x.

    python -m bench.streaming [--quick] [--batches 1000] [--delta-batches N] [--rows 10000] [--trigger 1]
                              [--out docs/benchmarks-streaming.md]

`--delta-batches` stops Delta's stream earlier than Lance's (its batches take seconds each: 1,000
of them take about an hour); the latency ratio compares medians, the planning growth is Lance's.

Targets: the Lance sink's per-batch latency (median) at most 1.0x Delta's; planning after the last
batch at most 2x planning after the first. Nothing here asserts on timings."""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List

from . import env

WHERE = env.use_in_tree_package()


def _events(spark, rows: int):
    return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows).option("numPartitions", 2)
            .load()
            .selectExpr("value AS id", "concat('user-', CAST(value % 1000 AS STRING)) AS user",
                        "CAST(value % 97 AS DOUBLE) * 0.5 AS score",
                        "transform(sequence(1, 32), i -> CAST(sin(value + i) AS FLOAT)) AS emb"))


def _plan_seconds(spark, fmt: str, path: str, reps: int = 7) -> float:
    """Median seconds to analyse, optimize and plan a filtered scan of the table (py4j)."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        df = spark.read.format(fmt).load(path).where("id % 1000 = 7 AND score > 10").select("id", "user")
        df._jdf.queryExecution().executedPlan()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _run(spark, fmt: str, path: str, ckpt: str, rows: int, batches: int, trigger: float, log) -> Dict[str, Any]:
    q = (_events(spark, rows).writeStream.format(fmt).option("checkpointLocation", ckpt)
         .trigger(processingTime=f"{trigger} seconds").start(path))
    progress: List[dict] = []
    first_plan = None
    seen = set()
    try:
        while len(progress) < batches:
            if q.exception() is not None:
                raise RuntimeError(str(q.exception()))
            for p in q.recentProgress:
                if p["batchId"] not in seen and p["numInputRows"] > 0:
                    seen.add(p["batchId"])
                    progress.append(p)
            if first_plan is None and progress:
                first_plan = _plan_seconds(spark, fmt, path)
            if len(progress) % 100 == 0 and progress:
                log(f"{fmt}: {len(progress)} batches")
            time.sleep(0.2)
    finally:
        q.stop()
    progress = sorted(progress, key=lambda p: p["batchId"])[:batches]
    trig = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    add = [p["durationMs"].get("addBatch", 0) / 1000 for p in progress]
    last_plan = _plan_seconds(spark, fmt, path)
    rows_in = spark.read.format(fmt).load(path).count()
    return {"format": fmt, "batches": len(progress), "rows": rows_in,
            "trigger_median": statistics.median(trig), "trigger_p95": sorted(trig)[int(0.95 * (len(trig) - 1))],
            "add_median": statistics.median(add), "add_p95": sorted(add)[int(0.95 * (len(add) - 1))],
            "plan_first": first_plan, "plan_last": last_plan}


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="60 batches (default 1000)")
    ap.add_argument("--batches", type=int, default=None)
    ap.add_argument("--delta-batches", type=int, default=None, help="Delta's batches (default: --batches)")
    ap.add_argument("--rows", type=int, default=10_000, help="rows a micro-batch (default 10,000)")
    ap.add_argument("--trigger", type=float, default=1.0, help="processing-time trigger, seconds (default 1)")
    ap.add_argument("--out", default=str(env.REPO / "docs" / "benchmarks-streaming.md"))
    args = ap.parse_args(argv)
    batches = args.batches or (60 if args.quick else 1000)

    jar = env.ensure_jar()
    from lance_spark.testing import delta_settings, local_session

    def log(msg: str) -> None:
        print(f"[bench.streaming {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    spark = local_session({**delta_settings(), "spark.sql.shuffle.partitions": "2"},
                          app="lance-spark-bench-streaming", driver_memory="4g")
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(tempfile.mkdtemp(prefix="bench-streaming-"))
    results = []
    try:
        for fmt in ("lance", "delta"):
            n = batches if fmt == "lance" else (args.delta_batches or batches)
            log(f"{fmt}: {n} batches of {args.rows:,} rows, {args.trigger} s triggers")
            results.append(_run(spark, fmt, str(root / f"t_{fmt}"), str(root / f"ckpt_{fmt}"), args.rows, n,
                                args.trigger, log))
            log(json.dumps(results[-1]))
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    _report(Path(args.out), results, batches, args, WHERE, jar)
    env.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    (env.RESULTS_DIR / f"{stamp}-streaming.json").write_text(json.dumps(
        {"machine": env.machine(), "args": vars(args), "results": results}, indent=1, default=str))
    return 0


def _report(out: Path, results: List[Dict[str, Any]], batches: int, args, where: str, jar: str) -> None:
    m = env.machine()
    lance, delta = results
    ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
    lines = [
        "# Structured Streaming: the Lance sink against Delta Lake's",
        "",
        f"Generated by `python -m bench.streaming{' --quick' if args.quick else ''}` "
        f"({datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}); see the module's docstring.",
        f"Machine: {m.get('cpu_model')}, {m.get('nproc')} cores (shared with other work). Package: `{where}`; "
        f"jar: `{jar}`.",
        f"{batches} micro-batches (Lance; Delta: {delta['batches']}) of {args.rows:,} rows (id, user, score, "
        "a 32-float embedding), "
        f"{args.trigger} s processing-time triggers, local[2], one stream at a time.",
        "",
        "| sink | batches | batch end to end, median | p95 | write + commit, median | p95 | rows after | "
        "planning after batch 1 | after the last | growth |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(f"| {r['format']} | {r['batches']:,} | {ms(r['trigger_median'])} | {ms(r['trigger_p95'])} | "
                     f"{ms(r['add_median'])} | {ms(r['add_p95'])} | {r['rows']:,} | {ms(r['plan_first'])} | "
                     f"{ms(r['plan_last'])} | {r['plan_last'] / r['plan_first']:.2f}x |")
    ratio = lance["trigger_median"] / delta["trigger_median"]
    growth = lance["plan_last"] / lance["plan_first"]
    lines += [
        "",
        f"- Per-batch latency, Lance / Delta (medians, end to end): **{ratio:.2f}x** "
        f"(target at most 1.0x: {'met' if ratio <= 1.0 else 'missed'}).",
        f"- Planning a query after {lance['batches']:,} batches / after the first, Lance: **{growth:.2f}x** "
        f"(target under 2x: {'met' if growth < 2.0 else 'missed'}).",
        "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
