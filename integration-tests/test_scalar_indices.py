"""Scans that use the scalar indices pylance builds (BTREE, BITMAP, ZONEMAP,
BLOOMFILTER), and the ZONEMAP and BLOOMFILTER indices Spark builds: seeded
differential over random tables and random filters (=, IN, ranges, IS NULL,
AND/OR/NOT, nulls), with deletes, appends and an update after the build:
Spark with indices == Spark with useIndex=false == pylance (and, with the
Spark-built indices, pylance with them == pylance without). The index is
used (the scan's metrics count the rows and fragments it selects), and a
point lookup reads a small fraction of a full scan's bytes."""
from __future__ import annotations

import os
import random

import lance
import pyarrow as pa
import pytest

from scan_metrics import scan_metrics

LONG = os.environ.get("LANCE_LONG_TESTS") == "1"
#: LANCE_DIFF_FIRST_SEED moves both ranges (a campaign past the seeds every run covers)
FIRST = int(os.environ.get("LANCE_DIFF_FIRST_SEED", "0"))
SEEDS = [FIRST + i for i in range(12 if LONG else 1)]
#: seeds whose ZONEMAP and BLOOMFILTER indices Spark builds (CALL lance.system.create_index)
SPARK_BUILT_SEEDS = [FIRST + 100 + i for i in range(8 if LONG else 1)]
FILTERS_PER_SEED = 60 if LONG else 25
WORDS = ["a", "b", "c", "dd", "é", "zz"]


