"""Data evolution (issue 39, first part): `CALL lance.system.add_columns` /
`LanceTable.add_columns(df)` add columns as new data files beside the existing
ones (a Merge commit, no rewrite), and `mergeSchema` lets an append add
columns. pylance 14 (the oracle) reads every table after each step with the
same rows as Spark; pylance's own add_columns/merge work on tables Spark
evolved and Spark's on tables pylance evolved; the old data files are never
touched; an append racing add_columns is a clear conflict."""
from __future__ import annotations

import os
import threading
import time

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from lance_spark import LanceTable


@pytest.fixture(scope="module", autouse=True)
def wh(spark, tmp_path_factory):
    wh = tmp_path_factory.mktemp("addcol-warehouse")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    return wh


def quoted(path: str) -> str:
    return "`" + path + "`"


def base_table(n0: int, n: int) -> pa.Table:
    ids = np.arange(n0, n0 + n, dtype=np.int64)
    return pa.table({"id": ids, "v": pa.array([f"v{i}" for i in ids])})


def data_files(path: str) -> dict[str, tuple[int, int]]:
    """Every data file: name -> (size, mtime in ns)."""
    d = os.path.join(path, "data")
    return {n: (os.stat(os.path.join(d, n)).st_size, os.stat(os.path.join(d, n)).st_mtime_ns) for n in os.listdir(d)}


def pylance_rows(path: str, cols: list[str], version: int | None = None) -> list[tuple]:
    t = lance.dataset(path, version=version).to_table(columns=cols)
    return sorted(zip(*[t.column(c).to_pylist() for c in cols]))


def spark_rows(spark, path: str, cols: list[str], version: int | None = None) -> list[tuple]:
    r = spark.read.format("lance")
    if version is not None:
        r = r.option("version", version)
    return sorted(tuple(x) for x in r.load(path).select(*cols).collect())


def call_add_columns(spark, path: str, view: str) -> dict:
    return spark.sql(f"CALL lance.system.add_columns(table => '{quoted(path)}', source => '{view}')").first().asDict()


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_pylance_written_evolved_by_spark_then_pylance(spark, tmp_path, version):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 300), path, max_rows_per_file=100, data_storage_version=version)
    lance.dataset(path).delete("id % 10 = 3")
    lance.dataset(path).delete("id >= 100 AND id < 110")
    before = lance.dataset(path)
    v0 = before.version
    files0 = data_files(path)
    assert len(before.get_fragments()) == 3
    # new values for some rows of fragments 0 and 1; fragment 2 (ids 200..299) gets none
    src = (spark.read.format("lance").load(path).where("id < 200 AND id % 4 != 0")
           .select("_rowaddr", (F.col("id") * 2).alias("c2"), F.concat(F.lit("s"), F.col("v")).alias("s2")))
    src.createOrReplaceTempView("addcol_src")
    res = call_add_columns(spark, path, "addcol_src")
    assert res["read_version"] == v0 and res["new_version"] == v0 + 1
    assert res["columns_added"] == ["c2", "s2"] and res["files_added"] == 3

    after = lance.dataset(path)
    assert after.version == v0 + 1
    assert after.schema.names == ["id", "v", "c2", "s2"]
    live = [i for i in range(300) if i % 10 != 3 and not 100 <= i < 110]
    expected = sorted((i, i * 2 if i < 200 and i % 4 else None, f"sv{i}" if i < 200 and i % 4 else None) for i in live)
    assert pylance_rows(path, ["id", "c2", "s2"]) == expected
    assert spark_rows(spark, path, ["id", "c2", "s2"]) == expected
    # each fragment gained one file holding only the new columns; the old files are untouched
    for frag in after.get_fragments():
        files = frag.metadata.files
        assert len(files) == 2 and files[1].fields == [2, 3] and files[1].column_indices == [0, 1]
    files1 = data_files(path)
    assert {k: files1[k] for k in files0} == files0 and len(files1) == len(files0) + 3
    assert type(after.read_transaction(after.version).operation).__name__ == "Merge"
    # time travel to the version before: the old schema and rows
    assert lance.dataset(path, version=v0).schema.names == ["id", "v"]
    old = spark.read.format("lance").option("version", v0).load(path)
    assert old.columns == ["id", "v"] and old.count() == len(live)

    # pylance evolves the Spark-evolved table: add_columns (SQL expression) and merge
    ds = lance.dataset(path)
    ds.add_columns({"c3": "id + 1"})
    ds = lance.dataset(path)
    ds.merge(pa.table({"id": pa.array(live[:50], pa.int64()), "m": pa.array([float(i) for i in live[:50]])}), "id")
    exp2 = sorted((i, c2, i + 1, float(i) if i in set(live[:50]) else None) for i, c2, _ in expected)
    assert pylance_rows(path, ["id", "c2", "c3", "m"]) == exp2
    assert spark_rows(spark, path, ["id", "c2", "c3", "m"]) == exp2
    lance.dataset(path).validate()


