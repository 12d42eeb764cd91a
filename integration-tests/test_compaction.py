"""Compaction (issue 14): `CALL lance.system.compact` and `LanceTable.compact`
rewrite small fragments and fragments with deletions into new ones with one
Rewrite commit. Checked against pylance 14 (the oracle: it reads what we
commit, `validate()` passes, its indexed queries equal its unindexed ones),
the pure-Python reader and Spark itself; stable row ids survive, old versions
stay readable, concurrent writers lose nothing."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import lance
import lance.optimize
import numpy as np
import pyarrow as pa
import pytest

from lance_spark import LanceTable, reader


@pytest.fixture(scope="module", autouse=True)
def wh(spark, tmp_path_factory):
    """A warehouse of this module's own, set before the catalog first loads."""
    wh = tmp_path_factory.mktemp("compact-warehouse")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    return wh


def quoted(path: str) -> str:
    return "`" + path + "`"


def compact(spark, path: str, **kw) -> dict:
    args = ", ".join([f"table => '{quoted(path)}'"] + [f"{k} => {str(v).lower() if isinstance(v, bool) else v}"
                                                      for k, v in kw.items()])
    return spark.sql(f"CALL lance.system.compact({args})").first().asDict()


def table(n0: int, n: int) -> pa.Table:
    ids = np.arange(n0, n0 + n, dtype=np.int64)
    return pa.table({"id": ids, "v": pa.array([f"v{i}" for i in ids]), "x": (ids * 0.5).astype(np.float64)})


def spark_rows(spark, path: str, version: int | None = None) -> list[tuple]:
    df = spark.read.format("lance")
    if version is not None:
        df = df.option("version", version)
    return sorted(tuple(r) for r in df.load(path).select("id", "v", "x").collect())


def arrow_rows(t: pa.Table) -> list[tuple]:
    return sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), t.column("x").to_pylist()))


def build_small_fragments(spark, path: str, version: str, stable: bool) -> None:
    """50 small appends (47 by pylance, 3 by Spark, in 2 fragments each) and deletes by both."""
    lance.write_dataset(table(0, 20), path, data_storage_version=version, enable_stable_row_ids=stable)
    for k in range(1, 50):
        if k % 16 == 0:
            spark.createDataFrame(table(k * 20, 20).to_pandas()).write.format("lance").mode("append").save(path)
        else:
            lance.write_dataset(table(k * 20, 20), path, mode="append")
    lance.dataset(path).delete("id % 7 = 3")                                     # many fragments, small shares
    spark.sql(f"DELETE FROM lance.{quoted(path)} WHERE id >= 300 AND id < 305")  # a quarter of a fragment
    lance.dataset(path).delete("id >= 600 AND id < 620")                          # fragment 30 entirely


