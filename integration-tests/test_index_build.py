"""Scalar indices built from Spark (CALL lance.system.create_index): BTREE and
BITMAP over Spark-written and pylance-written tables (several fragments,
nulls, deleted rows). pylance plans its queries with them (ScalarIndexQuery in
explain_plan) and returns the same rows as without them; our scans select rows
with them; fragments appended after the build are scanned normally; bad input
fails before any job; drop_index removes one; the `indices` metadata table
lists them."""
from __future__ import annotations

import os
import random

import lance
import pyarrow as pa
import pytest

from scan_metrics import scan_metrics

FILTERS = ["id = 17", "id IN (3, 250, 999, 1500)", "id >= 100 AND id < 140", "id > 1190", "id IS NULL",
           "s = 'b'", "s IN ('a', 'dd')", "s IS NULL", "s IS NOT NULL AND id < 50"]


@pytest.fixture(scope="module")
def wh(spark, tmp_path_factory):
    wh = tmp_path_factory.mktemp("ibuild-warehouse")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lance.db")
    return wh


def _ids(rows) -> list:
    return sorted(r[0] for r in rows)


def _check_pylance_uses(path: str, names: set[str]) -> None:
    ds = lance.dataset(path)
    assert {i["name"] for i in ds.list_indices()} >= names
    for f in FILTERS:
        plan = ds.scanner(filter=f, columns=["id"]).explain_plan(True)
        if f != "id IS NULL" or "id_idx" in names:
            assert "ScalarIndexQuery" in plan, (f, plan)
        a = sorted(ds.to_table(filter=f, columns=["id"])["id"].to_pylist(), key=lambda x: (x is None, x))
        b = sorted(ds.to_table(filter=f, columns=["id"], use_scalar_index=False)["id"].to_pylist(),
                   key=lambda x: (x is None, x))
        assert a == b, f


def _check_spark(spark, df, path: str, must_select: bool = True) -> None:
    ds = lance.dataset(path)
    off = df.sparkSession.read.format("lance").option("useIndex", "false").load(path)
    for f in FILTERS:
        want = sorted(ds.to_table(filter=f, columns=["id"])["id"].to_pylist(), key=lambda x: (x is None, x))
        m = scan_metrics(df.where(f).select("id"))
        got = sorted((r[0] for r in m["rows"]), key=lambda x: (x is None, x))
        base = sorted((r[0] for r in off.where(f).select("id").collect()), key=lambda x: (x is None, x))
        assert got == base == want, f
        if must_select and f in ("id = 17", "s = 'b'"):
            assert m["fragmentsDecidedByIndex"] > 0, (f, m)


def test_create_index_on_a_spark_written_table(spark, wh):
    spark.sql("DROP TABLE IF EXISTS lance.db.ib")
    spark.sql("CREATE TABLE lance.db.ib (id BIGINT, s STRING) USING lance")
    words = ["a", "b", "c", "dd", None]
    for part in range(4):    # four fragments
        rows = ", ".join(
            f"({'NULL' if i % 37 == 0 else i}, {'NULL' if words[i % 5] is None else repr(words[i % 5])})"
            for i in range(part * 300, part * 300 + 300))
        spark.sql(f"INSERT INTO lance.db.ib VALUES {rows}")
    spark.sql("DELETE FROM lance.db.ib WHERE id % 10 = 3")
    path = str(wh / "db" / "ib.lance")
    before = lance.dataset(path).version
    frags = sorted(f.fragment_id for f in lance.dataset(path).get_fragments())
    assert len(frags) >= 4
    r = spark.sql("CALL lance.system.create_index(table => 'db.ib', column => 'id', index_type => 'btree')").first()
    assert (r.name, r.index_type, r.read_version, r.new_version) == ("id_idx", "btree", before, before + 1)
    assert r.rows_indexed == lance.dataset(path).count_rows() and r.fragments_covered == len(frags)
    r2 = spark.sql("CALL lance.system.create_index(table => 'lance.db.ib', column => 's', "
                   "index_type => 'bitmap', name => 's_bits')").first()
    assert r2.new_version == before + 2
    ds = lance.dataset(path)
    types = {i["name"]: i["type"] for i in ds.list_indices()}
    assert types == {"id_idx": "BTree", "s_bits": "Bitmap"}
    assert ds.get_transactions(1)[0].operation.__class__.__name__ == "CreateIndex"
    _check_pylance_uses(path, {"id_idx", "s_bits"})
    df = spark.table("lance.db.ib")
    _check_spark(spark, df, path)
    m = scan_metrics(df.where("id = 17").select("id"))
    assert m["rowsSelectedByIndex"] == 1, m  # (page statistics prune the other fragments first)

    # an append after the build: its fragment is scanned normally, pylance too
    spark.sql("INSERT INTO lance.db.ib VALUES (17, 'b'), (5000, NULL)")
    appended = sorted(f.fragment_id for f in lance.dataset(path).get_fragments() if f.fragment_id not in frags)
    assert appended
    _check_pylance_uses(path, {"id_idx", "s_bits"})
    _check_spark(spark, spark.table("lance.db.ib"), path)
    assert _ids(spark.sql("SELECT id FROM lance.db.ib WHERE id = 17").collect()) == [17, 17]
    rows = {r.name: r for r in spark.sql("SELECT * FROM lance.db.ib.indices").collect()}
    assert rows["id_idx"].index_type == "BTree" and rows["id_idx"].columns == ["id"]
    assert rows["id_idx"].fragments == frags and rows["id_idx"].unindexed_fragments == appended
    assert rows["id_idx"].dataset_version == before and rows["s_bits"].dataset_version == before + 1

    spark.sql("CALL lance.system.drop_index(table => 'db.ib', name => 's_bits')")
    assert [i["name"] for i in lance.dataset(path).list_indices()] == ["id_idx"]


