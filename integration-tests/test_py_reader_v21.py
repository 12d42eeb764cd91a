"""Randomized differential test of the pure-Python reader at file versions 2.1
and 2.2: random schemas and data (random_tables, seeded; the same generator and
seeds and the same fragment and page sizes as test_read_differential)
written by pylance, read by the Python
reader (`lance_spark.reader`) and by pylance (the oracle), compared value for
value. No Spark.

`LANCE_DIFF_CASES` sets the number of seeds per version (default 150); a failing
seed reproduces alone: `LANCE_DIFF_SEED=<seed> pytest -k py_reader_v21`.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import lance
import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from lance_spark import reader  # noqa: E402
from compare import table_difference  # noqa: E402
from random_tables import describe, diff_seeds, random_table, write_with_pylance  # noqa: E402

CASES = int(os.environ.get("LANCE_DIFF_CASES", "150"))
SEEDS = diff_seeds(CASES)
# Seeds that once failed, kept as regression cases whatever LANCE_DIFF_CASES is.
REGRESSIONS: list[int] = []


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("seed", sorted(set(SEEDS + REGRESSIONS)))
def test_py_reader_differential(tmp_path, version, seed):
    table = random_table(seed, maps=version == "2.2", max_rows=3000, max_bytes=2 << 20)
    path = str(tmp_path / "t.lance")
    what = f"seed {seed} at {version}: {describe(table)}"
    write_with_pylance(table, path, version, seed)
    oracle = lance.dataset(path)
    want = oracle.to_table()
    assert oracle.data_storage_version == version, what
    ours = reader.dataset(path)
    diff = table_difference(ours.to_table(), want)
    assert not diff, f"Python reader vs pylance, {what}: {diff}"
    # a projection, out of order, and streaming in small batches
    cols = table.column_names[::-1][:3]
    diff = table_difference(ours.to_table(columns=cols), oracle.to_table(columns=cols))
    assert not diff, f"projection {cols}, {what}: {diff}"
    batches = list(ours.to_batches(columns=cols, batch_rows=337))
    streamed = pa.Table.from_batches(batches, schema=ours.to_table(columns=cols).schema) if batches else \
        ours.to_table(columns=cols).slice(0, 0)
    diff = table_difference(streamed, oracle.to_table(columns=cols))
    assert not diff, f"to_batches {cols}, {what}: {diff}"