@pytest.mark.parametrize("version,stable", [("2.0", True), ("2.2", True), ("2.2", False)])
def test_compaction_of_small_appends_and_deletes(spark, tmp_path, version, stable):
    path = str(tmp_path / "t.lance")
    build_small_fragments(spark, path, version, stable)
    before = lance.dataset(path)
    old_version = before.version
    expected = arrow_rows(before.to_table())
    row_ids = dict(zip(*before.to_table(columns=["id"], with_row_id=True).to_pydict().values())) if stable else None
    assert len(before.get_fragments()) >= 49

    m = compact(spark, path, target_rows_per_fragment=300)
    after = lance.dataset(path)
    assert m["read_version"] == old_version and m["new_version"] == after.version == old_version + 1
    assert m["fragments_removed"] == len(before.get_fragments()) and m["fragments_added"] == len(after.get_fragments())
    deleted = sum(f.metadata.deletion_file.num_deleted_rows for f in before.get_fragments() if f.metadata.deletion_file)
    assert m["rows_rewritten"] == len(expected) and m["deletions_materialized"] == deleted > 100
    # bins of at least 300 live rows (the rest with the last), files of at most 300 rows
    sizes = [f.metadata.physical_rows for f in after.get_fragments()]
    assert 3 <= len(sizes) <= 5 and max(sizes) == 300 and sum(sizes) == len(expected), sizes
    assert all(f.metadata.deletion_file is None for f in after.get_fragments())
    assert {f.metadata.files[0].file_major_version * 10 + f.metadata.files[0].file_minor_version
            for f in after.get_fragments()} == {int(version.replace(".", ""))}
    after.validate()
    assert after.data_storage_version == version

    # the same rows through pylance, Spark and the pure-Python reader; in insertion order
    assert arrow_rows(after.to_table()) == expected
    assert after.to_table(columns=["id"]).column("id").to_pylist() == sorted(r[0] for r in expected)
    assert spark_rows(spark, path) == expected
    assert arrow_rows(reader.dataset(path).to_table()) == expected
    if stable:  # every row keeps its stable row id, as pylance and Spark read them
        assert dict(zip(*after.to_table(columns=["id"], with_row_id=True).to_pydict().values())) == row_ids
        spark_ids = spark.read.format("lance").load(path).select("id", "_rowid").collect()
        assert {r.id: r._rowid for r in spark_ids} == row_ids
        assert after.to_table(filter="id = 401", with_row_id=True)["_rowid"][0].as_py() == row_ids[401]

    # the older version still reads its rows (until a vacuum)
    assert arrow_rows(lance.dataset(path, version=old_version).to_table()) == expected
    assert spark_rows(spark, path, version=old_version) == expected
    assert arrow_rows(reader.dataset(path, version=old_version - 3).to_table()) == \
        arrow_rows(lance.dataset(path, version=old_version - 3).to_table())

    # the transaction is the format's Rewrite, as pylance reports it
    txn = after.read_transaction(after.version)
    assert type(txn.operation).__name__ == "Rewrite"
    assert sum(len(g.old_fragments) for g in txn.operation.groups) == len(before.get_fragments())

    # nothing left to do: no new version
    again = compact(spark, path, target_rows_per_fragment=300)
    assert again["new_version"] is None and again["groups"] == 0 and lance.dataset(path).version == after.version


def test_planning_follows_the_reference(spark, tmp_path):
    """The same groups as pylance's own compaction plans on the same dataset."""
    path = str(tmp_path / "p.lance")
    lance.write_dataset(table(0, 1000), path, max_rows_per_file=100)       # 10 fragments of 100
    lance.write_dataset(table(1000, 2000), path, mode="append")            # one big fragment
    lance.write_dataset(table(3000, 50), path, mode="append")              # one small, alone
    lance.write_dataset(table(3050, 600), path, mode="append")             # big again
    ds = lance.dataset(path)
    ds.delete("id >= 1000 AND id < 1300")                                  # 15% of the big one
    ds.delete("id >= 3050 AND id < 3080")                                  # 5% of the last one
    ds = lance.dataset(path)
    plan = lance.optimize.Compaction.plan(ds, {"target_rows_per_fragment": 500})
    theirs = [[f.id for f in t.fragments] for t in plan.tasks]
    m = compact(spark, path, target_rows_per_fragment=500)
    txn = lance.dataset(path).read_transaction(m["new_version"])
    ours = [[f.id for f in g.old_fragments] for g in txn.operation.groups]
    assert ours == theirs == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]
    lance.dataset(path).validate()
    assert arrow_rows(lance.dataset(path).to_table()) == arrow_rows(ds.to_table())


def test_options_and_python_handle(spark, tmp_path):
    path = str(tmp_path / "h.lance")
    lance.write_dataset(table(0, 400), path, max_rows_per_file=100)
    lance.dataset(path).delete("id < 5")                                  # 5% of fragment 0
    t = LanceTable.forPath(spark, path)
    # the deletions stay below the threshold and the fragments are big enough
    r = t.compact(target_rows_per_fragment=100)
    assert r.new_version is None and len(lance.dataset(path).get_fragments()) == 4
    # a threshold of 0.01 rewrites fragment 0 alone
    r = t.compact(target_rows_per_fragment=100, materialize_deletions_threshold=0.01)
    assert (r.fragments_removed, r.fragments_added, r.rows_rewritten, r.deletions_materialized) == (1, 1, 95, 5)
    assert r.files_removed == 2 and r.files_added == 1
    # materialize_deletions => false: nothing to do for a lone fragment with deletions
    lance.dataset(path).delete("id = 150")
    assert t.compact(target_rows_per_fragment=100, materialize_deletions=False).new_version is None
    r = t.compact(target_rows_per_fragment=1000, max_rows_per_group=7)
    assert r.fragments_removed == 4 and r.fragments_added == 1
    assert sorted(lance.dataset(path).to_table().column("id").to_pylist()) == [i for i in range(5, 400) if i != 150]
    with pytest.raises(Exception, match="target_rows_per_fragment must be positive"):
        t.compact(target_rows_per_fragment=0)
    history = [r.operation for r in t.history().collect()]
    assert history[-1] == "Rewrite"


