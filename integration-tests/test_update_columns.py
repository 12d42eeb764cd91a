"""Data evolution (issue 39, backfill / replace columns): `CALL
lance.system.update_columns` / `LanceTable.update_columns(df)` replace existing
columns' values without rewriting the other columns: one new data file per
fragment holding only the replaced columns (the source's value where it has the
row, the old value elsewhere), committed as pylance's `Update` with
`fields_modified` (the columns tombstoned, -2, in the older files) or, when
each new file takes the place of a file holding exactly those columns, a
`DataReplacement`. pylance 14 (the oracle) and the pure-Python reader read
every result with the same rows as Spark; the other columns' files keep their
names, sizes and mtimes; concurrent appends and deletes are rebased onto, a
compaction is a clear conflict."""
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
from lance_spark import reader


@pytest.fixture(scope="module", autouse=True)
def wh(spark, tmp_path_factory):
    wh = tmp_path_factory.mktemp("updcol-warehouse")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    return wh


def quoted(path: str) -> str:
    return "`" + path + "`"


def base_table(n0: int, n: int) -> pa.Table:
    ids = np.arange(n0, n0 + n, dtype=np.int64)
    return pa.table({"id": ids, "v": pa.array([f"v{i}-" + "x" * 200 for i in ids]),
                     "x": pa.array(ids.astype(np.float64) / 2)})


def data_files(path: str) -> dict[str, tuple[int, int]]:
    """Every data file: name -> (size, mtime in ns)."""
    d = os.path.join(path, "data")
    return {n: (os.stat(os.path.join(d, n)).st_size, os.stat(os.path.join(d, n)).st_mtime_ns) for n in os.listdir(d)}


def rows_of(t: pa.Table, cols: list[str]) -> list[tuple]:
    return sorted(zip(*[t.column(c).to_pylist() for c in cols]))


def check_everywhere(spark, path: str, cols: list[str], expected: list[tuple]) -> None:
    """pylance, Spark and the pure-Python reader give `expected`."""
    assert rows_of(lance.dataset(path).to_table(columns=cols), cols) == expected
    got = sorted(tuple(r) for r in spark.read.format("lance").load(path).select(*cols).collect())
    assert [tuple(x.asDict(recursive=True) if hasattr(x, "asDict") else x for x in r) for r in got] == expected
    assert rows_of(reader.dataset(path).to_table(columns=cols), cols) == expected


def call_update(spark, path: str, view: str) -> dict:
    return spark.sql(f"CALL lance.system.update_columns(table => '{quoted(path)}', source => '{view}')").first().asDict()


