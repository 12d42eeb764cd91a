"""How a Spark scan reads storage: the pages a batch needs are read in few, merged requests,
the next batch's reads run on the read pool while the current batch decodes, and Spark's task
input metrics still count every byte (the pool's reads are credited to the task's thread).
Values are checked against pylance; no assertion is about time."""
from __future__ import annotations

from pathlib import Path

import lance
import pytest
from pyspark.sql import functions as F

from scan_metrics import scan_metrics

ROWS = 200_000


@pytest.fixture(scope="module")
def small_pages(spark, tmp_path_factory):
    """File version 2.0 with 1,000-row pages: many small adjacent pages, which
    the reads of one batch merge (2.1/2.2 pages are large: a batch reads a
    range of each, see test_2_2_batches_read_one_range_per_column)."""
    spark.conf.set("spark.sql.adaptive.enabled", "false")   # the scan node's metrics in the executed plan
    path = str(tmp_path_factory.mktemp("io") / "small_pages.lance")
    (spark.range(0, ROWS, numPartitions=2)
     .selectExpr("id", "id * 3 AS v", "CAST(id AS DOUBLE) / 7 AS d",
                 "IF(id % 5 = 0, NULL, concat('row-', id)) AS s")
     .write.format("lance").option("maxRowsPerPage", 1000).option("fileVersion", "2.0").save(path))
    return path


def _aggs(df):
    return df.agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("si"), F.sum("v").alias("sv"),
                  F.sum("d").alias("sd"), F.count("s").alias("ns"), F.max("s").alias("ms"))


def _expected(path: str) -> tuple:
    t = lance.dataset(path).to_table()
    ids = t.column("id").to_pylist()
    s = [x for x in t.column("s").to_pylist() if x is not None]
    return (len(ids), sum(ids), sum(t.column("v").to_pylist()), None, len(s), max(s))


@pytest.mark.parametrize("ahead", ["true", "auto"])
def test_batches_over_adjacent_pages_are_read_in_merged_requests(spark, small_pages, ahead):
    m = scan_metrics(_aggs(spark.read.format("lance").option("readAhead", ahead).load(small_pages)))
    exp = _expected(small_pages)
    got = tuple(m["rows"][0])
    assert got[:3] == exp[:3] and got[4:] == exp[4:], (got, exp)
    assert got[3] == pytest.approx(sum(i / 7 for i in range(ROWS)), rel=1e-12)
    # 4 columns in pages of 1,000 rows; each 8,192-row batch decodes about 4 x 9 pages. The
    # writer stores each column's pages of one 8,192-row write together, so a batch meets at most
    # 2 runs of adjacent pages per column (8 reads, plus the bytes of a partly read string page
    # at either end) where one read per page buffer would be over 40.
    batches = ROWS // 8192 + 2
    assert m["pagesRead"] >= 4 * ROWS // 1000, m
    assert m["readRequests"] <= 11 * batches and m["readRequests"] * 3 <= m["pagesRead"], m


def test_2_2_batches_read_one_range_per_column(spark, tmp_path):
    """Spark-written 2.2 (the default): each 8,192-row batch reads a range of
    each column's page (its chunks, and the levels and string bytes beside
    them), a handful of requests whatever the page size, and the rows equal
    pylance's."""
    spark.conf.set("spark.sql.adaptive.enabled", "false")   # the scan node's metrics in the executed plan
    path = str(tmp_path / "v22.lance")
    (spark.range(0, ROWS, numPartitions=1)
     .selectExpr("id", "id * 3 AS v", "CAST(id AS DOUBLE) / 7 AS d", "IF(id % 5 = 0, NULL, concat('row-', id)) AS s")
     .write.format("lance").save(path))
    assert lance.dataset(path).data_storage_version == "2.2"
    m = scan_metrics(_aggs(spark.read.format("lance").option("readAhead", "true").load(path)))
    exp = _expected(path)
    got = tuple(m["rows"][0])
    assert got[:3] == exp[:3] and got[4:] == exp[4:], (got, exp)
    batches = ROWS // 8192 + 1
    assert m["readRequests"] <= 7 * batches, m       # 148 for 25 batches of 4 columns when written


