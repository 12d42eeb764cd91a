"""Data evolution (issue 39): adding an embedding column to an existing table from a DataFrame,
the connector's ``add_columns`` against Delta Lake's way, in one Spark session.

The table: ``--rows`` rows of ``id`` (BIGINT), ``label`` (STRING, 100 values) and ``score``
(DOUBLE), written by the connector (Lance) and by Delta from the same DataFrame. The new column:
``emb``, ``--dim`` floats per row computed in Spark SQL from the row's ``id`` (a seeded hash of
``(id, i)`` scaled to [-1, 1)), the shape of an embedding a new model adds to every row.

* **Lance**: ``CALL lance.system.add_columns(table => <path>, source => 'src', vector_columns =>
  'emb:<dim>')`` where ``src`` is the table's ``_rowaddr`` with ``emb`` computed from its ``id``
  (the issue's "DataFrame keyed by ``_rowaddr``"): new data files holding only ``emb`` beside the
  old ones. ``emb`` is a vector (a ``fixed_size_list``, which vector indices need); ``--column
  list`` adds it as a variable-length ``list`` instead (the same type as Delta's).
* **Delta**: ``ALTER TABLE ADD COLUMN emb ARRAY<FLOAT>`` then ``MERGE INTO ... ON t.id = s.id
  WHEN MATCHED THEN UPDATE SET emb = s.emb`` with the same ``emb`` computed from Delta's ``id``:
  Delta's way of filling a new column for existing rows (it rewrites every data file).

With ``--source parquet`` the embeddings are instead precomputed once (the same values) and read
from Parquet keyed by ``id``, as when a model's output arrives from elsewhere: ``add_columns``
gets them joined to the table's ``_rowaddr`` (a join, then its shuffle by fragment), Delta's
MERGE reads them as its source.

With ``--source rowaddr`` the embeddings are also computed once (not timed) over a scan of the
Lance table and saved to Parquet with the row's ``_rowaddr``, in the scan's order, in about
``--source-files`` files (the issue's "DataFrame keyed by ``_rowaddr``": a model's output over
``SELECT _rowaddr, ...``): ``add_columns`` reads ``_rowaddr, emb`` from it as its source; Delta's
MERGE reads the same values keyed by ``id`` from the ``--source parquet`` file (8 files; Delta has
no row addresses, and its MERGE took 29-38 s at 1M rows from that file against 52-69 s when it
read ``id, emb`` from the address-ordered one). ``--low-disk`` checks and deletes each side's
table right after its run (10M rows: the source files, 15 GB each, Delta's rewrite, 15.6 GB, and
its MERGE's shuffle files, about 30 GB, must fit).

Broadcast joins are off (``spark.sql.autoBroadcastJoinThreshold=-1``): Spark estimates the
MERGE's source from the few megabytes of the table it is computed from and would broadcast the
whole gigabytes of embeddings. Each round starts from fresh copies of both tables (copied on disk, not timed); ``--reps``
rounds, alternating which side goes first; medians. Each side starts after a full GC of the
driver JVM (untimed: a side running after the other does not collect the other's garbage) and its
time ends with an ``os.sync()``:
it includes writing its own files to disk, and the next side does not run while the kernel writes
back the previous side's gigabytes (which had slowed whichever side came next). Bytes written: the growth of each table's
directory (a Lance round adds files and keeps the old ones; a Delta round adds rewritten files and
keeps the old ones until VACUUM, so the growth is what each wrote). The new column's own size is
``rows x dim x 4`` bytes (float32 values; they do not compress). Checked once: both tables then
hold the same ``emb`` for a sample of ids, equal to the expression's values (after the last
timed round: reading the tables before the timed rounds slowed the later Lance rounds in the same
JVM by 20-30%, for reasons not found).

    python -m bench.evolution [--rows 1000000] [--dim 384] [--reps 3] [--source expression|parquet|rowaddr]
                              [--data bench-data/evolution]
                              [--out docs/benchmarks-evolution.md]

Targets (issue 39): the Lance time at most 0.3x Delta's; bytes written at most 1.1x the new
column's own size. Nothing here asserts on timings."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List

from . import env, report

WHERE = env.use_in_tree_package()


def log(msg: str) -> None:
    print(f"[bench.evolution {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _emb_sql(dim: int) -> str:
    return (f"transform(sequence(0, {dim - 1}), i -> CAST(hash(id, i, 17) * 4.656612873077393E-10D AS FLOAT)) "
            "AS emb")


def _du(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _generate(spark, root: Path, rows: int) -> Dict[str, Path]:
    base = {"lance": root / "base.lance", "delta": root / "base.delta"}
    stamp = root / f"done-{rows}"
    if stamp.exists():
        return base
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    df = spark.range(0, rows, 1, 8).selectExpr("id", "concat('l', CAST(id % 100 AS STRING)) AS label",
                                               "CAST(hash(id) AS DOUBLE) / 1e6 AS score")
    log(f"the connector and Delta write {rows:,} rows")
    df.write.format("lance").save(str(base["lance"]))
    df.write.format("delta").save(str(base["delta"]))
    stamp.touch()
    return base


def _embeddings(spark, root: Path, rows: int, dim: int) -> Path:
    """The embeddings precomputed once, keyed by ``id``, as Parquet (``--source parquet``)."""
    path = root / f"emb-{rows}-{dim}.parquet"
    if not (path / "_SUCCESS").exists():
        log(f"precomputing {rows:,} embeddings of {dim} floats as Parquet")
        spark.range(0, rows, 1, 8).selectExpr("id", _emb_sql(dim)).write.mode("overwrite").parquet(str(path))
    return path


def _by_address(spark, base: Dict[str, Path], root: Path, rows: int, dim: int, files: int) -> Path:
    """The embeddings with the Lance table's ``_rowaddr`` and ``id`` (``--source rowaddr``), as
    Parquet in the scan's (address) order: a model's output over ``SELECT _rowaddr, id, ...``,
    in about ``files`` files (each of one row group)."""
    path = root / f"emb-{rows}-{dim}-rowaddr-{files}.parquet"
    if not (path / "_SUCCESS").exists():
        log(f"computing {rows:,} embeddings of {dim} floats over a scan of the table, saved with _rowaddr and id")
        spark.read.format("lance").load(str(base["lance"])).selectExpr("_rowaddr", "id", _emb_sql(dim)) \
            .write.mode("overwrite").option("maxRecordsPerFile", -(-rows // files)).parquet(str(path))
    return path


def _round(spark, base: Dict[str, Path], root: Path, dim: int, order: List[str],
           emb: Path | None = None, by_address: Path | None = None,
           low_disk: Callable[[str, Path], None] | None = None, vector: bool = True) -> Dict[str, Any]:
    work = {s: root / f"work.{s}" for s in base}
    for s in base:
        shutil.rmtree(work[s], ignore_errors=True)
        shutil.copytree(base[s], work[s])
    before = {s: _du(work[s]) for s in work}
    written: Dict[str, int] = {}
    times: Dict[str, float] = {}
    for s in order:
        spark.sparkContext._jvm.System.gc()   # (untimed) neither side starts with the other's garbage
        t = time.perf_counter()
        if s == "lance":
            table = spark.read.format("lance").load(str(work[s]))
            if by_address is not None:   # the precomputed embeddings keyed by _rowaddr
                spark.read.parquet(str(by_address)).select("_rowaddr", "emb").createOrReplaceTempView("evo_src")
            elif emb is None:
                table.selectExpr("_rowaddr", _emb_sql(dim)).createOrReplaceTempView("evo_src")
            else:   # the precomputed embeddings keyed by id: joined to the table's _rowaddr
                table.select("_rowaddr", "id").join(spark.read.parquet(str(emb)), "id") \
                    .select("_rowaddr", "emb").createOrReplaceTempView("evo_src")
            vectors = f", vector_columns => 'emb:{dim}'" if vector else ""
            spark.sql(f"CALL lance.system.add_columns(table => '`{work[s]}`', source => 'evo_src'{vectors})").collect()
        else:
            spark.sql(f"ALTER TABLE delta.`{work[s]}` ADD COLUMN emb ARRAY<FLOAT>")
            if emb is None:
                spark.read.format("delta").load(str(work[s])).selectExpr("id", _emb_sql(dim)) \
                    .createOrReplaceTempView("evo_dsrc")
            else:
                spark.read.parquet(str(emb)).createOrReplaceTempView("evo_dsrc")
            spark.sql(f"MERGE INTO delta.`{work[s]}` t USING evo_dsrc s ON t.id = s.id "
                      "WHEN MATCHED THEN UPDATE SET t.emb = s.emb").collect()
        os.sync()   # each side's time includes writing its files to disk, not the next side's
        times[s] = time.perf_counter() - t
        written[s] = _du(work[s]) - before[s]
        if low_disk is not None:   # checked and deleted before the other side runs
            low_disk(s, work[s])
            shutil.rmtree(work[s], ignore_errors=True)
    return {"times": times, "written": written, "work": work}


def _check(spark, work: Dict[str, Path], dim: int, rows: int) -> None:
    for s in ("lance", "delta"):
        _check_side(spark, s, work[s], dim, rows)


def _check_side(spark, s: str, path: Path, dim: int, rows: int) -> None:
    ids = ", ".join(str(i) for i in range(0, rows, max(1, rows // 50)))
    want = {r["id"]: list(r["emb"]) for r in spark.range(0, rows).where(f"id IN ({ids})")
            .selectExpr("id", _emb_sql(dim)).collect()}
    got = {r["id"]: list(r["emb"]) for r in spark.read.format(s).load(str(path))
           .where(f"id IN ({ids})").select("id", "emb").collect()}
    if got != want:
        raise AssertionError(f"{s}: emb differs from the expression's values for sampled ids")
    log(f"checked: {s} holds the expression's emb for the sampled ids")


def _report(out: Path, args, rounds: List[Dict[str, Any]], jar: str) -> None:
    m = env.machine()
    lt = [r["times"]["lance"] for r in rounds]
    dt = [r["times"]["delta"] for r in rounds]
    own = args.rows * args.dim * 4
    lw = statistics.median(r["written"]["lance"] for r in rounds)
    dw = statistics.median(r["written"]["delta"] for r in rounds)
    gib = lambda n: f"{n / 2**30:,.2f} GiB"  # noqa: E731
    lines = [
        "# Adding an embedding column: `add_columns` against Delta Lake's ALTER TABLE + MERGE",
        "",
        f"Generated by `python -m bench.evolution --rows {args.rows} --dim {args.dim} --reps {args.reps} "
        f"--source {args.source}"
        + (f" --source-files {args.source_files}" if args.source == "rowaddr" else "")
        + (" --low-disk" if args.low_disk else "") + f" --column {args.column}` "
        f"({datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}); see the module's docstring.",
        f"Machine: {m.get('cpu_model')}, {m.get('nproc')} cores. Package: `{WHERE}`; jar: `{jar}`; "
        f"local[{args.cores}], shuffle partitions {args.shuffle_partitions}.",
        f"Table: {args.rows:,} rows (`id`, `label`, `score`); new column `emb`: {args.dim} float32 per row "
        f"({gib(own)} of values), added to the Lance table as "
        + ("a vector (`fixed_size_list`, `vector_columns => 'emb:N'`)" if args.column == "vector" else "a `list`")
        + "; Delta's is `ARRAY<FLOAT>`.",
        "",
        "| side | median (s) | runs (s) | ratio | target | bytes written | vs the column's size | target |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
        f"| Lance `add_columns` | {statistics.median(lt):.1f} | {', '.join(f'{t:.1f}' for t in lt)} | "
        f"{statistics.median(lt) / statistics.median(dt):.3f}x | 0.3x | {gib(lw)} | {lw / own:.3f}x | 1.1x |",
        f"| Delta `ALTER TABLE ADD COLUMN` + `MERGE` | {statistics.median(dt):.1f} | "
        f"{', '.join(f'{t:.1f}' for t in dt)} | 1.000x | | {gib(dw)} | {dw / own:.3f}x | |",
        "",
    ]
    out.write_text("\n".join(lines))
    print(f"wrote {out}")


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--shuffle-partitions", type=int, default=200)
    ap.add_argument("--source", choices=["expression", "parquet", "rowaddr"], default="expression",
                    help="the new column computed from the table (default), or precomputed Parquet keyed by "
                         "id (joined to _rowaddr) or by _rowaddr")
    ap.add_argument("--column", choices=["vector", "list"], default="vector",
                    help="the Lance column's type: a vector (fixed-size list, as vector search needs) or a list")
    ap.add_argument("--source-files", type=int, default=200,
                    help="--source rowaddr: about this many Parquet files (one row group each)")
    ap.add_argument("--low-disk", action="store_true",
                    help="check and delete each side's table right after its run (10M rows on a small disk)")
    ap.add_argument("--data", default=str(env.REPO / "bench-data" / "evolution"))
    ap.add_argument("--out", default=str(env.REPO / "docs" / "benchmarks-evolution.md"))
    args = ap.parse_args(argv)

    jar = env.ensure_jar()
    from lance_spark.testing import delta_settings, local_session

    # no broadcast joins: the MERGE's source (the embeddings) is estimated from the table it is
    # computed from (megabytes) and would be broadcast whole (gigabytes, past maxResultSize)
    spark = local_session({**delta_settings(), "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
                           "spark.sql.autoBroadcastJoinThreshold": "-1"},
                          app="lance-spark-bench-evolution", cores=str(args.cores), driver_memory="6g")
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(args.data).resolve()   # SQL names the tables by absolute path
    rounds: List[Dict[str, Any]] = []
    try:
        base = _generate(spark, root, args.rows)
        emb = _embeddings(spark, root, args.rows, args.dim) if args.source != "expression" else None
        by_address = (_by_address(spark, base, root, args.rows, args.dim, args.source_files)
                      if args.source == "rowaddr" else None)
        low_disk = (lambda s, p: _check_side(spark, s, p, args.dim, args.rows)) if args.low_disk else None
        for r in range(args.reps):
            order = ["lance", "delta"] if r % 2 == 0 else ["delta", "lance"]
            res = _round(spark, base, root, args.dim, order, emb, by_address, low_disk, args.column == "vector")
            # checked after the last timed round: a read of the tables before the timed rounds made
            # the later add_columns rounds 20-30% slower in the same JVM (not explained)
            if r == args.reps - 1 and low_disk is None:
                _check(spark, res["work"], args.dim, args.rows)
            del res["work"]
            rounds.append(res)
            spark.sparkContext._jvm.System.gc()   # Spark's cleaner then deletes the round's shuffle files
            log(f"round {r}: {json.dumps(res)}")
        for s in ("lance", "delta"):
            shutil.rmtree(root / f"work.{s}", ignore_errors=True)
    finally:
        spark.stop()
    _report(Path(args.out), args, rounds, jar)
    report.save_run("evolution", {"args": vars(args), "rounds": rounds})
    return 0


if __name__ == "__main__":
    sys.exit(main())
