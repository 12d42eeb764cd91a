"""Scalar indices from Spark (issue 37), measured in one Spark session against Spark on Parquet
and against pylance.

The table: ``--rows`` rows of ``id`` (sorted), ``key`` (the same values shuffled), ``label`` (100
values: each 1% of the rows) and ``emb`` (a ``--dim``-float vector beside them), generated with
numpy (seeded), written by pylance, by the connector (from pylance's table) and by Spark's Parquet
writer (the same rows).

* **Lookups**: ``id = k`` and ``key = k`` (BTREE), 1,000 random keys ``key IN (...)`` (BTREE),
  ``label = 'l7'`` (BITMAP, 1%), each selecting ``id, key, label``; on the pylance-written table
  with pylance's indices and on the connector's table with indices built by Spark, against the
  same query on the Parquet copy. A first run of each side (results checked equal, bytes read
  taken), warm-ups as bench/harness.py's full mode (at least 3 rounds, more, up to 40, until each
  side has run 5 s; ``--warmups 1``: the first run only), every query's before any is timed
  (the JIT is still compiling the planning code all lookups share during the first query's
  warm-ups), then ``--reps`` rounds alternating the sides; medians; ratio = Lance / Parquet.
  Each round times the query twice: collected to Python (``DataFrame.collect()``, as a PySpark
  user runs it) and collected on the JVM (``Dataset.collect`` through py4j: the same query
  without PySpark's pickling of the rows, which both sides pay). Bytes read: the Lance scan's
  ``lanceBytesRead`` metric and the Parquet stage's input bytes.
* **Build**: ``CREATE INDEX`` of a BTREE over ``key`` from Spark (``CALL
  lance.system.create_index``) against pylance's ``create_scalar_index``, each round on fresh
  copies of one pylance-written table of the same rows without the vector column; medians of
  ``--build-reps`` rounds.

With ``--staged`` only two copies are on disk at a time (10M rows with 384 floats are 15 GB a
copy): pylance's and Parquet are measured side by side, then pylance's is deleted and the
connector's copy is written from the Parquet copy and measured beside Parquet again; each Lance
side's ratio is to the Parquet of its own phase.

    python -m bench.indices [--rows 10000000] [--dim 384] [--reps 5] [--staged] [--data bench-data/indices]
                            [--out docs/benchmarks-indices.md]

Targets (issue 37): id/key lookups at most 0.05x Parquet, 1,000 ids at most 0.2x, the BITMAP
label at most 0.5x; the Spark build at most 1.5x pylance's. Nothing here asserts on timings."""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from . import env, report
from .harness import FULL, warm_up

WHERE = env.use_in_tree_package()
BATCH = 250_000
TARGETS = {"id = k (BTREE, sorted)": 0.05, "key = k (BTREE, unsorted)": 0.05,
           "key IN (1,000 keys) (BTREE)": 0.2, "label = 'l7' (BITMAP, 1%)": 0.5}


