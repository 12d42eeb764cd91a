"""Scan behaviour: count from the manifest, partitioning, batch size, metadata
columns (compared with pylance's _rowid / _rowaddr)."""
from __future__ import annotations

import shutil

import lance
import pytest

from conftest import sliced
from datagen import small_table


@pytest.fixture(scope="module")
def stable(tmp_path_factory):
    path = tmp_path_factory.mktemp("stable") / "s.lance"
    lance.write_dataset(small_table(5000), str(path), max_rows_per_file=2000, enable_stable_row_ids=True,
                       data_storage_version="2.0")
    lance.write_dataset(small_table(1000, start=5000), str(path), mode="append")
    lance.dataset(str(path)).delete("id % 7 = 0")
    return path


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    path = tmp_path_factory.mktemp("plain") / "p.lance"
    lance.write_dataset(small_table(300_000), str(path), max_rows_per_file=300_000, data_storage_version="2.0")
    lance.dataset(str(path)).delete("id < 10")
    return path


def test_count_is_answered_from_the_manifest(spark, plain, tmp_path):
    copy = tmp_path / "nodata.lance"
    shutil.copytree(plain, copy)
    shutil.rmtree(copy / "data")           # no data file left: a data read would fail
    df = spark.read.format("lance").load(str(copy))
    assert df.count() == 300_000 - 10
    plan = df.groupBy().count()._jdf.queryExecution().executedPlan().toString()
    assert "LocalTableScan" in plan or "LanceCountScan" in plan, plan


def test_large_fragment_is_split_across_cores(spark, plain):
    df = spark.read.format("lance").load(str(plain))
    assert df.rdd.getNumPartitions() >= 2
    assert df.select("id").distinct().count() == 300_000 - 10
    small = spark.read.format("lance").option("splitRows", 50_000).load(str(plain))
    assert small.rdd.getNumPartitions() == 6


