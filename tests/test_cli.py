"""The lance-spark CLI (in-process via cli.main, plus one `python -m lance_spark` run)."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

lance = pytest.importorskip("lance")

from conftest import PYTHON_DIR  # noqa: E402
from lance_spark import cli, reader  # noqa: E402
from test_reader import _first_data_file, _latest_manifest, _rewrite_manifest  # noqa: E402


def run(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_inspect_text_and_json(datasets_dir, capsys):
    path = datasets_dir / "bitmap_2_0"
    rc, out, _ = run(capsys, "inspect", path)
    assert rc == 0
    assert "schema" in out and "id: int64" in out and "(bitmap)" in out and "file version 2.0" in out
    rc, out, _ = run(capsys, "inspect", path, "--json", "--version", 2)
    assert rc == 0
    info = json.loads(out)
    oracle = lance.dataset(str(path), version=2)
    assert info["version"] == 2
    assert info["rows"] == oracle.count_rows()
    assert len(info["fragments"]) == len(oracle.get_fragments())
    assert [f["name"] for f in info["schema"]] == oracle.schema.names
    assert len(info["versions"]) == len(oracle.versions())


def test_history(datasets_dir, capsys):
    path = datasets_dir / "rich_legacy"
    rc, out, _ = run(capsys, "history", path)
    assert rc == 0
    lines = out.strip().splitlines()
    assert len(lines) == len(lance.dataset(str(path)).versions())
    assert lines[0].startswith("1\t") and lines[0].endswith("Overwrite")
    assert any(line.endswith("Delete") for line in lines)


@pytest.mark.parametrize("name", ["rich_legacy", "rich_2_0", "bitmap_legacy", "bitmap_2_0"])
def test_verify_good(datasets_dir, capsys, name):
    rc, out, _ = run(capsys, "verify", datasets_dir / name)
    assert rc == 0, out
    assert out.startswith("OK:")


def test_cat(datasets_dir, capsys):
    path = datasets_dir / "rich_2_0"
    rc, out, _ = run(capsys, "cat", path, "--limit", 5, "--columns", "id,s,lst")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "id\ts\tlst"
    assert len(lines) == 6
    ids = lance.dataset(str(path)).to_table(columns=["id"]).column("id").to_pylist()[:5]
    assert [int(line.split("\t")[0]) for line in lines[1:]] == ids


def test_cat_unknown_column_is_an_error(datasets_dir, capsys):
    rc, _, err = run(capsys, "cat", datasets_dir / "rich_2_0", "--columns", "nope")
    assert rc == 2 and "nope" in err


def _truncate(root):
    f = _first_data_file(root)
    f.write_bytes(f.read_bytes()[:-100])
    return f.name


def _bad_magic(root):
    f = _first_data_file(root)
    data = bytearray(f.read_bytes())
    data[-4:] = b"XXXX"
    f.write_bytes(bytes(data))
    return f.name


def _corrupt_manifest(root):
    m = _latest_manifest(root)
    data = bytearray(m.read_bytes())
    pos = struct.unpack("<q", bytes(data[-16:-8]))[0]
    data[pos + 4:pos + 40] = b"\xff" * 36
    m.write_bytes(bytes(data))
    return m.name


def _missing(root):
    f = _first_data_file(root)
    f.unlink()
    return f.name


def _flag(root):
    m = _latest_manifest(root)
    _rewrite_manifest(m, lambda x: setattr(x, "reader_feature_flags", x.reader_feature_flags | 1024))
    return "1024"


def _escape(root):
    def edit(x):
        x.fragments[0].files[0].path = "../../evil.lance"
    _rewrite_manifest(_latest_manifest(root), edit)
    return "../../evil.lance"


def _deletion_beyond_rows(root):
    def edit(x):
        x.fragments[0].physical_rows = 10
    _rewrite_manifest(_latest_manifest(root), edit)
    return "physical"


@pytest.mark.parametrize("damage", [_truncate, _bad_magic, _corrupt_manifest, _missing, _flag,
                                    _escape, _deletion_beyond_rows])
@pytest.mark.parametrize("name", ["rich_legacy", "rich_2_0"])
def test_verify_bad(copy_dataset, capsys, damage, name):
    root = copy_dataset(name)
    needle = damage(root)
    rc, out, _ = run(capsys, "verify", root)
    assert rc == 1, out
    assert "FAILED" in out
    assert needle in out


def test_python_dash_m(datasets_dir):
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    res = subprocess.run([sys.executable, "-m", "lance_spark", "history", str(datasets_dir / "rich_2_0")],
                         capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.strip().splitlines()) == len(reader.dataset(datasets_dir / "rich_2_0").versions())
