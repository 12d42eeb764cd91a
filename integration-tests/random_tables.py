"""Seeded random tables for the differential tests: random schemas and data
shaped like users' data (sorted keys, small ints, constants, repeated strings,
nulls at every depth, long values, empty and long lists), written by one
implementation and read by another.

    random_table(seed, spark_types=False, maps=True, max_rows=20000, max_bytes=8 << 20) -> pa.Table
    describe(table) -> str
    write_with_pylance(table, path, version, seed)   # fragments and page sizes drawn from the seed
    diff_seeds(cases) -> list[int]                   # the seeds a differential module runs

The same seed gives the same table. `spark_types=True` keeps to types Spark
writes and reads back unchanged (no unsigned ints, large lists/strings,
half floats or nanosecond timestamps; timestamps in UTC); `maps=False` leaves
maps out (file versions below 2.2 have none).
"""
from __future__ import annotations

import datetime as dt
import decimal
import os
from typing import Callable

import numpy as np
import pyarrow as pa

Gen = Callable[[np.random.Generator, int], pa.Array]


def diff_seeds(cases: int) -> list[int]:
    """`LANCE_DIFF_SEED` alone, or `cases` seeds from `LANCE_DIFF_FIRST_SEED` (default 0): a
    campaign past the seeds every run covers sets the first seed (`LANCE_DIFF_FIRST_SEED=100000`)."""
    only = os.environ.get("LANCE_DIFF_SEED")
    if only:
        return [int(only)]
    first = int(os.environ.get("LANCE_DIFF_FIRST_SEED", "0"))
    return list(range(first, first + cases))

_WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
          "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon"]
_CHARS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_/.:", dtype=np.uint8)


def _mask(rng: np.random.Generator, n: int, shape: str) -> np.ndarray | None:
    """Null positions for a column of the given null shape."""
    if shape == "none":
        return None
    p = {"few": 0.05, "half": 0.5, "most": 0.95, "all": 1.0}[shape]
    return rng.random(n) < p


def _null_shape(rng: np.random.Generator, nullable: bool) -> str:
    if not nullable:
        return "none"
    return str(rng.choice(["none", "none", "few", "few", "half", "most", "all"]))


