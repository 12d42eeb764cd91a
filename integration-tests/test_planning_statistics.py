"""What a Lance scan tells Spark's planner (issue 15): the rows and bytes of
the scan as planned — after pruning by page statistics, deletions and LIMIT,
scaled to the bytes of the columns read, as the files' column metadata gives
them — so that joins are planned as on Parquet whatever wrote the files. Expected values
come from the files on disk, pylance and Spark's own estimate for Parquet."""
from __future__ import annotations

import math
from pathlib import Path

import lance
import pytest


def stats(df, leaf: bool = False):
    """(sizeInBytes, rowCount) of the optimized plan, or of its one leaf (the scan relation)."""
    plan = df._jdf.queryExecution().optimizedPlan()
    s = (plan.collectLeaves().head() if leaf else plan).stats()
    rows = s.rowCount()
    return int(str(s.sizeInBytes())), (int(str(rows.get())) if rows.isDefined() else None)


def least(rows: float, widths: list[int]) -> float:
    """The least a scan of `rows` rows weighs without the cost-based optimizer: a fifth of
    Spark's per-row size estimate (8 bytes a row plus each column's default size: long 8,
    int 4, double 8, string 20) times the rows."""
    return rows * (8 + sum(widths)) / 5


def data_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in (Path(path) / "data").glob("*.lance"))


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    """200,000 sorted ids in 4 fragments of 2.2 files (with our page statistics), 1% deleted."""
    path = str(tmp_path_factory.mktemp("stats") / "t.lance")
    (spark.range(0, 200_000, numPartitions=4)
     .selectExpr("id", "id % 97 AS small", "concat('name-', id % 1000) AS name", "CAST(id * 0.5 AS DOUBLE) AS x")
     .write.format("lance").save(path))
    lance.dataset(path).delete("id % 100 = 7")
    return path


def test_rows_and_bytes_of_the_whole_table(spark, table):
    size, rows = stats(spark.read.format("lance").load(table))
    assert rows == lance.dataset(table).count_rows() == 198_000
    # every column read: the data files' bytes, less the deleted share, or a fifth of Spark's
    # in-memory estimate of the rows where more (these sorted ids and codes compress far below it)
    assert least(198_000, [8, 8, 20, 8]) > data_bytes(table) * 0.99
    assert size == pytest.approx(least(198_000, [8, 8, 20, 8]), rel=0.001)


def column_bytes(path: str) -> list[int]:
    """Bytes of each column of the dataset's data file with the most rows (the first of equals),
    as pylance's file reader describes its buffers."""
    from lance.file import LanceFileReader
    ds = lance.dataset(path)
    frag = max(ds.get_fragments(), key=lambda f: f.metadata.physical_rows)   # max: the first of equals
    meta = LanceFileReader(str(Path(path) / "data" / frag.metadata.files[0].path)).metadata()
    return [sum(b.size for b in c.column_buffers) + sum(b.size for p in c.pages for b in p.buffers)
            for c in meta.columns]


def test_projection_weighs_the_bytes_of_its_columns(spark, table):
    """A projection's share of the files' bytes is its columns' share of a data file's bytes,
    as the file's column metadata gives them, where that is less than Spark's per-row size
    estimate gives it (8 bytes a row plus long 8, string 20, double 8: Spark's rule for a
    Parquet relation, which does not know its columns' bytes); but it never weighs less than a
    fifth of Spark's per-row estimate of its rows."""
    full = data_bytes(table) * 0.99
    cols = column_bytes(table)     # id, small, name, x
    by_type = lambda widths: (8 + sum(widths)) / (8 + 8 + 8 + 20 + 8)   # noqa: E731
    one, rows = stats(spark.read.format("lance").load(table).select("id"))
    assert one == pytest.approx(max(full * min(cols[0] / sum(cols), by_type([8])), least(rows, [8])), rel=0.001)
    assert rows == 198_000
    two, _ = stats(spark.read.format("lance").load(table).select("name", "x"))
    assert two == pytest.approx(max(full * min((cols[2] + cols[3]) / sum(cols), by_type([20, 8])),
                                    least(rows, [20, 8])), rel=0.001)
    # a metadata column (computed, not stored) at Spark's size of a long, on the per-row scale
    with_id, _ = stats(spark.read.format("lance").load(table).select("small", "_rowaddr"))
    assert with_id == pytest.approx(max(full * min(cols[1] / sum(cols) + 8 / 52, by_type([8, 8])),
                                        least(rows, [8, 8])), rel=0.001)


