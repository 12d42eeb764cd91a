"""What a Lance scan tells Spark's planner (issue 15): the rows and bytes of
the scan as planned — after pruning by page statistics, deletions and LIMIT,
scaled to the columns read the way Spark scales a projection of a Parquet
relation — so that joins are planned alike on both formats. Expected values
come from the files on disk, pylance and Spark's own estimate for Parquet."""
from __future__ import annotations

from pathlib import Path

import lance
import pytest


def stats(df, leaf: bool = False):
    """(sizeInBytes, rowCount) of the optimized plan, or of its one leaf (the scan relation)."""
    plan = df._jdf.queryExecution().optimizedPlan()
    s = (plan.collectLeaves().head() if leaf else plan).stats()
    rows = s.rowCount()
    return int(str(s.sizeInBytes())), (int(str(rows.get())) if rows.isDefined() else None)


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
    # every column read: the data files' bytes, less the deleted share
    assert size == pytest.approx(data_bytes(table) * 0.99, rel=0.001)


def test_projection_scales_like_a_parquet_relation(spark, table, tmp_path):
    full, _ = stats(spark.read.format("lance").load(table))
    one, rows = stats(spark.read.format("lance").load(table).select("id"))
    # Spark's per-row estimate: 8 bytes + default sizes (long 8, string 20, double 8)
    assert one == pytest.approx(full * (8 + 8) / (8 + 8 + 8 + 20 + 8), rel=0.001)
    assert rows == 198_000
    # Parquet of the same rows, projected alike, by Spark's own rule
    pq = str(tmp_path / "pq")
    spark.read.format("lance").load(table).write.parquet(pq)
    pq_full, _ = stats(spark.read.parquet(pq))
    pq_one, _ = stats(spark.read.parquet(pq).select("id"))
    assert one / full == pytest.approx(pq_one / pq_full, rel=0.01)


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
    # pruned to the one fragment (5,000 rows) holding the range
    assert rows == 5_000
    data = Path(path) / "data"
    away = tmp_path / "away"
    data.rename(away)
    try:
        rows_again = planned_rows()
        assert rows_again == 5_000 and cache.size()._1() == files_before + 8
    finally:
        away.rename(data)
    assert spark.read.format("lance").load(path).where(q).count() == 100
    # an overwrite's new files: read (and pruned) by their own statistics
    spark.range(0, 40_000, numPartitions=4).selectExpr("id + 100000 AS id", "id AS v") \
        .write.format("lance").mode("overwrite").save(path)
    rows_new = planned_rows()
    assert rows_new == 0 and cache.size()._1() == files_before + 12
