"""Datasets as old Lance releases left them (manifests without row counts,
without a writer version, with counts that are rows minus deletions, 2.0
files named 0.3, legacy manifests over 2.0 files), made by
tests/fixtures/old_releases.py: Spark reads exactly what pylance 14 reads,
counts them from the manifest as pylance counts them, and a change committed
on top of one is a manifest pylance reads with the counts filled in."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import lance
import pyarrow as pa
import pytest

from compare import assert_same, assert_same_table, oracle_rows, spark_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))
import old_releases  # noqa: E402

from lance_spark._protos import table_pb2  # noqa: E402

READABLE = [k for k in old_releases.KINDS
            if k not in old_releases.PYLANCE_REFUSES and k != "unreadable_no_row_count"]


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("old_releases")
    out = {}
    for kind in old_releases.KINDS:
        old_releases.build(kind, root / kind, seed=7)
        out[kind] = root / kind
    return out


def latest_manifest(path: Path) -> table_pb2.Manifest:
    from lance_spark.reader.table.manifest import parse_manifest, version_files

    files = version_files(str(path))
    return parse_manifest(files[max(files)])


@pytest.mark.parametrize("kind", READABLE)
def test_spark_reads_what_pylance_reads(spark, datasets, kind):
    path = str(datasets[kind])
    expected = lance.dataset(path).to_table()
    assert expected.num_rows > 0, "a fixture whose rows pylance does not see tests nothing"
    df = spark.read.format("lance").load(path)
    assert df.count() == expected.num_rows                         # from the manifest (or its files)
    assert len(df.select("id").collect()) == expected.num_rows     # from the data
    assert_same_table(df, expected, kind)
    filtered = df.where("id % 3 = 1")
    # pylance's filtered scan refuses fragments without row counts ("Fragments are
    # missing row count stats"): filter its full read instead
    want = expected.filter(pa.array(expected["id"].to_numpy() % 3 == 1))
    assert_same_table(filtered, want, f"{kind} filtered")


@pytest.mark.parametrize("kind", READABLE)
def test_metadata_table_counts_fragments_as_pylance(spark, datasets, kind):
    path = str(datasets[kind])
    want = {f.fragment_id: f.count_rows() for f in lance.dataset(path).get_fragments()}
    rows = spark.sql(f"SELECT * FROM lance.`{path}`.fragments").collect()
    got = {r["fragment_id"]: r["num_rows"] for r in rows}
    assert got == {k: v for k, v in want.items() if v > 0}


REFUSED = sorted(set(old_releases.KINDS) & old_releases.PYLANCE_REFUSES) + old_releases.INCONSISTENT


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    root = tmp_path_factory.mktemp("old_releases_refused")
    for kind in old_releases.INCONSISTENT:
        old_releases.build(kind, root / kind, seed=7)
    return root


@pytest.mark.parametrize("kind", REFUSED)
def test_what_cannot_be_read_exactly_is_a_clear_error(spark, datasets, refused, kind):
    """What pylance refuses, and what pylance reads wrongly (a writer version with
    a row count below the file's: it returns too few rows), is an error naming the file."""
    path = datasets[kind] if kind in datasets else refused / kind
    needle = old_releases.refusal_needle(kind, path)
    assert needle
    with pytest.raises(Exception) as e:
        spark.read.format("lance").load(str(path)).collect()
    assert needle in str(e.value), str(e.value)[:2000]


def _no_writer_wrong_counts(m) -> None:
    """The 1531 migration on a 2.0 dataset: rows minus deletions, no writer version."""
    m.ClearField("writer_version")
    for f in m.fragments:
        if f.HasField("deletion_file"):
            f.physical_rows -= f.deletion_file.num_deleted_rows


@pytest.mark.parametrize("kind", ["no_physical_rows_v2", "v03_files", "v03_under_legacy_manifest",
                                  "v03_no_data_format", "no_writer_wrong_counts_v2"])
def test_delete_on_an_old_release_commits_the_counts(spark, datasets, tmp_path, kind):
    """A change on top of an old manifest writes it as the reference would: row
    counts, deletion counts, a writer version and the files' version. (Legacy
    datasets are read, not written: this connector writes 2.x files only.)"""
    import shutil

    path = tmp_path / kind
    if kind == "no_writer_wrong_counts_v2":
        old_releases.write_history(path, "2.0", seed=7)
        before = lance.dataset(str(path)).to_table()
        old_releases.rewrite_manifest(old_releases.latest_manifest(path), _no_writer_wrong_counts)
        # the files' rows, which pylance counts without a writer version
        assert lance.dataset(str(path)).count_rows() == before.num_rows
    else:
        shutil.copytree(datasets[kind], path)
        before = lance.dataset(str(path)).to_table()
    spark.sql(f"DELETE FROM lance.`{path}` WHERE id % 5 = 0")
    after = lance.dataset(str(path)).to_table()
    want = before.filter(pa.array(before["id"].to_numpy() % 5 != 0))
    assert after.num_rows == want.num_rows < before.num_rows
    assert sorted(after["id"].to_pylist()) == sorted(want["id"].to_pylist())
    assert lance.dataset(str(path)).count_rows() == want.num_rows
    m = latest_manifest(path)
    assert m.HasField("writer_version")
    for f in m.fragments:
        assert f.physical_rows > 0, f
        if f.HasField("deletion_file"):
            assert 0 < f.deletion_file.num_deleted_rows < f.physical_rows, f
    assert m.data_format.version == "2.0", m.data_format
    df = spark.read.format("lance").load(str(path))
    assert_same_table(df, after, f"{kind} after DELETE")


# A slice of tests/test_reader_old_releases.py's property test, through Spark:
# random histories whose latest manifest gets random old-release damage are
# read exactly (every row written, counted as pylance counts) or refused,
# never read with other rows.
SPARK_CASES = 150 if os.environ.get("LANCE_LONG_TESTS") else 16


@pytest.mark.parametrize("case", range(SPARK_CASES))
def test_old_release_damage_property_in_spark(spark, tmp_path, case):
    import numpy as np

    rng = np.random.default_rng(5000 + case)
    path = tmp_path / "d"
    version = old_releases.random_dataset(path, rng)
    truth = lance.dataset(str(path)).to_table()
    done, consistent = old_releases.damage(path, rng)
    what = f"case {case} ({version}): {done}"
    try:
        df = spark.read.format("lance").load(str(path))
        count = df.count()
        rows = spark_rows(df)
    except Exception as e:  # noqa: BLE001 -- a refusal must be a clear error naming the dataset
        assert not consistent, f"{what}: refused a consistent manifest: {str(e)[:1500]}"
        assert str(path) in str(e) and "LanceFormatException" in str(e), f"{what}: {str(e)[:1500]}"
        return
    assert consistent, f"{what}: read an inconsistent manifest ({count} rows, {truth.num_rows} written)"
    assert count == truth.num_rows, what
    assert_same(rows, oracle_rows(truth), what)
