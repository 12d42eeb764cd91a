"""Bad input gives an error that names the file and the problem: no crash, no
hang, no wrong answer."""
from __future__ import annotations

import shutil
import struct
from pathlib import Path

import lance
import pytest

from datagen import small_table


def _manifest_path(ds: Path) -> Path:
    return sorted((ds / "_versions").glob("*.manifest"), key=lambda p: p.stat().st_mtime)[-1]


def _rewrite_manifest(path: Path, edit) -> None:
    from lance_spark._proto import table_pb2

    raw = path.read_bytes()
    pos = struct.unpack("<q", raw[-16:-8])[0]
    length = struct.unpack("<I", raw[pos:pos + 4])[0]
    m = table_pb2.Manifest()
    m.ParseFromString(raw[pos + 4:pos + 4 + length])
    edit(m)
    body = m.SerializeToString()
    path.write_bytes(raw[:pos] + struct.pack("<I", len(body)) + body + struct.pack("<q", pos) + raw[-8:])


@pytest.fixture(scope="module", params=["legacy", "2.0"])
def pristine(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(f"bad_{request.param}") / "ds.lance"
    lance.write_dataset(small_table(300), str(path), data_storage_version=request.param, max_rows_per_file=100)
    return path


@pytest.fixture()
def ds(pristine, tmp_path):
    copy = tmp_path / "copy.lance"
    shutil.copytree(pristine, copy)
    return copy


def _data_file(ds: Path) -> Path:
    return sorted((ds / "data").glob("*.lance"))[0]


def _read_error(spark, path: Path) -> str:
    with pytest.raises(Exception) as e:
        spark.read.format("lance").load(str(path)).collect()
    return str(e.value)


def test_pristine_copy_reads(spark, ds):
    assert spark.read.format("lance").load(str(ds)).count() == 300
    assert len(spark.read.format("lance").load(str(ds)).collect()) == 300


def test_truncated_data_file(spark, ds):
    f = _data_file(ds)
    f.write_bytes(f.read_bytes()[:-30])
    msg = _read_error(spark, ds)
    assert f.name in msg


def test_wrong_magic(spark, ds):
    f = _data_file(ds)
    raw = bytearray(f.read_bytes())
    raw[-4:] = b"NOPE"
    f.write_bytes(bytes(raw))
    msg = _read_error(spark, ds)
    assert f.name in msg and "magic" in msg.lower()


def test_corrupt_manifest(spark, ds):
    m = _manifest_path(ds)
    raw = bytearray(m.read_bytes())
    pos = struct.unpack("<q", raw[-16:-8])[0]
    raw[pos + 4:pos + 24] = b"\xff" * 20
    m.write_bytes(bytes(raw))
    msg = _read_error(spark, ds)
    assert m.name in msg and "manifest" in msg


def test_missing_data_file(spark, ds):
    f = _data_file(ds)
    f.unlink()
    msg = _read_error(spark, ds)
    assert f.name in msg and "missing" in msg


def test_unknown_reader_feature_flag(spark, ds):
    _rewrite_manifest(_manifest_path(ds), lambda m: setattr(m, "reader_feature_flags", m.reader_feature_flags | (1 << 20)))
    msg = _read_error(spark, ds)
    assert "reader_feature_flags" in msg and str(ds.name) in msg


def test_data_file_path_escaping_dataset(spark, ds):
    def edit(m):
        m.fragments[0].files[0].path = "../../../etc/passwd"
    _rewrite_manifest(_manifest_path(ds), edit)
    msg = _read_error(spark, ds)
    assert "escapes the dataset directory" in msg and "../../../etc/passwd" in msg
