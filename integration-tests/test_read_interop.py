"""Spark reads what pylance wrote: every type, nulls, fragments, deletions, added
columns, both manifest naming schemes, stable row ids on and off, every version."""
from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest

from compare import assert_same_table
from lance_datasets import build_history, deletion_suffixes

# (file version, v2 manifest paths, stable row ids): every file version, and each
# of the two table features on and off, in `make test`; every pairing the
# matrix in `make test-long` (LANCE_LONG_TESTS=1)
MATRIX = [
    ("legacy", False, False),
    ("2.0", True, False),
    ("2.1", True, True),
    ("2.2", False, False),
]
if os.environ.get("LANCE_LONG_TESTS") == "1":
    MATRIX += [("legacy", True, True), ("2.0", False, True), ("2.2", True, True)]


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    out = {}
    for file_version, v2_paths, stable in MATRIX:
        path = tmp_path_factory.mktemp(f"ds_{file_version}_{int(v2_paths)}_{int(stable)}") / "data.lance"
        out[(file_version, v2_paths, stable)] = (path, build_history(path, file_version, v2_paths, stable))
    return out


def test_history_exercises_both_deletion_flavours(histories):
    for path, _ in histories.values():
        assert deletion_suffixes(path) == {".arrow", ".bin"}, path


@pytest.mark.parametrize("case", MATRIX, ids=lambda c: f"{c[0]}-v2paths{c[1]}-stable{c[2]}")
def test_every_version_matches_pylance(spark, histories, case):
    path, versions = histories[case]
    assert len(versions) >= 5
    for v in versions:
        expected = lance.dataset(str(path), version=v).to_table()
        df = spark.read.format("lance").option("version", v).load(str(path))
        assert df.count() == expected.num_rows, f"count at version {v}"
        assert_same_table(df, expected, f"{case} version {v}")


@pytest.mark.parametrize("case", MATRIX, ids=lambda c: f"{c[0]}-v2paths{c[1]}-stable{c[2]}")
def test_projections_match_pylance(spark, histories, case):
    path, versions = histories[case]
    latest = versions[-1]
    for cols in (["id", "s"], ["id", "st", "vec"], ["id", "lst_st", "z"], ["id", "ts_ns_tz", "u64", "f16"]):
        expected = lance.dataset(str(path)).to_table(columns=cols)
        df = spark.read.format("lance").load(str(path)).select(*cols)
        assert_same_table(df, expected, f"{case} columns {cols} at version {latest}")


def test_nested_field_projection(spark, histories):
    path, _ = histories[("2.0", True, False)]
    expected = lance.dataset(str(path)).to_table(columns=["id", "st"])
    rows = spark.read.format("lance").load(str(path)).select("id", "st.b").orderBy("id").collect()
    want = sorted(((r["id"], (r["st"] or {}).get("b")) for r in expected.to_pylist()))
    assert [(r["id"], r["b"]) for r in rows] == want


def nested_2_2(n: int) -> pa.Table:
    """What only file version 2.2 stores: maps, and null structs at any depth."""
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "m": pa.array([None if i % 7 == 0 else [(f"k{j}", j if j % 2 else None) for j in range(i % 4)]
                       for i in range(n)], pa.map_(pa.string(), pa.int32())),
        "m_st": pa.array([[(i, {"a": i, "b": None if i % 3 else "x"})] if i % 5 else [] for i in range(n)],
                         pa.map_(pa.int64(), pa.struct([("a", pa.int64()), ("b", pa.string())]))),
        "st": pa.array([{"in": {"v": i if i % 7 else None} if i % 3 else None} if i % 5 else None for i in range(n)],
                       pa.struct([("in", pa.struct([("v", pa.int32())]))])),
        "lst_st": pa.array([[{"x": j} if (i + j) % 4 else None for j in range(i % 3)] if i % 6 else None
                            for i in range(n)], pa.list_(pa.struct([("x", pa.int32())]))),
        "st_lst": pa.array([{"l": [i] * (i % 3) if i % 5 else None} if i % 4 else None for i in range(n)],
                           pa.struct([("l", pa.list_(pa.int32()))])),
    })


def test_maps_and_null_structs_at_2_2(spark, tmp_path):
    path = tmp_path / "nested.lance"
    lance.write_dataset(nested_2_2(3000), str(path), data_storage_version="2.2", max_rows_per_file=1000)
    expected = lance.dataset(str(path)).to_table()
    df = spark.read.format("lance").load(str(path))
    assert dict(df.dtypes)["m"] == "map<string,int>"
    assert_same_table(df, expected, "2.2 maps and null structs")
    sub = df.select("id", "st.in.v").where("id % 10 = 3").orderBy("id").collect()
    want = [(r["id"], ((r["st"] or {}).get("in") or {}).get("v")) for r in expected.to_pylist() if r["id"] % 10 == 3]
    assert [(r["id"], r["v"]) for r in sub] == want


def packed_and_blob(n: int, version: str) -> pa.Table:
    """Opt-in layouts: packed structs (fixed-width fields; 2.2 also variable ones)
    and blob columns (values stored outside the pages)."""
    import numpy as np
    rng = np.random.default_rng(3)
    st = pa.array([{"a": i, "b": float(i) / 3} if i % 5 else None for i in range(n)],
                  pa.struct([("a", pa.int32()), ("b", pa.float64())]))
    blob = pa.array([bytes(rng.integers(0, 256, int(rng.integers(0, 3000)), dtype=np.uint8)) if i % 7 else None
                     for i in range(n)], pa.large_binary())
    fields = [pa.field("id", pa.int64()), pa.field("p", st.type, metadata={"lance-encoding:packed": "true"}),
              pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})]
    cols = [pa.array(range(n), pa.int64()), st, blob]
    if version == "2.2":
        fields.append(pa.field("pv", pa.struct([("a", pa.int32()), ("s", pa.string())]),
                               metadata={"lance-encoding:packed": "true"}))
        cols.append(pa.array([{"a": i, "s": "x" * (i % 5)} for i in range(n)], fields[-1].type))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_packed_structs_and_blobs(spark, tmp_path, version):
    path = tmp_path / f"packed-{version}.lance"
    table = packed_and_blob(2500, version)
    lance.write_dataset(table, str(path), data_storage_version=version, max_rows_per_file=1000)
    ds = lance.dataset(str(path))
    # pylance returns blob descriptions from to_table(); the values come from take_blobs
    blobs = [None if f is None else f.read() for f in ds.take_blobs("blob", indices=list(range(table.num_rows)))]
    expected = ds.to_table(columns=[c for c in table.column_names if c != "blob"]).to_pylist()
    df = spark.read.format("lance").load(str(path))
    rows = df.orderBy("id").collect()
    assert len(rows) == table.num_rows
    for r, e, b in zip(rows, expected, blobs):
        d = r.asDict(recursive=True)
        got_blob = d.pop("blob")
        if version == "2.2":  # a blob column of 2.2 is struct<data, uri>
            got_blob = None if got_blob is None else got_blob["data"]
        assert (None if got_blob is None else bytes(got_blob)) == b, f"{version} row {e['id']} blob"
        assert {k: d[k] for k in e} == e, f"{version} row {e['id']}"
    # a projection of one field of a packed struct
    sub = df.select("id", "p.b").where("id % 100 = 1").orderBy("id").collect()
    assert [(r["id"], r["b"]) for r in sub] == [(e["id"], (e["p"] or {}).get("b")) for e in expected if e["id"] % 100 == 1]