def test_spark_written_evolved_by_pylance_then_spark(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    (spark.createDataFrame(base_table(0, 240).to_pandas()).coalesce(1)
     .write.format("lance").option("maxRowsPerFile", 60).save(path))
    spark.sql(f"DELETE FROM lance.{quoted(path)} WHERE id % 7 = 0")
    # pylance first: merge keyed by id, then add_columns
    ds = lance.dataset(path)
    ds.merge(pa.table({"id": pa.array(range(0, 240, 2), pa.int64()), "p": pa.array([f"p{i}" for i in range(0, 240, 2)])}),
             "id")
    lance.dataset(path).add_columns({"q": "id * 10"})
    v0 = lance.dataset(path).version
    files0 = data_files(path)
    # then Spark, through the Python handle, keyed by _rowid (= the address without stable row ids)
    src = (spark.read.format("lance").load(path).where("id >= 30")
           .select("_rowid", (F.col("q") + F.col("id")).alias("z")))
    res = LanceTable.forPath(spark, path).add_columns(src)
    assert res["new_version"] == v0 + 1 and res["files_added"] == 4
    live = [i for i in range(240) if i % 7]
    expected = sorted((i, f"p{i}" if i % 2 == 0 else None, i * 10, i * 11 if i >= 30 else None) for i in live)
    assert pylance_rows(path, ["id", "p", "q", "z"]) == expected
    assert spark_rows(spark, path, ["id", "p", "q", "z"]) == expected
    assert {k: v for k, v in data_files(path).items() if k in files0} == files0
    assert lance.dataset(path, version=v0).schema.names == ["id", "v", "p", "q"]
    lance.dataset(path).validate()


def test_stable_row_ids_keyed_by_rowid(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 50), path, enable_stable_row_ids=True)
    for k in range(1, 4):
        lance.write_dataset(base_table(k * 50, 50), path, mode="append")
    lance.dataset(path).delete("id % 5 = 0")
    lance.dataset(path).optimize.compact_files()  # row ids no longer equal the addresses
    src = spark.read.format("lance").load(path).select("_rowid", (F.col("id") - 1).alias("w"))
    LanceTable.forPath(spark, path).add_columns(src)
    expected = sorted((i, i - 1) for i in range(200) if i % 5)
    assert pylance_rows(path, ["id", "w"]) == expected
    assert spark_rows(spark, path, ["id", "w"]) == expected


def run_racing(spark, path: str, tmp, other) -> tuple[BaseException | None, dict | None]:
    """add_columns (t = id * 3 for every row) paused after writing its files and
    before its commit (a test-only session conf), `other` committed meanwhile."""
    out: dict = {}
    prefix = str(tmp / "pause")
    src = spark.read.format("lance").load(path).select("_rowaddr", (F.col("id") * 3).alias("t"))

    def run():
        try:
            out["res"] = LanceTable.forPath(spark, path).add_columns(src)
        except BaseException as e:  # noqa: BLE001
            out["err"] = e

    spark.conf.set("spark.lance.test.addColumnsPause", prefix)
    try:
        t = threading.Thread(target=run)
        t.start()
        deadline = time.time() + 240
        while not os.path.exists(prefix + ".started") and time.time() < deadline and t.is_alive():
            time.sleep(0.05)
        assert os.path.exists(prefix + ".started"), out
        other()
        open(prefix + ".go", "a").close()
        t.join(300)
        assert not t.is_alive()
    finally:
        spark.conf.unset("spark.lance.test.addColumnsPause")
    return out.get("err"), out.get("res")


def assert_failed_leaving_nothing(err, res, path: str) -> None:
    """add_columns failed telling to run it again, and none of its files is left."""
    assert res is None and err is not None
    assert "add_columns again" in str(err), str(err)
    assert not [n for n in os.listdir(os.path.join(path, "data")) if n.startswith("addcol-")]


