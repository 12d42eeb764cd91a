"""Comparison of what Spark returns with what pylance (the oracle) returns,
after applying the documented Lance -> Spark type mapping to pylance's table."""
from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def spark_table(df) -> pa.Table:
    """Collects a Spark DataFrame as an Arrow table (in Spark's Arrow types); a table is itself."""
    if isinstance(df, pa.Table):
        return df
    if hasattr(df, "toArrow"):
        return df.toArrow()
    # pyspark 3.5 (toArrow arrived in 4.0)
    from pyspark.sql.pandas.types import to_arrow_schema
    batches = df._collect_as_arrow()
    return pa.Table.from_batches(batches) if batches else to_arrow_schema(df.schema).empty_table()


def spark_rows(df, order_by: str = "id") -> list[dict]:
    """Collects a Spark DataFrame (through Arrow) as plain Python values, ordered by `order_by`."""
    table = spark_table(df)
    return table.take(pc.sort_indices(table, [(order_by, "ascending")])).to_pylist()


def _norm_value(v: Any, t: pa.DataType) -> Any:
    """pylance's Python value as Spark returns it for the mapped type."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: _norm_value(v.get(f.name), f.type) for f in t}
    if pa.types.is_map(t):
        return [(_norm_value(k, t.key_type), _norm_value(x, t.item_type)) for k, x in v]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [_norm_value(x, t.value_type) for x in v]
    if pa.types.is_uint64(t):
        return decimal.Decimal(v)
    if pa.types.is_float16(t):
        return float(v)
    if pa.types.is_fixed_size_binary(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return bytearray(v)
    if pa.types.is_date64(t) or pa.types.is_date32(t):
        return v if isinstance(v, dt.date) and not isinstance(v, dt.datetime) else v.date()
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v
    if pa.types.is_time(t):
        return v
    return v


def _floor_ns_timestamps(table: pa.Table) -> pa.Table:
    """Spark keeps microseconds: nanosecond timestamps are floored (documented mapping)."""
    for i, f in enumerate(table.schema):
        if pa.types.is_timestamp(f.type) and f.type.unit == "ns":
            utc = table[f.name].cast(pa.timestamp("ns"))  # the UTC instants, no zone rules
            col = pc.floor_temporal(utc, unit="microsecond").cast(pa.timestamp("us")).cast(
                pa.timestamp("us", f.type.tz))
            table = table.set_column(i, f.name, col)
    return table


def _needs_norm(t: pa.DataType) -> bool:
    """Whether pylance's Python values of type `t` differ from what Spark returns."""
    if pa.types.is_struct(t):
        return any(_needs_norm(f.type) for f in t)
    if pa.types.is_map(t):
        return _needs_norm(t.key_type) or _needs_norm(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _needs_norm(t.value_type)
    return (pa.types.is_uint64(t) or pa.types.is_float16(t) or pa.types.is_date64(t)
            or (pa.types.is_timestamp(t) and t.tz is not None))


def oracle_rows(table: pa.Table, order_by: str = "id") -> list[dict]:
    table = _floor_ns_timestamps(table.take(pc.sort_indices(table, [(order_by, "ascending")])))
    cols = {}
    for name in table.column_names:
        t = table.schema.field(name).type
        values = table[name].to_pylist()
        cols[name] = [_norm_value(v, t) for v in values] if _needs_norm(t) else values
    return [{name: cols[name][i] for name in table.column_names} for i in range(table.num_rows)]


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_eq(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b))
    if isinstance(a, (bytes, bytearray)) and isinstance(b, (bytes, bytearray)):
        return bytes(a) == bytes(b)
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime):
        return a.replace(tzinfo=None) == b.replace(tzinfo=None)
    return a == b


def assert_same(spark_side: list[dict], oracle_side: list[dict], context: str) -> None:
    assert len(spark_side) == len(oracle_side), f"{context}: {len(spark_side)} rows from Spark, {len(oracle_side)} from pylance"
    for i, (s, o) in enumerate(zip(spark_side, oracle_side)):
        if not _eq(s, o):
            for k in o:
                if not _eq(s.get(k), o[k]):
                    raise AssertionError(f"{context}: row {i} (id={o.get('id')}) column {k}: "
                                         f"Spark {s.get(k)!r} != pylance {o[k]!r}")
            raise AssertionError(f"{context}: row {i} differs: {s} vs {o}")