def _ints(rng: np.random.Generator, n: int, bits: int, signed: bool) -> np.ndarray:
    """Integers in one of the shapes users' data has."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    shape = rng.choice(["sorted", "small", "constant", "runs", "random", "extremes"])
    if shape == "sorted":
        start = int(rng.integers(lo // 2, max(lo // 2 + 1, hi // 2)))
        v = start + np.cumsum(rng.integers(0, 3, size=n))
    elif shape == "small":
        v = rng.integers(0, 1 << int(rng.integers(1, 6)), size=n)
    elif shape == "constant":
        v = np.full(n, int(rng.integers(lo, hi, endpoint=True, dtype=np.int64 if signed or bits < 64 else np.uint64)))
    elif shape == "runs":
        v = np.repeat(rng.integers(0, 100, size=n // 50 + 1), 50)[:n]
    elif shape == "extremes":
        v = rng.choice(np.array([lo, hi, 0, 1, lo + 1, hi - 1], dtype=object), size=n)
    else:
        v = rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64 if signed or bits < 64 else np.uint64)
    return np.clip(np.asarray(v, dtype=object), lo, hi)


def _int_gen(bits: int, signed: bool) -> Gen:
    t = {(8, True): pa.int8(), (16, True): pa.int16(), (32, True): pa.int32(), (64, True): pa.int64(),
         (8, False): pa.uint8(), (16, False): pa.uint16(), (32, False): pa.uint32(), (64, False): pa.uint64()}[(bits, signed)]
    return lambda rng, n: pa.array(_ints(rng, n, bits, signed).tolist(), t)


def _float_gen(t: pa.DataType) -> Gen:
    def gen(rng: np.random.Generator, n: int) -> pa.Array:
        shape = rng.choice(["prices", "random", "constant", "special"])
        if shape == "prices":
            v = np.round(rng.gamma(2.0, 20.0, size=n), 2)
        elif shape == "constant":
            v = np.full(n, float(rng.normal()))
        elif shape == "special":
            v = rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, 1.5]), size=n)
        else:
            v = rng.normal(size=n) * 10 ** float(rng.integers(-3, 6))
        return pa.array(v.astype(np.float32 if t == pa.float32() else np.float64), t)
    return gen


def _strings(rng: np.random.Generator, n: int) -> list[str]:
    shape = rng.choice(["words", "ids", "urls", "random", "long", "empty", "constant"])
    if shape == "words":
        k = int(rng.integers(1, len(_WORDS)))
        return [_WORDS[i] for i in rng.integers(0, k, size=n)]
    if shape == "ids":
        start = int(rng.integers(0, 10**6))
        return [f"key-{start + i:08d}" for i in range(n)]
    if shape == "urls":
        return [f"https://shop.example.com/{_WORDS[a % 20]}/item-{b}?ref={c}"
                for a, b, c in zip(rng.integers(0, 20, n), rng.integers(0, 10**6, n), rng.integers(0, 9, n))]
    if shape == "long":   # wide values: full-zip pages
        lens = rng.integers(200, 1200, size=n)
    elif shape == "empty":
        return ["" if i % 3 else "x" for i in range(n)]
    elif shape == "constant":
        return ["the same value"] * n
    else:
        lens = rng.integers(0, 24, size=n)
    chars = _CHARS[rng.integers(0, len(_CHARS), size=int(lens.sum()))].tobytes().decode()
    ends = np.cumsum(lens)
    return [chars[e - l:e] for e, l in zip(ends.tolist(), lens.tolist())]


def _string_gen(t: pa.DataType) -> Gen:
    def gen(rng: np.random.Generator, n: int) -> pa.Array:
        s = _strings(rng, n)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return pa.array([x.encode() for x in s], t)
        return pa.array(s, t)
    return gen


def _date_gen(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array((18000 + np.sort(rng.integers(-20000, 20000, size=n))).astype(np.int32), pa.date32())


def _timestamp_gen(t: pa.DataType) -> Gen:
    def gen(rng: np.random.Generator, n: int) -> pa.Array:
        base = 1_600_000_000_000_000
        v = base + np.cumsum(rng.integers(0, 10**7, size=n)) if rng.random() < 0.5 else \
            base + rng.integers(-10**15, 10**15, size=n)
        return pa.array(v.astype(np.int64), pa.timestamp("us")).cast(t)
    return gen


def _decimal_gen(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array([decimal.Decimal(int(x)).scaleb(-2) for x in rng.integers(-10**8, 10**8, size=n)],
                    pa.decimal128(12, 2))


def _with_nulls(arr: pa.Array, mask: np.ndarray | None) -> pa.Array:
    if mask is None or len(arr) == 0:
        return arr
    return pa.compute.if_else(pa.array(mask), pa.nulls(len(arr), arr.type), arr)


class _Builder:
    """Draws a random type (depth-limited) and the data for it."""

    def __init__(self, rng: np.random.Generator, spark_types: bool, maps: bool):
        self.rng = rng
        self.spark = spark_types
        self.maps = maps

    def leaf(self) -> tuple[pa.DataType, Gen]:
        rng = self.rng
        options: list[tuple[pa.DataType, Gen]] = [
            (pa.int8(), _int_gen(8, True)), (pa.int16(), _int_gen(16, True)), (pa.int32(), _int_gen(32, True)),
            (pa.int64(), _int_gen(64, True)), (pa.int64(), _int_gen(64, True)),
            (pa.float32(), _float_gen(pa.float32())), (pa.float64(), _float_gen(pa.float64())),
            (pa.bool_(), lambda r, n: pa.array(r.random(n) < r.random())),
            (pa.string(), _string_gen(pa.string())), (pa.string(), _string_gen(pa.string())),
            (pa.binary(), _string_gen(pa.binary())), (pa.date32(), _date_gen),
            (pa.timestamp("us", "UTC"), _timestamp_gen(pa.timestamp("us", "UTC"))),
            (pa.decimal128(12, 2), _decimal_gen),
        ]
        if not self.spark:
            options += [(pa.uint8(), _int_gen(8, False)), (pa.uint16(), _int_gen(16, False)),
                        (pa.uint32(), _int_gen(32, False)), (pa.uint64(), _int_gen(64, False)),
                        (pa.large_string(), _string_gen(pa.large_string())),
                        (pa.large_binary(), _string_gen(pa.large_binary())),
                        (pa.timestamp("us"), _timestamp_gen(pa.timestamp("us")))]
        return options[int(rng.integers(0, len(options)))]

    def field(self, depth: int) -> tuple[pa.DataType, Callable[[int], pa.Array]]:
        """A type and a function making `n` values of it (nulls included)."""
        rng = self.rng
        kinds = ["leaf"] * 5 + (["list", "struct", "vector"] if depth < 2 else [])
        if depth < 2 and not self.spark:
            kinds.append("large_list")
        if depth < 2 and self.maps:
            kinds.append("map")
        kind = kinds[int(rng.integers(0, len(kinds)))]
        nulls = _null_shape(rng, True)
        if kind == "leaf":
            t, gen = self.leaf()
            return t, lambda n: _with_nulls(gen(rng, n), _mask(rng, n, nulls))
        if kind in ("list", "large_list"):
            item_t, item = self.field(depth + 1)
            t = pa.list_(item_t) if kind == "list" else pa.large_list(item_t)
            long_lists = rng.random() < 0.2

            def make_list(n: int) -> pa.Array:
                lens = rng.integers(0, 40 if long_lists else 4, size=n)
                offsets = np.zeros(n + 1, dtype=np.int64)
                np.cumsum(lens, out=offsets[1:])
                values = item(int(offsets[-1]))
                m = _mask(rng, n, nulls)
                cls = pa.ListArray if kind == "list" else pa.LargeListArray
                offs = pa.array(offsets.astype(np.int32 if kind == "list" else np.int64))
                arr = cls.from_arrays(offs, values, type=t)
                return _with_nulls(arr, m) if m is not None else arr
            return t, make_list
        if kind == "vector":
            dim = int(rng.choice([2, 3, 8, 16, 128]))
            t = pa.list_(pa.float32(), dim)

            def make_vec(n: int) -> pa.Array:
                v = pa.array(rng.normal(size=n * dim).astype(np.float32))
                return _with_nulls(pa.FixedSizeListArray.from_arrays(v, dim), _mask(rng, n, nulls))
            return t, make_vec
        if kind == "map":
            vt, vals = self.field(depth + 1) if rng.random() < 0.3 else (pa.int64(), None)
            t = pa.map_(pa.string(), vt)

            def make_map(n: int) -> pa.Array:
                lens = rng.integers(0, 4, size=n)
                offsets = np.zeros(n + 1, dtype=np.int32)
                np.cumsum(lens, out=offsets[1:])
                total = int(offsets[-1])
                keys = pa.array([f"k{i % 7}" for i in range(total)], pa.string())
                items = vals(total) if vals else _with_nulls(pa.array(rng.integers(0, 100, size=total)),
                                                             _mask(rng, total, "few"))
                arr = pa.MapArray.from_arrays(pa.array(offsets), keys, items)
                m = _mask(rng, n, nulls)
                return _with_nulls(arr, m) if m is not None else arr
            return t, make_map
        # struct
        k = int(rng.integers(1, 4))
        kids = [self.field(depth + 1) for _ in range(k)]
        t = pa.struct([pa.field(f"f{i}", ct) for i, (ct, _) in enumerate(kids)])

        def make_struct(n: int) -> pa.Array:
            arrs = [g(n) for _, g in kids]
            m = _mask(rng, n, nulls)
            return pa.StructArray.from_arrays(arrs, fields=list(t), mask=pa.array(m) if m is not None else None)
        return t, make_struct


def random_table(seed: int, *, spark_types: bool = False, maps: bool = True, max_rows: int = 20000,
                 max_bytes: int = 8 << 20) -> pa.Table:
    """A random table of 1-8 columns (first an int64 `id`, unique, for ordering)."""
    rng = np.random.default_rng(seed)
    b = _Builder(rng, spark_types, maps)
    n = int(rng.choice([0, 1, 2, 7, 100, 1000, int(rng.integers(1, max_rows + 1))],
                       p=[0.03, 0.05, 0.05, 0.12, 0.25, 0.25, 0.25]))
    n = min(n, max_rows)
    cols = {"id": pa.array(np.arange(n, dtype=np.int64))}
    for i in range(int(rng.integers(1, 8))):
        t, gen = b.field(0)
        cols[f"c{i}"] = gen(n)
        assert cols[f"c{i}"].type == t, (cols[f"c{i}"].type, t)
    table = pa.table(cols)
    while table.nbytes > max_bytes and table.num_rows > 1:
        table = table.slice(0, table.num_rows // 2)
    return table


def describe(table: pa.Table) -> str:
    """One line: rows and each column's type."""
    return f"{table.num_rows} rows: " + ", ".join(f"{f.name} {f.type}" for f in table.schema)