def test_append_racing_add_columns_is_a_clear_conflict(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 200), path, max_rows_per_file=100)
    v0 = lance.dataset(path).version
    err, res = run_racing(spark, path, tmp_path, lambda: lance.write_dataset(base_table(200, 10), path, mode="append"))
    assert res is None and err is not None
    assert "appended fragments" in str(err) and "add_columns again" in str(err), str(err)
    ds = lance.dataset(path)
    assert ds.version == v0 + 1 and ds.schema.names == ["id", "v"] and ds.count_rows() == 210
    assert not [n for n in os.listdir(os.path.join(path, "data")) if n.startswith("addcol-")]


def test_delete_racing_add_columns_is_rebased(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 200), path, max_rows_per_file=100)
    err, res = run_racing(spark, path, tmp_path, lambda: lance.dataset(path).delete("id < 20 OR id >= 150"))
    assert err is None, str(err)
    expected = sorted((i, i * 3) for i in range(20, 150))
    assert pylance_rows(path, ["id", "t"]) == expected
    assert spark_rows(spark, path, ["id", "t"]) == expected


def test_compaction_racing_add_columns_is_a_clear_conflict(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 200), path, max_rows_per_file=50)
    lance.dataset(path).delete("id % 9 = 0")
    v0 = lance.dataset(path).version
    err, res = run_racing(spark, path, tmp_path, lambda: lance.dataset(path).optimize.compact_files())
    assert_failed_leaving_nothing(err, res, path)
    # the compaction's version stands, without the new column
    ds = lance.dataset(path)
    assert ds.version > v0 and ds.schema.names == ["id", "v"]  # pylance's compaction may commit twice
    assert sorted(pylance_rows(path, ["id"])) == [(i,) for i in range(200) if i % 9]


def test_row_update_racing_add_columns_is_a_clear_conflict(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 100), path, max_rows_per_file=50)
    err, res = run_racing(spark, path, tmp_path, lambda: lance.dataset(path).update({"id": "id + 1000"}, where="id < 10"))
    assert_failed_leaving_nothing(err, res, path)
    # pylance's update stands, without the new column
    assert lance.dataset(path).schema.names == ["id", "v"]
    want = sorted((i + 1000 if i < 10 else i,) for i in range(100))
    assert pylance_rows(path, ["id"]) == want == spark_rows(spark, path, ["id"])


def test_bad_sources_are_clear(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 20), path)
    df = spark.read.format("lance").load(path)
    for src, words in [
        (df.select((F.col("id") * 2).alias("c")), ["no _rowaddr or _rowid"]),
        (df.select("_rowaddr", "v"), ["already in the dataset", "v"]),
        (df.select("_rowaddr", F.lit(1).alias("c")).union(df.select("_rowaddr", F.lit(2).alias("c"))),
         ["more than one row for _rowaddr"]),
        (df.select((F.col("_rowaddr") + 100).alias("_rowaddr"), F.lit(1).alias("c")), ["offset", "has 20 rows"]),
    ]:
        with pytest.raises(Exception) as e:
            LanceTable.forPath(spark, path).add_columns(src)
        for w in words:
            assert w in str(e.value), str(e.value)
    assert lance.dataset(path).version == 1
    assert not [n for n in os.listdir(os.path.join(path, "data")) if n.startswith("addcol-")]


def test_merge_schema_append(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 20), path)
    more = spark.createDataFrame([(100 + i, f"v{100 + i}", i * 1.5) for i in range(5)], "id long, v string, score double")
    with pytest.raises(Exception) as e:
        more.write.format("lance").mode("append").save(path)
    assert "score" in str(e.value) and "mergeSchema" in str(e.value), str(e.value)
    assert lance.dataset(path).version == 1
    # columns in another order: by name
    more.select("score", "v", "id").write.format("lance").mode("append").option("mergeSchema", "true").save(path)
    ds = lance.dataset(path)
    assert ds.schema.names == ["id", "v", "score"]
    expected = sorted([(i, f"v{i}", None) for i in range(20)] + [(100 + i, f"v{100 + i}", i * 1.5) for i in range(5)])
    assert pylance_rows(path, ["id", "v", "score"]) == expected
    assert spark_rows(spark, path, ["id", "v", "score"]) == expected
    assert lance.dataset(path, version=1).schema.names == ["id", "v"]
    # the session conf, and a later append of the evolved schema without the option
    spark.conf.set("spark.lance.write.mergeSchema", "true")
    try:
        spark.createDataFrame([(200, "w", 2.0, True)], "id long, v string, score double, flag boolean") \
            .write.format("lance").mode("append").save(path)
    finally:
        spark.conf.unset("spark.lance.write.mergeSchema")
    spark.createDataFrame([(300, "x", 3.0, False)], "id long, v string, score double, flag boolean") \
        .write.format("lance").mode("append").save(path)
    t = lance.dataset(path).to_table(columns=["id", "flag"]).to_pydict()
    flags = dict(zip(t["id"], t["flag"]))
    assert flags[200] is True and flags[300] is False and flags[0] is None
    assert spark.read.format("lance").load(path).where("flag").select("id").collect()[0][0] == 200
    lance.dataset(path).validate()


