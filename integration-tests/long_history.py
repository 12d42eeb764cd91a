"""Datasets with long histories, made quickly: pylance writes version 1 (eight
fragments of 100 rows), then the manifests of versions 1..n are written
directly, each a copy of version 1's with its own version number, commit time
and the first `fragments_of(v)` fragments (so neighbouring versions differ in
row count and a test can tell which version it read). Writing 2,000 manifests
takes about a second on a local disk (2,000 pylance appends would take
minutes); `put` writes them elsewhere (an S3 bucket)."""
from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import lance
import pyarrow as pa

from lance_spark._protos import table_pb2

FRAGMENTS = 8
ROWS_PER_FRAGMENT = 100
U64_MAX = (1 << 64) - 1


def fragments_of(v: int) -> int:
    return v % FRAGMENTS + 1


def rows_of(v: int) -> int:
    """The rows version `v` of a generated history holds."""
    return fragments_of(v) * ROWS_PER_FRAGMENT


def manifest_name(v: int) -> str:
    """The V2 name of version `v`'s manifest (newest sorts first)."""
    return f"{U64_MAX - v:020d}.manifest"


@dataclass
class History:
    n: int
    t0_micros: int          # version v was committed at t0 + v seconds + 500 ms
    step_micros: int = 1_000_000

    def micros(self, v: int) -> int:
        return self.t0_micros + v * self.step_micros + 500_000

    def when(self, micros: int) -> datetime:
        """A naive UTC datetime, as pylance's version list gives times (the tests run with TZ=UTC)."""
        return datetime.fromtimestamp(micros / 1e6, tz=timezone.utc).replace(tzinfo=None)


def _manifest_body(data: bytes) -> table_pb2.Manifest:
    pos = struct.unpack_from("<Q", data, len(data) - 16)[0]
    (length,) = struct.unpack_from("<I", data, pos)
    m = table_pb2.Manifest()
    m.ParseFromString(data[pos + 4:pos + 4 + length])
    return m


def _manifest_file(m: table_pb2.Manifest) -> bytes:
    body = m.SerializeToString()
    return struct.pack("<I", len(body)) + body + struct.pack("<QHH", 0, 0, 2) + b"LANC"


def build(uri: str, n: int, t0_micros: int, *, read: Callable[[str], bytes] | None = None,
          put: Callable[[str, bytes], None] | None = None, storage_options: dict | None = None,
          hint: bool = True, vary: bool = True, threads: int = 8) -> History:
    """Versions 1..n at `uri` (a local path unless `read`/`put` are given: they
    take a key relative to the dataset). Version 1 is written by pylance.
    `vary=False`: every version holds all eight fragments (the same data)."""
    table = pa.table({"id": pa.array(range(FRAGMENTS * ROWS_PER_FRAGMENT), pa.int64())})
    lance.write_dataset(table, uri, max_rows_per_file=ROWS_PER_FRAGMENT, storage_options=storage_options)
    read = read or (lambda key: Path(uri, key).read_bytes())
    put = put or (lambda key, data: Path(uri, key).write_bytes(data))
    first = _manifest_body(read(f"_versions/{manifest_name(1)}"))
    assert len(first.fragments) == FRAGMENTS, len(first.fragments)
    frags = list(first.fragments)
    first.ClearField("index_section")
    first.ClearField("transaction_section")   # positions in version 1's own file
    first.DiscardUnknownFields()              # pylance 14 keeps its inline transaction's there too
    history = History(n, t0_micros)

    def write(v: int) -> None:
        m = table_pb2.Manifest()
        m.CopyFrom(first)
        m.version = v
        t = history.micros(v)
        m.timestamp.seconds, m.timestamp.nanos = t // 1_000_000, (t % 1_000_000) * 1000
        del m.fragments[:]
        m.fragments.extend(frags[:fragments_of(v)] if vary else frags)
        put(f"_versions/{manifest_name(v)}", _manifest_file(m))

    with ThreadPoolExecutor(threads) as pool:   # requests to a bucket overlap
        list(pool.map(write, range(1, n + 1)))
    if hint:
        put("_versions/latest_version_hint.json", f'{{"version":{n}}}'.encode())
    return history
