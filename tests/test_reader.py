"""The pure-Python reader against pylance (the oracle), value for value, at every version."""
from __future__ import annotations

import math
import os
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from conftest import DATASETS

lance = pytest.importorskip("lance")

from lance_spark import reader  # noqa: E402
from lance_spark.reader import LanceFormatError  # noqa: E402
from lance_spark._protos import table_pb2  # noqa: E402


def _norm(x):
    if isinstance(x, float) and math.isnan(x):
        return "NaN"
    if isinstance(x, dict):
        return {k: _norm(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_norm(v) for v in x]
    return x


def assert_same_column(name, ours: pa.ChunkedArray, theirs: pa.ChunkedArray):
    a, b = ours.combine_chunks(), theirs.combine_chunks()
    assert a.type == b.type, name
    if a.equals(b):
        return
    # NaN != NaN: compare NaN-aware, value for value
    assert _norm(a.to_pylist()) == _norm(b.to_pylist()), f"column {name} differs"


def assert_same_table(ours: pa.Table, theirs: pa.Table):
    assert ours.schema.equals(theirs.schema), (ours.schema, theirs.schema)
    assert ours.num_rows == theirs.num_rows
    for name in theirs.column_names:
        assert_same_column(name, ours.column(name), theirs.column(name))


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_version_matches_pylance(datasets_dir, name):
    path = str(datasets_dir / name)
    versions = [v["version"] for v in lance.dataset(path).versions()]
    assert len(versions) >= 3
    for v in versions:
        oracle = lance.dataset(path, version=v)
        ds = reader.dataset(path, version=v)
        assert ds.version == v
        assert ds.count_rows() == oracle.count_rows()
        assert ds.schema.equals(oracle.schema)
        assert_same_table(ds.to_table(), oracle.to_table())
        cols = ds.schema.names[::3][::-1]  # a subset, out of order
        assert_same_table(ds.to_table(columns=cols), oracle.to_table(columns=cols))


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_versions_and_fragments(datasets_dir, name):
    path = str(datasets_dir / name)
    ds = reader.dataset(path)
    oracle = lance.dataset(path)
    ours = ds.versions()
    theirs = oracle.versions()
    assert [v["version"] for v in ours] == [v["version"] for v in theirs]
    assert [v["timestamp"] for v in ours] == [v["timestamp"] for v in theirs]
    ops = [v["operation"] for v in ours]
    assert ops[0] == "Overwrite" and "Delete" in ops and "Merge" in ops
    frags = ds.fragments()
    ofrags = oracle.get_fragments()
    assert [f.id for f in frags] == [f.fragment_id for f in ofrags]
    for f, of in zip(frags, ofrags):
        assert f.physical_rows == of.metadata.physical_rows
        assert f.num_rows == of.count_rows()
        assert [d.path for d in f.files] == [d.path for d in of.data_files()]
        want = DATASETS[name][1]
        assert {d.file_version for d in f.files} == {want}


def test_bitmap_and_arrow_deletion_files_are_both_exercised(datasets_dir):
    for name in ("bitmap_legacy", "bitmap_2_0"):
        names = os.listdir(datasets_dir / name / "_deletions")
        assert any(n.endswith(".bin") for n in names), names
        assert any(n.endswith(".arrow") for n in names), names
        ds = reader.dataset(datasets_dir / name)
        types = {f.deletion_file.file_type for f in ds.fragments() if f.deletion_file}
        assert "bitmap" in types


def test_manifest_naming_schemes(datasets_dir):
    v2 = os.listdir(datasets_dir / "rich_2_0" / "_versions")
    v1 = os.listdir(datasets_dir / "rich_legacy" / "_versions")
    assert any(len(n) == len("00000000000000000000.manifest") for n in v2)
    assert "1.manifest" in v1


def test_older_fragments_lack_the_added_column(datasets_dir):
    ds = reader.dataset(datasets_dir / "rich_2_0")
    t = ds.to_table(columns=["id", "z", "later"])
    assert t.column("z").to_pylist() == [i * 2 for i in t.column("id").to_pylist()]
    # "later" was added without data: only the last fragment has a data file for it
    later_id = next(f.id for f in ds.fields if f.name == "later")
    lacking = [f for f in ds.fragments() if not any(later_id in d.fields for d in f.files)]
    assert len(lacking) >= 3
    assert t.column("later").null_count == t.num_rows - 500
    assert "z" not in reader.dataset(datasets_dir / "rich_2_0", version=2).schema.names


def test_unknown_column_and_version(datasets_dir):
    ds = reader.dataset(datasets_dir / "rich_2_0")
    with pytest.raises(ValueError, match="nope"):
        ds.to_table(columns=["nope"])
    with pytest.raises(LanceFormatError, match="version 999"):
        reader.dataset(datasets_dir / "rich_2_0", version=999)


def test_single_2_0_files_with_small_pages(tmp_path):
    """Many pages per column (list items crossing page boundaries), all-null and empty values."""
    from lance.file import LanceFileReader, LanceFileWriter
    from datagen import rich_table
    from lance_spark.reader.format.file_v2 import read_file_table

    cases = {
        "rich_small_pages": (rich_table(2000, seed=3), 8 * 1024),
        "all_null": (pa.table({"a": pa.nulls(100, pa.int64()), "s": pa.nulls(100, pa.string()),
                               "l": pa.nulls(100, pa.list_(pa.int32())),
                               "v": pa.nulls(100, pa.list_(pa.float32(), 4))}), None),
        "empty_strings": (pa.table({"s": pa.array([""] * 50 + ["x"] + [None] * 3)}), None),
        "long_lists": (pa.table({"l": pa.array([list(range(i % 300)) for i in range(1000)],
                                               pa.list_(pa.int64()))}), 4096),
    }
    for name, (table, page_bytes) in cases.items():
        path = str(tmp_path / f"{name}.lance")
        kwargs = {"version": "2.0"}
        if page_bytes:
            kwargs["max_page_bytes"] = page_bytes
        with LanceFileWriter(path, table.schema, **kwargs) as w:
            w.write_batch(table)
        assert_same_table(read_file_table(path), LanceFileReader(path).read_all().to_table())


# -- bad input ----------------------------------------------------------------------------

def _latest_manifest(root: Path) -> Path:
    ds = reader.dataset(root)
    return Path(ds.manifest_path)


def _rewrite_manifest(path: Path, edit) -> None:
    data = path.read_bytes()
    pos = struct.unpack("<q", data[-16:-8])[0]
    (n,) = struct.unpack("<I", data[pos:pos + 4])
    m = table_pb2.Manifest()
    m.ParseFromString(data[pos + 4:pos + 4 + n])
    edit(m)
    body = m.SerializeToString()
    path.write_bytes(struct.pack("<I", len(body)) + body + struct.pack("<qHH", 0, 0, 2) + b"LANC")


def _first_data_file(root: Path) -> Path:
    ds = reader.dataset(root)
    return Path(ds.fragments()[0].files[0].full_path)


@pytest.mark.parametrize("name", ["rich_legacy", "rich_2_0"])
def test_truncated_data_file(copy_dataset, name):
    root = copy_dataset(name)
    f = _first_data_file(root)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(LanceFormatError, match=f.name):
        reader.dataset(root).to_table()


@pytest.mark.parametrize("name", ["rich_legacy", "rich_2_0"])
def test_wrong_magic(copy_dataset, name):
    root = copy_dataset(name)
    f = _first_data_file(root)
    data = bytearray(f.read_bytes())
    data[-4:] = b"XXXX"
    f.write_bytes(bytes(data))
    with pytest.raises(LanceFormatError, match=f"{f.name}.*magic"):
        reader.dataset(root).to_table()


def test_corrupt_manifest(copy_dataset):
    root = copy_dataset("rich_2_0")
    mpath = _latest_manifest(root)
    data = bytearray(mpath.read_bytes())
    pos = struct.unpack("<q", bytes(data[-16:-8]))[0]
    data[pos + 4:pos + 40] = b"\xff" * 36
    mpath.write_bytes(bytes(data))
    with pytest.raises(LanceFormatError, match=mpath.name):
        reader.dataset(root)
    data[-4:] = b"NOPE"
    mpath.write_bytes(bytes(data))
    with pytest.raises(LanceFormatError, match=f"{mpath.name}.*magic"):
        reader.dataset(root)


def test_missing_data_file(copy_dataset):
    root = copy_dataset("rich_legacy")
    f = _first_data_file(root)
    f.unlink()
    with pytest.raises(LanceFormatError, match=f"{f.name}.*missing"):
        reader.dataset(root).to_table()


def test_unknown_reader_feature_flag(copy_dataset):
    root = copy_dataset("rich_2_0")
    mpath = _latest_manifest(root)
    _rewrite_manifest(mpath, lambda m: setattr(m, "reader_feature_flags", m.reader_feature_flags | 64))
    with pytest.raises(LanceFormatError, match=r"unknown reader feature flag\(s\) 64") as e:
        reader.dataset(root)
    assert str(root) in str(e.value)


def test_data_file_path_escaping_the_dataset(copy_dataset):
    root = copy_dataset("rich_2_0")
    mpath = _latest_manifest(root)

    def edit(m):
        m.fragments[0].files[0].path = "../../evil.lance"
    _rewrite_manifest(mpath, edit)
    with pytest.raises(LanceFormatError, match=r"\.\./\.\./evil\.lance.*escapes"):
        reader.dataset(root).to_table()


def test_rewritten_manifest_still_reads(copy_dataset):
    """The rewrite helper itself produces a valid manifest (so the failures above are real)."""
    root = copy_dataset("rich_2_0")
    before = reader.dataset(root).to_table(columns=["id"])
    _rewrite_manifest(_latest_manifest(root), lambda m: None)
    assert reader.dataset(root).to_table(columns=["id"]).equals(before)


def test_mixed_manifest_naming_is_an_error(copy_dataset):
    root = copy_dataset("rich_legacy")
    (root / "_versions" / "18446744073709551610.manifest").write_bytes(
        (root / "_versions" / "1.manifest").read_bytes())
    with pytest.raises(LanceFormatError, match="mixes V1"):
        reader.dataset(root)
