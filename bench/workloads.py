"""The workloads.  Each is one registered prepare(ctx) -> Prepared; see bench/README.md.

To add one (e.g. a Spark write once the connector writes): write the data it needs with
bench.data, return Prepared(this=..., other=..., rows=...) and decorate it with @workload.
"""
from __future__ import annotations

import hashlib
import os
import math
import statistics
import time
from pathlib import Path
from typing import Any, Dict, Optional

from . import data, env
from .harness import Context, Prepared, workload

MIXED_AGGS = [  # (function, column): every column of the mixed table, one action
    ("count", "*"), ("sum", "id"), ("max", "id"), ("sum", "qty"), ("max", "qty"),
    ("sum", "price"), ("max", "price"), ("maxlen", "name"), ("count", "name"),
    ("maxlen", "category"), ("count", "category"), ("sum", "discount"), ("count", "discount"),
]
PROJECTED = "l05"   # the one column of the twenty that spark_projection reads


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _agg_exprs(specs):
    from pyspark.sql import functions as F

    out = []
    for fn, col in specs:
        if fn == "count":
            out.append(F.count(F.lit(1)) if col == "*" else F.count(col))
        elif fn == "maxlen":
            out.append(F.max(F.length(col)))
        else:
            out.append(getattr(F, fn)(col))
    return out


