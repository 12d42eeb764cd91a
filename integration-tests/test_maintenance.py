"""Table maintenance (issue 14): tags, restore, history and vacuum through SQL
procedures, metadata tables, the Python handle and the CLI, checked against
pylance (tags and restore both ways; vacuum against pylance's own
explain_cleanup_old_versions) and from first principles."""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import lance
import pyarrow as pa
import pytest

from lance_spark import LanceTable

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wh(spark, tmp_path_factory):
    wh = tmp_path_factory.mktemp("maint-warehouse")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lance.db")
    return wh


def ids(spark, sql: str) -> list[int]:
    return sorted(r[0] for r in spark.sql(sql).collect())


def lance_ids(ds) -> list[int]:
    return sorted(ds.to_table(columns=["id"]).column("id").to_pylist())


def files_under(path: str) -> set[str]:
    out = set()
    for d, _, names in os.walk(path):
        for n in names:
            out.add(os.path.relpath(os.path.join(d, n), path))
    return out


def pylance_candidates(path: str, **kw) -> set[str]:
    e = lance.dataset(path).explain_cleanup_old_versions(include_files=True, **kw)
    root = os.path.abspath(path).lstrip("/")
    return {f.path[len(root) + 1:] for f in e.candidate_files}


def make_table(spark, wh, name: str) -> str:
    spark.sql(f"DROP TABLE IF EXISTS lance.db.{name}")
    spark.sql(f"CREATE TABLE lance.db.{name} (id BIGINT, v STRING) USING lance")
    spark.sql(f"INSERT INTO lance.db.{name} VALUES (1, 'a'), (2, 'b')")          # v2
    spark.sql(f"INSERT INTO lance.db.{name} VALUES (3, 'c')")                    # v3
    spark.sql(f"DELETE FROM lance.db.{name} WHERE id = 1")                       # v4
    return str(wh / "db" / f"{name}.lance")


def test_tags_interop_both_ways(spark, wh):
    path = make_table(spark, wh, "tagged")
    row = spark.sql("CALL lance.system.create_tag(table => 'db.tagged', tag => 'golden', version => 2)").first()
    assert (row.tag, row.version) == ("golden", 2)
    # pylance sees our tag and reads the version it names
    ds = lance.dataset(path)
    assert {k: v["version"] for k, v in ds.tags.list().items()} == {"golden": 2}
    assert lance_ids(lance.dataset(path, version="golden")) == [1, 2]
    assert ids(spark, "SELECT id FROM lance.db.tagged VERSION AS OF 'golden'") == [1, 2]
    assert spark.read.format("lance").option("tag", "golden").load(path).count() == 2
    # a tag pylance creates is ours to read, list, move and delete
    ds.tags.create("py", 3)
    tags = {r.tag: r.version for r in spark.sql("SELECT * FROM lance.db.tagged.tags").collect()}
    assert tags == {"golden": 2, "py": 3}
    assert ids(spark, "SELECT id FROM lance.db.tagged VERSION AS OF 'py'") == [1, 2, 3]
    moved = spark.sql("CALL lance.system.move_tag(table => 'db.tagged', tag => 'py', version => 4)").first()
    assert (moved.version, moved.previous_version) == (4, 3)
    assert lance.dataset(path).tags.get_version("py") == 4
    assert lance_ids(lance.dataset(path, version="py")) == [2, 3]
    spark.sql("CALL lance.system.delete_tag(table => 'db.tagged', tag => 'golden')")
    assert set(lance.dataset(path).tags.list()) == {"py"}
    lance.dataset(path).tags.delete("py")
    assert spark.sql("SELECT * FROM lance.db.tagged.tags").count() == 0
    # errors name the table, tag and version
    with pytest.raises(Exception, match="version 99"):
        spark.sql("CALL lance.system.create_tag(table => 'db.tagged', tag => 'x', version => 99)").collect()
    with pytest.raises(Exception, match="tag 'nope' does not exist"):
        spark.sql("SELECT * FROM lance.db.tagged VERSION AS OF 'nope'").collect()
    # the default version is the latest; a second create of the same name fails
    spark.sql("CALL lance.system.create_tag(table => 'db.tagged', tag => 'now')")
    assert lance.dataset(path).tags.get_version("now") == lance.dataset(path).version
    with pytest.raises(Exception, match="already exists"):
        spark.sql("CALL lance.system.create_tag(table => 'db.tagged', tag => 'now', version => 2)").collect()