def _unsliced(table: pa.Table) -> pa.Table:
    """The same rows in buffers of their own (concatenation copies them):
    pylance 14 fails on struct arrays sliced at an offset ("null_bit_buffer
    size too small"), which is not what the differential tests are about."""
    cols = [pa.concat_arrays(list(col.chunks) + [pa.array([], col.type)]) for col in table.columns]
    return pa.Table.from_arrays(cols, schema=table.schema)


def write_with_pylance(table: pa.Table, path: str, version: str, seed: int,
                       storage_options: dict[str, str] | None = None) -> None:
    """The table written by pylance at `version` as one or several fragments
    (one append each) with pages of 37 to 1,024 rows, drawn from the seed:
    pages then split lists and structs anywhere. `storage_options`: pylance's,
    for a dataset on an object store."""
    import random

    import lance

    r = random.Random(seed)
    rows = table.num_rows
    per_file = max(r.choice([rows, rows // 3, 997]), 1)
    per_group = r.choice([1024, 100, 37])
    for i, start in enumerate(range(0, max(rows, 1), per_file)):
        lance.write_dataset(_unsliced(table.slice(start, per_file)), path, data_storage_version=version,
                            mode="create" if i == 0 else "append", max_rows_per_group=per_group,
                            storage_options=storage_options)
