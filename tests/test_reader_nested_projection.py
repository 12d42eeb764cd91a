"""Projections of nested fields ("a.b.c", through structs) by the pure-Python
reader: the same columns, names and values as pylance's to_table(columns=...),
at every file version, through to_table and to_batches, with deletions."""
from __future__ import annotations

import lance
import pyarrow as pa
import pytest

from lance_spark import reader

N = 3000


def _table(version: str) -> pa.Table:
    nulls = version in ("2.1", "2.2")     # null structs are stored from 2.1 on
    empty = {"kind": None, "v": None, "in": {"x": None, "y": None}}
    return pa.table({
        "id": pa.array(range(N), pa.int64()),
        "payload": pa.array([(None if nulls else empty) if i % 7 == 0 else
                             {"kind": f"k{i % 5}" if i % 3 else None, "v": i, "in": {"x": i * 2, "y": "y"}}
                             for i in range(N)]),
    })


@pytest.mark.parametrize("version", ["legacy", "2.0", "2.1", "2.2"])
@pytest.mark.parametrize("columns", [["id", "payload.kind"], ["payload.in.x", "id", "payload.kind"],
                                     ["payload", "payload.v"], ["payload.in"]])
def test_nested_projection_equals_pylance(tmp_path, version, columns):
    path = str(tmp_path / "n.lance")
    lance.write_dataset(_table(version), path, data_storage_version=version, max_rows_per_file=1000)
    lance.dataset(path).delete("id % 11 = 0")
    want = lance.dataset(path).to_table(columns=columns)
    ds = reader.dataset(path)
    assert ds.to_table(columns=columns).equals(want)
    assert pa.Table.from_batches(list(ds.to_batches(columns=columns, batch_rows=333))).equals(want)


def test_unknown_nested_names_are_errors(tmp_path):
    path = str(tmp_path / "n.lance")
    lance.write_dataset(_table("2.2"), path)
    ds = reader.dataset(path)
    with pytest.raises(ValueError, match=r"no column 'payload\.nope'.*kind"):
        ds.to_table(columns=["payload.nope"])
    with pytest.raises(ValueError, match=r"no column 'id\.x'.*not a struct"):
        ds.to_table(columns=["id.x"])
