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


@pytest.fixture(params=["driver", "job"])
def build_path(request, spark):
    """Both ways a BTREE/BITMAP over a keyed column is built: on the driver (small tables, the
    default here) and as a Spark job of sorted runs (forced: no local rows, runs of 250 rows, so
    several runs per fragment and several fragments per run are merged)."""
    keys = ("spark.lance.index.build.localRows", "spark.lance.index.build.runRows")
    if request.param == "job":
        spark.conf.set(keys[0], "0")
        spark.conf.set(keys[1], "250")
    yield request.param
    for k in keys:
        spark.conf.unset(k)


def _jobs(spark) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


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


def test_create_index_on_a_spark_written_table(spark, wh, build_path):
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
    jobs = _jobs(spark)
    r = spark.sql("CALL lance.system.create_index(table => 'db.ib', column => 'id', index_type => 'btree')").first()
    # the job path runs a job (its sorted runs); the driver path none
    assert (_jobs(spark) > jobs) == (build_path == "job")
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


def test_create_index_on_a_pylance_written_table(spark, tmp_path, build_path):
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


# --- ZONEMAP and BLOOMFILTER builds, optimize_indices ---

def _same_with_and_without(path: str, filters: list[str], index_names: set[str]) -> None:
    """pylance plans each filter with one of our indices and returns the rows it returns without indices."""
    ds = lance.dataset(path)
    assert {i["name"] for i in ds.list_indices()} >= index_names
    for f in filters:
        plan = ds.scanner(filter=f, columns=["id"]).explain_plan(True)
        assert "ScalarIndexQuery" in plan, (f, plan)
        a = sorted(ds.to_table(filter=f, columns=["id"])["id"].to_pylist())
        b = sorted(ds.to_table(filter=f, columns=["id"], use_scalar_index=False)["id"].to_pylist())
        assert a == b, f


def test_zonemap_and_bloomfilter_built_by_spark(spark, tmp_path):
    """A Spark-written table (4 fragments): ZONEMAP and BLOOMFILTER built by create_index and by CREATE INDEX
    ... USING; pylance uses them with the rows it returns without them (equality and IN over many values);
    our scans return the unindexed rows and read fewer bytes where the index prunes."""
    path = str(tmp_path / "zb.lance")
    n = 20000
    (spark.range(n).selectExpr(
        "id", "CAST((id * 7919) % 20000 AS INT) AS k",
        "IF(id % 53 = 0, NULL, CONCAT('v', CAST((id * 104729) % 100003 AS STRING))) AS s",
        "CAST(id % 1000 AS DOUBLE) / 8 AS f")
     .repartition(4).sortWithinPartitions("id")
     .write.format("lance").save(path))
    assert len(lance.dataset(path).get_fragments()) == 4
    r = spark.sql(f"CALL lance.system.create_index(table => '{path}', column => 'k', index_type => 'bloomfilter')").first()
    assert (r.name, r.index_type, r.rows_indexed, r.fragments_covered) == ("k_idx", "bloomfilter", n, 4)
    spark.sql(f"CALL lance.system.create_index(table => '{path}', column => 's', index_type => 'BloomFilter', "
              "name => 's_bloom', options => map('number_of_items', '2048', 'probability', '0.001'))")
    spark.sql(f"CALL lance.system.create_index(table => '{path}', column => 'f', index_type => 'zonemap', "
              "options => map('rows_per_zone', '1024'))")
    ds = lance.dataset(path)
    types = {i["name"]: i["type"] for i in ds.list_indices()}
    assert types == {"k_idx": "BloomFilter", "s_bloom": "BloomFilter", "f_idx": "ZoneMap"}
    rnd = random.Random(3)
    ks = rnd.sample(range(n), 40) + [-1, n + 5]
    svals = ["v%d" % ((i * 104729) % 100003) for i in rnd.sample(range(n), 30)] + ["nope", "v-1"]
    filters = [f"k = {k}" for k in ks[:3]] + [f"k IN ({', '.join(map(str, ks))})"] + \
              [f"s = '{v}'" for v in svals[:3]] + ["s IN (" + ", ".join(f"'{v}'" for v in svals) + ")"] + \
              ["f = 3.5", "f > 124.5", "f >= 10 AND f < 10.2", "f IN (0.125, 99.0)"]
    _same_with_and_without(path, filters, {"k_idx", "s_bloom", "f_idx"})

    df = spark.read.format("lance").load(path)
    off = spark.read.format("lance").option("useIndex", "false").load(path)
    for f in [filters[3], filters[7], filters[-3]]:
        want = sorted(lance.dataset(path).to_table(filter=f, columns=["id"])["id"].to_pylist())
        assert _ids(df.where(f).select("id").collect()) == _ids(off.where(f).select("id").collect()) == want, f
    # a bloom filter prunes zones of a shuffled column: fewer bytes than the full scan of the same column
    f = f"s = '{svals[0]}'"
    on = scan_metrics(df.where(f).select("id", "s"))
    full = scan_metrics(off.where(f).select("id", "s"))
    assert [tuple(x) for x in on["rows"]] == [tuple(x) for x in full["rows"]] and len(on["rows"]) == 1
    assert on["fragmentsDecidedByIndex"] == 4 and on["rowsSelectedByIndex"] <= 2 * 2048, on  # 1 zone (+ a false positive)
    assert on["lanceBytesRead"] < full["lanceBytesRead"] / 3, (on, full)

    # CREATE INDEX ... USING zonemap | bloomfilter on a catalog table, with OPTIONS
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lance.db")
    spark.sql("DROP TABLE IF EXISTS lance.db.zbs")
    spark.sql("CREATE TABLE lance.db.zbs (id BIGINT, s STRING) USING lance")
    spark.sql("INSERT INTO lance.db.zbs SELECT id, CONCAT('w', CAST(id % 97 AS STRING)) FROM range(3000)")
    spark.sql("CREATE INDEX zbs_id ON lance.db.zbs USING zonemap (id) OPTIONS ('rows_per_zone' = '500')")
    spark.sql("CREATE INDEX zbs_s ON lance.db.zbs USING bloomfilter (s)")
    zpath = spark.sql("DESCRIBE TABLE EXTENDED lance.db.zbs").where("col_name = 'Location'").first().data_type
    zds = lance.dataset(zpath)
    assert {i["name"]: i["type"] for i in zds.list_indices()} == {"zbs_id": "ZoneMap", "zbs_s": "BloomFilter"}
    _same_with_and_without(zpath, ["id = 1234", "id IN (1, 2999)", "s = 'w5'", "s IN ('w1', 'w96', 'x')"],
                           {"zbs_id", "zbs_s"})


