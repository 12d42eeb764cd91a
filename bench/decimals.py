"""Decimals and the pushed aggregate, measured in one Spark session (issue 40).

* ``q6``: TPC-H Q6 over ``lineitem`` at a scale factor, three ways: the Lance table with the
  aggregate pushed into the scan (the default), the Lance table with ``aggregatePushdown=false``
  (Spark aggregates the scan's batches), and Spark on Parquet.
* ``scan``: a full scan (``write.format("noop")``) of one ``DECIMAL(7,2)`` and one
  ``DECIMAL(15,2)`` column, each alone, Lance vs Parquet.
* ``columns``: the compressible table of issue 40 (sorted id, small ints, a double, 4-value and
  100,000-value strings, a nullable int), each column alone and all together, then the whole
  table written from memory (cached), Lance vs Parquet.

Runs alternate the sides (warm-ups as bench/harness.py's full mode: at least 3 rounds, more until
each side has run 5 s; ``--warmups 1`` for a single one; then ``--reps`` rounds); times are medians
and the ratio is Lance / Parquet. Data (generated with ``tpchgen-cli`` and numpy, written by the
connector and by Spark) lives under ``--data`` and is reused. Prints a Markdown table.

    python -m bench.decimals q6 --sf 1 --cores 2 --shuffle 8
    python -m bench.decimals scan --rows 5000000
    python -m bench.decimals columns --rows 5000000
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

from bench.harness import FULL, warm_up

REPO = Path(__file__).resolve().parent.parent

Q6 = """
SELECT sum(l_extendedprice * l_discount) AS revenue
  FROM {t}
 WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1994-01-01' + interval '1' year
   AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND l_quantity < 24"""


def session(cores: int, shuffle: int, memory: str):
    from pyspark.sql import SparkSession

    jar = os.environ.get("LANCE_SPARK_JAR") or str(REPO / "target" / "bundles" / "lance-spark-bundle-4.2_2.13-0.1.0.jar")
    spark = (SparkSession.builder.master(f"local[{cores}]").appName("lance-spark-decimals")
             .config("spark.jars", jar).config("spark.driver.memory", memory)
             .config("spark.sql.shuffle.partitions", str(shuffle)).config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark


def timed(f: Callable[[], object]) -> Tuple[float, object]:
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


#: Warm-ups, as bench/harness.py's full mode (its FULL: at least `warmup` rounds, more, up to
#: `max_warmup`, until each side has run `warmup_seconds`). One warm-up left part of a side's code to the
#: JIT's first tier in the first timed rounds: the compressible table's scan of all columns took 0.53 s
#: twice, then 0.36-0.45 s (Parquet 0.64, then 0.52-0.57), and the median moved with how many rounds
#: were of the first kind.
WARMUPS = FULL.warmup


def alternate(sides: Dict[str, Callable[[], object]], reps: int, warmups: int = WARMUPS) -> Dict[str, List[float]]:
    """Warm-ups of each side (the first one's results checked equal; see WARMUPS), then `reps`
    rounds, the sides alternating (and their order turning each round)."""
    names = list(sides)
    first = {n: sides[n]() for n in names}
    values = list(first.values())
    if any(v != values[0] for v in values[1:]):
        raise AssertionError(f"results differ: {first}")
    warm_up(sides, warmups)
    times: Dict[str, List[float]] = {n: [] for n in names}
    for r in range(reps):
        order = names if r % 2 == 0 else list(reversed(names))
        for n in order:
            times[n].append(timed(sides[n])[0])
    return times


def table(rows: List[Tuple[str, Dict[str, List[float]], str]], base: str) -> str:
    out = ["| what | side | median (s) | runs (s) | ratio to " + base + " |", "|---|---|---:|---|---:|"]
    for what, times, _ in rows:
        b = statistics.median(times[base])
        for side, ts in times.items():
            m = statistics.median(ts)
            out.append(f"| {what} | {side} | {m:.3f} | {', '.join(f'{t:.2f}' for t in ts)} | {m / b:.2f}x |")
    return "\n".join(out)


def lineitem(spark, data: Path, sf: float) -> Tuple[Path, Path]:
    src = data / f"src-sf{sf}"
    if not (src / "lineitem.parquet").exists():
        cli = Path(sys.executable).with_name("tpchgen-cli")
        subprocess.run([str(cli), "parquet", "-s", str(sf), "--tables=lineitem", f"--output-dir={src}"], check=True)
    lance, parquet = data / f"lineitem-sf{sf}.lance", data / f"lineitem-sf{sf}.parquet"
    done = data / f"lineitem-sf{sf}.done"
    if not done.exists():
        df = spark.read.parquet(str(src / "lineitem.parquet"))
        df.write.format("lance").mode("overwrite").save(str(lance))
        df.write.mode("overwrite").parquet(str(parquet))
        done.write_text("")
    return lance, parquet


def q6(spark, args) -> str:
    lance, parquet = lineitem(spark, Path(args.data), args.sf)
    spark.read.format("lance").load(str(lance)).createOrReplaceTempView("l_pushed")
    spark.read.format("lance").option("aggregatePushdown", "false").load(str(lance)).createOrReplaceTempView("l_spark")
    spark.read.parquet(str(parquet)).createOrReplaceTempView("p")
    sides = {f"lance pushed": lambda: spark.sql(Q6.format(t="l_pushed")).collect(),
             f"lance, Spark aggregates": lambda: spark.sql(Q6.format(t="l_spark")).collect(),
             "parquet": lambda: spark.sql(Q6.format(t="p")).collect()}
    times = alternate(sides, args.reps, args.warmups)
    return table([(f"Q6 SF{args.sf}", times, "")], "parquet")


def _write_both(spark, df, data: Path, name: str) -> Tuple[Path, Path]:
    lance, parquet = data / f"{name}.lance", data / f"{name}.parquet"
    done = data / f"{name}.done"
    if not done.exists():
        df.write.format("lance").mode("overwrite").save(str(lance))
        df.write.mode("overwrite").parquet(str(parquet))
        done.write_text("")
    return lance, parquet


def _scan(spark, path: Path, fmt: str, cols: List[str]) -> Callable[[], object]:
    def run() -> object:
        df = spark.read.format(fmt).load(str(path)).select(*cols)
        df.write.format("noop").mode("overwrite").save()
        return None
    return run


def scan(spark, args) -> str:
    from pyspark.sql import functions as F

    n = args.rows
    df = (spark.range(0, n, 1, 4)
          .select(F.col("id"),
                  # prices: cents up to 100,000.00, some negative, 1 in 50 NULL
                  F.when(F.col("id") % 50 == 7, F.lit(None))
                  .otherwise(((F.hash(F.col("id")) % 10000000) / 100).cast("decimal(7,2)")).alias("d7"),
                  ((F.hash(F.col("id"), F.lit(1)).cast("long") * 1000 % 1000000000000000) / 100)
                  .cast("decimal(15,2)").alias("d15")))
    lance, parquet = _write_both(spark, df, Path(args.data), f"decimals-{n}")
    rows = []
    for c in ["d7", "d15"]:
        times = alternate({"lance": _scan(spark, lance, "lance", [c]), "parquet": _scan(spark, parquet, "parquet", [c])},
                          args.reps, args.warmups)
        rows.append((f"scan {c} ({n:,} rows)", times, ""))
    return table(rows, "parquet")


def columns(spark, args) -> str:
    from pyspark.sql import functions as F

    n = args.rows
    df = (spark.range(0, n, 1, 4)
          .select(F.col("id"),
                  (F.col("id") % 100).cast("int").alias("small_int"),
                  (F.col("id") % 7 * 1.5 + F.col("id") / 1000).alias("double"),
                  F.element_at(F.array(*[F.lit(s) for s in ["alpha", "beta", "gamma", "delta"]]),
                               (F.col("id") % 4 + 1).cast("int")).alias("str4"),
                  F.concat(F.lit("value-"), (F.hash(F.col("id")) % 100000).cast("string")).alias("str100k"),
                  F.when(F.col("id") % 10 == 3, F.lit(None)).otherwise((F.col("id") % 1000).cast("int")).alias("nullable_int")))
    lance, parquet = _write_both(spark, df, Path(args.data), f"compressible-{n}")
    rows = []
    cols = ["id", "small_int", "double", "str4", "str100k", "nullable_int"]
    for c in cols + ["*"]:
        sel = cols if c == "*" else [c]
        times = alternate({"lance": _scan(spark, lance, "lance", sel), "parquet": _scan(spark, parquet, "parquet", sel)},
                          args.reps, args.warmups)
        rows.append((f"scan {'all columns' if c == '*' else c} ({n:,} rows)", times, ""))
    # the write: the same rows, cached in memory first, so both sides time their writer and not the generator
    cached = df.cache()
    cached.count()
    out = Path(args.data) / "written"
    times = alternate({"lance": _write(cached, "lance", out / "t.lance"), "parquet": _write(cached, "parquet", out / "t.parquet")},
                      args.reps, args.warmups)
    rows.append((f"write all columns ({n:,} rows)", times, ""))
    cached.unpersist()
    shutil.rmtree(out, ignore_errors=True)  # (an overwritten Lance table keeps every version's files)
    return table(rows, "parquet")


def _write(df, fmt: str, path: Path) -> Callable[[], object]:
    def run() -> object:
        df.write.format(fmt).mode("overwrite").save(str(path))
        return None
    return run


def main(argv: List[str] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["q6", "scan", "columns"])
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warmups", type=int, default=WARMUPS, help="least warm-up rounds (see WARMUPS; 1: one only)")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--shuffle", type=int, default=8)
    p.add_argument("--memory", default="8g")
    p.add_argument("--data", default=str(REPO / "bench" / "data" / "decimals"))
    args = p.parse_args(argv)
    Path(args.data).mkdir(parents=True, exist_ok=True)
    spark = session(args.cores, args.shuffle, args.memory)
    load = os.getloadavg()
    out = {"q6": q6, "scan": scan, "columns": columns}[args.what](spark, args)
    print(f"\nlocal[{args.cores}], shuffle partitions {args.shuffle}, driver memory {args.memory}; "
          f"load average before {load[0]:.2f}, after {os.getloadavg()[0]:.2f}\n")
    print(out)
    spark.stop()


if __name__ == "__main__":
    main()