def test_restore_interop_both_ways(spark, wh):
    path = make_table(spark, wh, "restored")
    row = spark.sql("CALL lance.system.restore(table => 'db.restored', version => 2)").first()
    assert (row.restored_version, row.previous_version, row.new_version, row.total_rows) == (2, 4, 5, 2)
    ds = lance.dataset(path)
    assert ds.version == 5 and lance_ids(ds) == [1, 2]
    ds.validate()
    # pylance appends after our restore: fresh fragment ids, every row there
    lance.write_dataset(pa.table({"id": pa.array([10], pa.int64()), "v": ["z"]}), path, mode="append")
    lance.dataset(path).validate()
    assert ids(spark, "SELECT id FROM lance.db.restored") == [1, 2, 10]
    # pylance restores; we read it and our history names the restore
    lance.dataset(path, version=3).restore()
    assert ids(spark, "SELECT id FROM lance.db.restored") == [1, 2, 3]
    hist = {r.version: r for r in spark.sql("SELECT * FROM lance.db.restored.history").collect()}
    assert hist[5].operation == "Restore" and hist[5].operation_details == {"restored_version": "2"}
    assert hist[7].operation == "Restore" and hist[7].operation_details == {"restored_version": "3"}
    # we append after pylance's restore
    spark.sql("INSERT INTO lance.db.restored VALUES (20, 'y')")
    lance.dataset(path).validate()
    assert lance_ids(lance.dataset(path)) == [1, 2, 3, 20]
    # by tag and by timestamp
    lance.dataset(path).tags.create("three", 3)
    spark.sql("CALL lance.system.restore(table => 'db.restored', tag => 'three')")
    assert lance_ids(lance.dataset(path)) == [1, 2, 3]
    before = lance.dataset(path).version
    time.sleep(1.1)
    ts = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    time.sleep(0.1)
    spark.sql("INSERT INTO lance.db.restored VALUES (30, 'w')")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    r = spark.sql(f"CALL lance.system.restore(table => 'db.restored', timestamp => TIMESTAMP '{ts}')").first()
    assert r.restored_version == before
    assert lance_ids(lance.dataset(path)) == [1, 2, 3]
    with pytest.raises(Exception, match="exactly one of version, timestamp or tag"):
        spark.sql("CALL lance.system.restore(table => 'db.restored')").collect()
    with pytest.raises(Exception, match="version 77"):
        spark.sql("CALL lance.system.restore(table => 'db.restored', version => 77)").collect()


