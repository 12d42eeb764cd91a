"""SQL DELETE / UPDATE / MERGE INTO on Lance tables (merge-on-read): pylance
and the pure-Python reader agree after every statement; deletion files of both
flavours; metadata-only deletes; stable row ids; concurrent row-level changes."""
from __future__ import annotations

import threading

import lance
import pytest

from lance_spark import reader


@pytest.fixture(scope="module")
def wh(spark, tmp_path_factory):
    wh = tmp_path_factory.mktemp("dml")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    return wh


def _table(spark, wh, name: str, rows: int, per_file: int, stable: bool = False) -> str:
    path = str(wh / "default" / f"{name}.lance")
    (spark.range(0, rows, numPartitions=max(1, rows // per_file))
     .selectExpr("id", "id % 10 AS k", "concat('v', CAST(id AS STRING)) AS s")
     .write.format("lance").option("maxRowsPerFile", per_file).option("enableStableRowIds", stable).save(path))
    return path


def _rows(spark, table: str):
    return sorted(tuple(r) for r in spark.sql(f"SELECT id, k, s FROM {table}").collect())


def _agree(spark, table: str, path: str):
    got = _rows(spark, table)
    assert got == sorted(tuple(r.values()) for r in lance.dataset(path).to_table(columns=["id", "k", "s"]).to_pylist())
    assert got == sorted(tuple(r.values()) for r in reader.dataset(path).to_table(columns=["id", "k", "s"]).to_pylist())
    return got


def test_delete_update_merge(spark, wh):
    path = _table(spark, wh, "t", 20_000, 10_000)
    t = "lance.default.t"
    spark.sql(f"DELETE FROM {t} WHERE id % 97 = 0")                           # sparse: .arrow
    spark.sql(f"DELETE FROM {t} WHERE id >= 10000 AND id < 16000")            # dense in fragment 1: .bin
    suffixes = {p.suffix for p in (wh / "default" / "t.lance" / "_deletions").iterdir()}
    assert suffixes == {".arrow", ".bin"}
    expect = {(i, i % 10, f"v{i}") for i in range(20_000) if i % 97 and not 10000 <= i < 16000}
    assert set(_agree(spark, t, path)) == expect

    spark.sql(f"UPDATE {t} SET s = concat(s, '!'), k = k + 100 WHERE k = 3")
    expect = {(i, k + 100, s + "!") if k == 3 else (i, k, s) for i, k, s in expect}
    assert set(_agree(spark, t, path)) == expect

    spark.createDataFrame([(5, 0, "merged"), (7, 0, "gone"), (30_000, 1, "new"), (30_001, 2, "new2")],
                          "id long, k long, s string").createOrReplaceTempView("src")
    spark.sql(f"""
        MERGE INTO {t} t USING src ON t.id = src.id
        WHEN MATCHED AND src.s = 'gone' THEN DELETE
        WHEN MATCHED THEN UPDATE SET s = src.s
        WHEN NOT MATCHED THEN INSERT (id, k, s) VALUES (src.id, src.k, src.s)
    """)
    expect = {(i, k, "merged") if i == 5 else (i, k, s) for i, k, s in expect if i != 7}
    expect |= {(30_000, 1, "new"), (30_001, 2, "new2")}
    assert set(_agree(spark, t, path)) == expect
    ops = [v["operation"] for v in reader.dataset(path).versions()]
    assert ops[-5:] == ["Delete", "Delete", "Update", "Update", "Update"][-len(ops[-5:]):] or "Update" in ops, ops


def test_merge_not_matched_by_source_and_cardinality(spark, wh):
    path = _table(spark, wh, "m", 100, 50)
    t = "lance.default.m"
    spark.createDataFrame([(i, 0, "keep") for i in range(0, 50)], "id long, k long, s string") \
        .createOrReplaceTempView("src2")
    spark.sql(f"""MERGE INTO {t} t USING src2 ON t.id = src2.id
                  WHEN MATCHED THEN UPDATE SET s = src2.s
                  WHEN NOT MATCHED BY SOURCE THEN DELETE""")
    assert set(_agree(spark, t, path)) == {(i, i % 10, "keep") for i in range(50)}
    spark.createDataFrame([(1, 0, "a"), (1, 0, "b")], "id long, k long, s string").createOrReplaceTempView("dup")
    with pytest.raises(Exception, match="MERGE_CARDINALITY_VIOLATION|matched multiple"):
        spark.sql(f"MERGE INTO {t} t USING dup ON t.id = dup.id WHEN MATCHED THEN UPDATE SET s = dup.s")
    assert set(_agree(spark, t, path)) == {(i, i % 10, "keep") for i in range(50)}


def test_failed_update_commits_nothing_and_leaves_no_files(spark, wh):
    """The write stage fails in one task (a null struct cannot be stored in a
    2.0 file) while another task may already have written its fragment's
    deletion file: no version is committed and every file the job wrote is
    removed."""
    path = str(wh / "default" / "failing.lance")
    (spark.range(0, 2000, numPartitions=2).selectExpr("id", "IF(id < 0, NULL, named_struct('a', id)) AS st")
     .write.format("lance").option("maxRowsPerFile", 1000).option("fileVersion", "2.0").save(path))
    t = "lance.default.failing"
    before = {d: sorted(p.name for p in (wh / "default" / "failing.lance" / d).glob("*"))
              for d in ("data", "_deletions")}
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    try:
        with pytest.raises(Exception, match="null struct"):
            spark.sql(f"UPDATE {t} SET st = CASE WHEN id = 1999 THEN NULL ELSE st END WHERE id % 2 = 0 OR id = 1999")
    finally:
        spark.conf.unset("spark.sql.adaptive.coalescePartitions.enabled")
    after = {d: sorted(p.name for p in (wh / "default" / "failing.lance" / d).glob("*"))
             for d in ("data", "_deletions")}
    assert after == before
    assert lance.dataset(path).version == 1 and lance.dataset(path).count_rows() == 2000


def test_metadata_only_delete_drops_whole_fragments(spark, wh):
    path = _table(spark, wh, "frags", 4000, 1000)
    t = "lance.default.frags"
    before = lance.dataset(path).version
    spark.sql(f"DELETE FROM {t} WHERE _fragid IN (1, 2)")
    ds = lance.dataset(path)
    assert ds.version == before + 1 and [f.fragment_id for f in ds.get_fragments()] == [0, 3]
    assert not (wh / "default" / "frags.lance" / "_deletions").exists()
    spark.sql(f"DELETE FROM {t} WHERE id < 1000")          # statistics: exactly fragment 0
    assert [f.fragment_id for f in lance.dataset(path).get_fragments()] == [3]
    assert set(_agree(spark, t, path)) == {(i, i % 10, f"v{i}") for i in range(3000, 4000)}


def test_stable_row_ids_survive_deletes(spark, wh):
    path = _table(spark, wh, "stable", 3000, 1000, stable=True)
    before = {r["id"]: r["_rowid"] for r in lance.dataset(path).to_table(columns=["id"], with_row_id=True).to_pylist()}
    spark.sql("DELETE FROM lance.default.stable WHERE id % 3 = 0")
    spark.sql("UPDATE lance.default.stable SET s = 'u' WHERE id = 1")
    after = {r["id"]: r["_rowid"] for r in lance.dataset(path).to_table(columns=["id"], with_row_id=True).to_pylist()}
    assert set(after) == {i for i in range(3000) if i % 3}
    assert all(after[i] == before[i] for i in after if i != 1)      # deletes keep row ids
    assert after[1] not in before.values()                          # an updated row gets a new id
    got = {r["id"]: r["_rowid"] for r in spark.sql("SELECT id, _rowid FROM lance.default.stable").collect()}
    assert got == after


def test_concurrent_deletes_on_one_fragment_and_delete_racing_append(spark, wh):
    path = _table(spark, wh, "race", 2000, 2000)
    t = "lance.default.race"
    errors = []

    def run(sql):
        try:
            spark.sql(sql)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run, args=(f"DELETE FROM {t} WHERE id % 4 = {r}",)) for r in (0, 1)]
    threads.append(threading.Thread(target=run, args=(f"INSERT INTO {t} VALUES (5000, 0, 'x')",)))
    [th.start() for th in threads]
    [th.join(120) for th in threads]
    assert not errors, errors
    assert set(_agree(spark, t, path)) == {(i, i % 10, f"v{i}") for i in range(2000) if i % 4 > 1} | {(5000, 0, "x")}