def op_name(path: str) -> str:
    ds = lance.dataset(path)
    return type(ds.read_transaction(ds.version).operation).__name__


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_pylance_written_subset_then_all(spark, tmp_path, version):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 300), path, max_rows_per_file=100, data_storage_version=version)
    lance.dataset(path).delete("id % 10 = 3")
    v0 = lance.dataset(path).version
    files0 = data_files(path)
    live = [i for i in range(300) if i % 10 != 3]
    # a subset: every 3rd row of fragments 0 and 1 (fragment 2 gets no source row)
    (spark.read.format("lance").load(path).where("id < 200 AND id % 3 = 0")
     .select("_rowaddr", (F.col("id") * 10.0).alias("x")).createOrReplaceTempView("updcol_src"))
    res = call_update(spark, path, "updcol_src")
    n_subset = len([i for i in live if i < 200 and i % 3 == 0])
    assert res["read_version"] == v0 and res["new_version"] == v0 + 1
    assert res["columns_updated"] == ["x"] and res["files_added"] == 3 and res["rows_updated"] == n_subset
    exp1 = sorted((i, f"v{i}-" + "x" * 200, i * 10.0 if i < 200 and i % 3 == 0 else i / 2) for i in live)
    check_everywhere(spark, path, ["id", "v", "x"], exp1)
    assert lance.dataset(path).count_rows() == len(live)  # deleted rows stay deleted
    assert op_name(path) == "Update"
    # x is tombstoned (-2) in the old files, which are untouched; one new file per fragment holds only x
    for frag in lance.dataset(path).get_fragments():
        fs = frag.metadata.files
        assert len(fs) == 2 and -2 in fs[0].fields and fs[1].fields == [2]
    files1 = data_files(path)
    assert {k: files1[k] for k in files0} == files0
    new = {k: v for k, v in files1.items() if k not in files0}
    assert len(new) == 3 and all(k.startswith("updcol-") for k in new)
    # bytes written ~ the replaced column's own size (pylance writing x alone in the same
    # fragments), not the table's
    written = sum(s for s, _ in new.values())
    ref = str(tmp_path / "x-only.lance")
    lance.write_dataset(base_table(0, 300).select(["x"]), ref, max_rows_per_file=100, data_storage_version=version)
    alone = sum(s for s, _ in data_files(ref).values())
    # (plus a fixed ~4.3 KiB a file: the page statistics, an Arrow IPC stream in a global buffer)
    assert written <= 1.1 * alone + 3 * 4600, (written, alone)
    assert written < 0.3 * sum(s for s, _ in files0.values()), (written, files0)
    # time travel: the version before has the old values
    assert rows_of(lance.dataset(path, version=v0).to_table(columns=["id", "x"]), ["id", "x"]) == \
        sorted((i, i / 2) for i in live)
    old = spark.read.format("lance").option("version", v0).load(path).select("id", "x")
    assert sorted(tuple(r) for r in old.collect()) == sorted((i, i / 2) for i in live)

    # every row again: x now lives in a file of its own, so the new file takes its place (DataReplacement)
    src = spark.read.format("lance").load(path).select("_rowaddr", (F.col("x") + 1).alias("x"))
    res = LanceTable.forPath(spark, path).update_columns(src)
    assert res["new_version"] == v0 + 2 and res["rows_updated"] == len(live)
    check_everywhere(spark, path, ["id", "v", "x"], [(i, v, x + 1) for i, v, x in exp1])
    assert op_name(path) == "DataReplacement"
    for frag in lance.dataset(path).get_fragments():
        assert len(frag.metadata.files) == 2 and frag.metadata.files[1].fields == [2]
    files2 = data_files(path)
    assert {k: files2[k] for k in files0} == files0
    lance.dataset(path).validate()
    # pylance goes on from Spark's result: its own update of another column
    ds = lance.dataset(path)
    ds.update({"v": "'w'"}, where="id < 5")
    check_everywhere(spark, path, ["id", "x"], [(i, x + 1) for i, _, x in exp1])


def test_spark_written_struct_and_string_by_rowid(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    df = spark.range(0, 120).select(F.col("id"), F.concat(F.lit("v"), F.col("id").cast("string")).alias("v"),
                                    F.struct((F.col("id") * 2).cast("int").alias("a"),
                                             F.lit("b").alias("b")).alias("s"))
    df.coalesce(1).write.format("lance").option("maxRowsPerFile", 50).save(path)
    lance.dataset(path).delete("id % 7 = 0")
    v0 = lance.dataset(path).version
    files0 = data_files(path)
    t = spark.read.format("lance").load(path)
    src = t.where("id >= 10").select("_rowid", F.upper("v").alias("v"),
                                     F.struct((F.col("s.a") + 1).alias("a"), F.lit("B").alias("b")).alias("s"))
    res = LanceTable.forPath(spark, path).update_columns(src)
    live = [i for i in range(120) if i % 7]
    assert res["new_version"] == v0 + 1 and res["columns_updated"] == ["v", "s"] and res["files_added"] == 3
    exp = sorted((i, (f"V{i}" if i >= 10 else f"v{i}"),
                  {"a": i * 2 + 1, "b": "B"} if i >= 10 else {"a": i * 2, "b": "b"}) for i in live)
    assert rows_of(lance.dataset(path).to_table(columns=["id", "v", "s"]), ["id", "v", "s"]) == exp
    got = sorted((r["id"], r["v"], r["s"].asDict()) for r in spark.read.format("lance").load(path).collect())
    assert got == exp
    assert rows_of(reader.dataset(path).to_table(columns=["id", "v", "s"]), ["id", "v", "s"]) == exp
    assert {k: v for k, v in data_files(path).items() if k in files0} == files0
    old = lance.dataset(path, version=v0).to_table(columns=["id", "v"])
    assert rows_of(old, ["id", "v"]) == sorted((i, f"v{i}") for i in live)
    lance.dataset(path).validate()


def test_bad_sources_are_clear(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 20), path)
    df = spark.read.format("lance").load(path)
    for src, words in [
        (df.select("_rowaddr", F.lit(1.0).alias("nope")), ["'nope' is not a column of the table", "add_columns"]),
        (df.select("_rowaddr", F.col("id").cast("int").alias("id")), ["'id' is int", "bigint"]),
        (df.select((F.col("x") * 2).alias("x")), ["no _rowaddr or _rowid"]),
        (df.select("_rowaddr", F.lit(1.0).alias("x")).union(df.select("_rowaddr", F.lit(2.0).alias("x"))),
         ["more than one row for _rowaddr"]),
        (df.select((F.col("_rowaddr") + 100).alias("_rowaddr"), F.lit(1.0).alias("x")), ["offset", "has 20 rows"]),
    ]:
        with pytest.raises(Exception) as e:
            LanceTable.forPath(spark, path).update_columns(src)
        for w in words:
            assert w in str(e.value), str(e.value)
    assert lance.dataset(path).version == 1
    assert not [n for n in os.listdir(os.path.join(path, "data")) if n.startswith("updcol-")]
    # a column an index covers: refused (the index would keep the old values)
    lance.dataset(path).create_scalar_index("x", "BTREE")
    with pytest.raises(Exception) as e:
        LanceTable.forPath(spark, path).update_columns(df.select("_rowaddr", F.lit(1.0).alias("x")))
    assert "covers it" in str(e.value) and "drop the index" in str(e.value), str(e.value)
    assert lance.dataset(path).version == 2
    assert not [n for n in os.listdir(os.path.join(path, "data")) if n.startswith("updcol-")]