def test_history_matches_pylance_and_first_principles(spark, wh, tmp_path):
    path = make_table(spark, wh, "hist")
    lance.write_dataset(pa.table({"id": pa.array([5, 6], pa.int64()), "v": ["e", "f"]}), path, mode="append",
                        transaction_properties={"job": "nightly", "owner": "ops"})
    rows = spark.sql("SELECT * FROM lance.db.hist.history ORDER BY version").collect()
    pv = lance.dataset(path).versions()
    assert [r.version for r in rows] == [v["version"] for v in pv] == [1, 2, 3, 4, 5]
    for r, v in zip(rows, pv):
        assert abs((r.timestamp - v["timestamp"]).total_seconds()) < 0.001
    assert [r.operation for r in rows] == ["Overwrite", "Append", "Append", "Delete", "Append"]
    assert [(r.rows_added, r.rows_deleted) for r in rows] == [(0, 0), (2, 0), (1, 0), (0, 1), (2, 0)]
    assert [r.total_rows for r in rows] == [0, 2, 3, 2, 4]
    # the delete removed a whole one-row fragment or wrote a deletion file
    assert rows[3].fragments_removed == 1 or rows[3].deletion_files == 1
    assert rows[4].transaction_properties == {"job": "nightly", "owner": "ops"}
    assert rows[4].writer.startswith("lance") and rows[1].writer.startswith("lance-spark")
    assert rows[3].read_version == 3
    # metadata tables filter and join like any table
    assert spark.sql("SELECT count(*) FROM lance.db.hist.history WHERE operation = 'Append'").first()[0] == 3
    frags = spark.sql("SELECT * FROM lance.db.hist.fragments").collect()
    ds = lance.dataset(path)
    assert sorted(f.fragment_id for f in frags) == sorted(f.fragment_id for f in ds.get_fragments())
    assert sum(f.num_rows for f in frags) == ds.count_rows() == 4
    # path tables too
    assert spark.sql(f"SELECT count(*) FROM lance.`{path}`.history").first()[0] == 5
    # the pure-Python history agrees on operations
    out = subprocess.run([sys.executable, "-m", "lance_spark", "history", path], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert [line.split("\t")[2] for line in out] == [r.operation for r in rows]


def test_vacuum_removes_old_versions_keeps_latest_and_tagged(spark, wh):
    path = make_table(spark, wh, "vac")
    spark.sql("INSERT OVERWRITE lance.db.vac VALUES (7, 'g'), (8, 'h')")            # v5
    spark.sql("INSERT INTO lance.db.vac VALUES (9, 'i')")                           # v6
    spark.sql("CALL lance.system.create_tag(table => 'db.vac', tag => 'keep', version => 4)")
    before = files_under(path)
    # the default retention (14 days) removes nothing
    r = spark.sql("CALL lance.system.vacuum(table => 'db.vac')").first()
    assert r.old_versions_removed == 0 and r.files == []
    # a tagged old version fails the default policy, naming the tag
    with pytest.raises(Exception, match=r"keep \(version 4\)"):
        spark.sql("CALL lance.system.vacuum(table => 'db.vac', retain_hours => 0)").collect()
    expected = pylance_candidates(path, older_than=timedelta(0), error_if_tagged_old_versions=False)
    dry = spark.sql("CALL lance.system.vacuum(table => 'db.vac', retain_hours => 0, dry_run => true, "
                    "error_if_tagged_old_versions => false)").first()
    assert dry.dry_run and sorted(dry.removed_versions) == [1, 2, 3, 5] and dry.kept_tagged_versions == [4]
    assert {f.path for f in dry.files} == expected
    assert dry.bytes_removed == sum(os.path.getsize(os.path.join(path, f.path)) for f in dry.files) > 0
    assert dry.manifests_removed == 4 and dry.data_files_removed >= 1
    assert files_under(path) == before                                   # the dry run removed nothing
    # the CLI (no Spark) plans the same
    out = subprocess.run([sys.executable, "-m", "lance_spark", "vacuum", path, "--dry-run", "--retain-hours", "0",
                          "--keep-tagged", "--json"], capture_output=True, text=True, check=True).stdout
    assert {f["path"] for f in json.loads(out)["files"]} == expected
    # the real run (the fragment only versions 2 and 3 had is among the files)
    done = LanceTable.forName(spark, "db.vac").vacuum(0, error_if_tagged_old_versions=False)
    assert {f.path for f in done.files} == expected and done.bytes_removed == dry.bytes_removed
    assert files_under(path) == before - expected
    ds = lance.dataset(path)
    assert [v["version"] for v in ds.versions()] == [4, 6]
    assert lance_ids(ds) == [7, 8, 9] and lance_ids(lance.dataset(path, version="keep")) == [2, 3]
    ds.validate()
    lance.dataset(path, version=4).validate()
    with pytest.raises(Exception):
        lance.dataset(path, version=2)
    assert ids(spark, "SELECT id FROM lance.db.vac VERSION AS OF 'keep'") == [2, 3]
    assert ids(spark, "SELECT id FROM lance.db.vac") == [7, 8, 9]
    # pylance finds nothing more to clean
    assert pylance_candidates(path, older_than=timedelta(0), error_if_tagged_old_versions=False) == set()


def test_vacuum_killed_job_files_only_past_retention(spark, wh):
    path = make_table(spark, wh, "killed")
    # a killed job's leftovers: data files, a deletion file and a transaction file nothing references
    leftovers = []
    src = next(p for p in Path(path, "data").iterdir())
    for rel in [f"data/{uuid.uuid4()}.lance", f"data/{uuid.uuid4()}.lance"]:
        shutil.copy(src, Path(path, rel)); leftovers.append(rel)
    Path(path, "_transactions", f"4-{uuid.uuid4()}.txn").write_bytes(b"\0")
    leftovers.append(next(f"_transactions/{p.name}" for p in Path(path, "_transactions").iterdir()
                          if p.stat().st_size == 1))
    spark.sql("INSERT INTO lance.db.killed VALUES (4, 'd')")
    call = "CALL lance.system.vacuum(table => 'db.killed', retain_hours => 0{})"
    r = spark.sql(call.format("")).first()
    assert not {f.path for f in r.files} & set(leftovers)
    assert all(Path(path, rel).exists() for rel in leftovers)
    # pylance agrees: young unreferenced files stay
    assert not pylance_candidates(path, older_than=timedelta(0)) & set(leftovers)
    # eight days later they are garbage (for pylance too)
    old = time.time() - 8 * 86400
    for rel in leftovers:
        os.utime(Path(path, rel), (old, old))
    expected = pylance_candidates(path, older_than=timedelta(0))
    assert set(leftovers) <= expected
    dry = spark.sql(call.format(", dry_run => true")).first()
    assert {f.path for f in dry.files} == expected
    spark.sql(call.format("")).collect()
    assert not any(Path(path, rel).exists() for rel in leftovers)
    assert lance_ids(lance.dataset(path)) == [2, 3, 4]
    lance.dataset(path).validate()
    # a write in progress (young, unreferenced) survives even a zero retention
    young = Path(path, "data", f"{uuid.uuid4()}.lance")
    shutil.copy(src if src.exists() else next(Path(path, "data").iterdir()), young)
    spark.sql(call.format("")).collect()
    assert young.exists()
    # unless the caller vouches that nothing else writes (delete_unverified)
    r = spark.sql(call.format(", delete_unverified => true")).first()
    assert f"data/{young.name}" in {f.path for f in r.files} and not young.exists()


def test_python_handle_and_path_tables(spark, tmp_path):
    path = str(tmp_path / "handle.lance")
    spark.range(3).write.format("lance").save(path)
    spark.range(3, 5).write.format("lance").mode("append").save(path)
    t = LanceTable.forPath(spark, path)
    t.tags.create("first", 1)
    assert t.tags.list() == {"first": 1}
    assert lance.dataset(path).tags.get_version("first") == 1
    assert [r.version for r in t.history().collect()] == [1, 2]
    assert sorted(r.id for r in t.toDF("first").collect()) == [0, 1, 2]
    row = t.restore(1)
    assert row.new_version == 3 and lance.dataset(path).count_rows() == 3
    t.tags.update("first", 3)
    assert lance.dataset(path).tags.get_version("first") == 3
    v = t.vacuum(0, dry_run=True)
    assert sorted(v.removed_versions) == [1, 2] and v.dry_run
    t.tags.delete("first")
    assert t.tags.list() == {}
    # unquoted absolute paths are accepted by the procedures as well
    assert spark.sql(f"CALL lance.system.vacuum(table => '{path}', dry_run => true)").first().dry_run
    # the CLI lists tags written by pylance
    lance.dataset(path).tags.create("py", 2)
    out = subprocess.run([sys.executable, "-m", "lance_spark", "tags", path], capture_output=True, text=True,
                         check=True).stdout
    assert out.split("\t")[:2] == ["py", "2"]
