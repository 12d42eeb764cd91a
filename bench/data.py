"""Deterministic bench data (seeded numpy), cached in bench/data/ under a content key.

Three table kinds, each produced batch by batch from one seed, so a Lance copy and a Parquet
copy of the same (kind, rows, seed) hold the same rows:

* ``mixed`` - long id, int, double, short string, low-cardinality string, nullable double;
* ``wide``  - 20 columns (8 long, 8 double, 4 short string) for projection;
* ``int64`` - one plain int64 column (random, incompressible) for decode throughput;
* ``events`` - what pipelines write: a sequential key, a timestamp that grows, skewed user ids,
  small status codes, a low-cardinality country, URLs (high cardinality, shared prefixes), a
  nullable amount with cents;
* ``lineitem`` - TPC-H ``lineitem`` from ``tpchgen-cli`` (PyPI), at the scale factor that gives
  about ``rows`` rows (6M rows per unit), generated once as Parquet and read batch by batch.

Lance copies are written by pylance at file version 2.0 unless a workload asks for 2.2 (pylance
14's default: compressed, mini-block and full-zip pages); Parquet
copies are written by Spark (``spark.read.parquet(staging).write.parquet``), Spark's defaults
(snappy), id-range partitioned into at least 4 files so Spark can use every core.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Callable, Dict, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from .env import DATA_DIR

#: Bump when a generator or a writer setting changes: every cached copy is then rebuilt.
SCHEMA_VERSION = 1
SEED = 20240601
BATCH_ROWS = 1 << 20
LANCE_FILE_VERSION = "2.0"      # the version of the copies the 2.0-era workloads compare; pylance 14 defaults to 2.2
LANCE_MAX_ROWS_PER_FILE = 1 << 20   # pylance's default, stated so the key covers it
CATEGORIES = ["books", "music", "garden", "toys", "kitchen", "sports", "auto", "health",
              "beauty", "office", "pets", "tools"]

_ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)


def _vocabulary(rng: np.random.Generator, n: int, lo: int, hi: int) -> pa.Array:
    """n random ASCII words of lo..hi characters, built without a Python loop per word."""
    lengths = rng.integers(lo, hi + 1, size=n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    chars = _ALPHABET[rng.integers(0, len(_ALPHABET), size=int(offsets[-1]))]
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes()))


def _mixed(rng: np.random.Generator, start: int, n: int, words: pa.Array) -> pa.RecordBatch:
    nulls = rng.random(n) < 0.2
    discount = rng.random(n) * 0.5
    return pa.record_batch({
        "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
        "qty": pa.array(rng.integers(0, 1000, size=n, dtype=np.int32)),
        "price": pa.array(np.round(rng.gamma(2.0, 20.0, size=n), 2)),
        "name": words.take(pa.array(rng.integers(0, len(words), size=n))),
        "category": pa.array(CATEGORIES).take(pa.array(rng.integers(0, len(CATEGORIES), size=n))),
        "discount": pa.array(discount, mask=nulls),
    })


def _wide(rng: np.random.Generator, start: int, n: int, words: pa.Array) -> pa.RecordBatch:
    cols = {"id": pa.array(np.arange(start, start + n, dtype=np.int64))}
    for i in range(1, 8):
        cols[f"l{i:02d}"] = pa.array(rng.integers(0, 1 << 30, size=n, dtype=np.int64))
    for i in range(8):
        cols[f"d{i:02d}"] = pa.array(rng.random(n))
    for i in range(4):
        cols[f"s{i:02d}"] = words.take(pa.array(rng.integers(0, len(words), size=n)))
    return pa.record_batch(cols)


def _int64(rng: np.random.Generator, start: int, n: int, words: pa.Array) -> pa.RecordBatch:
    return pa.record_batch({"v": pa.array(rng.integers(-(1 << 62), 1 << 62, size=n, dtype=np.int64))})


COUNTRIES = ["US", "DE", "FR", "GB", "JP", "BR", "IN", "CA", "AU", "ES", "IT", "NL", "SE", "MX", "KR",
             "PL", "CH", "BE", "AT", "NO", "DK", "FI", "IE", "PT", "NZ", "SG", "ZA", "AR", "CL", "TR"]
HOSTS = ["shop.example.com", "www.example.org", "cdn.images.example.net", "api.example.io"]
SECTIONS = ["products", "category", "search", "cart", "checkout", "account", "help"]
STATUS = np.array([200, 200, 200, 200, 200, 200, 301, 304, 404, 500], dtype=np.int16)


def _events(rng: np.random.Generator, start: int, n: int, words: pa.Array) -> pa.RecordBatch:
    ids = np.arange(start, start + n, dtype=np.int64)
    ts = 1_700_000_000_000_000 + ids * 250_000 + rng.integers(0, 200_000, size=n)
    users = (rng.zipf(1.3, size=n) % 100_000).astype(np.int64)
    host = pa.array(HOSTS).take(pa.array(rng.integers(0, len(HOSTS), size=n)))
    section = pa.array(SECTIONS).take(pa.array(rng.integers(0, len(SECTIONS), size=n)))
    item = pa.array(rng.integers(0, 2_000_000, size=n)).cast(pa.string())
    url = pa.compute.binary_join_element_wise("https://", host, "/", section, "/item-", item, "")
    amount = np.round(rng.gamma(2.0, 30.0, size=n), 2)
    return pa.record_batch({
        "id": pa.array(ids),
        "ts": pa.array(ts, pa.timestamp("us", "UTC")),
        "user_id": pa.array(users),
        "status": pa.array(STATUS[rng.integers(0, len(STATUS), size=n)]),
        "country": pa.array(COUNTRIES).take(pa.array(np.minimum(rng.geometric(0.2, size=n) - 1, 29))),
        "url": url,
        "amount": pa.array(amount, mask=rng.random(n) < 0.4),
    })


def _lineitem_source(rows: int) -> Path:
    """TPC-H lineitem at the scale factor giving about `rows` rows, as Parquet (tpchgen-cli)."""
    import subprocess
    import sys

    sf = max(0.01, round(rows / 6_000_000, 2))
    out = DATA_DIR / f"tpch-sf{sf}"
    done = out / ".done"
    if not done.exists():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        cli = Path(sys.executable).with_name("tpchgen-cli")
        subprocess.run([str(cli), "parquet", "-s", str(sf), "--tables=lineitem", f"--output-dir={out}"],
                       check=True)
        done.write_text("")
    return next(out.rglob("lineitem*.parquet"))


KINDS: Dict[str, Callable] = {"mixed": _mixed, "wide": _wide, "int64": _int64, "events": _events}


def batches(kind: str, rows: int, seed: int = SEED) -> Iterator[pa.RecordBatch]:
    """The rows of a table kind, in batches of BATCH_ROWS; the same for the same arguments
    (lineitem: all rows of its scale factor, which `rows` chooses)."""
    if kind == "lineitem":
        import pyarrow.parquet as pq
        f = pq.ParquetFile(str(_lineitem_source(rows)))
        # (string_view as string, which Spark and pylance write; no Parquet field ids)
        schema = pa.schema([pa.field(x.name, pa.string() if x.type == pa.string_view() else x.type, x.nullable)
                            for x in f.schema_arrow])
        for b in f.iter_batches(batch_size=BATCH_ROWS):
            yield pa.record_batch([c.cast(t.type) for c, t in zip(b.columns, schema)], schema=schema)
        return
    rng = np.random.default_rng(seed)
    words = _vocabulary(rng, 65_536, 4, 12)
    gen = KINDS[kind]
    for start in range(0, rows, BATCH_ROWS):
        yield gen(rng, start, min(BATCH_ROWS, rows - start), words)


def schema_of(kind: str) -> pa.Schema:
    return next(batches(kind, 1)).schema


def parquet_files(rows: int) -> int:
    return max(4, math.ceil(rows / LANCE_MAX_ROWS_PER_FILE))


def key(kind: str, rows: int, fmt: str, seed: int = SEED, file_version: str = LANCE_FILE_VERSION) -> str:
    spec = {"kind": kind, "rows": rows, "seed": seed, "schema_version": SCHEMA_VERSION, "format": fmt}
    if fmt == "lance":
        spec.update(file_version=file_version, max_rows_per_file=LANCE_MAX_ROWS_PER_FILE)
    else:
        spec.update(files=parquet_files(rows))
    digest = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    return f"{kind}-{rows}-{fmt}-{digest}"


def _cached(name: str, build: Callable[[Path], None], log) -> Path:
    """bench/data/<name>: built once; a `.done` marker makes half-written copies rebuild."""
    path = DATA_DIR / name
    done = DATA_DIR / (name + ".done")
    if done.exists() and path.exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    log(f"generating {name} ...")
    build(path)
    done.write_text(json.dumps({"name": name}) + "\n")
    return path


def lance_dataset(kind: str, rows: int, log=print, file_version: str = LANCE_FILE_VERSION) -> Path:
    """The rows written by pylance at `file_version` (2.0 unless asked; pylance 14's default is 2.2)."""
    import lance

    def build(path: Path) -> None:
        reader = pa.RecordBatchReader.from_batches(schema_of(kind), batches(kind, rows))
        lance.write_dataset(reader, str(path), data_storage_version=file_version,
                            max_rows_per_file=LANCE_MAX_ROWS_PER_FILE)

    name = key(kind, rows, "lance", file_version=file_version)
    return _cached(name if file_version == LANCE_FILE_VERSION else f"{name}-v{file_version}", build, log)


def parquet_dataset(spark, kind: str, rows: int, log=print) -> Path:
    """The same rows as Parquet written by Spark (staged through pyarrow, then rewritten)."""
    import pyarrow.parquet as pq

    def build(path: Path) -> None:
        staging = path.with_name(path.name + ".staging.parquet")
        staging.unlink(missing_ok=True)
        with pq.ParquetWriter(str(staging), schema_of(kind), compression="none") as w:
            for b in batches(kind, rows):
                w.write_batch(b)
        try:
            df = spark.read.parquet(str(staging))
            order = df.columns[0]
            if order in ("id", "l_orderkey"):
                df = df.repartitionByRange(parquet_files(rows), order).sortWithinPartitions(order)
            else:
                df = df.repartition(parquet_files(rows))
            df.write.mode("overwrite").parquet(str(path))
        finally:
            staging.unlink(missing_ok=True)

    return _cached(key(kind, rows, "parquet"), build, log)


def tree_bytes(path: Path, suffix: str = "") -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file() and p.name.endswith(suffix))


def data_files(path: Path, suffix: str) -> list:
    return sorted(p for p in Path(path).rglob("*" + suffix) if p.is_file())