def _table(rnd: random.Random, start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    rnd.shuffle(ids)

    def maybe(v, p=0.1):
        return None if rnd.random() < p else v
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "k": pa.array([maybe(rnd.randint(0, 9)) for _ in ids], pa.int32()),
        "s": pa.array([maybe(rnd.choice(WORDS)) for _ in ids], pa.string()),
        "v": pa.array([maybe(round(rnd.uniform(-50, 50), 2)) for _ in ids], pa.float64()),
        "r": pa.array([maybe(start + j // 3, 0.05) for j in range(n)], pa.int64()),   # clustered: zone maps prune
        "pay": pa.array([f"payload-{i}" for i in ids], pa.string()),
        # few values, each over many rows: a BTREE whose values run across its pages
        "g": pa.array([maybe(rnd.randint(0, 40)) for _ in ids], pa.int64()),
    })


def _build(path: str, seed: int, spark=None) -> None:
    """With `spark`: the ZONEMAP and BLOOMFILTER indices are built by Spark (random options)."""
    rnd = random.Random(seed)
    n = rnd.randint(3000, 6000)
    lance.write_dataset(_table(rnd, 0, n), path, max_rows_per_file=rnd.randint(800, 1600))
    ds = lance.dataset(path)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("v", "BTREE")
    ds.create_scalar_index("g", "BTREE")
    ds.create_scalar_index("k", "BITMAP")
    ds.create_scalar_index("s", "BITMAP")
    if spark is None:
        ds.create_scalar_index("r", "ZONEMAP")
        ds.create_scalar_index("v", "ZONEMAP", name="v_zones")
        ds.create_scalar_index("pay", "BLOOMFILTER")
        ds.create_scalar_index("k", "BLOOMFILTER", name="k_bloom")
    else:
        for col, kind, name, opts in [
                ("r", "zonemap", "r_idx", {"rows_per_zone": str(rnd.choice([100, 512, 8192]))}),
                ("v", "zonemap", "v_zones", {"rows_per_zone": str(rnd.choice([64, 1000]))}),
                ("pay", "bloomfilter", "pay_idx", {"number_of_items": str(rnd.choice([256, 8192]))}),
                ("k", "bloomfilter", "k_bloom", {"probability": rnd.choice(["0.01", "0.001"])})]:
            kv = ", ".join(f"'{k}', '{v}'" for k, v in opts.items())
            spark.sql(f"CALL lance.system.create_index(table => '{path}', column => '{col}', "
                      f"index_type => '{kind}', name => '{name}', options => map({kv}))").collect()
    ds = lance.dataset(path)
    ds.delete(f"id % {rnd.randint(7, 15)} = 3")                    # deletes after the build
    lance.write_dataset(_table(rnd, n, 700), path, mode="append")  # a fragment no index covers
    ds = lance.dataset(path)
    ds.update({"k": "k + 1"}, where=f"id < {rnd.randint(50, 400)}")  # rows moved to a new fragment


def _lit(rnd: random.Random, col: str) -> str:
    if col == "id":
        return str(rnd.randint(-5, 7000))
    if col == "k":
        return str(rnd.randint(-1, 11))
    if col == "r":
        return str(rnd.randint(-5, 2500))
    if col == "g":
        return str(rnd.randint(-1, 42))
    if col == "v":
        return str(round(rnd.uniform(-55, 55), rnd.choice([0, 2])))
    return "'" + rnd.choice(WORDS + ["q"]) + "'"


def _leaf(rnd: random.Random) -> str:
    col = rnd.choice(["id", "id", "k", "s", "v", "r", "pay", "g"])
    if col == "pay":
        v = ", ".join(f"'payload-{rnd.randint(0, 7000)}'" for _ in range(rnd.randint(1, 3)))
        return rnd.choice([f"pay = {v.split(', ')[0]}", f"pay <> {v.split(', ')[0]}", f"pay IN ({v})"])
    kind = rnd.random()
    if kind < 0.3:
        return f"{col} = {_lit(rnd, col)}"
    if kind < 0.5:
        return f"{col} IN ({', '.join(_lit(rnd, col) for _ in range(rnd.randint(1, 6)))})"
    if kind < 0.8 and col in ("id", "v", "k", "r", "g"):
        return f"{col} {rnd.choice(['<', '<=', '>', '>='])} {_lit(rnd, col)}"
    if kind < 0.9:
        return f"{col} IS NULL"
    return f"{col} IS NOT NULL"


def _filter(rnd: random.Random, depth: int = 0) -> str:
    r = rnd.random()
    if depth >= 3 or r < 0.4:
        return _leaf(rnd)
    if r < 0.65:
        return f"({_filter(rnd, depth + 1)}) AND ({_filter(rnd, depth + 1)})"
    if r < 0.9:
        return f"({_filter(rnd, depth + 1)}) OR ({_filter(rnd, depth + 1)})"
    return f"NOT ({_filter(rnd, depth + 1)})"


def _metrics(df) -> dict:
    """The scan's metrics and rows; just the rows where Spark planned no scan (a filter it proves FALSE)."""
    try:
        return scan_metrics(df)
    except AssertionError:
        return {"rows": df.collect()}


def _ids(rows) -> list:
    return sorted(r[0] for r in rows)


@pytest.mark.parametrize("seed", SEEDS + SPARK_BUILT_SEEDS)
def test_indexed_scans_equal_unindexed_and_pylance(spark, tmp_path, seed):
    path = str(tmp_path / "t")
    spark_built = seed in SPARK_BUILT_SEEDS
    _build(path, seed, spark if spark_built else None)
    ds = lance.dataset(path)
    assert len(ds.describe_indices()) == 9
    on = spark.read.format("lance").load(path)
    off = spark.read.format("lance").option("useIndex", "false").load(path)
    rnd = random.Random(1000 + seed)
    selected = 0
    for _ in range(FILTERS_PER_SEED):
        f = _filter(rnd)
        want = sorted(ds.to_table(columns=["id"], filter=f).column("id").to_pylist())
        if spark_built:   # pylance with our indices == pylance without
            plain = sorted(ds.to_table(columns=["id"], filter=f, use_scalar_index=False).column("id").to_pylist())
            assert want == plain, (seed, f)
        m = _metrics(on.where(f).select("id"))
        got = _ids(m["rows"])
        base = _ids(off.where(f).select("id").collect())
        assert got == base == want, (seed, f, len(got), len(base), len(want))
        selected += m.get("rowsSelectedByIndex", 0) + m.get("fragmentsDecidedByIndex", 0)
    assert selected > 0, "no filter was answered by an index"
    if spark_built:   # our scans and pylance's plans use the Spark-built indices
        for f, name in [("r >= 100 AND r < 120", "r_idx"), ("pay = 'payload-17'", "pay_idx")]:
            m = scan_metrics(on.where(f).select("id"))
            assert m["fragmentsDecidedByIndex"] > 0, (f, m)
            assert _ids(m["rows"]) == sorted(ds.to_table(columns=["id"], filter=f).column("id").to_pylist())
            assert "ScalarIndexQuery" in ds.scanner(columns=["id"], filter=f).explain_plan(True), f


def test_point_lookup_uses_the_btree_and_reads_a_fraction(spark, tmp_path):
    path = str(tmp_path / "big")
    n = 400_000
    rnd = random.Random(7)
    lance.write_dataset(_table(rnd, 0, n), path, max_rows_per_file=100_000)
    lance.dataset(path).create_scalar_index("id", "BTREE")
    k = 123_457
    df = spark.read.format("lance").load(path)
    full = scan_metrics(df.select("id", "pay"))
    m = scan_metrics(df.where(f"id = {k}").select("id", "pay"))
    assert [tuple(r) for r in m["rows"]] == [(k, f"payload-{k}")]
    assert m["rowsSelectedByIndex"] == 1 and m["fragmentsDecidedByIndex"] == 4, m
    assert m["fragmentsPrunedByIndex"] == 3, m
    off = scan_metrics(spark.read.format("lance").option("useIndex", "false").load(path)
                       .where(f"id = {k}").select("id", "pay"))
    assert off["rowsSelectedByIndex"] == 0
    print("point lookup bytes", m["lanceBytesRead"], "full scan", full["lanceBytesRead"],
          "unindexed lookup", off["lanceBytesRead"])
    assert m["lanceBytesRead"] < 0.01 * full["lanceBytesRead"], (m, full)


def test_a_zone_map_prunes_fragments_of_a_range(spark, tmp_path):
    path = str(tmp_path / "zm")
    rnd = random.Random(5)
    lance.write_dataset(_table(rnd, 0, 8000), path, max_rows_per_file=2000)
    ds = lance.dataset(path)
    ds.create_scalar_index("r", "ZONEMAP")
    f = "r >= 100 AND r < 120"
    want = sorted(ds.to_table(columns=["id"], filter=f).column("id").to_pylist())
    m = scan_metrics(spark.read.format("lance").load(path).where(f).select("id"))
    assert _ids(m["rows"]) == want
    assert m["fragmentsDecidedByIndex"] == 4 and m["fragmentsPrunedByIndex"] == 3, m


def test_a_bitmap_equality_selects_its_rows(spark, tmp_path):
    path = str(tmp_path / "bm")
    rnd = random.Random(3)
    lance.write_dataset(_table(rnd, 0, 5000), path, max_rows_per_file=1000)
    ds = lance.dataset(path)
    ds.create_scalar_index("s", "BITMAP")
    want = ds.count_rows("s = 'dd'")
    m = scan_metrics(spark.read.format("lance").load(path).where("s = 'dd'").select("id"))
    assert len(m["rows"]) == want
    assert m["rowsSelectedByIndex"] == want and m["fragmentsDecidedByIndex"] == 5, m


def test_use_index_option_is_checked(spark, tmp_path):
    path = str(tmp_path / "o")
    lance.write_dataset(pa.table({"id": pa.array([1, 2], pa.int64())}), path)
    with pytest.raises(Exception, match=r"option 'useIndex'.*one of true, false.*, got 'maybe'"):
        spark.read.format("lance").option("useIndex", "maybe").load(path).collect()


def test_rows_an_index_selects_are_shared_evenly_among_the_tasks(spark, tmp_path):
    """Partitions are sized over the rows the index selected, as over the files left after
    pruning: not packed into splits sized for the whole table (5,000 rows in one task, 2,000 in the other)."""
    path = str(tmp_path / "even")
    n = 100_000
    lance.write_dataset(pa.table({"id": pa.array(range(n), pa.int64()),
                                  "label": pa.array(["rare" if i % 100 < 7 else f"c{i % 5}" for i in range(n)], pa.string()),
                                  "pay": pa.array([f"payload-{i:08d}" for i in range(n)], pa.string())}),
                        path, max_rows_per_file=25_000)
    lance.dataset(path).create_scalar_index("label", "BITMAP")
    spark.conf.set("spark.sql.files.maxPartitionBytes", 64 * 1024)
    spark.conf.set("spark.sql.files.openCostInBytes", 1024)
    try:
        df = spark.read.format("lance").load(path).where("label = 'rare'").select("id", "pay")
        sizes = df.rdd.glom().map(len).collect()
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("spark.sql.files.openCostInBytes")
    assert sum(sizes) == 7 * n // 100
    cores = spark.sparkContext.defaultParallelism
    assert len(sizes) % cores == 0, sizes
    assert max(sizes) - min(sizes) <= 0.1 * max(sizes), sizes