def _gated(spark, tmp, name: str):
    """A SQL function `name(x)` that returns true, but whose first call signals
    `<name>.started` and waits for `<name>.go`: it holds a statement between its
    scan and its commit, so another statement can commit in between."""
    from pyspark.sql.types import BooleanType
    started, go = str(tmp / f"{name}.started"), str(tmp / f"{name}.go")

    def gate(_x) -> bool:
        import os
        import time
        open(started, "a").close()
        deadline = time.time() + 120
        while not os.path.exists(go) and time.time() < deadline:
            time.sleep(0.05)
        return True

    spark.udf.register(name, gate, BooleanType())
    return started, go


def _race(spark, tmp, name: str, held_sql: str, other_sql: str):
    """Runs `held_sql` (which calls `name`) until its scan is done, commits
    `other_sql` from a second Spark session, then lets `held_sql` commit.
    Returns the error `held_sql` raised, if any."""
    import os
    import time
    started, go = _gated(spark, tmp, name)
    outcome = []

    def run():
        try:
            spark.sql(held_sql)
            outcome.append(None)
        except Exception as e:  # noqa: BLE001
            outcome.append(e)

    th = threading.Thread(target=run)
    th.start()
    deadline = time.time() + 120
    while not os.path.exists(started) and time.time() < deadline:
        time.sleep(0.05)
    assert os.path.exists(started), "the held statement never reached its scan"
    other = spark.newSession()
    other.conf.set("spark.sql.catalog.lance.warehouse", spark.conf.get("spark.sql.catalog.lance.warehouse"))
    other.sql(other_sql)
    open(go, "w").close()
    th.join(180)
    assert outcome, "the held statement did not finish"
    return outcome[0]


