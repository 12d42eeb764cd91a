"""The fast Arrow comparison (assert_same_table) gives assert_same's verdict: differences
anywhere are found, NaNs and the documented type mapping are equal (no Spark needed)."""
from __future__ import annotations

import decimal
import math

import pyarrow as pa
import pytest

from compare import assert_same, assert_same_table, oracle_rows


def pylance_side() -> pa.Table:
    return pa.table({
        "id": pa.array([3, 1, 2], pa.int64()),
        "f": pa.array([math.nan, 1.5, None], pa.float64()),
        "u": pa.array([2**64 - 1, 0, None], pa.uint64()),
        "h": pa.array([1.5, None, -2.0], pa.float16()),
        "st": pa.array([{"a": 1, "c": math.nan}, None, {"a": None, "c": 2.0}],
                       pa.struct([("a", pa.int32()), ("c", pa.float64())])),
        "l": pa.array([[1.0, math.nan], [], None], pa.list_(pa.float64())),
    })


def spark_side() -> pa.Table:
    """What Spark returns for it (ordered by id), in Spark's Arrow types."""
    return pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "f": pa.array([1.5, None, math.nan], pa.float64()),
        "u": pa.array([decimal.Decimal(0), None, decimal.Decimal(2**64 - 1)], pa.decimal128(20, 0)),
        "h": pa.array([None, -2.0, 1.5], pa.float32()),
        "st": pa.array([None, {"a": None, "c": 2.0}, {"a": 1, "c": math.nan}],
                       pa.struct([("a", pa.int32()), ("c", pa.float64())])),
        "l": pa.array([[], None, [1.0, math.nan]], pa.large_list(pa.float64())),
    })


def test_equal_tables_pass_both_ways():
    assert_same_table(spark_side(), pylance_side(), "equal")
    assert_same(spark_side().to_pylist(), oracle_rows(pylance_side()), "equal")


@pytest.mark.parametrize("column,row,value", [
    ("f", 2, 1.0), ("f", 0, None), ("u", 2, decimal.Decimal(2**64 - 2)), ("h", 2, 1.25),
    ("st", 2, {"a": 2, "c": math.nan}), ("st", 1, None), ("l", 2, [1.0, 1.0]), ("l", 0, None)])
def test_one_changed_value_is_found(column, row, value):
    t = spark_side()
    values = t[column].to_pylist()
    values[row] = value
    changed = t.set_column(t.schema.get_field_index(column), column, pa.array(values, t[column].type))
    with pytest.raises(AssertionError, match=column):
        assert_same_table(changed, pylance_side(), "changed")


def test_a_narrowed_double_is_found():
    """Spark returning FLOAT for a DOUBLE column: the cast to float32 compares equal,
    the way back does not."""
    theirs = pa.table({"id": pa.array([1], pa.int64()), "d": pa.array([0.1], pa.float64())})
    ours = pa.table({"id": pa.array([1], pa.int64()), "d": pa.array([0.1], pa.float32())})
    with pytest.raises(AssertionError, match="d"):
        assert_same_table(ours, theirs, "narrowed")


def test_missing_or_extra_columns_and_rows_are_found():
    with pytest.raises(AssertionError, match="columns"):
        assert_same_table(spark_side().drop_columns(["h"]), pylance_side(), "missing")
    with pytest.raises(AssertionError, match="rows"):
        assert_same_table(spark_side().slice(0, 2), pylance_side(), "fewer")