def test_create_index_on_a_pylance_written_table(spark, tmp_path):
    path = str(tmp_path / "py.lance")
    rnd = random.Random(11)
    ids = list(range(1200))
    rnd.shuffle(ids)
    t = pa.table({"id": pa.array([None if i % 41 == 0 else i for i in ids], pa.int64()),
                  "s": pa.array([None if i % 7 == 0 else rnd.choice(["a", "b", "c", "dd"]) for i in ids]),
                  "tags": pa.array([[i % 3] for i in ids], pa.list_(pa.int32()))})
    lance.write_dataset(t, path, max_rows_per_file=300, data_storage_version="2.0")
    lance.dataset(path).delete("id % 9 = 2")
    spark.sql(f"CALL lance.system.create_index(table => '{path}', column => 'id')")
    spark.sql(f"CALL lance.system.create_index(table => '{path}', column => 's', index_type => 'BITMAP')")
    files = [f for d in os.listdir(os.path.join(path, "_indices"))
             for f in os.listdir(os.path.join(path, "_indices", d))]
    assert sorted(files) == ["bitmap_page_lookup.lance", "page_data.lance", "page_lookup.lance"]
    _check_pylance_uses(path, {"id_idx", "s_idx"})
    _check_spark(spark, spark.read.format("lance").load(path), path)

    # bad input: errors before any job, nothing committed or written
    version = lance.dataset(path).version
    dirs = set(os.listdir(os.path.join(path, "_indices")))
    bad = [("column => 'nope'", r"no column 'nope'"),
           ("column => 'id'", r"index named 'id_idx' already exists"),
           ("column => 'tags', index_type => 'bitmap'", r"BITMAP index is not built over column 'tags'"),
           ("column => 's', index_type => 'hnsw', name => 'x'", r"index type 'hnsw' is not built")]
    for args, msg in bad:
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(None)
        with pytest.raises(Exception, match=msg):
            spark.sql(f"CALL lance.system.create_index(table => '{path}', {args})").collect()
        assert spark.sparkContext.statusTracker().getJobIdsForGroup(None) == jobs, args
    assert lance.dataset(path).version == version
    assert set(os.listdir(os.path.join(path, "_indices"))) == dirs


def test_create_index_and_drop_index_statements(spark, wh):
    spark.sql("DROP TABLE IF EXISTS lance.db.stmt")
    spark.sql("CREATE TABLE lance.db.stmt (id BIGINT, s STRING) USING lance")
    spark.sql("INSERT INTO lance.db.stmt VALUES " + ", ".join(f"({i}, 'w{i % 4}')" for i in range(500)))
    path = str(wh / "db" / "stmt.lance")
    spark.sql("CREATE INDEX stmt_id ON lance.db.stmt USING btree (id)")
    spark.sql("CREATE INDEX stmt_s ON lance.db.stmt USING bitmap (s)")
    ds = lance.dataset(path)
    assert {i["name"]: i["type"] for i in ds.list_indices()} == {"stmt_id": "BTree", "stmt_s": "Bitmap"}
    assert "ScalarIndexQuery" in ds.scanner(filter="s = 'w1'", columns=["id"]).explain_plan(True)
    assert ds.count_rows("s = 'w1'") == 125
    with pytest.raises(Exception, match="stmt_id' already exists"):
        spark.sql("CREATE INDEX stmt_id ON lance.db.stmt USING btree (s)")
    spark.sql("DROP INDEX stmt_s ON lance.db.stmt")
    assert [i["name"] for i in lance.dataset(path).list_indices()] == ["stmt_id"]