def _version(path: str) -> int:
    return lance.dataset(path).version


def test_forced_race_update_and_delete_on_the_same_rows_conflicts(spark, wh, tmp_path):
    path = _table(spark, wh, "race_same", 2000, 2000)
    t = "lance.default.race_same"
    err = _race(spark, tmp_path, "gate_same",
                f"UPDATE {t} SET s = 'u' WHERE id % 4 = 0 AND gate_same(id)",
                f"DELETE FROM {t} WHERE id % 8 = 0")
    assert err is not None and "version 2" in str(err) and "fragment 0" in str(err), err
    assert _version(path) == 2   # the update committed nothing
    assert set(_agree(spark, t, path)) == {(i, i % 10, f"v{i}") for i in range(2000) if i % 8 != 0}
    assert len(list((wh / "default" / "race_same.lance" / "_deletions").iterdir())) == 1  # no stray files


# (held statement, statement committed while it is held, rows left): both land
_COMPATIBLE_RACES = {
    "update_vs_delete_on_disjoint_rows_of_one_fragment": (
        "UPDATE {t} SET s = 'u' WHERE id % 4 = 0 AND {gate}(id)",
        "DELETE FROM {t} WHERE id % 4 = 1",
        {(i, i % 10, "u" if i % 4 == 0 else f"v{i}") for i in range(2000) if i % 4 != 1}),
    "overlapping_deletes_merge": (
        "DELETE FROM {t} WHERE id % 4 = 2 AND {gate}(id)",
        "DELETE FROM {t} WHERE id % 4 >= 2 AND id < 1000",
        {(i, i % 10, f"v{i}") for i in range(2000) if i % 4 < 2 or (i % 4 == 3 and i >= 1000)}),
    "delete_vs_append": (
        "DELETE FROM {t} WHERE id % 2 = 0 AND {gate}(id)",
        "INSERT INTO {t} VALUES (5000, 0, 'x'), (5002, 2, 'y')",
        {(i, i % 10, f"v{i}") for i in range(2000) if i % 2} | {(5000, 0, "x"), (5002, 2, "y")}),
}


@pytest.mark.parametrize("case", sorted(_COMPATIBLE_RACES))
def test_forced_race_both_land(spark, wh, tmp_path, case):
    """Two sessions change one fragment; the held statement commits last,
    rebased onto the other: nothing is lost."""
    held, other, expected = _COMPATIBLE_RACES[case]
    path = _table(spark, wh, f"race_{case}", 2000, 2000)
    t, gate = f"lance.default.race_{case}", f"gate_{case}"
    err = _race(spark, tmp_path, gate, held.format(t=t, gate=gate), other.format(t=t, gate=gate))
    assert err is None
    assert _version(path) == 3
    assert set(_agree(spark, t, path)) == expected


def test_large_merge_inserts_are_written_by_several_tasks(spark, wh):
    """Inserted rows have no fragment; clustering by _fragid once sent them all
    to one task. Now AQE splits that partition (advisory size 64 KiB here), and
    the updates of the one fragment, split too, get their deletions combined."""
    path = str(wh / "default" / "bigmerge.lance")
    spark.range(0, 20_000, numPartitions=1).selectExpr("id", "id * 2 AS v").write.format("lance").save(path)
    spark.range(10_000, 200_000, numPartitions=8).selectExpr("id", "-id AS v").createOrReplaceTempView("bigsrc")
    spark.conf.set("spark.sql.adaptive.advisoryPartitionSizeInBytes", "64k")
    try:
        spark.sql(f"""MERGE INTO lance.`{path}` t USING bigsrc s ON t.id = s.id
                      WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *""")
    finally:
        spark.conf.unset("spark.sql.adaptive.advisoryPartitionSizeInBytes")
    ds = lance.dataset(path)
    t = ds.to_table()
    got = dict(zip(t["id"].to_pylist(), t["v"].to_pylist()))
    assert len(got) == t.num_rows == 200_000                      # every id once
    assert got == {i: (2 * i if i < 10_000 else -i) for i in range(200_000)}
    new_files = {f.path for frag in ds.get_fragments() for f in frag.data_files()} - \
        {f.path for frag in lance.dataset(path, version=1).get_fragments() for f in frag.data_files()}
    assert len(new_files) >= 3, new_files   # several tasks (before: the one task of the null _fragid, 1 file)
    assert type(ds.read_transaction(2).operation).__name__ == "Update"