def test_sorted_keys_and_few_codes_are_not_taken_for_small(spark, tmp_path):
    """Columns the files keep in a few bytes a row (keys written sorted, codes of a few
    values) must not make millions of rows look small enough to broadcast: TPC-H Q12 at scale
    factor 1 broadcast all 1.5M `orders` by its key and 5-value priority (under 10 MiB in the
    files), TPC-DS q10, q35, q69 and q85 the 1.9M rows of `customer_demographics`. The same
    shape, smaller: 500,000 rows whose two columns take about a megabyte in the files weigh a
    fifth of Spark's in-memory estimate of them, so a join with a threshold above their file
    bytes and below that weight is not planned as a broadcast of them."""
    path = str(tmp_path / "orders.lance")
    (spark.range(0, 500_000, numPartitions=2)
     .selectExpr("id AS o_key", "concat('prio-', id % 5) AS o_prio").write.format("lance").save(path))
    size, rows = stats(spark.read.format("lance").load(path))
    assert rows == 500_000
    assert data_bytes(path) < 1_500_000
    assert size == pytest.approx(least(500_000, [8, 20]), rel=0.001)   # 3.6 MB
    # 150,000 probe rows: more than the files' bytes of the 500,000, less than the threshold
    probe = spark.range(0, 150_000).selectExpr("id * 5 AS k", "id AS v")
    probe_size, _ = stats(probe)
    assert data_bytes(path) < probe_size < 3 << 20 < size
    probe.createOrReplaceTempView("probe")
    spark.read.format("lance").load(path).createOrReplaceTempView("orders_like")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(3 << 20))
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        plan = spark.sql("SELECT * FROM orders_like JOIN probe ON o_key = k")
        text = plan._jdf.queryExecution().executedPlan().toString()
        # the probe rows are the broadcast side, not the 500,000 (the smaller by file bytes)
        assert "BroadcastHashJoin" in text and "BuildRight" in text, text
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
        spark.conf.unset("spark.sql.adaptive.enabled")


def test_filter_share_shrinks_the_estimate(spark, tmp_path):
    """The scan evaluates its filter, so it tells the planner the rows the filter keeps as
    the page statistics estimate them (uniform between a column's min and max, 1/distinct
    for an equality), not every row it reads: a selective range makes a large table the
    small side of a join (TPC-H Q12 and Q14 then broadcast the filtered `lineitem`)."""
    path = str(tmp_path / "facts.lance")
    (spark.range(0, 400_000, numPartitions=1)
     .selectExpr("id", "CAST(id % 1000 AS INT) AS day", "id * 3 AS v").write.format("lance").save(path))
    df = spark.read.format("lance").load(path)
    _, all_rows = stats(df)
    assert all_rows == 400_000
    # day uniform over 0..999: day < 50 keeps 50/999 of the rows (no page pruned: every page
    # holds every day)
    size, rows = stats(df.where("day < 50").select("id", "v"), leaf=True)
    exact = df.where("day < 50").count()
    assert exact == 20_000
    assert rows == pytest.approx(400_000 * 50 / 999, rel=0.01)
    whole, _ = stats(df.select("id", "v", "day"), leaf=True)
    assert size < whole / 10


