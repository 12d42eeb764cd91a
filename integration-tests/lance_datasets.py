"""Datasets written by pylance (the oracle) for interop tests: several fragments,
several versions (append, sparse delete -> .arrow, dense delete -> .bin, added column)."""
from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

from datagen import rich_table

ROWS_PER_FRAGMENT = 6000
FRAGMENTS = 5


def build_history(path: Path, file_version: str, v2_paths: bool, stable_row_ids: bool) -> list[int]:
    """Writes versions 1..5 of a rich dataset at `path`; returns the versions."""
    n = ROWS_PER_FRAGMENT * FRAGMENTS
    ds = lance.write_dataset(rich_table(n, seed=11), str(path), data_storage_version=file_version,
                             max_rows_per_file=ROWS_PER_FRAGMENT, enable_v2_manifest_paths=v2_paths,
                             enable_stable_row_ids=stable_row_ids)
    ds = lance.write_dataset(rich_table(2000, seed=12, start=n), str(path), mode="append",
                             max_rows_per_file=ROWS_PER_FRAGMENT)
    ds.add_columns({"z": "id * 2"})                # a second data file in every fragment
    ds = lance.dataset(str(path))
    if file_version != "legacy":                   # pylance refuses this on legacy files
        ds.add_columns(pa.schema([pa.field("n", pa.int32())]))  # metadata only: no fragment has it
        ds = lance.dataset(str(path))
    ds.delete("id % 97 = 0")                       # sparse: .arrow deletion files
    ds = lance.dataset(str(path))
    ds.delete("id >= 6000 AND id < 11600")         # dense in fragment 1: .bin deletion file
    return [v["version"] for v in lance.dataset(str(path)).versions()]


def deletion_suffixes(path: Path) -> set[str]:
    return {p.suffix for p in (path / "_deletions").glob("*")}
