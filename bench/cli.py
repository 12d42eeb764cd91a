"""python -m bench [--quick] [--only NAME,...] [--out docs/benchmarks.md]"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from . import env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("--quick", action="store_true",
                    help="small data and 1 + 3 repetitions (1M rows reader, 500k Spark)")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--out", default=None,
                    help="the Markdown report (default docs/benchmarks.md); the PNG goes next to it")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--rows", type=int, default=None,
                    help="override every row count (development only)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="warm-up runs of each side (default: 3 in full mode, 1 in quick mode)")
    ap.add_argument("--driver-memory", default="6g", help="spark.driver.memory (default 6g)")
    ap.add_argument("--no-report", action="store_true",
                    help="write only the JSON, not docs/benchmarks.{md,png}")
    args = ap.parse_args(argv)

    pkg = env.use_in_tree_package()
    from . import harness, report, workloads  # noqa: F401 - registers the workloads
    from . import s3_scan  # noqa: F401 - the S3 workloads
    from . import first_query  # noqa: F401 - first queries of fresh JVMs
    from . import memory_scan  # noqa: F401 - registered last: it runs last

    if args.list:
        for w in harness.REGISTRY.values():
            print(f"{w.name:22s} {w.kind:7s} {w.this_label} vs {w.comparator}  [{w.target_text}]")
        return 0
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(harness.REGISTRY)
    unknown = [n for n in names if n not in harness.REGISTRY]
    if unknown:
        ap.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(harness.REGISTRY)}")
    mode = harness.QUICK if args.quick else harness.FULL
    if args.warmup is not None:
        mode = dataclasses.replace(mode, warmup=max(1, args.warmup))
    if args.rows:
        mode = dataclasses.replace(mode, name=mode.name + "-dev", reader_rows=args.rows,
                                   spark_rows=args.rows)

    def log(msg: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    log(f"mode {mode.name}; workloads {', '.join(names)}; lance_spark from {pkg}")
    ctx = harness.Context(mode, args.driver_memory, log)
    started = time.time()
    records = []
    jar = None
    try:
        for n in names:
            w = harness.REGISTRY[n]
            log(f"{n} ...")
            if w.kind == "spark" and jar is None:
                jar = env.ensure_jar()
            records.append(harness.run(w, ctx))
    finally:
        ctx.stop()
    results = {"mode": dataclasses.asdict(mode), "only": names if args.only else None,
               "machine": env.machine(), "lance_spark": pkg, "jar": jar,
               "driver_memory": args.driver_memory, "wall_seconds": time.time() - started,
               "workloads": records}
    log(f"raw results: {report.write_json(results)}")
    if args.no_report:
        return 1 if any(r.get("error") for r in records) else 0
    if args.rows and args.out is None:
        log("--rows without --out: not overwriting docs/benchmarks.md (development run)")
        return 1 if any(r.get("error") for r in records) else 0
    out = Path(args.out) if args.out else env.REPO / "docs" / "benchmarks.md"
    png = report.write_plot(records, out.with_suffix(".png"), mode.name)
    log(f"wrote {report.write_markdown(results, out, png)}" + (f" and {png}" if png else ""))
    return 1 if any(r.get("error") for r in records) else 0
