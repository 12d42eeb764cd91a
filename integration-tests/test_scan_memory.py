"""The reader's memory per task follows the batch size, not the file size: the scan node's
"peak reader memory per task" metric (Arrow allocator peak + the largest storage read of one
batch) grows with batchSize and stays far below the data file's size."""
from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

PEAK = "peak reader memory per task"
ROWS = 1_000_000


def _last_metric(spark, description: str) -> str:
    """The aggregated value (as the Spark UI shows it) of a metric of the last SQL execution."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)
    store = spark._jsparkSession.sharedState().statusStore()
    execs = store.executionsList()
    last = execs.apply(execs.size() - 1)
    ms = last.metrics()
    ids = {int(ms.apply(i).accumulatorId()) for i in range(ms.size()) if ms.apply(i).name() == description}
    assert ids, f"no metric {description!r} in the last execution"
    it = store.executionMetrics(last.executionId()).iterator()
    while it.hasNext():
        kv = it.next()
        if int(kv._1()) in ids:
            return str(kv._2())
    raise AssertionError(f"metric {description!r} has no value")


def _bytes(text: str) -> int:
    # "max 1.2 MiB (1258291 bytes) over 4 tasks"
    return int(text.split("(", 1)[1].split(" ", 1)[0])


@pytest.fixture(scope="module")
def one_file(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("mem") / "mem.lance")
    (spark.range(0, ROWS, numPartitions=1)
     .selectExpr("id", "id * 3 AS v", "CAST(id AS DOUBLE) / 7 AS d", "concat('row-', id) AS s")
     .write.format("lance").option("fileVersion", "2.0").save(path))   # uncompressed: file size ~ decoded size
    files = list(Path(path).rglob("*.lance"))
    assert len(files) == 1
    return path, files[0].stat().st_size


def _peak(spark, path: str, batch: int, ahead: str) -> int:
    df = spark.read.format("lance").option("batchSize", batch).option("readAhead", ahead).load(path)
    row = df.agg(F.count(F.lit(1)), F.sum("id"), F.sum("v"), F.sum("d"), F.max(F.length("s"))).collect()[0]
    assert row[0] == ROWS and row[1] == ROWS * (ROWS - 1) // 2 and row[4] == len(f"row-{ROWS - 1}")
    text = _last_metric(spark, PEAK)
    assert "over" in text and "tasks" in text, text
    return _bytes(text)


@pytest.mark.parametrize("ahead", ["false", "true"])
def test_peak_reader_memory_follows_batch_size(spark, one_file, ahead):
    """With readAhead the next batch's page bytes are held too, while the current one decodes."""
    path, file_bytes = one_file
    row_bytes = 8 * 3 + 4 + 10      # three 8-byte columns, a string's offset and ~10 characters
    small, large = _peak(spark, path, 1024, ahead), _peak(spark, path, 65536, ahead)
    print(f"readAhead={ahead}: peak {small} bytes for 1,024-row batches, {large} for 65,536")
    assert 0 < small < large, (small, large)
    # bounded by a small multiple of the batch (Arrow rounds buffers up to powers of two) ...
    assert small <= 8 * 1024 * row_bytes, small
    assert large <= 4 * 65536 * row_bytes, large
    # ... and nowhere near the file, which a whole-file read would hold
    assert large < file_bytes / 3, (large, file_bytes)


def test_full_zip_pages_of_large_values_are_not_read_whole(spark, tmp_path):
    """1 MB binary values written by pylance at 2.2 (its default) go to
    full-zip pages many values long; a batch of 2 rows reads those 2 values
    (through the page's repetition index), not the page."""
    import lance
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(3)
    n, size = 48, 1 << 20
    blobs = [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for _ in range(n)]
    path = str(tmp_path / "big.lance")
    lance.write_dataset(pa.table({"id": pa.array(range(n), pa.int64()), "b": pa.array(blobs, pa.binary())}),
                        path, data_storage_version="2.2")
    [data_file] = list(Path(path).rglob("*.lance"))
    assert data_file.stat().st_size > n * size
    # 48 rows: read as a job (the scan node's metric), not on the driver
    df = spark.read.format("lance").option("batchSize", 2).option("readAhead", "false") \
        .option("localScanRows", "0").load(path)
    got = df.select("id", F.length("b").alias("len"), F.xxhash64("b").alias("h")).orderBy("id").collect()
    assert [r["len"] for r in got] == [size] * n
    peak = _bytes(_last_metric(spark, PEAK))
    want = spark.createDataFrame([(i, bytearray(b)) for i, b in enumerate(blobs[:4])], "id long, b binary") \
        .select("id", F.xxhash64("b").alias("h")).orderBy("id").collect()
    assert [r["h"] for r in got[:4]] == [r["h"] for r in want]
    print(f"peak {peak} bytes for 2-row batches of 1 MiB values, file {data_file.stat().st_size}")
    assert peak <= 8 * 2 * size, peak                      # a few batches' worth (2 MiB a batch) ...
    assert peak < data_file.stat().st_size / 4, peak        # ... never the page or the file