# ---- computed columns: add_columns(expressions => map(...)) ----

def call_add_expressions(spark, path: str, exprs: dict[str, str]) -> dict:
    def lit(s: str) -> str:
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
    pairs = ", ".join(f"{lit(k)}, {lit(v)}" for k, v in exprs.items())
    return spark.sql(f"CALL lance.system.add_columns(table => '{quoted(path)}', expressions => map({pairs}))") \
        .first().asDict()


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_computed_columns_pylance_written(spark, tmp_path, version):
    path = str(tmp_path / "t.lance")
    rng = np.random.default_rng(39)
    n = 250
    emb = rng.normal(size=(n, 4)).astype(np.float64)
    a = np.arange(n, dtype=np.int64)
    lance.write_dataset(pa.table({"a": a, "v": pa.array([f"v{i}" for i in a]),
                                  "emb": pa.array(list(emb), pa.list_(pa.float64()))}),
                        path, max_rows_per_file=100, data_storage_version=version)
    lance.dataset(path).delete("a % 9 = 4")
    v0 = lance.dataset(path).version
    files0 = data_files(path)
    res = call_add_expressions(spark, path, {
        "c2": "a * 2", "norm": "sqrt(aggregate(emb, 0D, (s, x) -> s + x * x))", "up": "upper(v)"})
    assert res["read_version"] == v0 and res["new_version"] == v0 + 1
    assert res["columns_added"] == ["c2", "norm", "up"] and res["files_added"] == 3
    ds = lance.dataset(path)
    assert ds.schema.names == ["a", "v", "emb", "c2", "norm", "up"]
    assert type(ds.read_transaction(ds.version).operation).__name__ == "Merge"
    live = [i for i in range(n) if i % 9 != 4]
    got = lance.dataset(path).to_table(columns=["a", "c2", "norm", "up"]).to_pydict()
    assert sorted(got["a"]) == live
    by_a = {x: (c, nm, u) for x, c, nm, u in zip(got["a"], got["c2"], got["norm"], got["up"])}
    norms = np.linalg.norm(emb, axis=1)  # numpy, not our code, gives the expected norms
    for i in live:
        c, nm, u = by_a[i]
        assert c == 2 * i and u == f"V{i}" and nm == pytest.approx(norms[i], rel=1e-12)
    assert spark_rows(spark, path, ["a", "c2", "norm", "up"]) == pylance_rows(path, ["a", "c2", "norm", "up"])
    files1 = data_files(path)
    assert {k: files1[k] for k in files0} == files0 and len(files1) == len(files0) + 3
    assert lance.dataset(path, version=v0).schema.names == ["a", "v", "emb"]
    old = spark.read.format("lance").option("version", v0).load(path)
    assert old.columns == ["a", "v", "emb"] and old.count() == len(live)
    lance.dataset(path).validate()


