"""Dataset histories written by pylance (the oracle), for the interop tests and
the pytest suites (tests/): several fragments, several versions (append, sparse
delete -> .arrow, dense delete -> .bin, added columns)."""
from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc

from datagen import rich_table, small_table

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


def build_small_history(path: Path, version: str, v2_paths: bool, stable_ids: bool) -> None:
    """The pytest suites' rich history (tests/): write (3 fragments), append, sparse
    delete (.arrow), add a column."""
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


def build_bitmap_history(path: Path, version: str, v2_paths: bool, stable_ids: bool) -> None:
    """Small data with a dense delete (> 5000 rows of one fragment -> .bin bitmap)."""
    lance.write_dataset(small_table(9000), str(path), data_storage_version=version,
                        max_rows_per_file=7000, enable_v2_manifest_paths=v2_paths,
                        enable_stable_row_ids=stable_ids)
    ds = lance.dataset(str(path))
    ds.add_columns({"z": "id * 2"})
    ds.delete("id >= 100 and id < 5600")
    ds.delete("id % 97 = 0")