def test_filter_share_of_files_without_statistics_is_sampled(spark, tmp_path):
    """pylance keeps no page statistics, so they cannot estimate a filter's share: where the scan
    weighed at every planned row is more than Spark broadcasts, the share is measured on a sample
    of the rows (64 runs of 128 rows at seeded random positions, the filter evaluated), so that a
    selective filter on a dimension table lets it be broadcast (TPC-DS q48, q85 and q91 on
    pylance's tables sort-merged 1.9 million rows of `customer_demographics` whose filters keep
    under a tenth: 1.5x-2x Parquet's time). The shape of that table, smaller: a cross product of
    codes, a tenth of it deleted. Expected: pylance's count of the rows the filter keeps."""
    import pyarrow as pa
    n = 400_000
    genders, marital = ["M", "F"], ["M", "S", "D", "W", "U"]
    education = ["Primary", "Secondary", "College", "2 yr Degree", "4 yr Degree", "Advanced Degree", "Unknown"]
    sk = list(range(n))
    t = pa.table({"sk": pa.array(sk, pa.int32()),
                  "gender": [genders[i % 2] for i in sk],
                  "ms": [marital[(i // 2) % 5] for i in sk],
                  "es": [education[(i // 10) % 7] for i in sk],
                  "estimate": pa.array([((i // 70) % 20) * 500 for i in sk], pa.int32())})
    path = str(tmp_path / "demographics.lance")
    lance.write_dataset(t, path)
    lance.dataset(path).delete("sk % 10 = 3")
    live = lance.dataset(path).count_rows()
    assert live == n - n // 10
    flt = "(ms = 'M' AND es = '4 yr Degree') OR (ms = 'D' AND es = 'Primary') OR (ms = 'S' AND es = 'College')"
    exact = lance.dataset(path).count_rows(filter=flt)
    assert 0 < exact < live / 10
    df = spark.read.format("lance").load(path)
    dim = df.where(flt).select("sk")
    # every row weighs a fifth of Spark's per-row estimate: 360,000 x (8 + 4) / 5 = 864 KB
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(400_000))
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        size, rows = stats(dim, leaf=True)
        # codes with periods under a run's length (as customer_demographics'): close to exact
        assert rows == pytest.approx(exact, rel=0.05), (rows, exact)
        assert size < 400_000
        probe = spark.range(0, 300_000).selectExpr("id AS k", "id * 3 AS v")
        plan = probe.join(dim, probe.k == dim.sk)._jdf.queryExecution().executedPlan().toString()
        assert "BroadcastHashJoin" in plan and "BuildRight" in plan, plan
        both = "es IN ('Primary', 'Unknown') AND gender = 'F'"
        _, got = stats(df.where(both).select("sk"), leaf=True)
        assert got == pytest.approx(lance.dataset(path).count_rows(filter=both), rel=0.05)
        # runs of 70 equal values: each run of 128 rows sampled counts about as one row, so the
        # estimate is coarse (over seeds, 95% of such samples fall within 0.45x-1.65x here)
        clustered = "estimate >= 9000"
        _, got = stats(df.where(clustered).select("sk"), leaf=True)
        want = lance.dataset(path).count_rows(filter=clustered)
        assert 0.45 * want <= got <= 1.65 * want, (got, want)
        # no sampled row kept: not taken for none (half a stratum's share, 1/128)
        _, none = stats(df.where("sk < 0").select("sk"), leaf=True)
        assert lance.dataset(path).count_rows(filter="sk < 0") == 0
        assert none == pytest.approx(live / 128, rel=0.001)
        # turned off by its session setting: every planned row, as the statistics have it
        spark.conf.set("spark.lance.sampleFilterShare", "false")
        _, off = stats(df.where(flt).select("sk"), leaf=True)
        assert off == live
        spark.conf.set("spark.lance.sampleFilterShare", "sometimes")
        with pytest.raises(Exception, match="spark.lance.sampleFilterShare must be true or false"):
            stats(df.where(flt).select("sk"), leaf=True)
        spark.conf.unset("spark.lance.sampleFilterShare")
        # broadcasts off: nothing depends on the share, nothing is read for it; every planned row
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
        _, unsampled = stats(df.where(flt).select("sk"), leaf=True)
        assert unsampled == live
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
        spark.conf.unset("spark.sql.adaptive.enabled")
    # a scan small enough to broadcast at every row is not sampled either (the default 10 MB)
    _, small = stats(df.where(flt).select("sk"), leaf=True)
    assert small == live


def test_projection_of_uncompressed_decimals_weighs_what_is_stored(spark, tmp_path):
    """pylance stores decimals uncompressed (16 bytes a value): weighed by their types alone, the
    integer keys of a decimal-heavy table as pylance writes it weigh more than their share,
    and joins on them are planned as sort-merge joins where the Parquet of the same rows gets
    broadcasts (TPC-H Q18 and Q21, TPC-DS q6 and q25 on pylance's tables). Weighed by the
    bytes its columns take, a projection of the keys weighs what the scan reads; a column
    that takes more than its type's share (long strings) weighs that share, as Spark would
    weigh it in Parquet; and a decimal of at most 18 digits weighs at most 8 bytes a row,
    what Spark holds it in and Parquet stores it in (INT32/INT64): TPC-DS q80 at scale factor
    1 on pylance's tables sort-merged a join Parquet broadcasts, its two keys and two
    decimals of `store_returns` weighing 10.7 MB against Parquet's 4.4."""
    import decimal
    import pyarrow as pa
    n = 50_000
    cols = {f"k{i}": pa.array([(j * (i + 7)) % 100_003 for j in range(n)], pa.int32()) for i in range(3)}
    for i in range(6):
        cols[f"m{i}"] = pa.array([decimal.Decimal(j % 99_999) / 100 for j in range(n)], pa.decimal128(7, 2))
    cols["s"] = pa.array([f"{j:08d}-" * 12 for j in range(n)])    # 108 bytes a value
    path = str(tmp_path / "dec.lance")
    lance.write_dataset(pa.table(cols), path)
    df = spark.read.format("lance").load(path)
    full, _ = stats(df)
    disk = data_bytes(path)
    stored = column_bytes(path)
    assert all(b >= n * 16 for b in stored[3:9]), stored     # pylance's decimals: 16 bytes a value
    # every column: the files' bytes, the decimals' at 8 bytes a value
    assert full == pytest.approx(disk * (sum(stored) - sum(stored[3:9]) + 6 * n * 8) / sum(stored), rel=0.001)
    whole = 8 + 3 * 4 + 6 * 16 + 20          # Spark's per-row size with decimals at 16 bytes
    keys, _ = stats(df.select("k0", "k1", "k2"))
    assert sum(stored[:3]) / sum(stored) < (8 + 3 * 4) / whole
    assert keys == pytest.approx(max(disk * sum(stored[:3]) / sum(stored), least(n, [4, 4, 4])), rel=0.001)
    mixed, _ = stats(df.select("k0", "m0"))
    assert mixed == pytest.approx(max(disk * min((stored[0] + n * 8) / sum(stored), (8 + 4 + 16) / whole),
                                      least(n, [4, 8])), rel=0.001)
    money, _ = stats(df.select("m0", "m1", "m2"))
    assert money == pytest.approx(max(disk * 3 * n * 8 / sum(stored), least(n, [8, 8, 8])), rel=0.001)
    assert money < disk * 3 * n * 16 / sum(stored)
    text, _ = stats(df.select("s"))
    assert stored[9] / sum(stored) > (8 + 20) / whole
    assert disk * (8 + 20) / whole > least(n, [20])
    assert text == pytest.approx(disk * (8 + 20) / whole, rel=0.001)


def test_projection_of_legacy_files_scales_by_the_types(spark, tmp_path):
    """0.1 files have no column metadata of this kind: Spark's per-row estimate with the
    widths Lance stores (8 bytes a row, long 8, string 20, decimal 16) scales the bytes."""
    import decimal
    import pyarrow as pa
    n = 20_000
    t = pa.table({"id": pa.array(range(n), pa.int64()), "s": pa.array([f"v{j % 50}" for j in range(n)]),
                  "m": pa.array([decimal.Decimal(j % 999) / 100 for j in range(n)], pa.decimal128(7, 2))})
    path = str(tmp_path / "legacy01.lance")
    lance.write_dataset(t, path, data_storage_version="legacy")
    df = spark.read.format("lance").load(path)
    full, _ = stats(df)
    one, _ = stats(df.select("id"))
    assert one == pytest.approx(full * (8 + 8) / (8 + 8 + 20 + 16), rel=0.001)


def test_pruned_filter_and_limit_shrink_the_estimate(spark, table):
    df = spark.read.format("lance").load(table)
    size, rows = stats(df.where("id < 10000"), leaf=True)
    exact = df.where("id < 10000").count()
    # an upper bound from the page statistics: the pages that may match, not the table
    assert exact <= rows < 198_000 // 4
    assert size < data_bytes(table) / 4
    limited_size, limited = stats(df.limit(10), leaf=True)   # the limit pushed into the scan
    assert limited == 10
    whole, _ = stats(df, leaf=True)
    assert limited_size == pytest.approx(whole * 10 / 198_000, abs=2)


def test_manifest_without_file_sizes_is_not_taken_for_empty(spark, tmp_path):
    """pylance 2.0-era manifests may lack file sizes: the estimate must not be 0
    (Spark would broadcast a table of any size)."""
    path = str(tmp_path / "legacy.lance")
    import pyarrow as pa
    lance.write_dataset(pa.table({"id": list(range(1000))}), path, data_storage_version="legacy")
    size, rows = stats(spark.read.format("lance").load(path))
    assert rows == 1000 and size > 0


def test_planning_reads_each_files_statistics_once(spark, tmp_path):
    """The page statistics of a data file are read once per driver: a second
    planning of a filtered scan prunes the same way without opening the
    files (moved away here, so that any read of them would fail), and a new
    version's files are read when it is planned."""
    path = str(tmp_path / "once.lance")
    spark.range(0, 40_000, numPartitions=8).selectExpr("id", "id * 2 AS v").write.format("lance").save(path)
    q = "id BETWEEN 10000 AND 10099"

    def planned_rows() -> int:
        """The rows Spark's planner is told the filtered scan returns (after pruning)."""
        _, rows = stats(spark.read.format("lance").load(path).where(q), leaf=True)
        return rows

    cache = spark._jvm.io.lancespark.table.filter.StatisticsCache.shared()
    files_before = cache.size()._1()
    rows = planned_rows()
    assert cache.size()._1() == files_before + 8
    # pruned to the one fragment (5,000 rows, ids 10,000 to 14,999) holding the range, of which
    # the range keeps its share between the fragment's min and max (the upper bound inclusive:
    # one value more)
    expected = math.ceil(5_000 * (99 / 4_999 + 1 / 5_000))
    assert rows == expected
    data = Path(path) / "data"
    away = tmp_path / "away"
    data.rename(away)
    try:
        rows_again = planned_rows()
        assert rows_again == expected and cache.size()._1() == files_before + 8
    finally:
        away.rename(data)
    assert spark.read.format("lance").load(path).where(q).count() == 100
    # an overwrite's new files: read (and pruned) by their own statistics
    spark.range(0, 40_000, numPartitions=4).selectExpr("id + 100000 AS id", "id AS v") \
        .write.format("lance").mode("overwrite").save(path)
    rows_new = planned_rows()
    assert rows_new == 0 and cache.size()._1() == files_before + 12


def test_scans_share_one_broadcast_of_the_hadoop_configuration(spark, table):
    """Planning asks every scan for its reader factory, which ships the
    session's Hadoop configuration to the executors: scans of an unchanged
    configuration share one broadcast of it, and a Hadoop option set in the
    session makes a new one that carries it (and that the next read uses)."""
    jvm = spark._jvm
    confs = jvm.io.lancespark.spark.SerializableHadoopConf
    session = spark._jsparkSession
    first = confs.broadcast(session)
    assert confs.broadcast(session).id() == first.id()
    expected = lance.dataset(table).count_rows("small = 3")
    df = spark.read.format("lance").load(table)
    join = df.alias("a").join(df.alias("b"), "id").where("a.small = 3")
    assert join.count() == expected > 0
    assert confs.broadcast(session).id() == first.id()
    # (a session option reaches the session's Hadoop configuration under its own name)
    key = "spark.hadoop.lance.test.marker"
    spark.conf.set(key, "42")
    try:
        changed = confs.broadcast(session)
        assert changed.id() != first.id()
        assert changed.value().value().get(key) == "42"
        assert first.value().value().get(key) is None
        assert spark.read.format("lance").load(table).where("small = 3").count() == expected
    finally:
        spark.conf.unset(key)
    assert confs.broadcast(session).id() == first.id()


# ------------------------------------------------------------------ reuse of exchanges

def reused_exchanges(df) -> int:
    """ReusedExchange nodes in the plan as run (after adaptive execution)."""
    df.collect()
    return df._jdf.queryExecution().executedPlan().toString().count("ReusedExchange")


def grouped(view: str, where: str = "TRUE") -> str:
    return f"(SELECT small, count(*) AS c, sum(id) AS s FROM {view} WHERE {where} GROUP BY small)"


def test_equal_scans_share_their_exchanges(spark, table, tmp_path):
    """The same aggregate of the same scan twice in a query (as in TPC-H Q11
    and Q18): Spark computes its exchange once for Lance as it does for
    Parquet; filters written in another order are the same scan."""
    spark.read.format("lance").load(table).createOrReplaceTempView("reuse_lance")
    pq = str(tmp_path / "pq")
    spark.read.format("lance").load(table).write.parquet(pq)
    spark.read.parquet(pq).createOrReplaceTempView("reuse_pq")
    q = "SELECT a.small, a.c, a.s, b.c AS next_c, b.s AS next_s FROM {a} a JOIN {b} b ON a.small + 1 = b.small"
    for wa, wb in (("TRUE", "TRUE"), ("small = 1 OR small = 2 OR small = 3", "small = 3 OR small = 2 OR small = 1")):
        lance_df = spark.sql(q.format(a=grouped("reuse_lance", wa), b=grouped("reuse_lance", wb)))
        pq_df = spark.sql(q.format(a=grouped("reuse_pq", wa), b=grouped("reuse_pq", wb)))
        pq_reused = reused_exchanges(pq_df)
        assert pq_reused >= 1                          # Spark's own rule, the control
        assert reused_exchanges(lance_df) == pq_reused
        assert sorted(lance_df.collect()) == sorted(pq_df.collect())


def test_scans_of_other_versions_or_filters_are_not_shared(spark, tmp_path):
    """Scans that differ in version, filter or LIMIT return other rows: each is
    read on its own, and each side of the join has its own counts (from pyarrow)."""
    path = str(tmp_path / "versions.lance")
    spark.range(0, 10_000, numPartitions=2).selectExpr("id", "id % 10 AS small") \
        .write.format("lance").save(path)
    lance.dataset(path).delete("id < 4000")                      # version 2
    spark.read.format("lance").option("version", 1).load(path).createOrReplaceTempView("v_one")
    spark.read.format("lance").load(path).createOrReplaceTempView("v_two")
    q = "SELECT a.small, a.c AS ca, a.s AS sa, b.c AS cb, b.s AS sb FROM {a} a JOIN {b} b ON a.small = b.small"

    def counts(version: int, where=None) -> dict:
        t = lance.dataset(path, version=version).to_table(filter=where)
        return {r["small"]: r["id_count"] for r in t.group_by("small").aggregate([("id", "count")]).to_pylist()}

    cases = [(grouped("v_one"), grouped("v_two"), counts(1), counts(2)),
             (grouped("v_two", "id < 6000"), grouped("v_two", "id < 8000"),
              counts(2, "id < 6000"), counts(2, "id < 8000"))]
    for a, b, ca, cb in cases:
        df = spark.sql(q.format(a=a, b=b))
        assert reused_exchanges(df) == 0
        got = {r["small"]: (r["ca"], r["cb"]) for r in df.collect()}
        assert got == {k: (ca[k], cb[k]) for k in ca if k in cb}
        assert ca != cb
    limited = spark.sql("SELECT count(*) FROM (SELECT * FROM v_two LIMIT 10) UNION ALL "
                        "SELECT count(*) FROM (SELECT * FROM v_two LIMIT 20)").collect()
    assert sorted(r[0] for r in limited) == [10, 20]


# ------------------------------------------------------------------ column statistics (CBO)

def attribute_stats(df, leaf: bool = True):
    """(column name, Catalyst ColumnStat) pairs of the optimized plan (or of its one leaf, the scan)."""
    plan = df._jdf.queryExecution().optimizedPlan()
    it = (plan.collectLeaves().head() if leaf else plan).stats().attributeStats().iterator()
    while it.hasNext():
        kv = it.next()
        yield kv._1().name(), kv._2()


def opt(o, conv=lambda v: v):
    """A Scala Option's value converted, or None."""
    return conv(o.get()) if o.isDefined() else None


def column_stats(df, leaf: bool = True) -> dict:
    """{column: (distinctCount, min, max, nullCount)} Spark's planner has for
    the scan relation (None where it has none), as plain Python values."""
    as_int = lambda v: int(str(v))   # noqa: E731
    return {name: (opt(cs.distinctCount(), as_int), opt(cs.min(), str), opt(cs.max(), str), opt(cs.nullCount(), as_int))
            for name, cs in attribute_stats(df, leaf)}


@pytest.fixture(scope="module", params=["2.2", "2.0"])
def cbo_table(spark, tmp_path_factory, request):
    """Columns of known distinct counts, bounds and nulls, in 8 files of one
    file version (a write and an append)."""
    path = str(tmp_path_factory.mktemp("cbo") / "t.lance")
    def part(lo: int, hi: int):
        return (spark.range(lo, hi, numPartitions=4)
                .selectExpr("id", "CAST(id % 1000 AS INT) AS k",
                            "DATE_ADD(DATE'2020-01-01', CAST(id % 365 AS INT)) AS d",
                            "CAST(id % 500 AS DECIMAL(10,2)) / 4 AS price",
                            "concat('c-', id % 50) AS s",
                            "IF(id % 10 < 3, NULL, id % 20) AS n",
                            "CAST(id % 300 AS DOUBLE) / 3 AS f",
                            "id % 7 = 0 AS b"))
    part(0, 150_000).write.format("lance").option("fileVersion", request.param).save(path)
    part(150_000, 200_000).write.format("lance").mode("append").save(path)
    return path


def cbo_table_version(path: str):
    return tuple(int(x) for x in lance.dataset(path).data_storage_version.split(".")[:2])


@pytest.fixture()
def cbo(spark):
    spark.conf.set("spark.sql.cbo.enabled", "true")
    yield
    spark.conf.set("spark.sql.cbo.enabled", "false")


def test_cbo_gets_distinct_counts_bounds_and_nulls_from_the_files(spark, cbo_table, cbo):
    got = column_stats(spark.read.format("lance").load(cbo_table))
    rows = 200_000

    def near(est, exact):   # the sketch's standard error is 2.3%: within 3 of them
        return abs(est - exact) <= max(1, 0.07 * exact)
    assert near(got["id"][0], rows) and got["id"][1:] == ("0", str(rows - 1), 0)
    assert near(got["k"][0], 1000) and got["k"][1:] == ("0", "999", 0)
    assert near(got["d"][0], 365) and got["d"][1:3] == ("18262", str(18262 + 364)) and got["d"][3] == 0
    assert near(got["price"][0], 500) and got["price"][1:] == ("0.000000", "124.750000", 0)   # decimal(16,6)
    assert near(got["s"][0], 50) and got["s"][3] == 0 and got["s"][1] is None   # no string bounds for the optimizer
    assert near(got["n"][0], 20 - 6) and got["n"][3] == rows * 3 // 10 and got["n"][1:3] == ("3", "19")
    assert near(got["f"][0], 300) and got["f"][1] is None and got["f"][2] is None   # NaN is not in float bounds
    assert got["b"][0] == 2 and got["b"][1:] == ("False", "True", 0)
    # pylance still reads the files holding the sketches
    assert lance.dataset(cbo_table).count_rows() == rows
    assert lance.dataset(cbo_table).to_table(columns=["n"]).column(0).null_count == rows * 3 // 10


def test_cbo_statistics_follow_the_planned_rows(spark, cbo_table, cbo):
    got = column_stats(spark.read.format("lance").load(cbo_table).where("id < 20000"))
    # sorted ids: pruning keeps the first fragment (rows 0 to 37,499), and of
    # it the pages (2.0) or blocks of 8,192 rows (2.2) holding ids below 20,000
    assert 19_999 <= int(got["id"][2]) < 37_500 and got["id"][1] == "0"
    if cbo_table_version(cbo_table) == (2, 2):
        assert int(got["id"][2]) < 20_000 + 8192


def test_filter_estimates_use_the_distinct_counts(spark, cbo_table, cbo):
    df = spark.read.format("lance").load(cbo_table).where("k = 5")
    _, rows = stats(df)
    # Spark's equality estimate: rows / distinct(k) = 200,000 / ~1,000
    assert 180 <= rows <= 220, rows
    _, out_of_range = stats(spark.read.format("lance").load(cbo_table).where("k > 5000"))
    assert out_of_range == 0


def avg_lens(df, leaf: bool = True) -> dict:
    """{column: avgLen} Spark's planner has (None where it has none)."""
    return {name: opt(cs.avgLen(), lambda v: int(str(v))) for name, cs in attribute_stats(df, leaf)}


def test_cbo_estimates_are_those_of_the_same_rows_analyzed_in_parquet(spark, cbo_table, cbo, tmp_path):
    """With the cost-based optimizer, a Lance scan's rows, bytes and column statistics (from its
    files) are what Spark estimates for the same rows in Parquet with ANALYZE's statistics: a
    join side weighs the same in either format."""
    pq = tmp_path / "pq"
    spark.read.format("lance").load(cbo_table).write.parquet(str(pq))
    spark.sql("DROP TABLE IF EXISTS cbo_pq")
    spark.sql(f"CREATE TABLE cbo_pq USING parquet LOCATION '{pq}'")
    try:
        spark.sql("ANALYZE TABLE cbo_pq COMPUTE STATISTICS FOR ALL COLUMNS")
        ours_df, theirs_df = spark.read.format("lance").load(cbo_table), spark.table("cbo_pq")
        # the mean length of a string: ceil(3.8) for 'c-0' .. 'c-49'
        assert avg_lens(ours_df)["s"] == avg_lens(theirs_df)["s"] == 4
        for where, tolerance in (("k >= 100 AND k < 300", 0.001), ("d < DATE'2020-03-01'", 0.001),
                                 ("k > 900 AND k <= 950 AND d >= DATE'2020-06-01'", 0.001),
                                 ("k = 5", 0.1), ("s = 'c-7'", 0.1)):
            ours, theirs = ours_df.where(where).select("id", "s"), theirs_df.where(where).select("id", "s")
            (ob, orows), (tb, trows) = stats(ours), stats(theirs)
            assert abs(orows - trows) <= tolerance * trows, (where, orows, trows)
            assert abs(ob - tb) <= tolerance * tb + 64, (where, ob, tb)
            # the distinct ids carried through the filter as Spark carries them through its Filter
            od, td = column_stats(ours)["id"][0], column_stats(theirs, leaf=False)["id"][0]
            assert abs(od - td) <= 0.1 * td + 1, (where, od, td)
    finally:
        spark.sql("DROP TABLE IF EXISTS cbo_pq")


def test_no_column_statistics_without_cbo(spark, cbo_table):
    assert spark.conf.get("spark.sql.cbo.enabled") == "false"
    assert column_stats(spark.read.format("lance").load(cbo_table)) == {}