def test_computed_columns_python_and_over_added_columns(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    (spark.createDataFrame(base_table(0, 120).to_pandas()).coalesce(1)
     .write.format("lance").option("maxRowsPerFile", 50).save(path))
    t = LanceTable.forPath(spark, path)
    t.add_columns(expressions={"d": "id * 3"})
    # a computed column over a column the previous evolution added (two column files a fragment)
    res = t.add_columns(expressions={"e": "d + id", "half": "CAST(id AS DOUBLE) / 2"})
    assert res["columns_added"] == ["e", "half"]
    expected = sorted((i, 3 * i, 4 * i, i / 2) for i in range(120))
    assert pylance_rows(path, ["id", "d", "e", "half"]) == expected
    assert spark_rows(spark, path, ["id", "d", "e", "half"]) == expected
    for frag in lance.dataset(path).get_fragments():
        assert len(frag.metadata.files) == 3
    # pylance's own add_columns on top
    lance.dataset(path).add_columns({"f": "e - d"})
    assert pylance_rows(path, ["id", "f"]) == sorted((i, i) for i in range(120))
    assert spark_rows(spark, path, ["id", "f"]) == sorted((i, i) for i in range(120))


def test_computed_columns_bad_input_is_clear(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 20), path)
    q = quoted(path)
    cases = [
        (f"CALL lance.system.add_columns(table => '{q}', source => 'x', expressions => map('c', 'id'))",
         ["not both"]),
        (f"CALL lance.system.add_columns(table => '{q}')", ["source", "expressions"]),
        (f"CALL lance.system.add_columns(table => '{q}', expressions => map('c', 'nosuch + 1'))",
         ["nosuch", "c = nosuch + 1"]),
        (f"CALL lance.system.add_columns(table => '{q}', expressions => map('v', 'id + 1'))",
         ["already in the dataset", "v"]),
        (f"CALL lance.system.add_columns(table => '{q}', expressions => map('c', 'id +* 1'))",
         ["does not parse", "c"]),
        (f"CALL lance.system.add_columns(table => '{q}', expressions => map('_rowaddr', 'id'))",
         ["metadata column"]),
    ]
    for sql, words in cases:
        with pytest.raises(Exception) as e:
            spark.sql(sql).collect()
        for w in words:
            assert w in str(e.value), (sql, str(e.value))
    with pytest.raises(ValueError):
        LanceTable.forPath(spark, path).add_columns()
    assert lance.dataset(path).version == 1
    assert not [n for n in os.listdir(os.path.join(path, "data")) if n.startswith("addcol-")]


# ---- DataFrame appends follow spark.sql.storeAssignmentPolicy, as SQL INSERT does ----

def test_dataframe_append_store_assignment(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": pa.array([1, 2], pa.int64()), "x": pa.array([0.5, 1.5], pa.float64()),
                                  "s": pa.array([10, 20], pa.int32())}), path)
    ints = spark.createDataFrame([(3, 7, 30), (4, None, 40)], "id int, x int, s int")
    # ANSI (the default): INT -> BIGINT and INT -> DOUBLE are cast, as SQL INSERT casts them
    assert spark.conf.get("spark.sql.storeAssignmentPolicy").upper() == "ANSI"
    ints.write.format("lance").mode("append").save(path)
    spark.sql(f"INSERT INTO lance.{quoted(path)} VALUES (5, 9, 50)")
    expected = [(1, 0.5, 10), (2, 1.5, 20), (3, 7.0, 30), (4, None, 40), (5, 9.0, 50)]
    assert pylance_rows(path, ["id", "x", "s"]) == expected
    assert spark_rows(spark, path, ["id", "x", "s"]) == expected
    assert lance.dataset(path).schema.field("id").type == pa.int64()
    # ANSI: a BIGINT that does not fit the INT column fails the write, nothing committed
    v = lance.dataset(path).version
    with pytest.raises(Exception) as e:
        spark.createDataFrame([(6, 1.0, 2 ** 40)], "id long, x double, s long").write.format("lance") \
            .mode("append").save(path)
    assert "column 's'" in str(e.value) and "does not fit" in str(e.value), str(e.value)
    assert lance.dataset(path).version == v
    # in range: cast
    spark.createDataFrame([(6, 1.0, 60)], "id long, x double, s long").write.format("lance").mode("append").save(path)
    assert pylance_rows(path, ["id", "s"])[-1] == (6, 60)
    # ANSI refuses STRING -> DOUBLE (as INSERT does), naming the column and both types
    with pytest.raises(Exception) as e:
        spark.createDataFrame([(7, "1.0", 1)], "id long, x string, s int").write.format("lance") \
            .mode("append").save(path)
    assert "column 'x'" in str(e.value) and "string" in str(e.value) and "double" in str(e.value), str(e.value)
    # STRICT: only safe widenings; INT -> DOUBLE and INT -> BIGINT are up-casts, BIGINT -> INT is refused
    spark.conf.set("spark.sql.storeAssignmentPolicy", "STRICT")
    try:
        spark.createDataFrame([(8, 8, 80)], "id int, x int, s int").write.format("lance").mode("append").save(path)
        with pytest.raises(Exception) as e:
            spark.createDataFrame([(9, 1.0, 1)], "id long, x double, s long").write.format("lance") \
                .mode("append").save(path)
        msg = str(e.value)
        assert "column 's'" in msg and "bigint" in msg and "int" in msg and "STRICT" in msg, msg
    finally:
        spark.conf.unset("spark.sql.storeAssignmentPolicy")
    expected = [(1, 0.5, 10), (2, 1.5, 20), (3, 7.0, 30), (4, None, 40), (5, 9.0, 50), (6, 1.0, 60), (8, 8.0, 80)]
    assert pylance_rows(path, ["id", "x", "s"]) == expected
    assert spark_rows(spark, path, ["id", "x", "s"]) == expected
    lance.dataset(path).validate()


