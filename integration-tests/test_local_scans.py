"""Lookups without a Spark job (docs/indices.md, "Lookups without a Spark job"): a scan
whose plan leaves at most `localScanRows` rows (a BTREE point lookup, `_rowaddr IN`, a small
LIMIT) is read on the driver while the query is optimized. pylance is the oracle for the rows;
the plan shows a LocalTableScan and no job runs; above the threshold, or with it at 0, the scan
runs as a job with the same rows."""
from __future__ import annotations

import random

import lance
import pyarrow as pa
import pytest


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("local") / "t.lance")
    n = 30_000
    rnd = random.Random(5)
    keys = list(range(n))
    rnd.shuffle(keys)
    t = pa.table({"id": pa.array(range(n), pa.int64()), "key": pa.array(keys, pa.int64()),
                  "label": pa.array([f"l{k % 7}" for k in keys]),
                  "s": pa.array([{"a": i, "b": None if i % 5 == 0 else f"b{i}"} for i in range(n)]),
                  "tags": pa.array([[f"t{i % 3}", f"u{i % 11}"] for i in range(n)])})
    lance.write_dataset(t, path, max_rows_per_file=8_000)
    ds = lance.dataset(path)
    ds.create_scalar_index("key", "BTREE")
    ds.delete("id % 13 = 4")
    lance.write_dataset(pa.table({"id": pa.array(range(n, n + 100), pa.int64()),
                                  "key": pa.array(range(n, n + 100), pa.int64()),
                                  "label": pa.array(["late"] * 100),
                                  "s": pa.array([{"a": -1, "b": "late"}] * 100),
                                  "tags": pa.array([["late"]] * 100)}), path, mode="append")
    return path


def _jobs(spark) -> int:
    sc = spark.sparkContext._jsc.sc()
    sc.listenerBus().waitUntilEmpty(10_000)
    return sc.statusStore().jobsList(None).size()


def _run(spark, df):
    """df's rows (as dicts, sorted by id), its executed plan, and the jobs it ran."""
    before = _jobs(spark)
    qe = df._jdf.queryExecution()
    rows = sorted((r.asDict(recursive=True) for r in df.collect()), key=lambda r: r["id"])
    return rows, qe.executedPlan().toString(), _jobs(spark) - before


def _pylance(path: str, where: str, columns):
    t = lance.dataset(path).to_table(columns=columns, filter=where)
    return sorted(t.to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("where", ["key = 20017", "key IN (5, 77, 29999, 30050, 123456)", "key = 4",
                                   "key >= 100 AND key < 140 AND label = 'l3'", "key = -1"])
def test_index_lookups_run_no_job(spark, table, where):
    cols = ["id", "key", "label", "s", "tags"]
    df = spark.read.format("lance").load(table).where(where).select(*cols)
    rows, plan, jobs = _run(spark, df)
    assert rows == _pylance(table, where, cols)
    assert "LocalTableScan" in plan and "BatchScan" not in plan, plan
    assert jobs == 0


def test_rowaddr_lookup_and_small_limit(spark, table):
    ds = lance.dataset(table)
    t = ds.to_table(columns=["id", "label"], with_row_address=True)
    addrs = random.Random(3).sample(t.column("_rowaddr").to_pylist(), 25)
    want = sorted((r for r in t.to_pylist() if r["_rowaddr"] in set(addrs)), key=lambda r: r["id"])
    df = spark.read.format("lance").load(table).where(f"_rowaddr IN ({', '.join(map(str, addrs))})") \
        .select("id", "label", "_rowaddr")
    rows, plan, jobs = _run(spark, df)
    assert rows == want and "LocalTableScan" in plan and jobs == 0, plan
    live = set(t.column("id").to_pylist())
    rows, plan, jobs = _run(spark, spark.read.format("lance").load(table).select("id", "label").limit(7))
    assert len(rows) == 7 and all(r["id"] in live for r in rows) and jobs == 0, plan


def test_above_threshold_or_disabled_runs_a_job(spark, table):
    cols = ["id", "key", "label"]
    where = "label = 'l3'"   # about 4,000 rows: no index, every fragment planned
    rows, plan, jobs = _run(spark, spark.read.format("lance").load(table).where(where).select(*cols))
    assert rows == _pylance(table, where, cols)
    assert "BatchScan" in plan and jobs >= 1, plan
    where = "key = 20017"
    spark.conf.set("spark.lance.localScanRows", "0")
    try:
        rows, plan, jobs = _run(spark, spark.read.format("lance").load(table).where(where).select(*cols))
    finally:
        spark.conf.unset("spark.lance.localScanRows")
    assert rows == _pylance(table, where, cols)
    assert "BatchScan" in plan and jobs >= 1, plan
    rows, plan, jobs = _run(spark, spark.read.format("lance").option("localScanRows", "0").load(table)
                            .where(where).select(*cols))
    assert "BatchScan" in plan and jobs >= 1, plan
    with pytest.raises(Exception, match="localScanRows"):
        spark.read.format("lance").option("localScanRows", "-3").load(table).where(where).collect()


def test_sql_lookup_and_dml_still_exact(spark, table, tmp_path):
    import shutil

    path = str(tmp_path / "copy.lance")
    shutil.copytree(table, path)
    # a DELETE whose scan is small runs as the connector's row-level operation (no local read in commands)
    spark.sql(f"DELETE FROM lance.`{path}` WHERE key = 20017")
    rows, plan, jobs = _run(spark, spark.sql(f"SELECT id, key FROM lance.`{path}` WHERE key = 20017"))
    assert rows == [] and jobs == 0, plan
    want = _pylance(path, "key IN (17, 18)", ["id", "key"])
    rows, plan, _ = _run(spark, spark.sql(f"SELECT id, key FROM lance.`{path}` WHERE key IN (17, 18)"))
    assert rows == want and len(want) >= 1, plan
