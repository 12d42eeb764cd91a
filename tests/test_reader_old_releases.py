"""The pure-Python reader on datasets as old Lance releases left them (issue 35): what pylance 14 reads,
it reads the same; what cannot be read exactly is a LanceFormatError naming the file.

Fixtures: tests/fixtures/old_releases.py (also used by the Spark tests). The property test at the end
damages random small datasets the ways old releases did, and some ways no release did."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pytest

from conftest import REPO

lance = pytest.importorskip("lance")

sys.path.insert(0, str(REPO / "tests" / "fixtures"))
import old_releases  # noqa: E402

from lance_spark import reader  # noqa: E402
from lance_spark.reader import LanceFormatError  # noqa: E402
from lance_spark.reader.table import dataset as dataset_module  # noqa: E402
from test_reader import assert_same_table  # noqa: E402

ALL_KINDS = old_releases.KINDS + old_releases.INCONSISTENT
REFUSED = sorted(old_releases.PYLANCE_REFUSES | set(old_releases.INCONSISTENT))
READABLE = [k for k in old_releases.KINDS if k not in REFUSED]


@pytest.fixture(scope="module")
def kinds(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("old_releases")
    for kind in ALL_KINDS:
        old_releases.build(kind, root / kind, seed=3)
    return {kind: root / kind for kind in ALL_KINDS}


def by_id(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


def _versions_of(f) -> set:
    return {(df.file_major_version, df.file_minor_version) for df in f.files}


def _versions(m) -> set:
    return set().union(*(_versions_of(f) for f in m.fragments))


def test_the_fixture_module_lists_what_pylance_refuses(kinds):
    assert "unreadable_no_row_count" in old_releases.PYLANCE_REFUSES
    refused = {k for k in ALL_KINDS if "error" in old_releases.pylance_reads(kinds[k])}
    assert refused == old_releases.PYLANCE_REFUSES


@pytest.mark.parametrize("kind", READABLE)
def test_reads_what_pylance_reads(kinds, kind):
    path = kinds[kind]
    oracle = lance.dataset(str(path))
    ds = reader.dataset(path)
    expected = oracle.to_table()
    assert expected.num_rows > 0
    assert ds.count_rows() == oracle.count_rows() == expected.num_rows
    assert ds.data_storage_version == oracle.data_storage_version
    assert_same_table(by_id(ds.to_table()), by_id(expected))
    streamed = pa.Table.from_batches(list(ds.to_batches(batch_rows=17)), schema=ds.schema)
    assert_same_table(by_id(streamed), by_id(expected))
    # pylance 14's projected and filtered scans refuse some of these datasets ("Fragments are missing
    # row count stats", "Cannot open file ... with the v1 reader"): compare with its whole table
    part = by_id(ds.to_table(columns=["s", "id", "st.b"]))
    assert_same_table(part.select(["s", "id"]), by_id(expected).select(["s", "id"]))
    assert part.column("st.b").to_pylist() == [v["b"] for v in by_id(expected).column("st").to_pylist()]
    frags = ds.fragments()
    theirs = oracle.get_fragments()
    assert [f.id for f in frags] == [f.fragment_id for f in theirs]
    for f, of in zip(frags, theirs):
        assert f.physical_rows == of.physical_rows, f.id
        assert f.num_rows == of.count_rows(), f.id


@pytest.mark.parametrize("kind", READABLE)
def test_every_version_reads_what_pylance_reads(kinds, kind):
    path = str(kinds[kind])
    versions = [v["version"] for v in lance.dataset(path).versions()]
    assert len(versions) >= 4
    for v in versions:
        oracle = lance.dataset(path, version=v)
        ds = reader.dataset(path, version=v)
        assert ds.count_rows() == oracle.count_rows(), v
        assert_same_table(by_id(ds.to_table()), by_id(oracle.to_table()))


@pytest.mark.parametrize("kind", REFUSED)
def test_refuses_what_cannot_be_read_exactly(kinds, kind):
    path = kinds[kind]
    needle = old_releases.refusal_needle(kind, path)
    assert needle
    with pytest.raises(LanceFormatError) as e:
        reader.dataset(path).to_table()
    assert needle in str(e.value) and str(path) in str(e.value), str(e.value)


def test_unknown_row_count_names_the_fragment(kinds):
    path = kinds["unreadable_no_row_count"]
    for call in (lambda ds: ds.count_rows(), lambda ds: ds.fragments(), lambda ds: list(ds.to_batches())):
        with pytest.raises(LanceFormatError, match=r"fragment 1 lists no data files"):
            call(reader.dataset(path))


def test_what_the_kinds_are_made_of(kinds):
    """The rewrites happened (a fixture that pylance 14 would have written anyway tests nothing)."""
    def manifest(kind):
        return old_releases.read_manifest(old_releases.latest_manifest(kinds[kind]))

    m = manifest("no_physical_rows_legacy")
    assert not m.HasField("writer_version") and all(f.physical_rows == 0 for f in m.fragments)
    assert any(f.HasField("deletion_file") for f in m.fragments) and any(len(f.files) == 2 for f in m.fragments)
    m = manifest("no_deleted_counts")
    dels = [f.deletion_file for f in m.fragments if f.HasField("deletion_file")]
    assert {d.file_type for d in dels} == {0, 1} and all(d.num_deleted_rows == 0 for d in dels)
    m = manifest("wrong_physical_rows_no_writer")
    frags = lance.dataset(str(kinds["wrong_physical_rows_no_writer"])).get_fragments()
    oracle = {f.fragment_id: f.physical_rows for f in frags}
    assert any(f.physical_rows < oracle[f.id] for f in m.fragments)
    for kind, data_format in (("v03_files", "2.0"), ("v03_under_legacy_manifest", "0.1")):
        m = manifest(kind)
        assert m.data_format.version == data_format
        assert _versions(m) == {(0, 3)}
    m = manifest("v03_mixed_with_legacy")
    assert _versions(m) == {(0, 2), (0, 3)}
    assert not manifest("v03_mixed_no_data_format").HasField("data_format")
    m = manifest("lance_0_7_era")
    assert not m.HasField("data_format") and not m.HasField("writer_version")
    assert {(df.file_major_version, df.file_minor_version, df.file_size_bytes)
            for f in m.fragments for df in f.files} == {(0, 0, 0)}
    first = old_releases.read_manifest(Path(old_releases.version_files(str(kinds["lance_0_7_era"]))[1]))
    assert not first.HasField("writer_version") and all(f.physical_rows == 0 for f in first.fragments)


# -- file versions ------------------------------------------------------------------------------------

def _listed_as(path: Path, major: int, minor: int, data_format: Optional[str]) -> None:
    def edit(m):
        for f in m.fragments:
            for df in f.files:
                df.file_major_version, df.file_minor_version = major, minor
        if data_format is None:
            m.ClearField("data_format")
        else:
            m.data_format.version = data_format
    old_releases.rewrite_manifest(old_releases.latest_manifest(path), edit)


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
@pytest.mark.parametrize("listed", [(0, 0), (0, 2)])
def test_a_file_listed_as_legacy_is_read_by_its_footer(tmp_path, version, listed):
    path = tmp_path / "d"
    old_releases.write_history(path, version, seed=5)
    expected = lance.dataset(str(path)).to_table()
    _listed_as(path, *listed, data_format="0.1")
    ds = reader.dataset(path)
    assert {df.file_version for f in ds.fragments() for df in f.files} == {"legacy"}
    assert_same_table(by_id(ds.to_table()), by_id(expected))


def test_a_2_0_footer_may_say_2_0_or_0_3(kinds, tmp_path):
    path = tmp_path / "d"
    shutil.copytree(kinds["v03_files"], path)
    expected = reader.dataset(path).to_table()
    m = old_releases.read_manifest(old_releases.latest_manifest(path))
    old_releases.set_footer_version(path / "data" / m.fragments[0].files[0].path, 2, 0)
    assert_same_table(reader.dataset(path).to_table(), expected)
    old_releases.set_footer_version(path / "data" / m.fragments[0].files[0].path, 0, 2)
    with pytest.raises(LanceFormatError, match=f"{m.fragments[0].files[0].path}: the manifest lists file version "
                                               r"2\.0, the file's footer says 0\.2"):
        reader.dataset(path).to_table()


def test_mixed_versions_are_fine_under_a_data_format(kinds):
    ds = reader.dataset(kinds["v03_mixed_with_legacy"])
    assert {df.file_version for f in ds.fragments() for df in f.files} == {"legacy", "2.0"}


def test_unsupported_listed_version(kinds, tmp_path):
    path = tmp_path / "d"
    shutil.copytree(kinds["v03_files"], path)
    _listed_as(path, 3, 0, data_format="2.0")
    with pytest.raises(LanceFormatError, match=r"unsupported data file version 3\.0"):
        reader.dataset(path).to_table()
    _listed_as(path, 3, 0, data_format=None)
    with pytest.raises(LanceFormatError, match=r"unsupported file version 3\.0"):
        reader.dataset(path)


# -- row counts ---------------------------------------------------------------------------------------

def test_files_of_a_fragment_that_disagree_on_rows(kinds, tmp_path):
    """Physical rows come from the first file; a second file of other length is an error naming it."""
    path = tmp_path / "d"
    shutil.copytree(kinds["no_physical_rows_v2"], path)
    m = old_releases.read_manifest(old_releases.latest_manifest(path))
    rows = {f.fragment_id: f.physical_rows for f in lance.dataset(str(path)).get_fragments()}
    small = min((f for f in m.fragments if len(f.files) == 2), key=lambda f: rows[f.id])
    assert rows[small.id] < rows[0]
    stray = small.files[1].path

    def edit(m):
        m.fragments[0].files[1].path = stray
    old_releases.rewrite_manifest(old_releases.latest_manifest(path), edit)
    ds = reader.dataset(path)
    assert ds.fragments()[0].physical_rows == 40
    with pytest.raises(LanceFormatError, match=f"{stray}: field 'z' has .* rows, fragment 0 has 40 physical rows"):
        ds.to_table()
    assert ds.to_table(columns=["id"]).num_rows > 0  # the first file alone is fine


def test_deletion_beyond_the_derived_rows(kinds, tmp_path):
    path = tmp_path / "d"
    shutil.copytree(kinds["lance_0_7_era"], path)
    m = old_releases.read_manifest(old_releases.latest_manifest(path))
    rows = {f.fragment_id: f.physical_rows for f in lance.dataset(str(path)).get_fragments()}
    src = m.fragments[0]
    assert src.HasField("deletion_file")
    dst = min(m.fragments, key=lambda f: rows[f.id])
    d = src.deletion_file
    name = f"{dst.id}-{d.read_version}-{d.id}.arrow"
    shutil.copy(path / "_deletions" / f"{src.id}-{d.read_version}-{d.id}.arrow", path / "_deletions" / name)

    def edit(m):
        f = next(f for f in m.fragments if f.id == dst.id)
        f.deletion_file.CopyFrom(d)
    old_releases.rewrite_manifest(old_releases.latest_manifest(path), edit)
    with pytest.raises(LanceFormatError, match=f"{name}: deleted row offset .* is not below the fragment's"):
        reader.dataset(path).count_rows()


def test_modern_datasets_read_no_extra_metadata(datasets_dir, monkeypatch):
    """With a writer_version and the counts recorded, counting opens neither data nor deletion files."""
    def boom(*a, **k):
        raise AssertionError("read a file to count rows")
    monkeypatch.setattr(dataset_module, "data_file_rows", boom)
    monkeypatch.setattr(dataset_module._del, "read_deletions", boom)
    for name in ("rich_legacy", "rich_2_0", "bitmap_2_2"):
        path = datasets_dir / name
        assert reader.dataset(path).count_rows() == lance.dataset(str(path)).count_rows()


# -- property test ------------------------------------------------------------------------------------

CASES = 60


@pytest.mark.parametrize("case", range(CASES))
def test_old_release_damage_property(tmp_path, case):
    rng = np.random.default_rng(1000 + case)
    path = tmp_path / "d"
    version = old_releases.random_dataset(path, rng)
    truth = lance.dataset(str(path)).to_table()
    done, consistent = old_releases.damage(path, rng)
    what = f"case {case} ({version}): {done}"

    theirs = old_releases.pylance_reads(path)
    try:
        ds = reader.dataset(path)
        count = ds.count_rows()
        ours = ds.to_table()
    except LanceFormatError as e:
        assert not consistent, f"{what}: refused a consistent manifest: {e}"
        assert str(path) in str(e), f"{what}: {e}"
        return
    # read: exactly the rows written, never fewer or others
    assert consistent, f"{what}: read an inconsistent manifest ({ours.num_rows} rows, {truth.num_rows} written)"
    assert count == truth.num_rows, what
    assert_same_table(by_id(ours), by_id(truth))
    assert "error" not in theirs, f"{what}: pylance refuses: {theirs.get('error')}"
    assert theirs["count_rows"] == count, what
    assert_same_table(by_id(theirs["table"]), by_id(truth))