def test_default_partitions_follow_sparks_rule_for_files(spark, tmp_path):
    """Without splitRows a scan makes as many partitions as Spark's file scan
    makes of the same bytes: many small fragments are packed as many small
    Parquet files are (each costs spark.sql.files.openCostInBytes), a
    table of a few MB is one partition, and a larger one gets one per core;
    more partitions than cores are rounded up to whole waves."""
    rows = spark.range(0, 20_000, numPartitions=200).selectExpr("id", "id % 7 AS small")
    frags, pq = str(tmp_path / "frags.lance"), str(tmp_path / "frags.parquet")
    rows.write.format("lance").save(frags)
    rows.write.parquet(pq)
    assert len(lance.dataset(frags).get_fragments()) == 200
    lance_parts = spark.read.format("lance").load(frags).rdd.getNumPartitions()
    pq_parts = spark.read.parquet(pq).rdd.getNumPartitions()
    cores = spark.sparkContext.defaultParallelism
    # 200 x 4 MB of open cost / 128 MB: 7 partitions, rounded up to whole waves of tasks
    assert 1 < pq_parts < 20 and lance_parts == -(-pq_parts // cores) * cores
    assert spark.read.format("lance").load(frags).selectExpr("sum(id)").first()[0] == sum(range(20_000))
    small = str(tmp_path / "small.lance")
    spark.range(0, 50_000, numPartitions=1).write.format("lance").save(small)
    assert spark.read.format("lance").load(small).rdd.getNumPartitions() == 1
    spark.conf.set("spark.sql.files.maxPartitionBytes", 64 * 1024)
    spark.conf.set("spark.sql.files.openCostInBytes", 1024)
    try:
        # its data, far above this open cost: one partition per core
        assert spark.read.format("lance").load(small).rdd.getNumPartitions() == cores
        spark.conf.set("spark.sql.files.minPartitionNum", 5)
        assert spark.read.format("lance").load(small).rdd.getNumPartitions() == 5
        spark.conf.set("spark.sql.files.maxPartitionBytes", 16 * 1024)
        # ~25 pieces of 16 KB: whole waves of 5
        assert spark.read.format("lance").load(small).rdd.getNumPartitions() % 5 == 0
    finally:
        for k in ("maxPartitionBytes", "openCostInBytes", "minPartitionNum"):
            spark.conf.unset(f"spark.sql.files.{k}")


def test_partitions_are_sized_by_the_columns_read(spark, tmp_path):
    """A scan's partitions are sized by the bytes of the columns it reads, not by whole files: the
    8-byte ids of a table whose other column holds 128 hex characters a row get a partition per core
    where the whole rows get many (pylance's uncompressed tables made four times Parquet's
    partitions for a few of their columns)."""
    n = 200_000
    path = str(tmp_path / "wide.lance")
    spark.range(0, n, numPartitions=2).selectExpr("id", "sha2(cast(id AS string), 512) AS wide") \
        .write.format("lance").save(path)
    cores = spark.sparkContext.defaultParallelism
    spark.conf.set("spark.sql.files.maxPartitionBytes", 1 << 20)
    spark.conf.set("spark.sql.files.openCostInBytes", 1 << 10)
    try:
        df = spark.read.format("lance").load(path)
        whole = df.rdd.getNumPartitions()
        ids = df.select("id").rdd.getNumPartitions()
        filtered = df.where("wide < '8'").select("id").rdd.getNumPartitions()
        assert whole >= 8, whole                    # ~13 MB of hex strings in 1 MB partitions
        assert ids == cores, (ids, whole)           # ~0.5 MB of ids: one partition per core
        assert filtered == whole, (filtered, whole)  # the filter reads the wide column: sized by it
        assert df.select("id").agg({"id": "sum"}).first()[0] == n * (n - 1) // 2
    finally:
        for k in ("maxPartitionBytes", "openCostInBytes"):
            spark.conf.unset(f"spark.sql.files.{k}")


def test_batch_size_option_does_not_change_results(spark, stable):
    a = spark.read.format("lance").option("batchSize", 7).load(str(stable)).orderBy("id").collect()
    b = spark.read.format("lance").load(str(stable)).orderBy("id").collect()
    assert a == b and len(a) == lance.dataset(str(stable)).count_rows()


@pytest.mark.parametrize("which", ["stable", "plain_small"])
def test_metadata_columns_match_pylance(spark, stable, tmp_path, which):
    if which == "stable":
        path = stable
    else:
        path = tmp_path / "plain_small.lance"
        lance.write_dataset(small_table(3000), str(path), max_rows_per_file=1000, data_storage_version="legacy")
        lance.dataset(str(path)).delete("id % 5 = 1")
    expected = lance.dataset(str(path)).to_table(columns=["id"], with_row_id=True, with_row_address=True)
    want = sorted(zip(expected["id"].to_pylist(), expected["_rowid"].to_pylist(), expected["_rowaddr"].to_pylist()))
    rows = spark.read.format("lance").load(str(path)).select("id", "_rowid", "_rowaddr", "_fragid").collect()
    got = sorted((r["id"], r["_rowid"], r["_rowaddr"]) for r in rows)
    assert got == want
    assert all(r["_fragid"] == r["_rowaddr"] >> 32 for r in rows)


def test_select_star_hides_metadata_columns(spark, stable):
    cols = spark.read.format("lance").load(str(stable)).columns
    assert cols == ["id", "x", "name"]


def test_zstd_compressed_arrow_deletion_files(spark, tmp_path):
    """The reference writes .arrow deletion files as ZSTD-compressed Arrow IPC; read those too."""
    import pyarrow as pa

    path = tmp_path / "zstd.lance"
    lance.write_dataset(small_table(1000), str(path), data_storage_version="2.0")
    lance.dataset(str(path)).delete("id % 9 = 0")
    expected = lance.dataset(str(path)).count_rows()
    (f,) = list((path / "_deletions").glob("*.arrow"))
    table = pa.ipc.open_file(str(f)).read_all()
    opts = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.OSFile(str(f), "wb") as sink, pa.ipc.new_file(sink, table.schema, options=opts) as w:
        w.write_table(table)
    assert lance.dataset(str(path)).count_rows() == expected
    ids = sorted(r.id for r in spark.read.format("lance").load(str(path)).select("id").collect())
    assert ids == [i for i in range(1000) if i % 9 != 0]


@pytest.mark.parametrize("version", sliced(["2.1", "2.2"], ["2.2"]))   # make test: 2.2
def test_large_2_x_fragment_is_split_mid_file(spark, tmp_path, version):
    """A 300,000-row fragment pylance wrote at 2.1/2.2 is read by several
    tasks, each starting mid-file (mini-block chunks, the full-zip repetition
    index), and together they return exactly pylance's rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    from compare import assert_same, oracle_rows, spark_rows

    n = 300_000
    wide = pa.array([None if i % 5 == 0 else "w" * (150 + i % 97) for i in range(n)])   # full-zip pages
    path = str(tmp_path / "big.lance")
    lance.write_dataset(small_table(n).append_column("wide", wide), path, max_rows_per_file=n,
                        data_storage_version=version)
    assert len(lance.dataset(path).get_fragments()) == 1
    df = spark.read.format("lance").option("splitRows", 47_000).load(path)
    assert df.rdd.getNumPartitions() == 7
    per_task = df.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    assert per_task == [47_000] * 6 + [n - 6 * 47_000], per_task
    want = lance.dataset(path).to_table()
    agg = df.agg(F.count("id"), F.sum("id"), F.sum(F.length("wide")), F.count("wide"), F.count("name")).collect()[0]
    assert tuple(agg) == (n, n * (n - 1) // 2, pc.sum(pc.utf8_length(want["wide"])).as_py(),
                          n - want["wide"].null_count, n - want["name"].null_count)
    near = [r for r in oracle_rows(want) if r["id"] % 1009 == 0 or 46_990 <= r["id"] <= 47_010]
    got = spark_rows(df.where("id % 1009 = 0 OR id BETWEEN 46990 AND 47010"))
    assert_same(got, near, f"rows across task boundaries at {version}")


def _dictionary_strings(n: int, seed: int):
    """A low-cardinality string column (dictionary pages) with nulls and multi-byte
    UTF-8, whose set of values changes every 1,000 rows: consecutive pages have
    different dictionaries, in which one item index stands for different strings."""
    import numpy as np
    import pyarrow as pa

    values = ["alpha", "βeta", "gämma", "日本語", "", "x" * 40, "delta", "épsilon", "zeta", "ηta"]
    rng = np.random.default_rng(seed)
    ids = np.arange(n)
    which = (rng.integers(0, 4, size=n) + ids // 1000) % len(values)
    col = pa.array([None if (i % 11 == 3) else values[w] for i, w in zip(ids, which)], pa.string())
    return pa.table({"id": pa.array(ids, pa.int64()), "s": col})


def _write_by(spark, writer: str, table, path: str, rows_per_file: int) -> None:
    """`table` written by pylance at a file version ("pylance-2.1") or by Spark at 2.2 in one
    file of 1,000-row pages ("spark-2.2")."""
    if writer.startswith("pylance"):
        lance.write_dataset(table, path, max_rows_per_file=rows_per_file,
                            data_storage_version=writer.split("-")[1])
    else:
        (spark.createDataFrame(table.to_pandas()).coalesce(1).write.format("lance")
         .option("fileVersion", "2.2").option("maxRowsPerPage", 1_000).save(path))


@pytest.mark.parametrize("writer", ["pylance-2.1", "pylance-2.2", "spark-2.2"])
def test_dictionary_strings_through_spark_expressions(spark, tmp_path, writer):
    """Dictionary-encoded string columns reach Spark's expressions with each
    item decoded once per page (length, upper, grouping, equality, collect):
    every answer equals pylance's, whatever batches, pages, dictionaries and
    deletions do to which rows share a dictionary."""
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    from compare import assert_same, assert_same_table, oracle_rows, spark_rows

    n = 12_000
    table = _dictionary_strings(n, seed=7)
    path = str(tmp_path / "dict.lance")
    _write_by(spark, writer, table, path, rows_per_file=5_000)
    lance.dataset(path).delete("id % 97 = 5 AND id < 6000")   # batches with and without deleted rows
    want = lance.dataset(path).to_table()
    for batch in (700, 8192):
        df = spark.read.format("lance").option("batchSize", batch).load(path)
        assert_same_table(df, want, f"{writer}, batchSize {batch}")
        got = spark_rows(df.select("id", F.length("s").alias("n"), F.upper("s").alias("u")))
        lengths = pc.utf8_length(want["s"]).to_pylist()
        uppers = pc.utf8_upper(want["s"]).to_pylist()
        expected = sorted(({"id": i, "n": ln, "u": u} for i, ln, u in zip(want["id"].to_pylist(), lengths, uppers)),
                          key=lambda r: r["id"])
        assert got == expected, f"{writer}, batchSize {batch}: length/upper differ"
        groups = {r["s"]: r["c"] for r in df.groupBy("s").agg(F.count(F.lit(1)).alias("c")).collect()}
        counts = want.group_by("s").aggregate([([], "count_all")])
        assert groups == dict(zip(counts["s"].to_pylist(), counts["count_all"].to_pylist()))
        assert df.where(F.col("s") == "日本語").count() == pc.sum(pc.equal(want["s"], "日本語")).as_py()


def _dictionary_numbers(n: int, seed: int):
    """Columns of few values (dictionary pages where the writer finds them worth it) of
    every type Spark reads through dictionary items: 1-, 2-, 4- and 8-byte integers, dates
    and decimals of 7 and 18 digits, with nulls; their sets of values change every 1,000
    rows, so that consecutive pages have different dictionaries."""
    import datetime
    import decimal

    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    ids = np.arange(n)
    which = (rng.integers(0, 5, size=n) + ids // 1000) % 12
    null = (ids % 13 == 4)

    def col(values, typ):
        return pa.array([None if z else values[w] for z, w in zip(null, which)], typ)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "b": col([int(v) for v in range(-6, 6)], pa.int8()),
        "h": col([int(v) * 1000 for v in range(-6, 6)], pa.int16()),
        "i": col([int(v) * 100_000 for v in range(-6, 6)], pa.int32()),
        "l": col([int(v) * 10**13 + 1 for v in range(-6, 6)], pa.int64()),
        "d": col([datetime.date(1992, 1, 1) + datetime.timedelta(days=37 * v) for v in range(12)], pa.date32()),
        "p": col([decimal.Decimal(v * 1234 - 5000).scaleb(-2) for v in range(12)], pa.decimal128(7, 2)),
        "q": col([decimal.Decimal(v * 10**16 + 7).scaleb(-4) * (-1) ** v for v in range(12)], pa.decimal128(18, 4)),
    })


# make test: pylance's 2.1 and Spark's 2.2 (make test-long: pylance's 2.2 too)
@pytest.mark.parametrize("writer", sliced(["pylance-2.1", "pylance-2.2", "spark-2.2"], ["pylance-2.1", "spark-2.2"]))
def test_dictionary_numbers_through_spark_expressions(spark, tmp_path, writer):
    """Dictionary-encoded integers, dates and decimals reach Spark read through their
    page's items (their values not copied into each row): every row, sum, grouping and
    filtered projection equals pylance's, whatever batches, pages, dictionaries,
    deletions and a filter on one of them do to which rows share a dictionary."""
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    from compare import assert_same_table

    n = 12_000
    table = _dictionary_numbers(n, seed=3)
    path = str(tmp_path / "dictnum.lance")
    if writer.startswith("pylance"):
        _write_by(spark, writer, table, path, rows_per_file=5_000)
    else:   # (pandas would make the integers with nulls doubles)
        schema = "id bigint, b tinyint, h smallint, i int, l bigint, d date, p decimal(7,2), q decimal(18,4)"
        (spark.createDataFrame(table.to_pylist(), schema).coalesce(1).write.format("lance")
         .option("fileVersion", "2.2").option("maxRowsPerPage", 1_000).save(path))
    lance.dataset(path).delete("id % 89 = 7 AND id > 4000")
    want = lance.dataset(path).to_table()
    cols = ["b", "h", "i", "l", "d", "p", "q"]
    for batch in (4, 700, 8192):   # (4: fewer rows than items, read through the items still)
        df = spark.read.format("lance").option("batchSize", batch).load(path)
        assert_same_table(df, want, f"{writer}, batchSize {batch}")
        sums = df.agg(*[F.sum(c).alias(c) for c in cols if c != "d"]).collect()[0].asDict()
        for c in sums:
            assert sums[c] == pc.sum(want[c]).as_py(), f"{writer}, batchSize {batch}: sum({c})"
        groups = {(r["i"], r["d"]): r["c"] for r in df.groupBy("i", "d").agg(F.count(F.lit(1)).alias("c")).collect()}
        counts = want.group_by(["i", "d"]).aggregate([([], "count_all")])
        assert groups == dict(zip(zip(counts["i"].to_pylist(), counts["d"].to_pylist()),
                                  counts["count_all"].to_pylist())), f"{writer}, batchSize {batch}: groups"
        # a filter on one of them, the others (and itself) projected
        got = df.where("h >= 0 OR h IS NULL").select("id", "l", "p", "h")
        keep = pc.or_kleene(pc.greater_equal(want["h"], 0), pc.is_null(want["h"]))
        assert_same_table(got, want.filter(keep).select(["id", "l", "p", "h"]), f"{writer}, filtered")


def test_dictionary_of_many_items_through_spark_expressions(spark, tmp_path):
    """A page dictionary of 5,000 decimals and 64-bit integers (more items than a
    batch's values are read through in place: they are gathered once a batch): every row,
    sum and filtered projection equals pylance's, with nulls, deletions and batches that
    start inside the page."""
    import decimal
    import re

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from lance.file import LanceFileReader
    from pyspark.sql import functions as F

    from compare import assert_same_table

    n, distinct = 20_000, 5_000
    rng = np.random.default_rng(17)
    cents = rng.integers(-500_000, 2_000_000, distinct)
    big = rng.integers(-(10**15), 10**15, distinct)
    pick = rng.integers(0, distinct, n)
    rows = [(i, None if i % 13 == 4 else decimal.Decimal(int(cents[k])).scaleb(-2),
             None if i % 17 == 5 else int(big[k])) for i, k in enumerate(pick.tolist())]
    path = str(tmp_path / "many_items.lance")
    (spark.createDataFrame(rows, "id bigint, m decimal(7,2), l bigint").coalesce(1).write.format("lance")
     .option("fileVersion", "2.2").save(path))
    ds = lance.dataset(path)
    meta = LanceFileReader(f"{path}/data/{ds.get_fragments()[0].data_files()[0].path}").metadata()
    for c in (1, 2):   # each column one page, a dictionary of its distinct values (most of the 5,000)
        pages = [str(p.encoding) for p in meta.columns[c].pages]
        items = [int(x) for x in re.findall(r"num_dictionary_items: (\d+)", pages[0])]
        assert len(pages) == 1 and items and items[0] > 4_500, (c, len(pages), items)
    ds.delete("id % 89 = 7")
    want = lance.dataset(path).to_table()
    for batch in (700, 8192):
        df = spark.read.format("lance").option("batchSize", batch).load(path)
        assert_same_table(df, want, f"batchSize {batch}")
        sums = df.agg(F.sum("m").alias("m"), F.sum("l").alias("l")).collect()[0]
        assert (sums["m"], sums["l"]) == (pc.sum(want["m"]).as_py(), pc.sum(want["l"]).as_py()), f"batchSize {batch}"
        # Spark's filter over every row (gathered), and the scan's keeping a ninth (looked up)
        for k, cond in ((3, F.expr("id % 3 = 1")), (9, F.col("id").isin(list(range(1, n, 9))))):
            got = df.where(cond).select("id", "m", "l")
            keep = pa.array(want["id"].to_numpy() % k == 1)
            assert_same_table(got, want.filter(keep).select(["id", "m", "l"]), f"batchSize {batch}, id % {k} = 1")


@pytest.mark.parametrize("writer", ["pylance-2.0", "pylance-2.2", "spark-2.2"])
def test_string_lengths_through_spark_expressions(spark, tmp_path, writer):
    """Unique (not dictionary) strings, some batches all ASCII and some with multi-byte
    characters: the character counts Spark's expressions see (length, substring from
    the end, lpad) equal pyarrow's, computed on pylance's rows, at every batch size."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    from compare import spark_rows

    n = 9_000
    rng = np.random.default_rng(11)
    words = [f"https://h{i % 37}.example.com/item-{int(v)}" for i, v in enumerate(rng.integers(0, 10**9, n))]
    for i in range(3_000, 3_400, 23):           # a few batches hold multi-byte characters
        words[i] = words[i] + ["é", "日本", "🙂", "ÿ"][i % 4]
    words[n - 1] = words[n - 1] + "ü"             # and the very last value
    table = pa.table({"id": pa.array(np.arange(n, dtype=np.int64)),
                      "s": pa.array([None if i % 101 == 0 else w for i, w in enumerate(words)])})
    path = str(tmp_path / "strings.lance")
    _write_by(spark, writer, table, path, rows_per_file=4_000)
    want = lance.dataset(path).to_table().sort_by("id")
    expected = [{"id": i, "n": ln, "tail": t, "pad": p} for i, ln, t, p in zip(
        want["id"].to_pylist(), pc.utf8_length(want["s"]).to_pylist(),
        [None if v is None else v[-3:-1] for v in want["s"].to_pylist()],
        pc.utf8_lpad(want["s"], 48, "*").to_pylist())]
    for row in expected:   # Spark's lpad cuts longer strings to 48 characters; pyarrow's leaves them whole
        if row["pad"] is not None and row["n"] > 48:
            row["pad"] = row["pad"][:48]
    for batch in (500, 8192):
        df = spark.read.format("lance").option("batchSize", batch).load(path)
        got = spark_rows(df.select("id", F.length("s").alias("n"), F.substring("s", -3, 2).alias("tail"),
                                   F.lpad("s", 48, "*").alias("pad")))
        assert got == expected, f"{writer}, batchSize {batch}: character counts differ"


def test_small_fragments_share_tasks(spark, tmp_path):
    """Partitions span fragments: twelve fragments of 1,000 rows (some rows
    deleted, stable row ids) read with splitRows=2,500 make five tasks, each
    row once, with pylance's _rowid and _rowaddr, and the scan node counts
    every fragment scanned once."""
    path = str(tmp_path / "small_frags.lance")
    lance.write_dataset(small_table(12_000), path, max_rows_per_file=1_000, enable_stable_row_ids=True,
                        data_storage_version="2.2")
    lance.dataset(path).delete("id % 11 = 3")
    assert len(lance.dataset(path).get_fragments()) == 12
    df = spark.read.format("lance").option("splitRows", 2_500).load(path)
    assert df.rdd.getNumPartitions() == 5
    per_task = df.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    deleted_before = [sum(1 for i in range(k * 2_500, min((k + 1) * 2_500, 12_000)) if i % 11 == 3)
                      for k in range(5)]
    assert per_task == [min(2_500, 12_000 - k * 2_500) - deleted_before[k] for k in range(5)], per_task
    expected = lance.dataset(path).to_table(columns=["id"], with_row_id=True, with_row_address=True)
    want = sorted(zip(expected["id"].to_pylist(), expected["_rowid"].to_pylist(), expected["_rowaddr"].to_pylist()))
    rows = df.select("id", "_rowid", "_rowaddr", "_fragid").collect()
    assert sorted((r["id"], r["_rowid"], r["_rowaddr"]) for r in rows) == want
    assert all(r["_fragid"] == r["_rowaddr"] >> 32 for r in rows)
    q = df.select("id")
    qe = q._jdf.queryExecution()
    q.collect()
    leaves = qe.executedPlan().collectLeaves()
    scanned = [int(leaves.apply(i).metrics().get("fragmentsScanned").get().value()) for i in range(leaves.size())
               if leaves.apply(i).metrics().contains("fragmentsScanned")]
    assert scanned == [12]
    # a LIMIT stops within a task that spans fragments
    assert len(df.limit(1_700).collect()) == 1_700
