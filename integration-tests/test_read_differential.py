"""Randomized differential test of the reader: random schemas and data
(random_tables, seeded; every type pylance writes, nesting to depth 3, nulls
at every depth, sorted / small / constant / repeated / long values) written
by pylance (the oracle) at file versions 2.1 and 2.2, in several fragments
and small pages, then read by Spark; Spark must return what pylance's
`to_table()` returns, through the documented Lance -> Spark type mapping.

`LANCE_DIFF_CASES` sets the number of seeds per version (default 150: a few
hundred cases in `make test`; `make test-long` runs thousands, with up to
`LANCE_DIFF_MAX_ROWS` rows per table). A failing
seed reproduces alone: `LANCE_DIFF_SEED=<seed> pytest -k read_differential`; a campaign
past the usual seeds sets the first one (`LANCE_DIFF_FIRST_SEED=100000`).
"""
from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest

from compare import assert_same, oracle_rows, spark_rows
from random_tables import describe, diff_seeds, random_table, write_with_pylance

CASES = int(os.environ.get("LANCE_DIFF_CASES", "150"))
SEEDS = diff_seeds(CASES)
# Rows per table at most (make test-long raises it to a few hundred thousand).
MAX_ROWS = int(os.environ.get("LANCE_DIFF_MAX_ROWS", "3000"))
# Seeds that once failed, kept as regression cases whatever LANCE_DIFF_CASES is.
REGRESSIONS: list[int] = []


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("seed", sorted(set(SEEDS + REGRESSIONS)))
def test_read_differential(spark, tmp_path, version, seed):
    table = random_table(seed, maps=version == "2.2", max_rows=MAX_ROWS, max_bytes=max(2 << 20, MAX_ROWS * 700))
    path = str(tmp_path / "in.lance")
    write_with_pylance(table, path, version, seed)
    what = f"seed {seed} at {version}: {describe(table)}"

    ds = lance.dataset(path)
    assert ds.data_storage_version == version, what
    want = oracle_rows(ds.to_table())
    assert_same(spark_rows(spark.read.format("lance").load(path)), want, f"Spark reads pylance's {what}")

    # a projection of the last column and id, in the other order (nested fields included)
    if len(table.column_names) > 1:
        last = table.column_names[-1]
        proj = spark.read.format("lance").load(path).select(last, "id")
        want_proj = [{last: r[last], "id": r["id"]} for r in want]
        assert_same(spark_rows(proj), want_proj, f"projection [{last}, id] of {what}")


def test_generator_covers_the_types():
    """The seeds of make test reach every kind of column the issue lists."""
    seen: set[str] = set()

    def walk(t: pa.DataType) -> None:
        if pa.types.is_map(t):
            seen.add("map")
            walk(t.key_type)
            walk(t.item_type)
        elif pa.types.is_fixed_size_list(t):
            seen.add("vector")
            walk(t.value_type)
        elif pa.types.is_large_list(t):
            seen.add("large_list")
            walk(t.value_type)
        elif pa.types.is_list(t):
            seen.add("list_of_list" if pa.types.is_list(t.value_type) else "list")
            seen.add("list_of_struct" if pa.types.is_struct(t.value_type) else "list")
            walk(t.value_type)
        elif pa.types.is_struct(t):
            seen.add("struct")
            for f in t:
                walk(f.type)
        else:
            seen.add(str(t))

    for seed in range(150):
        for f in random_table(seed, maps=True, max_rows=50, max_bytes=1 << 16).schema:
            walk(f.type)
    for kind in ["map", "vector", "large_list", "list", "list_of_struct", "struct", "string", "large_string",
                 "int64", "uint64", "bool", "decimal128(12, 2)", "date32[day]", "double", "float"]:
        assert kind in seen, f"no seed among the first 150 draws a {kind} column"