def run_racing(spark, path: str, tmp, other) -> tuple:
    """update_columns (x = id * 3 for every row) paused after writing its files
    and before its commit (a test-only session conf), `other` committed meanwhile."""
    out: dict = {}
    prefix = str(tmp / "pause")
    src = spark.read.format("lance").load(path).select("_rowaddr", (F.col("id") * 3.0).alias("x"))

    def run():
        try:
            out["res"] = LanceTable.forPath(spark, path).update_columns(src)
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


def test_append_racing_update_columns_is_rebased(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 200), path, max_rows_per_file=100)
    err, res = run_racing(spark, path, tmp_path, lambda: lance.write_dataset(base_table(200, 10), path, mode="append"))
    assert err is None, str(err)
    # the old rows got the new values; the appended rows keep the values they were written with
    expected = sorted([(i, i * 3.0) for i in range(200)] + [(i, i / 2) for i in range(200, 210)])
    check_everywhere(spark, path, ["id", "x"], expected)
    assert op_name(path) == "Update"
    lance.dataset(path).validate()


def test_delete_racing_update_columns_is_rebased(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 200), path, max_rows_per_file=100)
    err, res = run_racing(spark, path, tmp_path, lambda: lance.dataset(path).delete("id < 20 OR id >= 150"))
    assert err is None, str(err)
    check_everywhere(spark, path, ["id", "x"], sorted((i, i * 3.0) for i in range(20, 150)))


def test_compaction_racing_update_columns_is_a_clear_conflict(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 200), path, max_rows_per_file=50)
    lance.dataset(path).delete("id % 9 = 0")
    err, res = run_racing(spark, path, tmp_path, lambda: lance.dataset(path).optimize.compact_files())
    assert res is None and err is not None
    assert "compacted" in str(err) and "update_columns again" in str(err), str(err)
    # the compaction's version stands, with the old values; nothing of the update is left
    check_everywhere(spark, path, ["id", "x"], sorted((i, i / 2) for i in range(200) if i % 9))
    assert not [n for n in os.listdir(os.path.join(path, "data")) if n.startswith("updcol-")]


def test_row_update_racing_update_columns_is_a_clear_conflict(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(base_table(0, 100), path, max_rows_per_file=50)
    err, res = run_racing(spark, path, tmp_path, lambda: lance.dataset(path).update({"x": "-1.0"}, where="id < 10"))
    assert res is None and err is not None
    assert "update_columns again" in str(err), str(err)
    # pylance's update stands; no value of the failed update_columns is anywhere
    check_everywhere(spark, path, ["id", "x"], sorted((i, -1.0 if i < 10 else i / 2) for i in range(100)))
    assert not [n for n in os.listdir(os.path.join(path, "data")) if n.startswith("updcol-")]