def test_fragments_of_several_data_files_and_dropped_columns(spark, tmp_path):
    """Every column of a fragment is read from whichever data file holds it (pylance's add_columns
    writes a second file per fragment); a column dropped from the schema is not carried over."""
    path = str(tmp_path / "cols.lance")
    lance.write_dataset(table(0, 300), path, max_rows_per_file=50)
    ds = lance.dataset(path)
    ds.add_columns({"y": "id * 2"})
    ds = lance.dataset(path)
    ds.drop_columns(["x"])
    ds = lance.dataset(path)
    ds.delete("id % 10 = 0")
    ds = lance.dataset(path)
    assert len(ds.get_fragments()[0].metadata.files) == 2
    expected = ds.to_table().to_pylist()
    m = compact(spark, path, target_rows_per_fragment=1000)
    assert m["fragments_removed"] == 6 and m["fragments_added"] == 1
    after = lance.dataset(path)
    after.validate()
    assert after.to_table().to_pylist() == expected
    assert [len(f.metadata.files) for f in after.get_fragments()] == [1]
    assert len(after.get_fragments()[0].metadata.files[0].fields) == 3          # id, v, y: not the dropped x
    assert {r.y for r in spark.read.format("lance").load(path).collect()} == {2 * r["id"] for r in expected}


def test_warehouse_table(spark, wh):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lance.cdb")
    spark.sql("CREATE TABLE lance.cdb.t (id BIGINT, s STRING) USING lance")
    for k in range(6):
        spark.sql(f"INSERT INTO lance.cdb.t VALUES ({2 * k}, 'a{k}'), ({2 * k + 1}, 'b{k}')")
    spark.sql("DELETE FROM lance.cdb.t WHERE id = 3")
    n = len(lance.dataset(str(wh / "cdb" / "t.lance")).get_fragments())
    r = spark.sql("CALL lance.system.compact(table => 'cdb.t')").first()
    assert (r.fragments_removed, r.fragments_added, r.rows_rewritten, r.groups_skipped) == (n, 1, 11, 0)
    assert sorted(x.id for x in spark.table("lance.cdb.t").collect()) == [i for i in range(12) if i != 3]
    assert LanceTable.forName(spark, "cdb.t").compact().new_version is None


# --- indices -----------------------------------------------------------------

DIM = 8


def vec_table(n0: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(n0, n0 + n, dtype=np.int64)
    vecs = rng.random((n, DIM), dtype=np.float32)
    return pa.table({"id": ids, "cat": pa.array([f"c{i % 5}" for i in ids]),
                     "vec": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), DIM)})


def assert_indexed_equals_unindexed(path: str, step: str) -> None:
    ds = lance.dataset(path)
    assert {i["name"] for i in ds.list_indices()} >= {"id_idx", "cat_idx", "vec_idx"}, step
    for flt in ["id < 300", "id >= 250 AND id < 1900", "id = 777", "cat = 'c2'", "cat = 'c3' AND id > 1000",
                "id > 5000"]:
        with_index = sorted(ds.to_table(columns=["id"], filter=flt).column("id").to_pylist())
        without = sorted(ds.to_table(columns=["id"], filter=flt, use_scalar_index=False).column("id").to_pylist())
        assert with_index == without, f"{step}: {flt}"
    q = np.full(DIM, 0.5, dtype=np.float32)
    n = ds.count_rows()
    ann = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": n, "nprobes": 4})
    flat = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": n, "use_index": False})
    assert sorted(ann.column("id").to_pylist()) == sorted(flat.column("id").to_pylist()), step
    assert ann.num_rows == n, step


