"""Point reads (issue 37): `_rowaddr IN (...)`, `_rowaddr = a`, `_fragid = f` and,
where row ids are addresses, `_rowid IN (...)` read only the fragments and rows
they name. pylance is the oracle: its own row addresses for every live row
(`with_row_address`), and its fragments' rows. Deleted rows, addresses past a
fragment's end and fragments that do not exist return nothing."""
from __future__ import annotations

import random

import lance
import pyarrow as pa
import pytest

from scan_metrics import scan_metrics


def _write(path: str, n: int, per_file: int, stable: bool = False) -> None:
    t = pa.table({"id": pa.array(range(n), pa.int64()),
                  "pay": pa.array([f"payload-{i:08d}-" + "x" * 40 for i in range(n)], pa.string())})
    lance.write_dataset(t, path, max_rows_per_file=per_file, enable_stable_row_ids=stable)


def _addresses(path: str) -> dict:
    t = lance.dataset(path).to_table(columns=["id"], with_row_address=True)
    return dict(zip(t.column("_rowaddr").to_pylist(), t.column("id").to_pylist()))


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("points") / "t")
    _write(path, 20_000, 4_000)
    ds = lance.dataset(path)
    ds.delete("id % 7 = 3")
    lance.write_dataset(pa.table({"id": pa.array(range(20_000, 21_000), pa.int64()),
                                  "pay": pa.array(["late"] * 1000, pa.string())}), path, mode="append")
    return path


def test_rowaddr_in_equals_pylance(spark, table):
    live = _addresses(table)
    rnd = random.Random(5)
    frags = sorted({a >> 32 for a in live})
    for case in range(6):
        # live rows, deleted rows (ids % 7 == 3 left holes), offsets past the end, a missing fragment
        picks = rnd.sample(sorted(live), 25)
        picks += [(rnd.choice(frags) << 32) | rnd.randint(0, 4500) for _ in range(10)]
        picks += [(999 << 32) | 1]
        want = sorted((a, live[a]) for a in set(picks) if a in live)
        lst = ", ".join(str(a) for a in picks)
        got = sorted((r["_rowaddr"], r["id"]) for r in spark.read.format("lance").load(table)
                     .where(f"_rowaddr IN ({lst})").select("_rowaddr", "id").collect())
        assert got == want, case
        # _rowid is the address on a dataset without stable row ids
        got_id = sorted(r["id"] for r in spark.read.format("lance").load(table)
                        .where(f"_rowid IN ({lst})").select("id").collect())
        assert got_id == sorted(v for _, v in want), case
    one = sorted(live)[123]
    assert [r["id"] for r in spark.read.format("lance").load(table).where(f"_rowaddr = {one}").collect()] == [live[one]]


def test_fragid_reads_one_fragment(spark, table):
    ds = lance.dataset(table)
    for frag in ds.get_fragments():
        want = sorted(frag.to_table(columns=["id"]).column("id").to_pylist())
        df = spark.read.format("lance").load(table).where(f"_fragid = {frag.fragment_id}").select("id")
        assert sorted(r["id"] for r in df.collect()) == want
    ids = [f.fragment_id for f in ds.get_fragments()][:2]
    want = sorted(i for f in ds.get_fragments()[:2] for i in f.to_table(columns=["id"]).column("id").to_pylist())
    got = spark.read.format("lance").load(table).where(f"_fragid IN ({ids[0]}, {ids[1]}) AND id >= 0").select("id")
    assert sorted(r["id"] for r in got.collect()) == want


def test_point_read_reads_a_fraction_of_the_bytes(spark, tmp_path):
    path = str(tmp_path / "big")
    _write(path, 400_000, 100_000)
    live = _addresses(path)
    picks = random.Random(3).sample(sorted(live), 5)
    lst = ", ".join(map(str, picks))
    df = spark.read.format("lance").load(path)
    point = scan_metrics(df.where(f"_rowaddr IN ({lst})").select("id", "pay"))
    full = scan_metrics(df.where("id >= 0").select("id", "pay"))
    assert sorted(r["id"] for r in point["rows"]) == sorted(live[a] for a in picks)
    assert point["lanceBytesRead"] * 20 < full["lanceBytesRead"], (point, full)


def test_rowid_on_stable_row_ids_is_a_point_read(spark, tmp_path):
    """With stable row ids, _rowid is not an address: the rows are found through the
    fragments' row id sequences (after deletes and a compaction moved them)."""
    path = str(tmp_path / "stable")
    _write(path, 200_000, 40_000, stable=True)
    ds = lance.dataset(path)
    ds.delete("id < 30000 OR id % 5 = 1")
    ds.optimize.compact_files(target_rows_per_fragment=60_000)
    t = lance.dataset(path).to_table(columns=["id"], with_row_id=True)
    by_rowid = dict(zip(t.column("_rowid").to_pylist(), t.column("id").to_pylist()))
    rnd = random.Random(9)
    picks = rnd.sample(sorted(by_rowid), 12) + [1, 6, 10**9]     # deleted and unknown ids too
    lst = ", ".join(map(str, picks))
    df = spark.read.format("lance").load(path)
    point = scan_metrics(df.where(f"_rowid IN ({lst})").select("id", "pay"))
    assert sorted(r["id"] for r in point["rows"]) == sorted(by_rowid[p] for p in picks if p in by_rowid)
    full = scan_metrics(df.where("id >= 0").select("id", "pay"))
    assert point["lanceBytesRead"] * 10 < full["lanceBytesRead"], (point, full)