def test_zonemap_and_bloomfilter_bad_input(spark, tmp_path):
    path = str(tmp_path / "bad.lance")
    lance.write_dataset(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "b": pa.array([True, False, None]),
                                  "l": pa.array([[1], [2], None], pa.list_(pa.int32())),
                                  "t": pa.array([["x", "y"], None, ["y"]], pa.list_(pa.string()))}), path)
    bad = [("column => 'b', index_type => 'bloomfilter'", r"BLOOMFILTER index is not built over column 'b'"),
           ("column => 'l', index_type => 'zonemap'", r"ZONEMAP index is not built over column 'l'"),
           ("column => 'id', index_type => 'zonemap', options => map('rows_per_zone', '-3')", r"rows_per_zone"),
           ("column => 'id', index_type => 'bloomfilter', options => map('probability', '1.5')", r"probability"),
           ("column => 'id', index_type => 'zonemap', options => map('number_of_items', '5')",
            r"option 'number_of_items' is not an option of a ZONEMAP index")]
    for args, msg in bad:
        with pytest.raises(Exception, match=msg):
            spark.sql(f"CALL lance.system.create_index(table => '{path}', {args})").collect()
    assert lance.dataset(path).version == 1 and not os.path.exists(os.path.join(path, "_indices"))
    with pytest.raises(Exception, match=r"LABEL_LIST index is not built over column 'id'"):
        spark.sql(f"CALL lance.system.create_index(table => '{path}', column => 'id', index_type => 'label_list')").collect()
    # LABEL_LIST over a list column: pylance answers array_has_any / array_has_all / array_contains with it
    spark.sql(f"CALL lance.system.create_index(table => '{path}', column => 't', index_type => 'label_list')")
    assert [(i["name"], i["type"]) for i in lance.dataset(path).list_indices()] == [("t_idx", "LabelList")]
    _same_with_and_without(path, ["array_has_any(t, ['x'])", "array_has_all(t, ['x', 'y'])",
                                  "array_contains(t, 'y')", "array_has_any(t, ['z'])"], {"t_idx"})