@pytest.mark.parametrize("stable", [False, True])
def test_pylance_indices_stay_right(spark, tmp_path, stable):
    path = str(tmp_path / "idx.lance")
    lance.write_dataset(vec_table(0, 2000, 1), path, max_rows_per_file=250, enable_stable_row_ids=stable)
    ds = lance.dataset(path)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("cat", "BITMAP")
    ds.create_index("vec", "IVF_PQ", num_partitions=4, num_sub_vectors=2)
    assert_indexed_equals_unindexed(path, "built")
    t = f"lance.{quoted(path)}"
    spark.createDataFrame(vec_table(2000, 300, 2).to_pandas()) \
        .selectExpr("id", "cat", "vec") \
        .write.format("lance").option("vectorColumns", f"vec:{DIM}").mode("append").save(path)
    assert_indexed_equals_unindexed(path, "spark append")
    spark.sql(f"DELETE FROM {t} WHERE id % 9 = 4 OR (id >= 500 AND id < 600)")
    assert_indexed_equals_unindexed(path, "spark delete")
    spark.sql(f"UPDATE {t} SET cat = 'c9' WHERE id >= 1000 AND id < 1100")
    assert_indexed_equals_unindexed(path, "spark update")
    spark.createDataFrame([(1500, "c7"), (5001, "c1")], "id BIGINT, cat STRING").createOrReplaceTempView("src")
    spark.sql(f"""MERGE INTO {t} d USING src s ON d.id = s.id
                  WHEN MATCHED THEN UPDATE SET cat = s.cat
                  WHEN NOT MATCHED THEN INSERT (id, cat, vec) VALUES (s.id, s.cat, array_repeat(CAST(0.5 AS FLOAT), {DIM}))""")
    assert_indexed_equals_unindexed(path, "spark merge")
    before = sorted(lance.dataset(path).to_table(columns=["id", "cat"]).to_pylist(), key=lambda r: r["id"])
    m = compact(spark, path, target_rows_per_fragment=1000)
    assert m["fragments_removed"] > 0
    ds = lance.dataset(path)
    ds.validate()
    assert sorted(ds.to_table(columns=["id", "cat"]).to_pylist(), key=lambda r: r["id"]) == before
    assert_indexed_equals_unindexed(path, "spark compact")
    # pylance 14's indices address rows by fragment and offset (with stable row ids too): the
    # rewritten fragments leave every index (their entries masked out), the new ones are scanned unindexed
    new = {f.fragment_id for f in ds.get_fragments()} - {f.fragment_id for f in lance.dataset(path, version=ds.version - 1).get_fragments()}
    assert new and all(not (set(i["fragment_ids"]) & new) for i in ds.list_indices())


# --- concurrency ---------------------------------------------------------------

RACE_SECONDS = 20

OTHER_PROCESS_APPENDER = """
import os, sys, time
import lance, numpy as np, pyarrow as pa
path, stop, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
k, end = 40_000, None   # races for `seconds` from its first commit
while not os.path.exists(stop) and (end is None or time.time() < end):
    ids = np.arange(k, k + 5, dtype=np.int64)
    t = pa.table({"id": ids, "v": pa.array([f"v{i}" for i in ids]), "x": (ids * 0.5).astype(np.float64)})
    try:
        lance.write_dataset(t, path, mode="append")
        print(k, flush=True)
        end = end or time.time() + seconds
    except Exception as e:   # a failed append committed nothing
        print("append failed:", e, file=sys.stderr, flush=True)
    k += 5
    time.sleep(0.05)
"""


