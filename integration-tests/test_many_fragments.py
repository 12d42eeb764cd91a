"""Many fragments (issue 35): a table of 5,000 fragments (100,000 with LANCE_LONG_TESTS=1), as
small appends never compacted leave it, written by pylance (a few rows per data file, some with
deletions). Spark's count(*) is answered from the manifest with no data file read (the data
files are removed from a copy: any read would fail); a filtered scan and an aggregate equal
pylance's; an append commits one more fragment, which pylance reads; after it, the manifest
still lists every fragment once. Times and driver memory at 100,000 fragments are measured by
bench/ (docs/benchmarks-many-fragments.md), not asserted here."""
from __future__ import annotations

import os
import shutil

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

N_FRAGMENTS = 100_000 if os.environ.get("LANCE_LONG_TESTS") == "1" else 5_000
ROWS_PER_FILE = 4


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    path = tmp_path_factory.mktemp("many") / "many.lance"
    n = N_FRAGMENTS * ROWS_PER_FILE
    rng = np.random.default_rng(35)
    table = pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "g": pa.array(rng.integers(0, 50, n), pa.int32()),
        "s": pa.array([None if i % 7 == 0 else f"s{i % 13}" for i in range(n)]),
    })
    lance.write_dataset(table, str(path), max_rows_per_file=ROWS_PER_FILE, max_rows_per_group=ROWS_PER_FILE)
    ds = lance.dataset(str(path))
    ds.delete("id % 1000 = 3")       # a deletion file in every 250th fragment
    assert len(ds.get_fragments()) == N_FRAGMENTS
    return path


def test_count_is_a_metadata_read(spark, many, tmp_path):
    copy = tmp_path / "nodata.lance"
    shutil.copytree(many, copy, ignore=shutil.ignore_patterns("*.lance"))   # manifests, deletions only
    assert not any((copy / "data").glob("*.lance"))
    expected = lance.dataset(str(many)).count_rows()
    df = spark.read.format("lance").load(str(copy))
    assert df.count() == expected
    plan = df.groupBy().count()._jdf.queryExecution().executedPlan().toString()
    assert "LocalTableScan" in plan or "LanceCountScan" in plan, plan


def test_filtered_scan_and_aggregate_equal_pylance(spark, many):
    ds = lance.dataset(str(many))
    k = N_FRAGMENTS * ROWS_PER_FILE // 2 + 1
    got = sorted(tuple(r) for r in spark.read.format("lance").load(str(many))
                 .where(f"id BETWEEN {k} AND {k + 40} AND s IS NOT NULL").collect())
    want = ds.to_table(filter=f"id >= {k} AND id <= {k + 40} AND s IS NOT NULL").to_pylist()
    assert got == sorted((r["id"], r["g"], r["s"]) for r in want)

    agg = {r["g"]: (r["n"], r["m"]) for r in spark.read.format("lance").load(str(many))
           .groupBy("g").agg({"id": "count", "s": "max"}).withColumnsRenamed({"count(id)": "n", "max(s)": "m"})
           .collect()}
    t = ds.to_table()
    want_agg = t.group_by("g").aggregate([("id", "count"), ("s", "max")]).to_pylist()
    assert agg == {r["g"]: (r["id_count"], r["s_max"]) for r in want_agg}


def test_append_commits_one_more_fragment(spark, many, tmp_path):
    copy = tmp_path / "append.lance"
    shutil.copytree(many, copy)
    before = lance.dataset(str(copy))
    spark.range(0, 3, 1, 1).selectExpr("id + 10000000 AS id", "CAST(id AS INT) AS g", "CAST(id AS STRING) AS s") \
        .write.format("lance").mode("append").save(str(copy))
    after = lance.dataset(str(copy))
    assert after.version == before.version + 1
    frags = after.get_fragments()
    assert len(frags) == N_FRAGMENTS + 1
    assert len({f.fragment_id for f in frags}) == N_FRAGMENTS + 1
    assert after.count_rows() == before.count_rows() + 3
    assert after.to_table(filter="id >= 10000000").num_rows == 3
    assert pc.sum(after.to_table(columns=["g"]).column("g")).as_py() == \
        pc.sum(before.to_table(columns=["g"]).column("g")).as_py() + 3