def test_optimize_indices_covers_appended_fragments(spark, tmp_path, build_path):
    path = str(tmp_path / "opt.lance")
    rnd = random.Random(5)
    ids = list(range(6000))
    rnd.shuffle(ids)
    t = pa.table({"id": pa.array(ids, pa.int64()), "s": pa.array([f"w{i % 50}" for i in ids]),
                  "k": pa.array([i * 3 for i in ids], pa.int32())})
    lance.write_dataset(t, path, max_rows_per_file=2000)
    for col, kind in [("id", "btree"), ("s", "bitmap"), ("k", "bloomfilter")]:
        spark.sql(f"CALL lance.system.create_index(table => '{path}', column => '{col}', index_type => '{kind}')")
    spark.sql(f"CALL lance.system.create_index(table => '{path}', column => 'id', index_type => 'zonemap', "
              "name => 'id_zones', options => map('rows_per_zone', '700'))")
    for start in (6000, 7000):
        more = pa.table({"id": pa.array(range(start, start + 1000), pa.int64()),
                         "s": pa.array([f"w{i % 60}" for i in range(start, start + 1000)]),
                         "k": pa.array([i * 3 for i in range(start, start + 1000)], pa.int32())})
        lance.write_dataset(more, path, mode="append")
    lance.dataset(path).delete("id % 17 = 4")
    frags = sorted(f.fragment_id for f in lance.dataset(path).get_fragments())
    assert len(frags) == 5
    r = spark.sql(f"CALL lance.system.optimize_indices(table => '{path}', index => 's_idx')").first()
    assert list(r.rebuilt) == ["s_idx"] and r.new_version == r.read_version + 1
    r = spark.sql(f"CALL lance.system.optimize_indices(table => '{path}')").first()
    assert sorted(r.rebuilt) == ["id_idx", "id_zones", "k_idx"] and list(r.up_to_date) == ["s_idx"]
    assert r.new_version == r.read_version + 3
    ds = lance.dataset(path)
    for i in ds.list_indices():
        assert sorted(i["fragment_ids"]) == frags, i
        assert ds.stats.index_stats(i["name"])["num_unindexed_fragments"] == 0
    zones = [d for d in ds.list_indices() if d["name"] == "id_zones"][0]
    zfile = os.path.join(path, "_indices", zones["uuid"], "zonemap.lance")
    assert lance.file.LanceFileReader(zfile).read_all().to_table().schema.metadata[b"rows_per_zone"] == b"700"
    _same_with_and_without(path, ["id = 6500", "id IN (5, 7999, 123)", "s = 'w55'", "s = 'w3'", "k = 21000",
                                  "k IN (3, 23997, 5)", "id > 7990"], {"id_idx", "s_idx", "k_idx", "id_zones"})
    df = spark.read.format("lance").load(path)
    m = scan_metrics(df.where("s = 'w55'").select("id"))
    assert m["fragmentsDecidedByIndex"] == 5, m
    assert _ids(m["rows"]) == sorted(ds.to_table(filter="s = 'w55'", columns=["id"])["id"].to_pylist())
    r = spark.sql(f"CALL lance.system.optimize_indices(table => '{path}')").first()
    assert list(r.rebuilt) == [] and r.new_version == r.read_version
    with pytest.raises(Exception, match="no index named 'nope'"):
        spark.sql(f"CALL lance.system.optimize_indices(table => '{path}', index => 'nope')").collect()


def test_python_table_handle_builds_lists_and_drops(spark, tmp_path):
    """LanceTable.create_index / indices / optimize_indices / drop_index (SQL under the hood):
    pylance sees the same indices and uses the one built."""
    from lance_spark.tables import LanceTable

    path = str(tmp_path / "handle.lance")
    t = pa.table({"id": pa.array(range(3000), pa.int64()), "s": [f"v{i % 5}" for i in range(3000)]})
    lance.write_dataset(t, path, max_rows_per_file=1000)
    h = LanceTable.forPath(spark, path)
    r = h.create_index("id", "btree")
    assert r["name"] == "id_idx" and r["fragments_covered"] == 3
    h.create_index("s", "bitmap", name="s_bm")
    h.create_index("id", "zonemap", name="id_zm", rows_per_zone=256)
    listed = {row["name"]: row for row in h.indices().collect()}
    assert set(listed) == {i["name"] for i in lance.dataset(path).list_indices()} == {"id_idx", "s_bm", "id_zm"}
    assert listed["s_bm"]["index_type"] == "Bitmap" and listed["s_bm"]["columns"] == ["s"]
    _check_pylance_uses(path, {"id_idx"})
    lance.write_dataset(t.slice(0, 10), path, mode="append")
    assert h.indices().where("name = 'id_idx'").first()["unindexed_fragments"] == [3]
    out = h.optimize_indices(index="id_idx")
    assert out["rebuilt"] == ["id_idx"]
    assert sorted(next(i for i in lance.dataset(path).list_indices() if i["name"] == "id_idx")["fragment_ids"]) == \
        [0, 1, 2, 3]
    h.drop_index("s_bm")
    assert {i["name"] for i in lance.dataset(path).list_indices()} == {"id_idx", "id_zm"}
    with pytest.raises(Exception, match="s_bm"):
        h.drop_index("s_bm")
