"""Randomized differential test of the writer: random schemas and data
(random_tables, seeded) written by Spark at file versions 2.1 and 2.2, read
by pylance (the oracle) and by Spark, compared value for value with the
table they came from.

`LANCE_DIFF_CASES` sets the number of seeds per version (default 150: a few
hundred cases in `make test`; `make test-long` runs thousands). A failing
seed reproduces alone: `LANCE_DIFF_SEED=<seed> pytest -k write_differential`.
"""
from __future__ import annotations

import os

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from compare import structural
from random_tables import describe, diff_seeds, random_table

CASES = int(os.environ.get("LANCE_DIFF_CASES", "150"))
SEEDS = diff_seeds(CASES)
# Rows per table at most (make test-long raises it).
MAX_ROWS = int(os.environ.get("LANCE_DIFF_MAX_ROWS", "3000"))
# Seeds that once failed, kept as regression cases whatever LANCE_DIFF_CASES is.
REGRESSIONS: list[int] = [
    74,   # a null struct over a list that is never null nor empty: pylance misread an all-valid list layer
]


def _rows(table: pa.Table) -> list:
    table = table.take(pc.sort_indices(table, [("id", "ascending")]))
    return [structural(r) for r in table.to_pylist()]


def _vectors(table: pa.Table) -> str:
    """vectorColumns for the top-level fixed-size lists (so they stay vectors)."""
    return ",".join(f"{f.name}:{f.type.list_size}" for f in table.schema
                    if pa.types.is_fixed_size_list(f.type))


def _first_difference(got: list, want: list) -> str:
    if len(got) != len(want):
        return f"{len(got)} rows, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            cols = [k for k in w if g.get(k) != w.get(k)]
            return f"row {i} (id {w.get('id')}), columns {cols}: got {[g.get(k) for k in cols]!r:.400} " \
                   f"expected {[w.get(k) for k in cols]!r:.400}"
    return ""


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("seed", sorted(set(SEEDS + REGRESSIONS)))
def test_write_differential(spark, tmp_path, version, seed):
    table = random_table(seed, spark_types=True, maps=version == "2.2", max_rows=MAX_ROWS, max_bytes=max(2 << 20, MAX_ROWS * 700))
    staged = tmp_path / "in.parquet"
    pq.write_table(table, staged)
    df = spark.read.parquet(str(staged))
    path = str(tmp_path / "out.lance")
    writer = df.write.format("lance").option("fileVersion", version).option("maxRowsPerFile", 1000)
    if _vectors(table):
        writer = writer.option("vectorColumns", _vectors(table))
    writer.save(path)
    want = _rows(table)
    what = f"seed {seed} at {version}: {describe(table)}"

    ds = lance.dataset(path)
    assert ds.data_storage_version == version, what
    got = _rows(ds.to_table())
    diff = _first_difference(got, want)
    assert not diff, f"pylance reads Spark's {what}: {diff}"

    back = spark.read.format("lance").load(path).toArrow()
    got = _rows(back)
    diff = _first_difference(got, want)
    assert not diff, f"Spark reads Spark's {what}: {diff}"
