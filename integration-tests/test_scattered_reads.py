"""Scattered rows (issue 37, random access): rows an index or row addresses
select all over a fragment are read by fetching and decoding each page or
mini-block chunk that holds them once, not once per selected row. From first
principles, the bytes such a scan reads (its ``lanceBytesRead`` metric) are
then at most those of a full scan of the same columns, however many rows are
selected (give or take the chunks at the cuts between tasks: a scan's selected
rows are shared evenly among its tasks, and a chunk holding rows of two tasks
is read by both, as a full scan's tasks cut elsewhere do; one chunk a column at
each cut, against a chunk per selected row if they were read row by row); the
rows are pylance's for the same filter. For every file version
pylance writes (2.0 pages, 2.1/2.2 mini-block chunks; the strings of 2.2 may be
full-zip; make test: 2.0 and 2.2)."""
from __future__ import annotations

import random

import lance
import numpy as np
import pyarrow as pa
import pytest

from conftest import sliced
from scan_metrics import scan_metrics

N = 200_000
COLUMNS = ["id", "key", "label", "pay", "w32", "w16", "w8"]


def _table(n: int) -> pa.Table:
    keys = np.random.default_rng(11).permutation(n).astype(np.int64)
    labels = np.array([f"l{i}" for i in range(100)], dtype=object)
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "key": pa.array(keys),
        "label": pa.array(labels[keys % 100]),
        "pay": pa.array([f"payload-{k}-" + "x" * (k % 23) for k in keys.tolist()], pa.string()),
        # narrower bit-packed values: single values read out of their chunks at each width
        "w32": pa.array((keys * 7919 % 1_000_003).astype(np.int32)),
        "w16": pa.array((keys % 3001 - 1500).astype(np.int16)),
        "w8": pa.array((keys % 37).astype(np.int8)),
    })


@pytest.fixture(scope="module", params=sliced(["2.0", "2.1", "2.2"], ["2.0", "2.2"]))   # make test: 2.0, 2.2
def table(request, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("scattered") / f"t{request.param}")
    lance.write_dataset(_table(N), path, data_storage_version=request.param, max_rows_per_file=N // 2)
    ds = lance.dataset(path)
    ds.create_scalar_index("label", "BITMAP")
    ds.create_scalar_index("key", "BTREE")
    return path


def _rows(rows) -> list:
    return sorted(tuple(r) for r in rows)


def _pylance(path: str, where: str) -> list:
    t = lance.dataset(path).to_table(columns=COLUMNS, filter=where)
    return sorted(zip(*(t.column(c).to_pylist() for c in COLUMNS)))


def _at_most_a_full_scan(m: dict, full: dict) -> None:
    """At most the full scan's bytes, plus 1% for the chunks at the cuts between tasks (a few KB
    here; reading a chunk per selected row would be many times the full scan)."""
    assert m["lanceBytesRead"] <= 1.01 * full["lanceBytesRead"], (m["lanceBytesRead"], full["lanceBytesRead"])


def test_a_bitmap_label_at_one_percent_reads_each_page_once(spark, table):
    df = spark.read.format("lance").load(table)
    full = scan_metrics(df.select(*COLUMNS))
    where = "label = 'l7'"
    m = scan_metrics(df.where(where).select(*COLUMNS))
    want = _pylance(table, where)
    assert len(want) == N // 100
    assert _rows(m["rows"]) == want
    assert m["rowsSelectedByIndex"] == len(want), m
    print("1% label: bytes", m["lanceBytesRead"], "full scan", full["lanceBytesRead"],
          "requests", m["readRequests"], "full", full["readRequests"])
    _at_most_a_full_scan(m, full)


def test_many_keys_in_a_btree_read_each_page_once(spark, table):
    keys = random.Random(4).sample(range(N), 2000)
    where = f"key IN ({', '.join(map(str, keys))})"
    df = spark.read.format("lance").load(table)
    full = scan_metrics(df.select(*COLUMNS))
    m = scan_metrics(df.where(where).select(*COLUMNS))
    assert _rows(m["rows"]) == _pylance(table, where)
    _at_most_a_full_scan(m, full)


def test_scattered_row_addresses_read_each_page_once(spark, table):
    t = lance.dataset(table).to_table(columns=COLUMNS, with_row_address=True)
    addrs = t.column("_rowaddr").to_pylist()
    picks = sorted(random.Random(9).sample(range(len(addrs)), 1500))
    want = sorted(tuple(t.column(c)[i].as_py() for c in COLUMNS) for i in picks)
    df = spark.read.format("lance").load(table)
    full = scan_metrics(df.select(*COLUMNS))
    m = scan_metrics(df.where(f"_rowaddr IN ({', '.join(str(addrs[i]) for i in picks)})").select(*COLUMNS))
    assert _rows(m["rows"]) == want
    _at_most_a_full_scan(m, full)


def test_a_limit_over_scattered_rows_equals_pylance(spark, table):
    where = "label = 'l3'"
    want = set(_pylance(table, where))
    got = spark.read.format("lance").load(table).where(where).select(*COLUMNS).limit(37).collect()
    assert len(got) == 37 and all(tuple(r) in want for r in got)


def test_one_row_reads_only_its_chunks(spark, table):
    df = spark.read.format("lance").load(table)
    full = scan_metrics(df.select(*COLUMNS))
    m = scan_metrics(df.where("key = 123457").select(*COLUMNS))
    assert _rows(m["rows"]) == _pylance(table, "key = 123457")
    assert m["lanceBytesRead"] < 0.02 * full["lanceBytesRead"], (m["lanceBytesRead"], full["lanceBytesRead"])