def _stages_per_job(spark, group: str, fn) -> list[int]:
    """Runs fn under a job group; the number of stages of each job it ran (more than one: a shuffle)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        fn()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    return [len(tracker.getJobInfo(j).stageIds) for j in sorted(tracker.getJobIdsForGroup(group))]


def test_a_source_computed_from_the_table_is_not_shuffled(spark, tmp_path):
    """`SELECT _rowaddr, f(x) FROM t` at the version being extended is written where it is
    computed (one stage, no shuffle): the scan's tasks are joined where a fragment continues from
    one into the next (fragments cut by `splitRows`), also after a compaction. A union is written
    in pieces (each task's rows are in order), a repartitioned source is shuffled. Every case gives
    pylance's rows and the expected values."""
    spark.conf.set("spark.lance.localScanRows", "0")   # these small scans run as jobs
    try:
        path = str(tmp_path / "aligned.lance")
        lance.write_dataset(base_table(0, 9000), path, max_rows_per_file=2000)
        lance.dataset(path).delete("id % 7 = 2")
        src = spark.read.format("lance").load(path).selectExpr("_rowaddr", "id * 3 AS x3")
        src.createOrReplaceTempView("aligned_src")
        stages = _stages_per_job(spark, "aligned", lambda: call_add_columns(spark, path, "aligned_src"))
        assert stages and max(stages) == 1, f"stages per job: {stages}"
        live = [i for i in range(9000) if i % 7 != 2]
        assert pylance_rows(path, ["id", "x3"]) == [(i, 3 * i) for i in live]
        # fragments cut over tasks, a filter: still one stage
        split = (spark.read.format("lance").option("splitRows", "700").load(path)
                 .where("id % 2 = 0").selectExpr("_rowaddr", "id + 1 AS y"))
        assert split.rdd.getNumPartitions() > 5
        split.createOrReplaceTempView("split_src")
        stages = _stages_per_job(spark, "split", lambda: call_add_columns(spark, path, "split_src"))
        assert max(stages) == 1, f"stages per job: {stages}"
        assert pylance_rows(path, ["id", "y"]) == [(i, i + 1 if i % 2 == 0 else None) for i in live]
        # after a compaction (a new fragment; the writer takes fragments in any order)
        lance.dataset(path).delete("id < 3500 AND id % 3 != 0")
        lance.dataset(path).optimize.compact_files(target_rows_per_fragment=1500, materialize_deletions_threshold=0.5)
        assert len(lance.dataset(path).get_fragments()) == 4
        src = spark.read.format("lance").option("splitRows", "900").load(path).selectExpr("_rowaddr", "concat(v, '!') AS w")
        src.createOrReplaceTempView("compacted_src")
        stages = _stages_per_job(spark, "compacted", lambda: call_add_columns(spark, path, "compacted_src"))
        assert max(stages) == 1, f"stages per job: {stages}"
        live = [i for i in live if not (i < 3500 and i % 3 != 0)]
        assert pylance_rows(path, ["id", "x3", "w"]) == [(i, 3 * i, f"v{i}!") for i in live]
        # a union is not a scan's rows in place, but each task's rows are in order: written in
        # pieces, a fragment's pieces from two tasks joined (one stage per job)
        t = spark.read.format("lance").load(path)
        union = t.where("id < 4000").selectExpr("_rowaddr", "id - 1 AS z").union(
            t.where("id >= 6000").selectExpr("_rowaddr", "id - 2 AS z"))
        union.createOrReplaceTempView("union_src")
        stages = _stages_per_job(spark, "union", lambda: call_add_columns(spark, path, "union_src"))
        assert max(stages) == 1, f"stages per job: {stages}"
        assert pylance_rows(path, ["id", "z"]) == [(i, i - 1 if i < 4000 else i - 2 if i >= 6000 else None) for i in live]
        # a source that is itself shuffled (here by a repartition) is shuffled by fragment
        shuffled = t.selectExpr("_rowaddr", "id + 5 AS r").repartition(3)
        shuffled.createOrReplaceTempView("shuffled_src")
        stages = _stages_per_job(spark, "shuffled", lambda: call_add_columns(spark, path, "shuffled_src"))
        assert max(stages) > 1, f"stages per job: {stages}"
        assert pylance_rows(path, ["id", "r"]) == [(i, i + 5) for i in live]
        cols = ["id", "x3", "y", "w", "z", "r"]
        assert spark_rows(spark, path, cols) == pylance_rows(path, cols)
        lance.dataset(path).validate()
    finally:
        spark.conf.unset("spark.lance.localScanRows")


def _leftover_files(path: str) -> set[str]:
    """Data files in the directory that no fragment of the latest version lists."""
    listed = {f.path for frag in lance.dataset(path).get_fragments() for f in frag.metadata.files}
    return {n for n in os.listdir(os.path.join(path, "data")) if n.endswith(".lance")} - listed


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_a_source_in_address_order_is_written_where_it_is_read(spark, tmp_path, version):
    """The issue's shape: new values keyed by `_rowaddr` saved to Parquet in address order (a
    model's output over a scan of the table), read back in splits that cut fragments. Each task
    writes pieces of the fragments it reads, joined per fragment without decoding: no shuffle,
    rows the source lacks and deleted rows NULL, old files untouched, no piece left behind;
    pylance reads the values; so are small files packed several to a task. A source in another
    order, or with a repeated address, falls back to the shuffle (its error names the address)."""
    path = str(tmp_path / "ordered.lance")
    lance.write_dataset(base_table(0, 12000), path, max_rows_per_file=2500, data_storage_version=version)
    lance.dataset(path).delete("id % 11 = 4")
    before = data_files(path)
    live = [i for i in range(12000) if i % 11 != 4]
    src_path = str(tmp_path / "emb.parquet")
    (spark.read.format("lance").load(path).where("id % 5 != 0")
     .selectExpr("_rowaddr", "id", "transform(array_repeat(0, 8), (_, k) -> CAST(id * 10 + k AS FLOAT)) AS emb",
                 "concat('s', CAST(id AS STRING)) AS s")
     .coalesce(1).write.option("maxRecordsPerFile", 1700).parquet(src_path))
    spark.conf.set("spark.sql.files.maxPartitionBytes", "65536")   # a split per file, as large files get
    try:
        src = spark.read.parquet(src_path)
        assert src.rdd.getNumPartitions() >= 5
        src.drop("id").createOrReplaceTempView("ordered_src")
        stages = _stages_per_job(spark, "ordered", lambda: call_add_columns(spark, path, "ordered_src"))
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert stages and max(stages) == 1, f"stages per job: {stages}"
    want = [(i, [float(i * 10 + k) for k in range(8)] if i % 5 else None, f"s{i}" if i % 5 else None) for i in live]
    assert pylance_rows(path, ["id", "emb", "s"]) == want
    assert spark_rows(spark, path, ["id", "emb", "s"]) == want
    after = data_files(path)
    assert {k: after[k] for k in before} == before
    assert _leftover_files(path) == set()
    lance.dataset(path).validate()

    # the same small files packed several to a task (read largest first, not in address order):
    # each run of a file is a piece of its own, still no shuffle
    src2 = spark.read.parquet(src_path)
    assert src2.rdd.getNumPartitions() < len([n for n in os.listdir(src_path) if n.endswith(".parquet")])
    src2.selectExpr("_rowaddr", "id + 7 AS p7").createOrReplaceTempView("packed_src")
    stages = _stages_per_job(spark, "packed", lambda: call_add_columns(spark, path, "packed_src"))
    assert stages and max(stages) == 1, f"stages per job: {stages}"
    assert pylance_rows(path, ["id", "p7"]) == [(i, i + 7 if i % 5 else None) for i in live]
    assert _leftover_files(path) == set()

    # rows in another order: pieces refused, shuffled by fragment
    (spark.read.parquet(src_path).orderBy(F.rand(3)).selectExpr("_rowaddr", "id * 2 AS twice")
     .coalesce(1).write.option("maxRecordsPerFile", 3000).parquet(str(tmp_path / "random.parquet")))
    spark.read.parquet(str(tmp_path / "random.parquet")).createOrReplaceTempView("random_src")
    stages = _stages_per_job(spark, "random", lambda: call_add_columns(spark, path, "random_src"))
    assert max(stages) > 1, f"stages per job: {stages}"
    assert pylance_rows(path, ["id", "twice"]) == [(i, 2 * i if i % 5 else None) for i in live]
    assert _leftover_files(path) == set()

    # a repeated address in an ordered source: the shuffle's error
    dup = spark.read.parquet(src_path).selectExpr("_rowaddr", "id AS d")
    dup.union(dup.limit(1)).coalesce(1).sortWithinPartitions("_rowaddr").createOrReplaceTempView("dup_src")
    with pytest.raises(Exception, match="more than one row for _rowaddr"):
        call_add_columns(spark, path, "dup_src")
    assert _leftover_files(path) == set()


# ---- embeddings added as vectors (fixed-size lists), usable by vector search ----

def test_add_columns_as_vectors_pylance_searches_them(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 300), path, max_rows_per_file=100)
    before = data_files(path)
    rng = np.random.default_rng(11)
    vecs = rng.standard_normal((300, 16), dtype=np.float32)
    addrs = spark.read.format("lance").load(path).select("_rowaddr", "id").toPandas()
    keep = addrs[addrs["id"] % 10 != 3]   # every tenth row gets no value: NULL
    src = spark.createDataFrame([(int(a), [float(x) for x in vecs[int(i)]]) for a, i in zip(keep["_rowaddr"], keep["id"])],
                                "_rowaddr BIGINT, emb ARRAY<FLOAT>")
    t = LanceTable.forPath(spark, path)
    res = t.add_columns(src, vector_columns={"emb": 16})
    assert res["columns_added"] == ["emb"]
    assert data_files(path).items() >= before.items()   # the old files untouched
    ds = lance.dataset(path)
    assert ds.schema.field("emb").type == pa.list_(pa.float32(), 16)   # a vector, not a list
    got = ds.to_table(columns=["id", "emb"]).to_pydict()
    for i, e in zip(got["id"], got["emb"]):
        if i % 10 == 3:
            assert e is None
        else:
            assert np.array_equal(np.array(e, dtype=np.float32), vecs[i])
    # pylance's own vector search over the added column, exact and with an index it builds
    q = vecs[42]
    assert ds.to_table(nearest={"column": "emb", "q": q, "k": 1}, columns=["id"]).column("id").to_pylist() == [42]
    ds.create_index("emb", index_type="IVF_FLAT", num_partitions=2)
    near = lance.dataset(path).to_table(nearest={"column": "emb", "q": q, "k": 1, "nprobes": 2}, columns=["id"])
    assert near.column("id").to_pylist() == [42]
    # Spark reads it as ARRAY<FLOAT> marked with its dimension; a copy made by Spark stays a vector column
    df = spark.read.format("lance").load(path)
    assert df.schema["emb"].metadata.get("lance.vector.dimension") == 16
    copy = str(tmp_path / "copy.lance")
    df.select("id", "emb").write.format("lance").save(copy)
    assert lance.dataset(copy).schema.field("emb").type == pa.list_(pa.float32(), 16)