def test_task_input_metrics_count_the_bytes_read_ahead(spark, small_pages):
    files = list(Path(small_pages).rglob("*.lance"))
    data_bytes = sum(f.stat().st_size for f in files)
    m = scan_metrics(_aggs(spark.read.format("lance").option("readAhead", "true").load(small_pages)))
    # every byte the readers fetched, most of them on the read pool, is in Spark's input metrics
    assert m["input_bytes"] == m["lanceBytesRead"], m
    # each byte once, but for holes of at most 4 KiB bridged between two ranges read together
    assert 0.9 * data_bytes <= m["lanceBytesRead"] <= data_bytes + 4096 * m["readRequests"], (m, data_bytes)


@pytest.mark.parametrize("batch", [1, 999, 8192, 65536])
def test_read_ahead_on_and_off_give_the_same_rows(spark, small_pages, batch):
    # batches of one row: the first 20,000 rows (the page statistics leave 20 pages to read)
    upto = 20_000 if batch == 1 else ROWS

    def read(ahead: str):
        df = (spark.read.format("lance").option("readAhead", ahead).option("batchSize", batch)
              .load(small_pages).where(f"id % 997 = 3 AND id < {upto}").select("id", "s"))
        return sorted(df.collect())

    on, off = read("true"), read("false")
    assert on == off
    if batch == 65536:   # auto is off on a local disk: read once more where it is cheap
        assert read("auto") == on
    assert [r.id for r in on] == [i for i in range(upto) if i % 997 == 3]
    assert all(r.s == (None if r.id % 5 == 0 else f"row-{r.id}") for r in on)


def test_without_read_ahead_the_reads_are_made_by_the_task(spark, small_pages):
    on = scan_metrics(_aggs(spark.read.format("lance").option("readAhead", "true").load(small_pages)))
    off = scan_metrics(_aggs(spark.read.format("lance").option("readAhead", "false").load(small_pages)))
    assert on["rows"] == off["rows"]
    # the same merged requests either way; only who makes them (and when) differs
    assert on["readRequests"] == off["readRequests"] and on["lanceBytesRead"] == off["lanceBytesRead"], (on, off)
    assert off["input_bytes"] == off["lanceBytesRead"], off


def test_read_ahead_option_is_checked(spark, small_pages):
    with pytest.raises(Exception, match="option .readAhead.*one of auto, true, false, got .sometimes."):
        spark.read.format("lance").option("readAhead", "sometimes").load(small_pages).count()


def test_lists_and_structs_read_ahead_equal_pylance(spark, tmp_path):
    path = str(tmp_path / "nested.lance")
    (spark.range(0, 20_000, numPartitions=2)
     .selectExpr("id", "IF(id % 7 = 0, NULL, sequence(id, id + id % 4)) AS xs",
                 "named_struct('a', id * 2, 's', concat('s', id)) AS st",
                 "transform(sequence(0, CAST(id % 3 AS INT)), k -> concat('t', id, '-', k)) AS tags")
     .write.format("lance").option("maxRowsPerPage", 300).save(path))
    got = (spark.read.format("lance").option("readAhead", "true").option("batchSize", 1000).load(path)
           .orderBy("id").collect())
    exp = sorted(lance.dataset(path).to_table().to_pylist(), key=lambda r: r["id"])
    assert len(got) == len(exp) == 20_000
    for g, e in zip(got, exp):
        assert (g.id, g.xs, g.st.a, g.st.s, g.tags) == (e["id"], e["xs"], e["st"]["a"], e["st"]["s"], e["tags"]), g


def test_coalesce_gap_is_configurable(spark, small_pages):
    """Two of four columns: each batch's pages of id and s lie apart (v and d
    between them). The default gap on a local disk (4 KiB) reads them apart; a
    1 MiB gap (the default on object stores) bridges them, in fewer requests."""
    def read(gap: str | None) -> dict:
        if gap is None:
            spark.conf.unset("lance.read.coalesce-gap")
        else:
            spark.conf.set("lance.read.coalesce-gap", gap)
        try:
            return scan_metrics(spark.read.format("lance").load(small_pages)
                                .agg(F.sum("id").alias("si"), F.max("s").alias("ms")))
        finally:
            spark.conf.unset("lance.read.coalesce-gap")

    local, wide = read(None), read("1m")
    assert local["rows"] == wide["rows"] == read("4k")["rows"]
    assert wide["readRequests"] * 2 <= local["readRequests"], (local, wide)
    assert wide["lanceBytesRead"] > local["lanceBytesRead"], (local, wide)   # the gaps' bytes
    with pytest.raises(Exception, match="lance.read.coalesce-gap: must be >= 0"):
        read("-1")
