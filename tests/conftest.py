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


DATASETS = {
    # name: (writer, file version, V2 manifest paths, stable row ids)
    "rich_legacy": ("build_small_history", "legacy", False, False),
    "rich_2_0": ("build_small_history", "2.0", True, True),
    "rich_2_0_v1paths": ("build_small_history", "2.0", False, False),
    "bitmap_legacy": ("build_bitmap_history", "legacy", True, True),
    "bitmap_2_0": ("build_bitmap_history", "2.0", False, False),
    "rich_2_1": ("build_small_history", "2.1", True, True),
    "rich_2_2": ("build_small_history", "2.2", False, False),
    "bitmap_2_2": ("build_bitmap_history", "2.2", True, False),
}


@pytest.fixture(scope="session")
def datasets_dir(tmp_path_factory) -> Path:
    pytest.importorskip("lance")
    import lance_datasets   # integration-tests/: the one place dataset histories are built

    root = tmp_path_factory.mktemp("lance_datasets")
    for name, (writer, version, v2_paths, stable) in DATASETS.items():
        getattr(lance_datasets, writer)(root / name, version, v2_paths, stable)
    return root


@pytest.fixture
def copy_dataset(datasets_dir, tmp_path):
    """A private copy of a session dataset, safe to corrupt."""
    def make(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(datasets_dir / name, dst)
        return dst
    return make