def structural(v: Any) -> Any:
    """A Python value compared structurally: NaN equal to NaN, tuples as lists."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dict):
        return {k: structural(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [structural(x) for x in v]
    return v


def table_difference(ours: pa.Table, theirs: pa.Table) -> str:
    """The first difference between two Arrow tables (schema, row count, then
    the first differing value of each column), or "" when they are equal."""
    if not ours.schema.equals(theirs.schema):
        return f"schema {ours.schema} != {theirs.schema}"
    if ours.num_rows != theirs.num_rows:
        return f"{ours.num_rows} rows, expected {theirs.num_rows}"
    for name in theirs.column_names:
        a, b = ours.column(name).combine_chunks(), theirs.column(name).combine_chunks()
        if a.equals(b):
            continue
        for i, (x, y) in enumerate(zip(a.to_pylist(), b.to_pylist())):
            if structural(x) != structural(y):
                return f"column {name} row {i}: got {x!r:.300} expected {y!r:.300}"
    return ""


def _equal_arrays(a: pa.Array, b: pa.Array) -> bool:
    """Arrow equality of two arrays of one type, NaN equal to NaN in float columns and
    in the float fields of structs (each field with its struct's nulls applied)."""
    if a.type != b.type or len(a) != len(b):
        return False
    if pa.types.is_floating(a.type):
        if not (a.is_null().equals(b.is_null()) and pc.is_nan(a).equals(pc.is_nan(b))):
            return False
        fill = lambda x: pc.if_else(pc.is_nan(x), pa.scalar(0, x.type), x)
        return fill(a).equals(fill(b))
    if pa.types.is_struct(a.type):
        return a.is_null().equals(b.is_null()) and all(
            _equal_arrays(x, y) for x, y in zip(a.flatten(), b.flatten()))
    return a.equals(b)


def _same_column(ours: pa.ChunkedArray, theirs: pa.ChunkedArray) -> bool:
    """Whether pylance's column, cast to the Arrow type Spark returned, equals Spark's:
    a quick exact check (casts used are lossless: wider ints, uint64 to decimal(20,0),
    half to single floats, string/binary widths, time zones). False means "not shown
    equal here" (NaNs, casts Arrow lacks): the caller compares those values one by one."""
    try:
        cast = theirs.cast(ours.type, safe=True)
        if not _equal_arrays(cast.combine_chunks(), ours.combine_chunks()):
            return False
        # lossless: the cast goes back to exactly pylance's values (a double column
        # returned as FLOAT by mistake fails here, not in the comparison above)
        return _equal_arrays(cast.cast(theirs.type, safe=True).combine_chunks(), theirs.combine_chunks())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False


def assert_same_table(df, expected: pa.Table, context: str, order_by: str = "id") -> None:
    """assert_same(spark_rows(df), oracle_rows(expected)) with the same verdict, faster:
    columns equal as Arrow arrays (after the documented mapping) are not converted to
    Python values; the others are compared value by value as assert_same does."""
    ours = spark_table(df)
    assert sorted(ours.column_names) == sorted(expected.column_names), \
        f"{context}: columns {ours.column_names} from Spark, {expected.column_names} from pylance"
    assert ours.num_rows == expected.num_rows, \
        f"{context}: {ours.num_rows} rows from Spark, {expected.num_rows} from pylance"
    ours = ours.take(pc.sort_indices(ours, [(order_by, "ascending")]))
    theirs = _floor_ns_timestamps(expected.take(pc.sort_indices(expected, [(order_by, "ascending")])))
    slow = [n for n in theirs.column_names if not _same_column(ours[n], theirs[n])]
    if slow:
        keep = slow if order_by in slow else [order_by] + slow
        assert_same(ours.select(keep).to_pylist(), oracle_rows(theirs.select(keep), order_by), context)
