"""Deterministic rich-schema data for interop tests (every Lance type, nulls everywhere)."""
from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa


def _mask(rng: np.random.Generator, n: int, p: float = 0.15) -> np.ndarray:
    return rng.random(n) < p


def rich_table(n: int, seed: int = 0, start: int = 0) -> pa.Table:
    """A table with every supported type; about 15% nulls in every nullable column."""
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)

    def arr(values, typ, p=0.15):
        return pa.array(values, type=typ, mask=_mask(rng, n, p))

    ints = rng.integers(-(2**62), 2**62, n)
    words = np.array(["alpha", "beta", "gamma", "delta", "", "épsilon ünïcode"], dtype=object)
    strs = np.array([f"s{x}-{'x' * (x % 17)}" for x in rng.integers(0, 10**6, n)], dtype=object)
    floats = rng.normal(size=n)
    floats[rng.random(n) < 0.02] = np.nan
    vec = rng.random((n, 8), dtype=np.float32)
    fsl_mask = _mask(rng, n)
    list_lens = rng.integers(0, 5, n)
    list_vals = [list(range(k, k + int(m))) for k, m in zip(range(n), list_lens)]
    list_mask = _mask(rng, n)
    dec = [decimal.Decimal(int(x)).scaleb(-3) for x in rng.integers(-10**12, 10**12, n)]
    epoch_days = rng.integers(-20000, 30000, n)
    micros = rng.integers(-2 * 10**15, 2 * 10**15, n)

    cols = {
        "id": pa.array(ids),
        "b": arr(rng.random(n) < 0.5, pa.bool_()),
        "i8": arr(rng.integers(-128, 128, n), pa.int8()),
        "i16": arr(rng.integers(-(2**15), 2**15, n), pa.int16()),
        "i32": arr(rng.integers(-(2**31), 2**31, n), pa.int32()),
        "i64": arr(ints, pa.int64()),
        "u8": arr(rng.integers(0, 256, n), pa.uint8()),
        "u16": arr(rng.integers(0, 2**16, n), pa.uint16()),
        "u32": arr(rng.integers(0, 2**32, n, dtype=np.uint64), pa.uint32()),
        "u64": arr(rng.integers(0, 2**64 - 1, n, dtype=np.uint64), pa.uint64()),
        "f16": arr(rng.normal(size=n).astype(np.float16), pa.float16()),
        "f32": arr(rng.normal(size=n).astype(np.float32), pa.float32()),
        "f64": arr(floats, pa.float64()),
        "s": arr(strs, pa.string()),
        "s_low": arr(words[rng.integers(0, len(words), n)], pa.string()),
        "ls": arr(strs, pa.large_string()),
        "bin": arr([x.encode() for x in strs], pa.binary()),
        "lbin": arr([x.encode()[:5] for x in strs], pa.large_binary()),
        "fbin": arr([int(x).to_bytes(8, "little", signed=True) for x in ints], pa.binary(8)),
        "d32": arr(epoch_days.astype(np.int32), pa.date32()),
        "d64": arr(epoch_days.astype(np.int64) * 86_400_000, pa.date64()),
        "t32s": arr(rng.integers(0, 86400, n).astype(np.int32), pa.time32("s")),
        "t32ms": arr(rng.integers(0, 86_400_000, n).astype(np.int32), pa.time32("ms")),
        "t64us": arr(rng.integers(0, 86_400_000_000, n), pa.time64("us")),
        "t64ns": arr(rng.integers(0, 86_400_000_000_000, n), pa.time64("ns")),
        "ts_s": arr(micros // 10**6, pa.timestamp("s")),
        "ts_ms": arr(micros // 10**3, pa.timestamp("ms")),
        "ts_us": arr(micros, pa.timestamp("us")),
        "ts_ns": arr(micros * 1000 + 7, pa.timestamp("ns")),
        "ts_us_tz": arr(micros, pa.timestamp("us", tz="UTC")),
        "ts_ns_tz": arr(micros * 1000 + 9, pa.timestamp("ns", tz="America/New_York")),
        "ts_ms_tz": arr(micros // 10**3, pa.timestamp("ms", tz="+02:00")),
        "dec": arr(dec, pa.decimal128(18, 3)),
        "dec_big": arr(dec, pa.decimal128(38, 3)),
        "dec256": arr(dec, pa.decimal256(30, 3)),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), 8, mask=pa.array(fsl_mask)),
        "vec64": pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1).astype(np.float64)), 8),
        "lst": pa.array([None if m else v for v, m in zip(list_vals, list_mask)], pa.list_(pa.int32())),
        "llst": pa.array([None if m else [str(x) for x in v] for v, m in zip(list_vals, list_mask)],
                         pa.large_list(pa.string())),
        "st": pa.StructArray.from_arrays(
            [arr(ints // 7, pa.int64()), arr(strs, pa.string()), arr(floats, pa.float64())],
            ["a", "b", "c"]),
        "st_nested": pa.StructArray.from_arrays(
            [pa.StructArray.from_arrays([arr(ints % 1000, pa.int32())], ["x"]),
             pa.array([None if m else v for v, m in zip(list_vals, list_mask)], pa.list_(pa.int64()))],
            ["inner", "tags"]),
        "lst_st": pa.array(
            [None if m else [{"k": str(x), "v": x} for x in v] for v, m in zip(list_vals, list_mask)],
            pa.list_(pa.struct([("k", pa.string()), ("v", pa.int64())]))),
        "lst_lst": pa.array([None if m else [v, v[:1]] for v, m in zip(list_vals, list_mask)],
                            pa.list_(pa.list_(pa.int16()))),
    }
    return pa.table(cols)


def small_table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "x": (ids * 3).astype(np.float64),
                     "name": pa.array([f"n{i}" if i % 5 else None for i in ids])})