def _close(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def _check_rows(a, b) -> str:
    """Spark rows of the two sides must agree (doubles to 1e-9: summation order differs)."""
    ta, tb = tuple(a), tuple(b)
    if len(ta) != len(tb) or not all(_close(x, y) for x, y in zip(ta, tb)):
        return f"MISMATCH: {ta} vs {tb}"
    return "results agree"


# -- 1. pure-Python reader vs pylance ---------------------------------------------------------

@workload("py_reader_to_table", kind="python",
          this="lance_spark.reader", comparator="pylance", target=5.0, target_text="<= 5x pylance",
          description="Whole mixed table to Arrow: `lance_spark.reader.dataset(p).to_table()` vs "
                      "`lance.dataset(p).to_table()` (dataset opened inside the timing on both sides).")
def py_reader_to_table(ctx: Context) -> Prepared:
    return _py_reader_to_table(ctx, None)


@workload("py_reader_to_table_v2_2", kind="python",
          this="lance_spark.reader", comparator="pylance", target=3.0, target_text="<= 3x pylance",
          description="The `py_reader_to_table` read of the mixed table written by pylance at file "
                      "version 2.2 (its default: mini-block pages, FastLanes bit-packing, FSST strings): "
                      "`lance_spark.reader.dataset(p).to_table()` vs `lance.dataset(p).to_table()`.")
def py_reader_to_table_v2_2(ctx: Context) -> Prepared:
    return _py_reader_to_table(ctx, "2.2")


def _tables_check(a, b) -> str:
    if a.num_rows != b.num_rows:
        return f"MISMATCH: {a.num_rows} vs {b.num_rows} rows"
    if a.schema != b.schema:
        try:
            a = a.cast(b.schema)
        except Exception as e:  # pragma: no cover
            return f"MISMATCH: schemas differ ({e})"
    return "tables equal" if a.equals(b) else "MISMATCH: values differ"


def _py_reader_to_table(ctx: Context, file_version) -> Prepared:
    """The mixed table (pylance-written at `file_version`, None: the bench's 2.0) read whole to
    Arrow by the pure-Python reader vs pylance."""
    import lance

    from lance_spark import reader

    rows = ctx.mode.reader_rows
    kw = {"file_version": file_version} if file_version else {}
    path = str(data.lance_dataset("mixed", rows, ctx.log, **kw))
    return Prepared(this=lambda: reader.dataset(path).to_table(),
                    other=lambda: lance.dataset(path).to_table(),
                    rows=rows, check=_tables_check,
                    facts={"dataset_bytes": data.tree_bytes(Path(path)),
                           "data_files": len(data.data_files(Path(path), ".lance"))})


def _arrow_aggs(t) -> tuple:
    """MIXED_AGGS computed with pyarrow.compute: touches every value of the table."""
    import pyarrow.compute as pc

    out = []
    for fn, col in MIXED_AGGS:
        if fn == "count":
            out.append(t.num_rows if col == "*" else pc.count(t[col]).as_py())
        elif fn == "maxlen":
            out.append(pc.max(pc.utf8_length(t[col])).as_py())
        else:
            out.append(getattr(pc, fn)(t[col]).as_py())
    return tuple(out)


@workload("py_reader_scan", kind="python",
          this="lance_spark.reader", comparator="pylance", target=None,
          target_text="(informational)",
          description="`to_table()` followed by the aggregates of `spark_full_scan` computed with "
                      "pyarrow.compute, so every value is touched: the pure-Python reader returns "
                      "zero-copy views of memory-mapped files, which `to_table()` alone does not read.")
def py_reader_scan(ctx: Context) -> Prepared:
    import lance

    from lance_spark import reader

    rows = ctx.mode.reader_rows
    path = str(data.lance_dataset("mixed", rows, ctx.log))
    return Prepared(this=lambda: _arrow_aggs(reader.dataset(path).to_table()),
                    other=lambda: _arrow_aggs(lance.dataset(path).to_table()),
                    rows=rows, check=_check_rows)


# -- 2. Spark full scan: Lance vs Parquet ------------------------------------------------------

@workload("spark_full_scan", kind="spark",
          this="Spark on Lance", comparator="Spark on Parquet", target=0.8,
          target_text="<= 0.8x Parquet",
          description="Every column of the mixed table aggregated in one action "
                      "(count, sum/max of numbers, max(length)/count of strings, sum/count of the "
                      "nullable column): `spark.read.format(\"lance\")` vs `spark.read.parquet` of "
                      "the same rows written by Spark.")
def spark_full_scan(ctx: Context) -> Prepared:
    spark = ctx.spark
    rows = ctx.mode.spark_rows
    lance_path = str(data.lance_dataset("mixed", rows, ctx.log))
    pq_path = str(data.parquet_dataset(spark, "mixed", rows, ctx.log))
    exprs = _agg_exprs(MIXED_AGGS)

    def derive(this_s: float, other_s: float) -> Dict[str, Any]:
        # how the scan read storage: as timed (readAhead=auto, which for local files is the
        # task reading each batch, then decoding it), and with readAhead=true (the reads on the
        # read pool, the next batch's during the current batch's decode), each run once, untimed
        keys = ("pagesRead", "readRequests", "lanceBytesRead", "storageWaitMs")
        facts = _lance_scan_metrics(spark.read.format("lance").load(lance_path).agg(*exprs), keys, "sync_")
        df = spark.read.format("lance").option("readAhead", "true").load(lance_path).agg(*exprs)
        facts["ahead_s"] = _timed(lambda: df.collect())
        facts.update(_lance_scan_metrics(df, keys, "ahead_"))
        return facts

    return Prepared(
        this=lambda: spark.read.format("lance").load(lance_path).agg(*exprs).collect()[0],
        other=lambda: spark.read.parquet(pq_path).agg(*exprs).collect()[0],
        rows=rows, check=_check_rows, derive=derive,
        facts={"lance_bytes": data.tree_bytes(Path(lance_path)),
               "parquet_bytes": data.tree_bytes(Path(pq_path), ".parquet"),
               "lance_files": len(data.data_files(Path(lance_path), ".lance")),
               "parquet_files": len(data.data_files(Path(pq_path), ".parquet"))})


@workload("spark_full_scan_v2_2", kind="spark",
          this="Spark on Lance 2.2 (pylance)", comparator="Spark on Parquet", target=0.8,
          target_text="<= 0.8x Parquet",
          description="The aggregation of `spark_full_scan` over the mixed table written by pylance "
                      "at file version 2.2 (its default: bit-packed integers, FSST strings, "
                      "dictionaries) vs the same rows in Parquet written by Spark.")
def spark_full_scan_v2_2(ctx: Context) -> Prepared:
    spark = ctx.spark
    rows = ctx.mode.spark_rows
    lance_path = str(data.lance_dataset("mixed", rows, ctx.log, file_version="2.2"))
    pq_path = str(data.parquet_dataset(spark, "mixed", rows, ctx.log))
    exprs = _agg_exprs(MIXED_AGGS)
    return Prepared(
        this=lambda: spark.read.format("lance").load(lance_path).agg(*exprs).collect()[0],
        other=lambda: spark.read.parquet(pq_path).agg(*exprs).collect()[0],
        rows=rows, check=_check_rows,
        facts={"lance_bytes": data.tree_bytes(Path(lance_path)),
               "parquet_bytes": data.tree_bytes(Path(pq_path), ".parquet")})


@workload("spark_vs_pylance_v2_2", kind="spark",
          this="Spark on Lance 2.2", comparator="pylance to_table()", target=None,
          target_text="(report)",
          description="The same 2.2 table: Spark's aggregation over every column vs pylance's own "
                      "`lance.dataset(p).to_table()` (every column decoded to Arrow, in this process): "
                      "how close the JVM decoder with Spark on top comes to the Rust one.")
def spark_vs_pylance_v2_2(ctx: Context) -> Prepared:
    import lance

    spark = ctx.spark
    rows = ctx.mode.spark_rows
    lance_path = str(data.lance_dataset("mixed", rows, ctx.log, file_version="2.2"))
    exprs = _agg_exprs(MIXED_AGGS)
    return Prepared(
        this=lambda: spark.read.format("lance").load(lance_path).agg(*exprs).collect()[0][0],
        other=lambda: lance.dataset(lance_path).to_table().num_rows,
        rows=rows)


@workload("decode_throughput_v2_2", kind="spark",
          this="Spark on Lance 2.2", comparator="Spark on Parquet", target=None,
          target_text="(report: GB/s)",
          description="Spark scanning one bit-packed int64 column (`max(id)`: sorted ids) and one "
                      "FSST string column (`max(length(name))`) of the 2.2 mixed table, in GB/s of "
                      "decoded values (8 bytes per id; the strings' bytes), next to Parquet.")
def decode_throughput_v2_2(ctx: Context) -> Prepared:
    from pyspark.sql import functions as F

    spark = ctx.spark
    rows = ctx.mode.spark_rows
    lance_path = str(data.lance_dataset("mixed", rows, ctx.log, file_version="2.2"))
    pq_path = str(data.parquet_dataset(spark, "mixed", rows, ctx.log))
    name_bytes = spark.read.parquet(pq_path).agg(F.sum(F.length("name"))).collect()[0][0]

    def q(df):
        return df.agg(F.max("id"), F.max(F.length("name"))).collect()[0]

    def derive(this_s: float, other_s: float) -> Dict[str, Any]:
        int_only = _timed(lambda: spark.read.format("lance").load(lance_path).agg(F.max("id")).collect())
        str_only = _timed(lambda: spark.read.format("lance").load(lance_path).agg(F.max(F.length("name"))).collect())
        return {"int64_gb_per_s": 8 * rows / int_only / 1e9,
                "fsst_gb_per_s": name_bytes / str_only / 1e9,
                "both_gb_per_s": (8 * rows + name_bytes) / this_s / 1e9}

    return Prepared(this=lambda: q(spark.read.format("lance").load(lance_path)),
                    other=lambda: q(spark.read.parquet(pq_path)),
                    rows=rows, check=_check_rows, derive=derive)


def _lance_scan_metrics(df, keys, prefix: str = "") -> Dict[str, Any]:
    """Runs df once (untimed) and returns the named metrics of its Lance scan node."""
    facts: Dict[str, Any] = {}

    def scan_node(node):
        if node.metrics().contains("pagesRead"):
            return node
        kind = node.getClass().getSimpleName()
        if kind == "AdaptiveSparkPlanExec":
            kids = [node.executedPlan()]
        elif kind.endswith("QueryStageExec"):
            kids = [node.plan()]
        else:
            seq = node.children()
            kids = [seq.apply(i) for i in range(seq.size())]
        for k in kids:
            found = scan_node(k)
            if found is not None:
                return found
        return None

    try:
        qe = df._jdf.queryExecution()
        df.collect()
        node = scan_node(qe.executedPlan())
        if node is None:
            raise RuntimeError("no Lance scan node in the executed plan")
        m = node.metrics()
        for k in keys:
            facts[prefix + k] = int(m.get(k).get().value())
    except Exception as e:  # noqa: BLE001 - facts are informational
        facts[prefix + "metrics_error"] = str(e)[:200]
    return facts


# -- 3. Spark projection: one column of twenty -------------------------------------------------

def lance_column_bytes(path: str, column: str) -> int:
    """Bytes of one column's pages, column buffers and column metadata in every data file of a
    2.x dataset (read with lance_spark's own reader: its file/column metadata, not the data)."""
    from lance_spark import reader
    from lance_spark.reader.format.file_v2 import FileV2Reader
    from lance_spark.reader.format.file_v21 import FileV21Reader

    ds = reader.dataset(path)
    fid = ds._select([column])[0].id
    total = 0
    for frag in ds.fragments():
        for df in frag.files:
            if fid not in df.fields:
                continue
            if df.column_indices:
                idx = dict(zip(df.fields, df.column_indices))[fid]
            else:
                idx = [f for f in df.fields if f >= 0].index(fid)
            r = (FileV21Reader if (df.file_major_version, df.file_minor_version) >= (2, 1)
                 else FileV2Reader)(df.full_path)
            try:
                cm = r.column(idx)
                total += int(r._cm_offsets[idx][1]) + sum(cm.buffer_sizes)
                total += sum(sum(p.buffer_sizes) for p in cm.pages)
            finally:
                r.close()
    return total


def parquet_column_bytes(path: str, column: str) -> int:
    """Compressed bytes of one column's chunks in every Parquet file (from the footers)."""
    import pyarrow.parquet as pq

    total = 0
    for f in data.data_files(Path(path), ".parquet"):
        md = pq.ParquetFile(str(f)).metadata
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            for c in range(rg.num_columns):
                if rg.column(c).path_in_schema == column:
                    total += rg.column(c).total_compressed_size
    return total


@workload("spark_projection", kind="spark",
          this="Spark on Lance", comparator="Spark on Parquet", target=None,
          target_text="(bytes read ~ one column)",
          description=f"`sum({PROJECTED})`, one long column of the 20-column wide table, Lance vs "
                      "Parquet; also the bytes Spark's input metrics report and the on-disk bytes of "
                      "that column in each format.")
def spark_projection(ctx: Context) -> Prepared:
    from pyspark.sql import functions as F

    spark = ctx.spark
    rows = ctx.mode.spark_rows
    lance_path = str(data.lance_dataset("wide", rows, ctx.log))
    pq_path = str(data.parquet_dataset(spark, "wide", rows, ctx.log))
    facts: Dict[str, Any] = {"lance_bytes": data.tree_bytes(Path(lance_path)),
                             "parquet_bytes": data.tree_bytes(Path(pq_path), ".parquet")}
    try:
        facts["lance_column_bytes"] = lance_column_bytes(lance_path, PROJECTED)
    except Exception as e:  # private reader internals: report, do not fail the workload
        facts["lance_column_bytes"] = f"unavailable ({type(e).__name__}: {e})"
    facts["parquet_column_bytes"] = parquet_column_bytes(pq_path, PROJECTED)
    # Parquet's vectored reads run on other threads, which Spark's thread-local bytesRead does
    # not see: one untimed probe with them off gives the Parquet reader's real bytes read.
    key = "parquet.hadoop.vectored.io.enabled"
    spark.conf.set(key, "false")
    try:
        ctx.stage_input.mark()
        spark.read.parquet(pq_path).agg(F.sum(PROJECTED)).collect()
        facts["parquet_bytes_read_unvectored"] = ctx.stage_input.since_mark()["input_bytes"]
    finally:
        spark.conf.unset(key)
    return Prepared(
        this=lambda: spark.read.format("lance").load(lance_path).agg(F.sum(PROJECTED)).collect()[0],
        other=lambda: spark.read.parquet(pq_path).agg(F.sum(PROJECTED)).collect()[0],
        rows=rows, check=_check_rows, facts=facts)


# -- 4. decode throughput vs the page cache ---------------------------------------------------

@workload("decode_throughput", kind="spark",
          this="Spark on Lance", comparator="page-cache read", target=None,
          target_text="(physical limit)",
          description="Spark scanning one plain int64 column (`max(v)`), GB/s = 8 x rows / time, "
                      "next to reading the same data files from the page cache in 8 MiB chunks "
                      "(the physical limit; warm after the warm-up).")
def decode_throughput(ctx: Context) -> Prepared:
    from pyspark.sql import functions as F

    spark = ctx.spark
    rows = ctx.mode.spark_rows
    path = str(data.lance_dataset("int64", rows, ctx.log))
    files = data.data_files(Path(path), ".lance")
    file_bytes = sum(f.stat().st_size for f in files)
    buf = bytearray(8 << 20)

    def read_files() -> int:
        n = 0
        view = memoryview(buf)
        for f in files:
            with open(f, "rb", buffering=0) as fh:
                while True:
                    k = fh.readinto(view)
                    if not k:
                        break
                    n += k
        return n

    # Spark's fixed cost per query (planning, one job): the same query on a 1-row dataset,
    # median of 5 untimed-by-the-harness runs, to give a net throughput next to the gross one.
    tiny = str(data.lance_dataset("int64", 1, ctx.log))
    query_tiny = lambda: spark.read.format("lance").load(tiny).agg(F.max("v")).collect()  # noqa: E731
    query_tiny()
    fixed = statistics.median(_timed(query_tiny) for _ in range(5))
    # Spark's own ceiling for the same column: Parquet (snappy, written by Spark), timed here
    # with the same warm-up/repetition counts but not alternated with the two sides.
    pq_path = str(data.parquet_dataset(spark, "int64", rows, ctx.log))
    query_pq = lambda: spark.read.parquet(pq_path).agg(F.max("v")).collect()  # noqa: E731
    for _ in range(ctx.mode.warmup):
        query_pq()
    parquet_s = statistics.median(_timed(query_pq) for _ in range(ctx.mode.reps))

    def derive(this_s: float, other_s: float) -> Dict[str, Any]:
        net = this_s - fixed
        return {"spark_gb_per_s": 8 * rows / this_s / 1e9,
                "spark_fixed_s": fixed,
                "parquet_s": parquet_s,
                "parquet_gb_per_s": 8 * rows / parquet_s / 1e9,
                "spark_net_gb_per_s": 8 * rows / net / 1e9 if net > 0 else None,
                "page_cache_gb_per_s": file_bytes / other_s / 1e9}

    return Prepared(
        this=lambda: spark.read.format("lance").load(path).agg(F.max("v")).collect()[0],
        other=read_files, rows=rows, derive=derive,
        facts={"value_bytes": 8 * rows, "file_bytes": file_bytes, "data_files": len(files)})


# -- 5. Spark write: the mixed table, Lance vs Parquet -----------------------------------------

@workload("spark_write", kind="spark",
          this="Spark writing Lance", comparator="Spark writing Parquet", target=1.0,
          target_text="<= 1.0x Parquet",
          description="The mixed table, cached in memory, written with `df.write.format(\"lance\")` "
                      "at file version 2.0 (uncompressed; 2.2, the default, is `spark_write_v2_2_*`) "
                      "(mode overwrite: each run commits a new version) vs `df.write.parquet` "
                      "(mode overwrite) in the same session.")
def spark_write(ctx: Context) -> Prepared:
    import shutil
    import tempfile

    spark = ctx.spark
    rows = ctx.mode.spark_rows
    source = spark.read.parquet(str(data.parquet_dataset(spark, "mixed", rows, ctx.log))).cache()
    source.count()  # materialize: both sides write from memory
    out = Path(tempfile.mkdtemp(prefix="lance-bench-write-"))
    lance_out, pq_out = str(out / "w.lance"), str(out / "w.parquet")

    def this():
        source.write.format("lance").option("fileVersion", "2.0").mode("overwrite").save(lance_out)

    def other():
        source.write.mode("overwrite").parquet(pq_out)

    def derive(this_s: float, other_s: float) -> Dict[str, Any]:
        facts = {"parquet_bytes": data.tree_bytes(Path(pq_out), ".parquet")}
        source.unpersist()
        shutil.rmtree(out, ignore_errors=True)
        return facts

    return Prepared(this=this, other=other, rows=rows, derive=derive)


# -- 5b. Spark-written 2.2 on realistic tables: size, write time, scans ---------------------

TABLES_2_2 = ("mixed", "events", "lineitem")


def _all_aggs(df):
    """One aggregate per column touching every value: sum of numbers, max of dates and times,
    max(length) of strings, plus count(*) and each column's non-null count. (Over batches of
    ASCII strings Lance's column vectors hand Spark the character counts, so `length` does not
    count them byte by byte there as it does over Parquet's.)"""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    out = [F.count(F.lit(1))]
    for f in df.schema.fields:
        t = f.dataType
        if isinstance(t, (T.IntegerType, T.LongType, T.ShortType, T.ByteType, T.DoubleType, T.FloatType,
                          T.DecimalType)):
            out.append(F.sum(f.name))
        elif isinstance(t, T.StringType):
            out.append(F.max(F.length(f.name)))
        else:
            out.append(F.max(f.name))
        out.append(F.count(f.name))
    return out


def _spark_lance(ctx: Context, kind: str, version: str = "2.2") -> Path:
    """The kind's rows written by Spark at `version` from the Parquet copy (cached)."""
    spark = ctx.spark
    rows = ctx.mode.spark_rows
    pq_path = data.parquet_dataset(spark, kind, rows, ctx.log)

    def build(path: Path) -> None:
        spark.read.parquet(str(pq_path)).write.format("lance").option("fileVersion", version).save(str(path))

    # the writer is part of the key: a copy written by another build of the connector is not reused
    return data._cached(data.key(kind, rows, "lance", file_version=version) + f"-spark-{_writer()}", build, ctx.log)


def _writer() -> str:
    """The connector build (its jar's digest), part of the key of data it writes: a copy written
    by another build is not reused, unless `LANCE_BENCH_WRITER` names that build's key (a build
    whose writer is unchanged, measured reading the tables of the one before it)."""
    given = os.environ.get("LANCE_BENCH_WRITER", "").strip()
    return given or hashlib.sha1(Path(env.ensure_jar()).read_bytes()).hexdigest()[:8]


def _write_2_2(kind: str) -> None:
    @workload(f"spark_write_v2_2_{kind}", kind="spark",
              this="Spark writing Lance 2.2", comparator="Spark writing Parquet", target=1.0,
              target_text="<= 1.0x Parquet (time; bytes reported)",
              description=f"The `{kind}` table, cached in memory, written at file version 2.2 (new "
                          "dataset each run) vs `df.write.parquet` (snappy); facts: bytes of both.")
    def prepare(ctx: Context) -> Prepared:
        import shutil
        import tempfile

        spark = ctx.spark
        rows = ctx.mode.spark_rows
        source = spark.read.parquet(str(data.parquet_dataset(spark, kind, rows, ctx.log))).cache()
        n = source.count()  # materialize: both sides write from memory
        out = Path(tempfile.mkdtemp(prefix="lance-bench-write22-"))
        runs = {"lance": 0}
        lance_last, pq_out = out / "w0.lance", str(out / "w.parquet")

        def this():
            nonlocal lance_last
            runs["lance"] += 1
            shutil.rmtree(lance_last, ignore_errors=True)
            lance_last = out / f"w{runs['lance']}.lance"
            source.write.format("lance").option("fileVersion", "2.2").save(str(lance_last))

        def other():
            source.write.mode("overwrite").parquet(pq_out)

        def derive(this_s: float, other_s: float) -> Dict[str, Any]:
            lance_bytes = data.tree_bytes(lance_last / "data")
            pq_bytes = data.tree_bytes(Path(pq_out), ".parquet")
            facts = {"lance_bytes": lance_bytes, "parquet_bytes": pq_bytes,
                     "size_ratio": round(lance_bytes / pq_bytes, 3)}
            source.unpersist()
            shutil.rmtree(out, ignore_errors=True)
            return facts

        return Prepared(this=this, other=other, rows=n, derive=derive)


def _spark_2_2_vs_parquet(ctx: Context, kind: str, query, facts) -> Prepared:
    """`query(df)` over the kind's rows written by Spark at 2.2 vs over its Parquet copy;
    `facts(lance_path, parquet_path)` describes them."""
    spark = ctx.spark
    lance_path = str(_spark_lance(ctx, kind))
    pq_path = str(data.parquet_dataset(spark, kind, ctx.mode.spark_rows, ctx.log))
    return Prepared(
        this=lambda: query(spark.read.format("lance").load(lance_path)),
        other=lambda: query(spark.read.parquet(pq_path)),
        rows=spark.read.format("lance").load(lance_path).count(), check=_check_rows,
        facts=facts(lance_path, pq_path))


def _scan_2_2(kind: str) -> None:
    @workload(f"spark_full_scan_spark_v2_2_{kind}", kind="spark",
              this="Spark on Lance 2.2 (Spark-written)", comparator="Spark on Parquet", target=0.7,
              target_text="<= 0.7x Parquet",
              description=f"Every column of the `{kind}` table aggregated in one action, over the "
                          "rows Spark wrote at file version 2.2 vs the same rows in Parquet (strings: "
                          "`max(length)`, which over ASCII batches of Lance counts no characters, "
                          "see docs/architecture.md).")
    def prepare(ctx: Context) -> Prepared:
        return _spark_2_2_vs_parquet(
            ctx, kind, lambda df: df.agg(*_all_aggs(df)).collect()[0],
            lambda lance_path, pq_path: {"lance_bytes": data.tree_bytes(Path(lance_path) / "data"),
                                         "parquet_bytes": data.tree_bytes(Path(pq_path), ".parquet")})


for _kind in TABLES_2_2:
    _write_2_2(_kind)
    _scan_2_2(_kind)


def _column_scan(name: str, kind: str, column: str, what: str, aggs) -> None:
    """One column of a Spark-written 2.2 table read and aggregated (issue: each such scan
    at most 0.8x Parquet's time)."""
    @workload(f"spark_column_scan_v2_2_{name}", kind="spark",
              this="Spark on Lance 2.2 (Spark-written)", comparator="Spark on Parquet", target=0.8,
              target_text="<= 0.8x Parquet",
              description=f"One column, {what}: `{column}` of the `{kind}` table written by Spark at "
                          "file version 2.2 vs the same rows in Parquet.")
    def prepare(ctx: Context) -> Prepared:
        return _spark_2_2_vs_parquet(
            ctx, kind, lambda df: df.select(column).agg(*aggs()).collect()[0],
            lambda lance_path, pq_path: {"lance_column_bytes": lance_column_bytes(lance_path, column),
                                         "parquet_column_bytes": parquet_column_bytes(pq_path, column)})


def _f():
    from pyspark.sql import functions as F
    return F


_column_scan("ints", "events", "user_id", "64-bit ints (Zipf-distributed user ids)",
             lambda: [_f().sum("user_id"), _f().max("user_id")])
_column_scan("small_ints", "events", "status", "16-bit HTTP status codes (few values)",
             lambda: [_f().sum("status"), _f().count("status")])
_column_scan("doubles", "mixed", "price", "doubles (prices, 2 decimals)",
             lambda: [_f().sum("price"), _f().max("price")])
_column_scan("low_card_strings", "events", "country", "a low-cardinality string (30 countries)",
             lambda: [_f().countDistinct("country"), _f().max(_f().length("country"))])
_column_scan("high_card_strings", "events", "url",
             "a high-cardinality string (URLs; all ASCII, so Lance's column vectors give Spark's `length` "
             "each value's character count and it reads no bytes a row, see docs/architecture.md)",
             lambda: [_f().max(_f().length("url")), _f().count("url")])
_column_scan("nullable", "events", "amount", "a nullable double (40% null)",
             lambda: [_f().sum("amount"), _f().count("amount")])


# -- 6. Selective reads: pushdown from page statistics ---------------------------------------

def _sorted_datasets(ctx: Context):
    """`rows` sorted by id (id, v = id * 3, a string and a double), written by Spark as Lance
    (with page statistics) and as Parquet (row-group statistics and page index), cached."""
    spark = ctx.spark
    rows = ctx.mode.spark_rows

    def frame():
        from pyspark.sql import functions as F
        return (spark.range(0, rows, numPartitions=4)
                .withColumn("v", F.col("id") * 3)
                .withColumn("s", F.concat(F.lit("k"), F.col("id").cast("string")))
                .withColumn("x", F.rand(seed=3)))

    def build_lance(path: Path) -> None:
        frame().write.format("lance").option("maxRowsPerPage", 8192).save(str(path))

    def build_parquet(path: Path) -> None:
        frame().write.parquet(str(path))

    lance_path = data._cached(f"sorted-{rows}-lance-v1", build_lance, ctx.log)
    pq_path = data._cached(f"sorted-{rows}-parquet-v1", build_parquet, ctx.log)
    return str(lance_path), str(pq_path), rows


def _selective(name: str, fraction: float) -> None:
    @workload(name, kind="spark", this="Spark on Lance (pushdown)", comparator="Spark on Parquet",
              target=1.0, target_text="<= 1.0x Parquet",
              description=f"`id BETWEEN a AND b` selecting {fraction:.2%} of a table sorted by id, "
                          "all four columns aggregated; Lance prunes fragments and pages from its page "
                          "statistics, Parquet uses row-group statistics and its page index.")
    def prepare(ctx: Context) -> Prepared:
        spark = ctx.spark
        lance_path, pq_path, rows = _sorted_datasets(ctx)
        width = max(1, int(rows * fraction))
        lo = rows // 3
        cond = f"id BETWEEN {lo} AND {lo + width - 1}"
        exprs = _agg_exprs([("count", "*"), ("sum", "v"), ("max", "s"), ("sum", "x")])

        def derive(this_s: float, other_s: float) -> Dict[str, Any]:
            facts: Dict[str, Any] = {"selected_rows": width}
            facts.update(_lance_scan_metrics(spark.read.format("lance").load(lance_path).where(cond).agg(*exprs),
                                             ("pagesRead", "pagesPruned", "fragmentsPruned")))
            return facts

        return Prepared(
            this=lambda: spark.read.format("lance").load(lance_path).where(cond).agg(*exprs).collect()[0],
            other=lambda: spark.read.parquet(pq_path).where(cond).agg(*exprs).collect()[0],
            rows=rows, check=_check_rows, derive=derive)


_selective("spark_select_0.01pct", 0.0001)
_selective("spark_select_1pct", 0.01)
_selective("spark_select_10pct", 0.10)


@workload("spark_select_bytes_v2_2", kind="spark", this="Spark on Lance 2.2 (pushdown)",
          comparator="Spark on Parquet", target=None,
          target_text="bytes read <= 1.0x Parquet (facts; time reported)",
          description="`id BETWEEN a AND b` selecting 0.1% of 2M rows sorted by id (columns id and a "
                      "977-value int), written by Spark at file version 2.2 (default pages: 131,072 "
                      "rows, bounds per 8,192-row block) and as Parquet; bytes read from the local "
                      "file system by each query, planning included (Parquet's vectored reads off "
                      "for the count: they bypass the file system's statistics).")
def spark_select_bytes_v2_2(ctx: Context) -> Prepared:
    from pyspark.sql import functions as F

    spark = ctx.spark
    rows = min(2_000_000, 4 * ctx.mode.spark_rows)

    def frame():
        return spark.range(0, rows, numPartitions=4).withColumn("v", (F.col("id") * 7919) % 977)

    lance_path = str(data._cached(f"sorted977-{rows}-lance-2.2-{_writer()}",
                                  lambda p: frame().write.format("lance").option("fileVersion", "2.2").save(str(p)),
                                  ctx.log))
    pq_path = str(data._cached(f"sorted977-{rows}-parquet", lambda p: frame().write.parquet(str(p)), ctx.log))
    lo = rows * 5 // 8
    cond = f"id BETWEEN {lo} AND {lo + rows // 1000 - 1}"
    exprs = _agg_exprs([("count", "*"), ("sum", "v")])
    jvm = spark._jvm
    hconf = spark.sparkContext._jsc.hadoopConfiguration()

    def fs_bytes() -> int:
        return sum(st.getBytesRead() for st in jvm.org.apache.hadoop.fs.FileSystem.getAllStatistics()
                   if st.getScheme() == "file")

    def bytes_of(fn) -> int:
        before = fs_bytes()
        fn()
        return fs_bytes() - before

    def lance_q():
        return spark.read.format("lance").load(lance_path).where(cond).agg(*exprs).collect()[0]

    def parquet_q():
        return spark.read.parquet(pq_path).where(cond).agg(*exprs).collect()[0]

    def derive(this_s: float, other_s: float) -> Dict[str, Any]:
        key = "parquet.hadoop.vectored.io.enabled"
        old = hconf.get(key)
        hconf.set(key, "false")
        try:
            pq_bytes = bytes_of(parquet_q)
        finally:
            if old is None:
                hconf.unset(key)
            else:
                hconf.set(key, old)
        lance_bytes = bytes_of(lance_q)
        return {"selected_rows": rows // 1000, "lance_bytes_read": lance_bytes, "parquet_bytes_read": pq_bytes,
                "bytes_ratio": round(lance_bytes / max(1, pq_bytes), 3)}

    return Prepared(this=lance_q, other=parquet_q, rows=rows, check=_check_rows, derive=derive)


@workload("spark_point_lookup", kind="spark", this="Spark on Lance (pushdown)", comparator="Spark on Parquet",
          target=1.0, target_text="<= 1.0x Parquet",
          description="`id = k` on the sorted table, returning the row.")
def spark_point_lookup(ctx: Context) -> Prepared:
    spark = ctx.spark
    lance_path, pq_path, rows = _sorted_datasets(ctx)
    k = rows // 2 + 17
    return Prepared(
        this=lambda: spark.read.format("lance").load(lance_path).where(f"id = {k}").collect(),
        other=lambda: spark.read.parquet(pq_path).where(f"id = {k}").collect(),
        rows=rows, check=lambda a, b: "results agree" if [tuple(r) for r in a] == [tuple(r) for r in b]
        else f"MISMATCH: {a} vs {b}")


def _count(name: str, cond: Optional[str], description: str) -> None:
    @workload(name, kind="spark", this="Spark on Lance", comparator="Spark on Parquet",
              target=1.0, target_text="<= 1.0x Parquet", description=description)
    def prepare(ctx: Context) -> Prepared:
        spark = ctx.spark
        lance_path, pq_path, rows = _sorted_datasets(ctx)
        where = cond.format(lo=rows // 3, hi=rows // 3 + rows // 10 - 1) if cond else "true"
        return Prepared(
            this=lambda: spark.read.format("lance").load(lance_path).where(where).count(),
            other=lambda: spark.read.parquet(pq_path).where(where).count(),
            rows=rows, check=lambda a, b: "results agree" if a == b else f"MISMATCH: {a} vs {b}")


_count("spark_count", None,
       "`count()` of the sorted table: Lance answers from the manifest (no job), Parquet from its footers.")
_count("spark_count_where", "id BETWEEN {lo} AND {hi}",
       "`count()` of `id BETWEEN a AND b` (10% of the sorted table): Lance prunes fragments and pages "
       "with its page statistics, then each task filters and counts the rows of the pages left (the "
       "aggregate pushed into the scan; a LocalTableScan, no job, when the statistics decide every row); "
       "Parquet uses row-group statistics and its page index.")


@workload("spark_plan_1000_fragments", kind="spark", this="Lance planning", comparator="Parquet planning",
          target=1.0, target_text="<= 1.0x Parquet",
          description="Planning (and pruning) a filtered query over a dataset of 1,000 fragments (Lance) "
                      "vs 1,000 files (Parquet): `executedPlan` of `id BETWEEN ...`, no execution. Lance "
                      "reads only the tail (statistics) of each data file, once per driver (they are kept "
                      "for the next plannings; `spark_plan_1000_fragments_cold` reads them every time).")
def spark_plan_1000_fragments(ctx: Context) -> Prepared:
    return _plan_1000_fragments(ctx, cold=False)


@workload("spark_plan_1000_fragments_cold", kind="spark", this="Lance planning (statistics read)",
          comparator="Parquet planning", target=1.0, target_text="<= 1.0x Parquet",
          description="`spark_plan_1000_fragments` with the driver's statistics cache emptied before each "
                      "Lance planning: the first planning over the dataset, which reads the tails of its "
                      "1,000 data files (several at once).")
def spark_plan_1000_fragments_cold(ctx: Context) -> Prepared:
    return _plan_1000_fragments(ctx, cold=True)


def _plan_1000_fragments(ctx: Context, cold: bool) -> Prepared:
    spark = ctx.spark
    rows = 1000 * 100

    def build_lance(path: Path) -> None:
        from pyspark.sql import functions as F
        spark.range(0, rows, numPartitions=1000).withColumn("v", F.col("id") * 2) \
            .write.format("lance").save(str(path))

    def build_parquet(path: Path) -> None:
        from pyspark.sql import functions as F
        spark.range(0, rows, numPartitions=1000).withColumn("v", F.col("id") * 2).write.parquet(str(path))

    lance_path = str(data._cached("frag1000-lance-v1", build_lance, ctx.log))
    pq_path = str(data._cached("frag1000-parquet-v1", build_parquet, ctx.log))
    cond = "id BETWEEN 5000 AND 5099"
    # (the connector's classes are loaded by Spark's class loader, not py4j's: reflection)
    jvm, gateway = spark._jvm, spark.sparkContext._gateway
    cls = jvm.org.apache.spark.util.Utils.classForName("io.lancespark.table.filter.StatisticsCache", True, False)
    shared = cls.getMethod("shared", gateway.new_array(jvm.java.lang.Class, 0)) \
        .invoke(None, gateway.new_array(jvm.java.lang.Object, 0))

    def this():
        if cold:
            shared.clear()
        return spark.read.format("lance").load(lance_path).where(cond)._jdf.queryExecution().executedPlan().toString()

    return Prepared(
        this=this,
        other=lambda: spark.read.parquet(pq_path).where(cond)._jdf.queryExecution().executedPlan().toString(),
        rows=rows)


# -- 6b. Many fragments (issue 35): 100,000 small fragments, never compacted ---------------------

MANY = 100_000
MANY_ROWS_PER_FILE = 10


def _many_table():
    import numpy as np
    import pyarrow as pa
    n = MANY * MANY_ROWS_PER_FILE
    rng = np.random.default_rng(35)
    ids = np.arange(n, dtype=np.int64)
    return pa.table({"id": ids, "v": rng.random(n), "s": pa.array([f"s{i % 100}" for i in range(n)])})


def _many_datasets(ctx: Context):
    """The same 1,000,000 rows as 100,000 Lance fragments (pylance, 10 rows per data file: what
    small appends leave behind) and as 100,000 Parquet files (pyarrow, 10 rows per file)."""
    import lance
    import pyarrow.dataset as pads

    def build_lance(path: Path) -> None:
        lance.write_dataset(_many_table(), str(path), max_rows_per_file=MANY_ROWS_PER_FILE,
                            max_rows_per_group=MANY_ROWS_PER_FILE, data_storage_version="2.1")

    def build_parquet(path: Path) -> None:
        pads.write_dataset(_many_table(), str(path), format="parquet", max_rows_per_file=MANY_ROWS_PER_FILE,
                           max_rows_per_group=MANY_ROWS_PER_FILE)

    lance_path = str(data._cached("frag100k-lance-v1", build_lance, ctx.log))
    pq_path = str(data._cached("frag100k-parquet-v1", build_parquet, ctx.log))
    return lance_path, pq_path


def _statistics_cache(spark):
    jvm, gateway = spark._jvm, spark.sparkContext._gateway
    cls = jvm.org.apache.spark.util.Utils.classForName("io.lancespark.table.filter.StatisticsCache", True, False)
    return cls.getMethod("shared", gateway.new_array(jvm.java.lang.Class, 0)) \
        .invoke(None, gateway.new_array(jvm.java.lang.Object, 0))


@workload("spark_plan_100k_fragments", kind="spark", this="Lance planning", comparator="Parquet planning",
          target=2.0, target_text="<= 2.0x Parquet",
          description="Planning a filtered query (`id = k`, `executedPlan`, no execution) over 100,000 "
                      "fragments written by pylance (10 rows each, as small appends leave them) vs Spark's "
                      "planning over 100,000 Parquet files (its file index lists the directory each time). "
                      "Lance opens the latest manifest (16 MB, every fragment) and reads the tail of each "
                      "data file for statistics, several at once, with the driver's statistics cache "
                      "emptied before every run (cold).")
def spark_plan_100k_fragments(ctx: Context) -> Prepared:
    spark = ctx.spark
    lance_path, pq_path = _many_datasets(ctx)
    shared = _statistics_cache(spark)
    cond = "id = 543210"

    def this():
        shared.clear()
        return spark.read.format("lance").load(lance_path).where(cond)._jdf.queryExecution().executedPlan().toString()

    # the driver heap a planned scan keeps (the snapshot of 100,000 fragments and its scan plan),
    # measured after full collections with and without one held
    rt = spark._jvm.java.lang.Runtime.getRuntime()

    def used_after_gc() -> int:
        for _ in range(3):
            spark._jvm.java.lang.System.gc()
        return int(rt.totalMemory() - rt.freeMemory())

    before = used_after_gc()
    held = spark.read.format("lance").load(lance_path).where(cond)._jdf.queryExecution().executedPlan()
    retained = used_after_gc() - before
    del held
    return Prepared(
        this=this,
        other=lambda: spark.read.parquet(pq_path).where(cond)._jdf.queryExecution().executedPlan().toString(),
        rows=MANY * MANY_ROWS_PER_FILE,
        facts={"fragments": MANY, "files": MANY,
               "driver heap kept by one planned scan (MiB)": round(retained / 2**20, 1),
               "per fragment (bytes)": round(retained / MANY)})


@workload("spark_count_100k_fragments", kind="spark", this="Spark on Lance", comparator="Spark on Parquet",
          target=1.0, target_text="<= 1.0x Parquet",
          description="`count()` of the 100,000-fragment table: Lance answers from the manifest (a metadata "
                      "read, no job); Parquet reads the footers of its 100,000 files in a job.")
def spark_count_100k_fragments(ctx: Context) -> Prepared:
    spark = ctx.spark
    lance_path, pq_path = _many_datasets(ctx)
    return Prepared(
        this=lambda: spark.read.format("lance").load(lance_path).count(),
        other=lambda: spark.read.parquet(pq_path).count(),
        rows=MANY * MANY_ROWS_PER_FILE, check=lambda a, b: "results agree" if a == b else f"MISMATCH: {a} vs {b}")


@workload("spark_append_100k_fragments", kind="spark", this="Lance append (100,000 fragments)",
          comparator="Delta append (100,000 files)", target=None, target_text="informational",
          description="Appending 10 rows (`df.write.mode(\"append\")`) to the 100,000-fragment table: Lance "
                      "reads the latest manifest, writes one data file and a manifest of every fragment plus "
                      "one; Delta (the same Parquet files, `CONVERT TO DELTA`, its log checkpointed) reads its "
                      "snapshot and writes one file and one commit. Each run appends to the table the last "
                      "run left (copies made once, untimed).")
def spark_append_100k_fragments(ctx: Context) -> Prepared:
    import shutil
    spark = ctx.spark
    lance_src, pq_src = _many_datasets(ctx)
    lance_path = str(data.DATA_DIR / "frag100k-lance-append")
    delta_path = str(data.DATA_DIR / "frag100k-delta-append")
    for src, dst in ((lance_src, lance_path), (pq_src, delta_path)):
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
    spark.sql(f"CONVERT TO DELTA parquet.`{delta_path}`")
    from delta.tables import DeltaTable
    DeltaTable.forPath(spark, delta_path).toDF().limit(1).collect()
    spark.sql(f"ALTER TABLE delta.`{delta_path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '10')")
    try:  # Delta reads a checkpoint, not 100,000 JSON actions, from here on (as a long-lived table would)
        spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, delta_path).checkpoint()
    except Exception as e:  # noqa: BLE001 - reported, the comparison is still valid without it
        ctx.log(f"Delta checkpoint not written: {e}")
    rows = spark.range(10).selectExpr("id", "cast(id as double) as v", "cast(id as string) as s")
    rows.cache().count()
    return Prepared(
        this=lambda: rows.write.format("lance").mode("append").save(lance_path),
        other=lambda: rows.write.format("delta").mode("append").save(delta_path),
        rows=MANY * MANY_ROWS_PER_FILE, facts={"fragments": MANY, "files": MANY})


# -- 7. SQL DML: Lance vs Delta Lake (deletion vectors) ----------------------------------------

DELTA_DV = "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"


def _restore_first_version(spark, side: str, lance_path: str, base: int, delta_t: str) -> None:
    """Puts one side back at its first version, untimed: the Lance table (`this`) with pylance's
    `restore` of version `base`, the Delta table with `RESTORE TABLE ... TO VERSION AS OF 0`."""
    import lance

    if side == "this":
        if lance.dataset(lance_path).version != base:
            lance.dataset(lance_path, version=base).restore()
    elif spark.sql(f"DESCRIBE HISTORY {delta_t} LIMIT 1").first()["version"] != 0:
        spark.sql(f"RESTORE TABLE {delta_t} TO VERSION AS OF 0")


def _dml_workload(name: str, statement: str, description: str, merge_source: bool) -> None:
    """A DML statement on the mixed table, `{T}` standing for `lance.`<path>`` (this) and
    `delta.`<path>`` (comparator, deletion vectors on).  Both tables are written once from the
    cached Parquet copy; before every run (untimed) each is put back at its first version
    (pylance `restore`, Delta `RESTORE TABLE`), so every repetition starts from the same state."""

    @workload(name, kind="spark", this="Spark SQL on Lance", comparator="Spark SQL on Delta Lake (DV)",
              target=0.5, target_text="<= 0.5x Delta", description=description)
    def prepare(ctx: Context) -> Prepared:
        import shutil
        import tempfile

        import lance

        spark, rows = ctx.spark, ctx.mode.spark_rows
        source = spark.read.parquet(str(data.parquet_dataset(spark, "mixed", rows, ctx.log)))
        out = Path(tempfile.mkdtemp(prefix=f"lance-bench-{name}-"))
        lance_path, delta_path = str(out / "t.lance"), str(out / "t.delta")
        lance_t, delta_t = f"lance.`{lance_path}`", f"delta.`{delta_path}`"
        ctx.log(f"  writing the {rows:,}-row tables (Lance, Delta) ...")
        source.write.format("lance").save(lance_path)
        source.createOrReplaceTempView(f"{name}_base")
        spark.sql(f"CREATE TABLE {delta_t} USING delta {DELTA_DV} AS SELECT * FROM {name}_base")
        base = lance.dataset(lance_path).version
        src = None
        if merge_source:   # 1% of the ids updated (spread over every file) + 1% new ids
            src = spark.sql(f"""
                SELECT id, qty + 1 AS qty, price * 1.1 AS price, name, category, discount
                  FROM {name}_base WHERE id % 100 = 7
                UNION ALL
                SELECT id + {rows} AS id, qty, price, name, category, discount
                  FROM {name}_base WHERE id % 100 = 11""").cache()
            src.count()
            src.createOrReplaceTempView(f"{name}_src")

        def reset(side: str) -> None:
            _restore_first_version(spark, side, lance_path, base, delta_t)

        def state(table: str):
            return spark.sql(f"SELECT count(*), sum(id), sum(qty), sum(price), count(discount) "
                             f"FROM {table}").first()

        def check(_a, _b) -> str:   # after the warm-ups each table holds its statement's result
            return _check_rows(state(lance_t), state(delta_t))

        def derive(this_s: float, other_s: float) -> Dict[str, Any]:
            facts: Dict[str, Any] = {}
            try:
                m = spark.sql(f"DESCRIBE HISTORY {delta_t} LIMIT 1").first()["operationMetrics"]
                facts["delta_metrics"] = {k: int(v) for k, v in m.items()
                                          if "DeletionVector" in k or k in (
                                              "numDeletedRows", "numTargetRowsUpdated", "numTargetRowsInserted",
                                              "numTargetFilesAdded", "numAddedFiles", "numRemovedFiles",
                                              "numTargetFilesRemoved")}
                facts["lance_fragments_after"] = len(lance.dataset(lance_path).get_fragments())
            except Exception as e:  # noqa: BLE001 - facts are informational
                facts["metrics_error"] = str(e)[:200]
            if src is not None:
                src.unpersist()
            shutil.rmtree(out, ignore_errors=True)
            return facts

        return Prepared(this=lambda: spark.sql(statement.replace("{T}", lance_t)).collect(),
                        other=lambda: spark.sql(statement.replace("{T}", delta_t)).collect(),
                        rows=rows, check=check, reset=reset, derive=derive,
                        facts={"lance_fragments": len(lance.dataset(lance_path).get_fragments()),
                               "delta_files": len(data.data_files(Path(delta_path), ".parquet"))})


_dml_workload(
    "dml_merge",
    "MERGE INTO {T} t USING dml_merge_src s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    "`MERGE INTO` the mixed table from a cached source of 1% of its ids (every 100th, so every "
    "file is touched; `UPDATE SET *`) and 1% new ids (`INSERT *`): Lance (merge-on-read: "
    "deletion files + new fragments) vs Delta Lake with deletion vectors.  Each run starts "
    "from the same table version (restored untimed).", merge_source=True)

_dml_workload(
    "dml_delete",
    "DELETE FROM {T} WHERE id % 100 = 3",
    "`DELETE` of 1% of the rows (every 100th id, so every file is touched) of the mixed table: "
    "Lance (deletion files) vs Delta Lake with deletion vectors.  Each run starts from the same "
    "table version (restored untimed).", merge_source=False)


# -- 8. Maintenance: compaction vs Delta Lake's OPTIMIZE -----------------------------------------

@workload("compact_1000_fragments", kind="spark", this="CALL lance.system.compact",
          comparator="Delta Lake OPTIMIZE", target=1.0, target_text="<= 1.0x Delta",
          description="Compaction of the mixed table written as 1,000 small fragments (Lance, one "
                      "commit) and 1,000 small files (Delta Lake), both by Spark from the same rows: "
                      "`CALL lance.system.compact(table => ...)` with its defaults (pylance's: "
                      "1,048,576 rows per fragment) vs `OPTIMIZE` with `maxFileSize` set so that Delta "
                      "writes as many files as Lance writes fragments (the same parallelism; Delta's "
                      "1 GB default would write one file in one task).  Each run starts from the "
                      "1,000-file version (restored untimed).")
def compact_1000_fragments(ctx: Context) -> Prepared:
    import shutil
    import tempfile

    import lance

    spark, rows = ctx.spark, ctx.mode.spark_rows
    source = spark.read.parquet(str(data.parquet_dataset(spark, "mixed", rows, ctx.log)))
    out = Path(tempfile.mkdtemp(prefix="lance-bench-compact-"))
    lance_path, delta_path = str(out / "t.lance"), str(out / "t.delta")
    delta_t = f"delta.`{delta_path}`"
    ctx.log(f"  writing {rows:,} rows as 1,000 fragments / files (Lance, Delta) ...")
    small = source.repartition(1000)
    small.write.format("lance").save(lance_path)
    small.write.format("delta").save(delta_path)
    base = lance.dataset(lance_path).version
    fragments = len(lance.dataset(lance_path).get_fragments())
    target_rows = 1024 * 1024
    outputs = max(1, -(-rows // target_rows))
    delta_bytes = data.tree_bytes(Path(delta_path), ".parquet")
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(max(1 << 20, delta_bytes // outputs)))

    def reset(side: str) -> None:
        _restore_first_version(spark, side, lance_path, base, delta_t)

    def state(df):
        return df.selectExpr("count(*)", "sum(id)", "sum(qty)", "sum(price)", "count(discount)").first()

    def check(_a, _b) -> str:   # after the warm-ups each table holds its compacted version
        return _check_rows(state(spark.read.format("lance").load(lance_path)),
                           state(spark.read.format("delta").load(delta_path)))

    def derive(this_s: float, other_s: float) -> Dict[str, Any]:
        facts: Dict[str, Any] = {}
        try:
            facts["lance_fragments_after"] = len(lance.dataset(lance_path).get_fragments())
            m = spark.sql(f"DESCRIBE HISTORY {delta_t} LIMIT 1").first()["operationMetrics"]
            facts["delta_files_after"] = int(m.get("numAddedFiles", -1))
            facts["delta_files_removed"] = int(m.get("numRemovedFiles", -1))
        except Exception as e:  # noqa: BLE001 - facts are informational
            facts["metrics_error"] = str(e)[:200]
        spark.conf.unset("spark.databricks.delta.optimize.maxFileSize")
        shutil.rmtree(out, ignore_errors=True)
        return facts

    return Prepared(this=lambda: spark.sql(f"CALL lance.system.compact(table => '{lance_path}')").collect(),
                    other=lambda: spark.sql(f"OPTIMIZE {delta_t}").collect(),
                    rows=rows, check=check, reset=reset, derive=derive,
                    facts={"lance_fragments": fragments,
                           "delta_files": len(data.data_files(Path(delta_path), ".parquet")),
                           "delta_max_file_size": max(1 << 20, delta_bytes // outputs)})


# -- 9. TPC-H: whole queries, Lance vs Parquet -----------------------------------------------------

TPCH_SF = {"full": 1.0, "quick": 0.1}


def tpch_copies(spark, sf: float, log) -> Path:
    """The TPC-H tables at scale factor `sf`, as Lance written by this connector (under
    `lance/`; the copy is keyed by the connector build) and as Parquet written by Spark (under
    `parquet/`), from the same DataFrames."""
    from bench import tpch

    src = tpch.generate(data.DATA_DIR / f"tpch-all-sf{sf}", sf)

    def build(path: Path) -> None:
        tpch.load(spark, src, path / "lance", path / "parquet")

    return data._cached(f"tpch-sf{sf}-copies-spark-{_writer()}", build, log)


def _tpch_tables(ctx: Context):
    """The TPC-H tables at the mode's scale factor: Lance written by this connector (its default
    file version; the copy is keyed by the connector build), Parquet written by Spark, from the
    same DataFrames; views `tl_<table>` and `tp_<table>`."""
    from bench import tpch

    sf = TPCH_SF[ctx.mode.name]
    root = tpch_copies(ctx.spark, sf, ctx.log)
    tpch.register(ctx.spark, "lance", root / "lance", "tl")
    tpch.register(ctx.spark, "parquet", root / "parquet", "tp")
    return root, sf


def _tpch_joins(ctx: Context, root: Path, n: int, sf: float) -> dict:
    """Query n's joins on both formats: the plan before running (EXPLAIN's) and the plan AQE
    ran, with Spark's defaults; then the plan before running with the cost-based optimizer,
    against Parquet as catalog tables with ANALYZE's statistics (views `ta_<table>`; Lance's
    statistics come from its files)."""
    from bench import tpch

    spark = ctx.spark
    mine, theirs = tpch.query(n, "tl", sf), tpch.query(n, "tp", sf)
    out = {"joins_lance": tpch.join_strategies(spark, mine),
           "joins_parquet": tpch.join_strategies(spark, theirs),
           "joins_lance_as_run": tpch.join_strategies(spark, mine, final=True),
           "joins_parquet_as_run": tpch.join_strategies(spark, theirs, final=True)}
    if not spark.catalog.tableExists("ta_lineitem"):
        tpch.register_analyzed(spark, root / "parquet", "ta")
    spark.conf.set("spark.sql.cbo.enabled", "true")
    try:
        out["joins_lance_cbo"] = tpch.join_strategies(spark, mine)
        out["joins_parquet_analyzed_cbo"] = tpch.join_strategies(spark, tpch.query(n, "ta", sf))
    finally:
        spark.conf.set("spark.sql.cbo.enabled", "false")
    return out


def _tpch_check(a, b) -> str:
    """Whether the two sides' rows (in order) are the same."""
    ra, rb = [tuple(r) for r in a], [tuple(r) for r in b]
    return "results agree" if ra == rb else f"MISMATCH: {len(ra)} vs {len(rb)} rows, first {ra[:2]} vs {rb[:2]}"


def _tpch_workload(n: int) -> None:
    @workload(f"tpch_q{n:02d}", kind="spark", this="Spark SQL on Lance", comparator="Spark SQL on Parquet",
              target=1.1, target_text="<= 1.1x Parquet (geomean of the 22 <= 0.8x)",
              description=f"TPC-H Q{n} (scale factor 1; 0.1 in quick mode) in Spark SQL over the "
                          "tables written by this connector at its default file version vs the same "
                          "rows in Parquet written by Spark; results compared.")
    def prepare(ctx: Context) -> Prepared:
        from bench import tpch

        spark = ctx.spark
        root, sf = _tpch_tables(ctx)
        mine, theirs = tpch.query(n, "tl", sf), tpch.query(n, "tp", sf)

        facts = {"sf": sf}
        if n in (3, 5, 10):
            facts.update(_tpch_joins(ctx, root, n, sf))
        rows = spark.read.parquet(str(root / "parquet" / "lineitem")).count()
        return Prepared(this=lambda: spark.sql(mine).collect(), other=lambda: spark.sql(theirs).collect(),
                        rows=rows, check=_tpch_check, facts=facts)


for _n in range(1, 23):
    _tpch_workload(_n)


def _tpch_pylance_tables(ctx: Context):
    """The TPC-H tables written by pylance at its default file version (views `tlp_<table>`),
    next to `_tpch_tables`' Parquet copy."""
    from bench import tpch
    import lance

    root, sf = _tpch_tables(ctx)
    src = tpch.generate(data.DATA_DIR / f"tpch-all-sf{sf}", sf)
    path = data._cached(f"tpch-sf{sf}-pylance-{lance.__version__}", lambda p: tpch.load_pylance(src, p), ctx.log)
    tpch.register(ctx.spark, "lance", path, "tlp")
    return root, path, sf


def _tpch_pylance_workload(n: int) -> None:
    @workload(f"tpch_pylance_q{n:02d}", kind="spark", this="Spark SQL on Lance (pylance-written)",
              comparator="Spark SQL on Parquet", target=None,
              target_text="geomean of the 22 <= 0.9x Parquet",
              description=f"TPC-H Q{n} (scale factor 1; 0.1 in quick mode) in Spark SQL over the "
                          "tables written by pylance at its default file version vs the same rows in "
                          "Parquet written by Spark; results compared.")
    def prepare(ctx: Context) -> Prepared:
        from bench import tpch
        import lance

        spark = ctx.spark
        root, path, sf = _tpch_pylance_tables(ctx)
        mine, theirs = tpch.query(n, "tlp", sf), tpch.query(n, "tp", sf)

        facts = {"sf": sf, "file_version": lance.dataset(str(path / "lineitem.lance")).data_storage_version}
        rows = spark.read.parquet(str(root / "parquet" / "lineitem")).count()
        return Prepared(this=lambda: spark.sql(mine).collect(), other=lambda: spark.sql(theirs).collect(),
                        rows=rows, check=_tpch_check, facts=facts)


for _n in range(1, 23):
    _tpch_pylance_workload(_n)