def test_add_columns_vectors_from_expressions_and_bad_input(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 40), path)
    q = quoted(path)
    spark.sql(f"CALL lance.system.add_columns(table => '{q}', "
              "expressions => map('v2', 'array(CAST(id AS DOUBLE), CAST(id * 2 AS DOUBLE))'), "
              "vector_columns => 'v2:2')").collect()
    ds = lance.dataset(path)
    assert ds.schema.field("v2").type == pa.list_(pa.float64(), 2)
    assert pylance_rows(path, ["id", "v2"]) == sorted((i, [float(i), 2.0 * i]) for i in range(40))
    version = ds.version
    files = data_files(path)
    cases = [
        ("map('w', 'array(1.0F)'), vector_columns => 'x:1'", ["vector_columns", "'x'", "w"]),
        ("map('w', 'array(1.0F)'), vector_columns => 'w:zero'", ["vector_columns", "w:zero"]),
        ("map('w', 'id'), vector_columns => 'w:1'", ["w", "ARRAY<FLOAT> and ARRAY<DOUBLE>"]),
        ("map('w', 'array(1.0F, 2.0F)'), vector_columns => 'w:3'", ["w"]),
    ]
    for tail, words in cases:
        with pytest.raises(Exception) as e:
            spark.sql(f"CALL lance.system.add_columns(table => '{q}', expressions => {tail})").collect()
        for w in words:
            assert w.lower() in str(e.value).lower(), (tail, str(e.value))
    assert lance.dataset(path).version == version   # nothing committed, nothing left behind
    assert data_files(path) == files
