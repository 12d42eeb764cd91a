"""`lance-spark indices` and the pure-Python reader's `list_indices` against pylance's
`list_indices`: names, types, columns (nested too), fragments covered (appends after the
build are not), the version each index was built at; time travel to before an index."""
from __future__ import annotations

import json
import warnings

import pyarrow as pa
import pytest

lance = pytest.importorskip("lance")

from lance_spark import cli, reader  # noqa: E402


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("indices") / "t.lance")
    n = 200
    t = pa.table({"id": pa.array(range(n), pa.int64()), "label": [f"l{i % 3}" for i in range(n)],
                  "s": pa.array([{"a": i, "b": f"b{i}"} for i in range(n)]),
                  "tags": pa.array([[f"t{i % 4}"] for i in range(n)])})
    lance.write_dataset(t, path, max_rows_per_file=70)
    ds = lance.dataset(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.create_scalar_index("id", "BTREE")
        ds.create_scalar_index("label", "BITMAP", name="lab")
        ds.create_scalar_index("s.a", "ZONEMAP")
        ds.create_scalar_index("tags", "LABEL_LIST")
    lance.write_dataset(t.slice(0, 50), path, mode="append")
    return path


def _oracle(path, version=None):
    ds = lance.dataset(path, version=version)
    live = sorted(f.fragment_id for f in ds.get_fragments())
    out = {}
    for i in ds.list_indices():
        frags = sorted(i["fragment_ids"])
        out[i["name"]] = {"type": i["type"], "columns": list(i["fields"]), "fragments": frags,
                          "unindexed": [f for f in live if f not in set(frags)], "version": i["version"],
                          "uuid": i["uuid"]}
    return out


def _ours(path, version=None):
    return {i.name: {"type": i.index_type, "columns": i.columns, "fragments": i.fragments,
                     "unindexed": i.unindexed_fragments, "version": i.dataset_version, "uuid": i.uuid}
            for i in reader.dataset(path, version).list_indices()}


def test_reader_lists_what_pylance_lists(indexed):
    want = _oracle(indexed)
    assert set(want) == {"id_idx", "lab", "s.a_idx", "tags_idx"}
    assert all(v["unindexed"] for v in want.values())          # the append after the builds
    assert _ours(indexed) == want
    assert _ours(indexed, 1) == {} == _oracle(indexed, 1)      # before any index
    assert _ours(indexed, 3) == _oracle(indexed, 3)            # two of them


def test_cli_indices_text_and_json(indexed, capsys):
    rc = cli.main(["indices", indexed, "--json"])
    out, _ = capsys.readouterr()
    assert rc == 0
    got = {i["name"]: i for i in json.loads(out)}
    want = _oracle(indexed)
    assert {k: (v["index_type"], v["columns"], v["fragments"], v["dataset_version"]) for k, v in got.items()} == \
        {k: (v["type"], v["columns"], v["fragments"], v["version"]) for k, v in want.items()}
    rc = cli.main(["indices", indexed])
    out, _ = capsys.readouterr()
    lines = out.strip().splitlines()
    assert rc == 0 and len(lines) == 4
    line = next(x for x in lines if x.startswith("lab\t"))
    assert "\tBitmap\tlabel\t" in line and f"built at version {want['lab']['version']}" in line
    assert "unindexed fragments" in line
    rc = cli.main(["indices", indexed, "--version", "1"])
    out, _ = capsys.readouterr()
    assert rc == 0 and out == ""
