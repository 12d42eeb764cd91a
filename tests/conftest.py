"""Shared test setup: generated protos, python/ and integration-tests/ on sys.path, and
datasets written by pylance (the oracle) once per session."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYTHON_DIR = REPO / "python"
for p in (PYTHON_DIR, REPO / "integration-tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

if not (PYTHON_DIR / "lance_spark" / "_proto" / "table_pb2.py").exists():
    from gen_protos import generate  # noqa: E402

    generate(REPO / "protos", PYTHON_DIR / "lance_spark" / "_proto")


def _write_history(path: Path, version: str, v2_paths: bool, stable_ids: bool) -> None:
    """rich data: write (3 fragments), append, sparse delete (.arrow), add a column."""
    import lance
    import pyarrow as pa
    import pyarrow.compute as pc
    from datagen import rich_table

    common = dict(data_storage_version=version, max_rows_per_file=1200)
    lance.write_dataset(rich_table(3000, seed=1), str(path), enable_v2_manifest_paths=v2_paths,
                        enable_stable_row_ids=stable_ids, **common)
    ds = lance.write_dataset(rich_table(1500, seed=2, start=3000), str(path), mode="append", **common)
    ds.delete("id % 97 = 0")
    ds.add_columns({"z": "id * 2"})  # a second data file in every fragment
    last = rich_table(500, seed=3, start=4500)
    last = last.append_column("z", pc.multiply(last.column("id"), 2))
    if version != "legacy":
        # a schema-only column: older fragments have no data file for it (read as nulls)
        ds.add_columns(pa.field("later", pa.string()))
        last = last.append_column("later", pa.array([f"L{i}" for i in range(last.num_rows)]))
    lance.write_dataset(last, str(path), mode="append", **common)


def _write_bitmap(path: Path, version: str, v2_paths: bool, stable_ids: bool) -> None:
    """small data with a dense delete (> 5000 rows of one fragment -> .bin bitmap)."""
    import lance
    from datagen import small_table

    lance.write_dataset(small_table(9000), str(path), data_storage_version=version,
                        max_rows_per_file=7000, enable_v2_manifest_paths=v2_paths,
                        enable_stable_row_ids=stable_ids)
    ds = lance.dataset(str(path))
    ds.add_columns({"z": "id * 2"})
    ds.delete("id >= 100 and id < 5600")
    ds.delete("id % 97 = 0")


DATASETS = {
    # name: (writer, file version, V2 manifest paths, stable row ids)
    "rich_legacy": (_write_history, "legacy", False, False),
    "rich_2_0": (_write_history, "2.0", True, True),
    "rich_2_0_v1paths": (_write_history, "2.0", False, False),
    "bitmap_legacy": (_write_bitmap, "legacy", True, True),
    "bitmap_2_0": (_write_bitmap, "2.0", False, False),
}


@pytest.fixture(scope="session")
def datasets_dir(tmp_path_factory) -> Path:
    pytest.importorskip("lance")
    root = tmp_path_factory.mktemp("lance_datasets")
    for name, (writer, version, v2_paths, stable) in DATASETS.items():
        writer(root / name, version, v2_paths, stable)
    return root


@pytest.fixture
def copy_dataset(datasets_dir, tmp_path):
    """A private copy of a session dataset, safe to corrupt."""
    def make(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(datasets_dir / name, dst)
        return dst
    return make