def log(msg: str) -> None:
    print(f"[bench.indices {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _batches(rows: int, dim: int, seed: int = 7):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    keys = rng.permutation(rows).astype(np.int64)
    labels = np.array([f"l{i}" for i in range(100)], dtype=object)
    for start in range(0, rows, BATCH):
        n = min(BATCH, rows - start)
        k = keys[start:start + n]
        cols = {"id": pa.array(np.arange(start, start + n, dtype=np.int64)), "key": pa.array(k),
                "label": pa.array(labels[k % 100])}
        if dim:
            flat = rng.standard_normal(n * dim, dtype=np.float32)
            cols["emb"] = pa.FixedSizeListArray.from_arrays(pa.array(flat), dim)
        yield pa.RecordBatch.from_pydict(cols)


def _paths(root: Path) -> Dict[str, Path]:
    return {"pylance": root / "pylance.lance", "spark": root / "spark.lance", "parquet": root / "parquet"}


def _generate(root: Path, rows: int, dim: int, spark, staged: bool = False) -> Dict[str, Path]:
    """The three copies (staged: pylance's and Parquet only; the connector's is written later by
    [_write_spark_copy], after pylance's is deleted)."""
    import lance
    import pyarrow as pa

    paths = _paths(root)
    stamp = root / (f"done-{rows}-{dim}" + ("-staged" if staged else ""))
    if stamp.exists() and paths["pylance"].exists():
        return paths
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    first = next(_batches(min(rows, 1), dim))
    reader = pa.RecordBatchReader.from_batches(first.schema, _batches(rows, dim))
    log(f"pylance writes {rows:,} rows")
    lance.write_dataset(reader, str(paths["pylance"]))
    src = spark.read.format("lance").load(str(paths["pylance"]))
    log("Spark writes Parquet" + ("" if staged else "; the connector writes its copy"))
    src.write.parquet(str(paths["parquet"]))
    if not staged:
        src.write.format("lance").save(str(paths["spark"]))   # (emb stays a vector: its metadata says so)
    stamp.touch()
    return paths


def _write_spark_copy(spark, paths: Dict[str, Path], dim: int) -> None:
    """Staged runs: the connector's copy from the Parquet copy (the same rows and order), with
    ``emb`` stored as a vector as in pylance's."""
    shutil.rmtree(paths["spark"], ignore_errors=True)
    log("the connector writes its copy from the Parquet copy")
    w = spark.read.parquet(str(paths["parquet"])).write.format("lance")
    if dim:
        w = w.option("vectorColumns", f"emb:{dim}")
    w.save(str(paths["spark"]))


def _call_create_index(spark, path: Path, column: str, kind: str, name: str) -> None:
    spark.sql(f"CALL lance.system.create_index(table => '`{path}`', column => '{column}', "
              f"index_type => '{kind}', name => '{name}')").collect()


def _index(spark, paths: Dict[str, Path], sides: Tuple[str, ...] = ("pylance", "spark")) -> None:
    import lance

    if "pylance" in sides:
        ds = lance.dataset(str(paths["pylance"]))
        have = {i["name"] for i in ds.list_indices()}
        for col, kind in (("id", "BTREE"), ("key", "BTREE"), ("label", "BITMAP")):
            if f"{col}_idx" not in have:
                ds.create_scalar_index(col, kind, name=f"{col}_idx")
    if "spark" in sides:
        have = {i["name"] for i in lance.dataset(str(paths["spark"])).list_indices()}
        for col, kind in (("id", "btree"), ("key", "btree"), ("label", "bitmap")):
            if f"{col}_idx" not in have:
                _call_create_index(spark, paths["spark"], col, kind, f"{col}_idx")


def _build_times(spark, rows: int, root: Path, reps: int) -> Dict[str, List[float]]:
    """Each round builds on two fresh copies of one pylance-written table of the same rows
    without the vector column (a columnar build reads the key column only)."""
    import lance
    import pyarrow as pa

    base = root / f"keys-{rows}.lance"
    if not base.exists():
        first = next(_batches(1, 0))
        lance.write_dataset(pa.RecordBatchReader.from_batches(first.schema, _batches(rows, 0)), str(base))
    a, b = root / "build_pylance.lance", root / "build_spark.lance"
    out: Dict[str, List[float]] = {"pylance create_scalar_index": [], "Spark create_index": []}
    for r in range(reps):
        for p in (a, b):
            shutil.rmtree(p, ignore_errors=True)
            shutil.copytree(base, p)
        t = time.perf_counter()
        lance.dataset(str(a)).create_scalar_index("key", "BTREE", name="key_idx")
        out["pylance create_scalar_index"].append(time.perf_counter() - t)
        t = time.perf_counter()
        _call_create_index(spark, b, "key", "btree", "key_idx")
        out["Spark create_index"].append(time.perf_counter() - t)
        log(f"build {r}: pylance {out['pylance create_scalar_index'][-1]:.2f} s, "
            f"Spark {out['Spark create_index'][-1]:.2f} s")
    for p in (a, b):
        shutil.rmtree(p, ignore_errors=True)
    return out


def _metrics(spark, df) -> Tuple[List[Any], int]:
    """Runs df: its rows (sorted) and the bytes its scan read (Lance: lanceBytesRead; else the
    new stages' input bytes)."""
    sc = spark.sparkContext._jsc.sc()
    gw = spark.sparkContext._gateway
    no_q = gw.new_array(gw.jvm.double, 0)

    def stages():
        sc.listenerBus().waitUntilEmpty(10_000)
        seq = sc.statusStore().stageList(None, False, False, no_q, None)
        return {(int(seq.apply(i).stageId()), int(seq.apply(i).attemptId())): seq.apply(i)
                for i in range(seq.length())}

    before = set(stages())
    qe = df._jdf.queryExecution()
    rows = sorted(tuple(r) for r in df.collect())
    leaves = qe.executedPlan().collectLeaves()
    for i in range(leaves.size()):
        m = leaves.apply(i).metrics()
        if m.contains("lanceBytesRead"):
            return rows, int(m.get("lanceBytesRead").get().value())
    new = [s for k, s in stages().items() if k not in before]
    return rows, sum(int(s.inputBytes()) for s in new)


def _lookups(spark, paths: Dict[str, Path], rows: int, reps: int,
             only: Tuple[str, ...] = ("pylance-written", "Spark-written", "Parquet"),
             warmups: int = FULL.warmup) -> List[Dict[str, Any]]:
    import random

    rnd = random.Random(11)
    k1, k2 = rnd.randrange(rows), rnd.randrange(rows)
    many = ", ".join(str(rnd.randrange(rows)) for _ in range(1000))
    queries = {"id = k (BTREE, sorted)": f"id = {k1}", "key = k (BTREE, unsorted)": f"key = {k2}",
               "key IN (1,000 keys) (BTREE)": f"key IN ({many})", "label = 'l7' (BITMAP, 1%)": "label = 'l7'"}
    frames: Dict[str, Callable[[str], Any]] = {
        "pylance-written": lambda w: spark.read.format("lance").load(str(paths["pylance"])).where(w),
        "Spark-written": lambda w: spark.read.format("lance").load(str(paths["spark"])).where(w),
        "Parquet": lambda w: spark.read.parquet(str(paths["parquet"])).where(w),
    }
    frames = {s: f for s, f in frames.items() if s in only}
    prepared = []
    # every query is checked and warmed up before any is timed: the planning code all lookups
    # share is still being compiled by the JIT during the first query's warm-ups (the query
    # timed first was ~2 ms of 12 slower than the same query timed after the others)
    for name, where in queries.items():
        sides = {s: (lambda f=f, w=where: f(w).select("id", "key", "label")) for s, f in frames.items()}
        # bytes from the scan's metrics: measured with the scan run as a job (a lookup small
        # enough is otherwise read on the driver, with no scan node and no metrics)
        spark.conf.set("spark.lance.localScanRows", "0")
        try:
            first = {s: _metrics(spark, df()) for s, df in sides.items()}
        finally:
            spark.conf.unset("spark.lance.localScanRows")
        results = [v[0] for v in first.values()]
        if any(r != results[0] for r in results[1:]):
            raise AssertionError(f"{name}: results differ: {[len(r) for r in results]}")
        warmed = warm_up({s: (lambda df=df: df().collect()) for s, df in sides.items()}, warmups)
        prepared.append((name, sides, first, len(results[0]), warmed))
    out = []
    for name, sides, first, nrows, warmed in prepared:
        times: Dict[str, List[float]] = {s: [] for s in sides}
        jvm: Dict[str, List[float]] = {s: [] for s in sides}
        order = list(sides)
        for r in range(reps):
            for s in (order if r % 2 == 0 else order[::-1]):
                t = time.perf_counter()
                got = sides[s]().collect()
                times[s].append(time.perf_counter() - t)
                if len(got) != nrows:
                    raise AssertionError(f"{name}, {s}: {len(got)} rows timed, {nrows} checked")
                t = time.perf_counter()
                sides[s]()._jdf.collect()
                jvm[s].append(time.perf_counter() - t)
        rec = {"query": name, "rows": nrows, "times": times, "jvm": jvm, "warmups": warmed,
               "bytes": {s: v[1] for s, v in first.items()}}
        log(json.dumps({"query": name, "rows": rec["rows"], "warm-up rounds": warmed,
                        "medians": {s: round(statistics.median(t), 4) for s, t in times.items()},
                        "jvm medians": {s: round(statistics.median(t), 4) for s, t in jvm.items()},
                        "bytes": rec["bytes"]}))
        out.append(rec)
    return out


PARQUET_2 = "Parquet (second phase)"


def _merge_phases(first: List[Dict[str, Any]], second: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Staged runs: the pylance-written side with Parquet measured beside it, then the Spark-written
    side with Parquet measured again beside it; each Lance side's ratio is to its own phase's Parquet."""
    out = []
    for a, b in zip(first, second):
        rec = {"query": a["query"], "rows": a["rows"], "times": dict(a["times"]), "jvm": dict(a["jvm"]),
               "bytes": dict(a["bytes"]), "base": {"Spark-written": PARQUET_2, PARQUET_2: PARQUET_2},
               "warmups": f"{a.get('warmups', 1)} / {b.get('warmups', 1)}"}
        for key in ("times", "jvm", "bytes"):
            rec[key]["Spark-written"] = b[key]["Spark-written"]
            rec[key][PARQUET_2] = b[key]["Parquet"]
        if b["rows"] != a["rows"]:
            raise AssertionError(f"{a['query']}: {a['rows']} rows in the first phase, {b['rows']} in the second")
        out.append(rec)
    return out


def _base(rec: Dict[str, Any], side: str) -> str:
    return rec.get("base", {}).get(side, "Parquet")


def _plot(lookups: List[Dict[str, Any]], build: Dict[str, List[float]], path: Path) -> None:
    bars: List[Tuple[str, float, float]] = []
    for rec in lookups:
        for side in ("pylance-written", "Spark-written"):
            pq = statistics.median(rec["times"][_base(rec, side)])
            bars.append((f"{rec['query']}\n{side} vs Parquet", statistics.median(rec["times"][side]) / pq,
                         TARGETS[rec["query"]]))
    bars.append(("CREATE INDEX BTREE (key)\nSpark vs pylance",
                 statistics.median(build["Spark create_index"]) / statistics.median(build["pylance create_scalar_index"]),
                 1.5))
    report.target_bars(bars, path, 'Scalar indices: lookups vs Spark on Parquet, builds vs pylance', digits=3)


def _report(out: Path, args, lookups, build, jar: str) -> None:
    m = env.machine()
    png = out.with_suffix(".png")
    _plot(lookups, build, png)
    mib = lambda n: f"{n / 2**20:,.1f} MiB"  # noqa: E731
    lines = [
        "# Scalar indices: lookups against Spark on Parquet, builds against pylance",
        "",
        f"Generated by `python -m bench.indices --rows {args.rows} --dim {args.dim} --reps {args.reps}"
        + (" --staged" if args.staged else "")
        + (f" --warmups {args.warmups}" if args.warmups != FULL.warmup else "") + "` "
        f"({datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}); see the module's docstring.",
        f"Machine: {m.get('cpu_model')}, {m.get('nproc')} cores. Package: `{WHERE}`; jar: `{jar}`; "
        f"local[{args.cores}], Spark's default shuffle partitions (200).",
        f"Table: {args.rows:,} rows of `id` (sorted), `key` (shuffled), `label` (100 values), "
        f"`emb` ({args.dim} floats).",
        "",
        f"![ratios]({png.name})",
        "",
        "| query | rows | side | median (s) | runs (s) | ratio to Parquet | target | bytes read | "
        "JVM median (s) | JVM ratio |",
        "|---|---:|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for rec in lookups:
        for side, ts in rec["times"].items():
            pq = statistics.median(rec["times"][_base(rec, side)])
            jpq = statistics.median(rec["jvm"][_base(rec, side)]) if "jvm" in rec else None
            med = statistics.median(ts)
            target = "" if side.startswith("Parquet") else f"{TARGETS[rec['query']]:g}x"
            jmed = statistics.median(rec["jvm"][side]) if jpq else None
            jcols = f"{jmed:.3f} | {jmed / jpq:.3f}x" if jmed is not None else " | "
            lines.append(f"| {rec['query']} | {rec['rows']:,} | {side} | {med:.3f} | "
                         f"{', '.join(f'{t:.3f}' for t in ts)} | {med / pq:.3f}x | {target} | "
                         f"{mib(rec['bytes'][side])} | {jcols} |")
    py, sp = build["pylance create_scalar_index"], build["Spark create_index"]
    lines += [
        "",
        "| build | median (s) | runs (s) | ratio | target |",
        "|---|---:|---|---:|---:|",
        f"| pylance `create_scalar_index('key', 'BTREE')` | {statistics.median(py):.2f} | "
        f"{', '.join(f'{t:.2f}' for t in py)} | 1.00x | |",
        f"| Spark `CALL lance.system.create_index(... 'btree')` | {statistics.median(sp):.2f} | "
        f"{', '.join(f'{t:.2f}' for t in sp)} | {statistics.median(sp) / statistics.median(py):.2f}x | 1.5x |",
        "",
        *(["Staged: the pylance-written table and Parquet were measured side by side, then the "
           "pylance-written table was deleted and the connector's copy written from the Parquet copy "
           f"and measured beside Parquet again (`{PARQUET_2}`); each Lance side's ratio is to the "
           "Parquet of its own phase (three copies of the table do not fit the disk).", ""]
          if args.staged else []),
        "Warm-up rounds before the timed ones (each side; the first run included; every query's "
        "before any query was timed"
        + ("; staged: first phase / second phase" if args.staged else "") + "): "
        + ", ".join(f"{rec['query']}: {rec.get('warmups', 1)}" for rec in lookups) + ".",
        "",
        "Bytes read: the Lance scan's `lanceBytesRead` metric (index files are read by the driver "
        "while planning and are not in it); Parquet: the stage's input bytes. JVM: the same query "
        "collected on the JVM (`Dataset.collect`), without PySpark's pickling of the rows.",
        "",
    ]
    out.write_text("\n".join(lines))
    print(f"wrote {out}")


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--dim", type=int, default=384, help="floats of the vector column (0: none)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--build-reps", type=int, default=3)
    ap.add_argument("--warmups", type=int, default=FULL.warmup,
                    help="least warm-up rounds of each lookup (as bench/harness.py's full mode; 1: the first run only)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--staged", action="store_true",
                    help="keep two copies on disk at a time: pylance's and Parquet, then the connector's and Parquet")
    ap.add_argument("--data", default=str(env.REPO / "bench-data" / "indices"))
    ap.add_argument("--out", default=str(env.REPO / "docs" / "benchmarks-indices.md"))
    args = ap.parse_args(argv)

    jar = env.ensure_jar()
    from lance_spark.testing import local_session

    spark = local_session({"spark.sql.shuffle.partitions": "200"}, app="lance-spark-bench-indices",
                          cores=str(args.cores), driver_memory="6g")
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(args.data).resolve()   # SQL names the tables by absolute path
    try:
        paths = _generate(root, args.rows, args.dim, spark, args.staged)
        log("indices")
        if not args.staged:
            _index(spark, paths)
            build = _build_times(spark, args.rows, root, args.build_reps)
            lookups = _lookups(spark, paths, args.rows, args.reps, warmups=args.warmups)
        else:
            _index(spark, paths, ("pylance",))
            build = _build_times(spark, args.rows, root, args.build_reps)
            first = _lookups(spark, paths, args.rows, args.reps, ("pylance-written", "Parquet"), args.warmups)
            shutil.rmtree(paths["pylance"], ignore_errors=True)
            _write_spark_copy(spark, paths, args.dim)
            _index(spark, paths, ("spark",))
            second = _lookups(spark, paths, args.rows, args.reps, ("Spark-written", "Parquet"), args.warmups)
            lookups = _merge_phases(first, second)
            shutil.rmtree(paths["spark"], ignore_errors=True)
            (root / f"done-{args.rows}-{args.dim}-staged").unlink(missing_ok=True)
    finally:
        spark.stop()
    _report(Path(args.out), args, lookups, build, jar)
    report.save_run("indices", {"args": vars(args), "lookups": lookups, "build": build})
    return 0


if __name__ == "__main__":
    sys.exit(main())