def test_compaction_racing_appends_and_deletes(spark, tmp_path):
    """Compactions race appends by pylance (a thread here and another OS
    process) and by Spark, and deletes by pylance: every committed change survives."""
    path = str(tmp_path / "race.lance")
    lance.write_dataset(table(0, 10), path, enable_stable_row_ids=True)
    for k in range(1, 30):
        lance.write_dataset(table(k * 10, 10), path, mode="append")
    appended: list[int] = []
    deleted: list[int] = []
    errors: list[str] = []
    stop = threading.Event()
    # the writers race the compactions for RACE_SECONDS at most: a compaction that keeps losing
    # the race for the next version to writers committing every 50 ms (each of its attempts
    # slower as the table grows) commits once they stop, instead of the race going on for as
    # long as its retries do (minutes on a busy machine); `end` is set when the race starts (below)

    def racing() -> bool:
        return not stop.is_set() and time.time() < end

    def appender():
        k = 1000
        while racing():
            try:
                lance.write_dataset(table(k, 5), path, mode="append")
                appended.extend(range(k, k + 5))
            except Exception as e:  # noqa: BLE001 - a failed append committed nothing
                errors.append(f"append: {e}")
            k += 5
            time.sleep(0.05)

    def deleter():
        for victim in range(1, 300, 13):
            if stop.is_set():
                return
            try:
                lance.dataset(path).delete(f"id = {victim}")
                deleted.append(victim)
            except Exception as e:  # noqa: BLE001 - a failed delete committed nothing
                errors.append(f"delete: {e}")
            time.sleep(0.1)

    def spark_appender():   # Spark's own appends, concurrent with the compaction's Spark job
        k = 20_000
        while racing():
            try:
                spark.createDataFrame(table(k, 5).to_pandas()).write.format("lance").mode("append").save(path)
                appended.extend(range(k, k + 5))
            except Exception as e:  # noqa: BLE001 - a failed append committed nothing
                errors.append(f"spark append: {e}")
            k += 5
            time.sleep(0.1)

    # another OS process appending with pylance: it prints each block it committed
    stop_file = tmp_path / "stop"
    other = subprocess.Popen([sys.executable, "-c", OTHER_PROCESS_APPENDER, path, str(stop_file), str(RACE_SECONDS)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the compactions start once it has committed (its start, importing lance, is slow on a
    # busy machine: the race must include it)
    first = other.stdout.readline()
    end = time.time() + RACE_SECONDS
    threads = [threading.Thread(target=appender), threading.Thread(target=deleter),
               threading.Thread(target=spark_appender)]
    for th in threads:
        th.start()
    outcomes, skipped = [], []
    try:
        for _ in range(4):
            try:
                r = compact(spark, path, target_rows_per_fragment=100)
                outcomes.append(r["new_version"])
                skipped.append(r["groups_skipped"])
            except Exception as e:  # noqa: BLE001 - a conflict must say so
                msg = str(e)
                assert "compaction" in msg or "conflict" in msg.lower() or "committed concurrently" in msg, msg
                outcomes.append("conflict")
            time.sleep(0.2)
    finally:
        stop.set()
        stop_file.write_text("")
        for th in threads:
            th.join()
        out, err = other.communicate(timeout=120)
    assert other.returncode == 0, err[-2000:]
    by_other = [int(x) for x in (first + out).split()]
    assert by_other, f"the other process committed nothing: {err[-2000:]}"
    appended.extend(i for k in by_other for i in range(k, k + 5))
    assert any(isinstance(o, int) for o in outcomes), outcomes
    print("compactions:", outcomes, "groups skipped:", skipped, "appends:", len(appended) // 5,
          "of them by the other process:", len(by_other), "deletes:", len(deleted), "errors:", errors)
    final = lance.dataset(path)
    final.validate()
    expected = sorted(set(range(300)) - set(deleted) | set(appended))
    assert sorted(final.to_table(columns=["id"]).column("id").to_pylist()) == expected
    assert sorted(r.id for r in spark.read.format("lance").load(path).select("id").collect()) == expected
    # a final compaction with nobody writing, every deletion materialized: no deletion file is left
    compact(spark, path, target_rows_per_fragment=100, materialize_deletions_threshold=0.0)
    assert all(f.metadata.deletion_file is None for f in lance.dataset(path).get_fragments())
    assert sorted(lance.dataset(path).to_table(columns=["id"]).column("id").to_pylist()) == expected
