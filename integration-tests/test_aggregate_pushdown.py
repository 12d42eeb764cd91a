"""Aggregates computed by the scan (SUM, COUNT, MIN, MAX; AVG as SUM and
COUNT), grouped or not, over the rows its filter keeps: every result equals
Spark's own aggregation of the same rows (aggregatePushdown=false), over
random data with nulls, deleted rows, several fragments and small pages, on
random queries (seeded) and on hand cases: partial sums that would leave
their input's decimal range, values beyond a long, overflow errors (ANSI),
sums whose statistics show they would be set aside every few rows (left to
Spark),
an integer AVG (its exact sum divided, where Spark sums doubles: equal to
1e-9),
and what is not pushed (DISTINCT, doubles, rounding arithmetic). A GROUP BY
a column that the statistics show clustered is completed in the scan (no
shuffle, no final aggregation), whatever the partitions' sizes, and not
where the statistics do not show it."""
from __future__ import annotations

import datetime as dt
import decimal
import math
import random

import lance
import pytest
from pyspark.sql import types as T

from conftest import LONG

SCHEMA = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("g", T.StringType()),
    T.StructField("k", T.IntegerType()),
    T.StructField("d", T.DateType()),
    T.StructField("flag", T.BooleanType()),
    T.StructField("q", T.IntegerType()),
    T.StructField("n", T.LongType()),
    T.StructField("price", T.DecimalType(12, 2)),
    T.StructField("rate", T.DecimalType(4, 2)),
    T.StructField("small", T.DecimalType(3, 1)),
    T.StructField("huge", T.DecimalType(38, 0)),
    T.StructField("f", T.DoubleType()),
    T.StructField("cents", T.DecimalType(4, 2)),
])

GROUPS = ["g", "k", "d", "flag"]
WORDS = ["A", "N", "R", "long word " * 3, "é", ""]


def _rows(n: int, seed: int):
    rnd = random.Random(seed)

    def maybe(v, p=0.12):
        return None if rnd.random() < p else v
    out = []
    for i in range(n):
        out.append((
            i,
            maybe(rnd.choice(WORDS)),
            maybe(rnd.randint(0, 6)),
            maybe(dt.date(2024, 1, 1) + dt.timedelta(days=rnd.randint(0, 5))),
            maybe(rnd.random() < 0.5),
            maybe(rnd.randint(-1000, 1000)),
            maybe(2**59 if rnd.random() < 0.002 else rnd.randint(-10**6, 10**6)),   # sums within a long
            maybe(decimal.Decimal(rnd.randint(-10**8, 10**8)).scaleb(-2)),
            maybe(decimal.Decimal(rnd.randint(0, 99)).scaleb(-2)),
            maybe(decimal.Decimal(rnd.randint(0, 999)).scaleb(-1)),   # sums leave decimal(3,1) at once
            # beyond a long, yet their sums and averages within decimal(38,0) and decimal(38,4)
            maybe(decimal.Decimal(10**32 if rnd.random() < 0.01 else rnd.choice([rnd.randint(-10**6, 10**6), 10**20, -3 * 10**19]))),
            maybe(rnd.uniform(-1, 1)),
            # at most 1/1,024 of decimal(4,2)'s range: pushed, yet a task's sum leaves it
            maybe(decimal.Decimal(rnd.choice([8, 9, 9])).scaleb(-2)),
        ))
    return out


@pytest.fixture(scope="module", autouse=True)
def any_groups(spark):
    """The module's tables are small: their GROUP BYs are pushed whatever rows their groups have
    (test_many_small_groups_are_left_to_spark checks the default)."""
    spark.conf.set("spark.lance.aggregateMinRowsPerGroup", "0")
    yield
    spark.conf.unset("spark.lance.aggregateMinRowsPerGroup")


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("aggregates") / "t.lance")
    df = spark.createDataFrame(_rows(6000, 11), SCHEMA).repartition(3)
    df.write.format("lance").option("maxRowsPerPage", 300).save(path)
    lance.dataset(path).delete("id % 17 = 3")      # deletion vectors in every fragment
    spark.read.format("lance").load(path).createOrReplaceTempView("t")
    yield "t"
    spark.conf.unset("spark.lance.aggregatePushdown")


def _plan(spark, sql: str) -> str:
    return spark.sql(sql)._jdf.queryExecution().executedPlan().toString()


def _both(spark, sql: str):
    """(rows with the aggregate in the scan, rows with Spark aggregating), sorted; and the plan."""
    spark.conf.set("spark.lance.aggregatePushdown", "true")
    plan = _plan(spark, sql)
    on = spark.sql(sql).collect()
    spark.conf.set("spark.lance.aggregatePushdown", "false")
    off = spark.sql(sql).collect()
    spark.conf.unset("spark.lance.aggregatePushdown")
    key = lambda r: tuple((v is None, str(v)) for v in r)   # noqa: E731
    return sorted(on, key=key), sorted(off, key=key), plan


HAND = [
    ("SELECT g, k, sum(price), count(*), count(q), min(price), max(q), avg(price) FROM t GROUP BY g, k", True),
    ("SELECT sum(price * (1 - rate)), sum(price * (1 - rate) * (1 + rate)), avg(rate * 0.01) FROM t WHERE d <= DATE'2024-01-03'", True),
    ("SELECT sum(cents), count(cents), avg(cents) FROM t", True),           # partial sums set aside
    ("SELECT d, sum(small), count(small) FROM t GROUP BY d", False),        # would be set aside every few rows
    ("SELECT avg(rate) FROM t", False),                                     # (0.99: 1/101 of 99.99)
    ("SELECT flag, sum(huge), min(huge), max(huge) FROM t GROUP BY flag", True),  # beyond a long
    ("SELECT sum(n), sum(q * 3), min(n), max(n) FROM t WHERE q > 0", True),
    ("SELECT g, count(*) FROM t WHERE g IN ('A', 'R') AND q BETWEEN -10 AND 400 GROUP BY g", True),
    ("SELECT k, sum(CAST(q AS BIGINT) * n) FROM t WHERE n BETWEEN -1000000 AND 1000000 GROUP BY k", True),
    ("SELECT sum(price) FROM t WHERE id < 0", True),                        # no row kept
    ("SELECT count(DISTINCT q) FROM t", False),
    ("SELECT sum(f), g FROM t GROUP BY g", False),                          # doubles: Spark sums
    ("SELECT sum(price * price * price * price) FROM t", False),            # would round: Spark computes
]


@pytest.mark.parametrize("sql,pushed", HAND)
def test_hand_cases_equal_spark(spark, table, sql, pushed):
    on, off, plan = _both(spark, sql)
    assert ("LanceAggregateScan" in plan) == pushed, plan
    assert on == off, sql


def _same(on, off) -> bool:
    """Rows equal; doubles (AVG of integers) to 1e-9 relative: Spark averages an integer column
    in a double sum, the pushed aggregate divides the exact integer sum (as for JDBC sources)."""
    if len(on) != len(off):
        return False
    for a, b in zip(on, off):
        for x, y in zip(a, b):
            if isinstance(x, float) and isinstance(y, float):
                if not math.isclose(x, y, rel_tol=1e-9):
                    return False
            elif x != y:
                return False
    return True


def _expr(rnd: random.Random) -> str:
    return rnd.choice(["q", "n", "price", "rate", "small", "huge", "cents", "q + 1", "price * rate", "price - rate",
                       "price * (1 - rate)", "CAST(q AS DECIMAL(10,0)) * rate", "q * k", "small + small"])


def _filter(rnd: random.Random) -> str:
    return rnd.choice(["", "", "WHERE q > 0", "WHERE g IN ('A', 'N')", "WHERE d < DATE'2024-01-04' AND flag",
                       "WHERE price IS NOT NULL AND rate < 0.5", "WHERE NOT (k = 2) OR g IS NULL",
                       "WHERE id % 5 = 1", "WHERE startswith(g, 'lo')"])


@pytest.mark.parametrize("seed", range(4 if LONG else 1))   # make test: 1 seed
def test_random_aggregates_equal_spark(spark, table, seed):
    rnd = random.Random(1000 + seed)
    for _ in range(12):
        groups = rnd.sample(GROUPS, rnd.randint(0, 2))
        aggs = [f"{rnd.choice(['sum', 'min', 'max', 'count', 'avg'])}({_expr(rnd)})" for _ in range(rnd.randint(1, 4))]
        if rnd.random() < 0.3:
            aggs.append("count(*)")
        sql = f"SELECT {', '.join(groups + aggs)} FROM t {_filter(rnd)}" + (f" GROUP BY {', '.join(groups)}" if groups else "")
        on, off, _ = _both(spark, sql)
        assert _same(on, off), f"{sql}: {on[:3]} vs {off[:3]}"


def test_overflow_is_an_error_as_in_spark(spark, table):
    sql = "SELECT sum(huge * huge) FROM t"
    assert "LanceAggregateScan" in _plan(spark, sql)
    for setting in ("true", "false"):
        spark.conf.set("spark.lance.aggregatePushdown", setting)
        with pytest.raises(Exception, match="NUMERIC_VALUE_OUT_OF_RANGE"):
            spark.sql(sql).collect()
    spark.conf.unset("spark.lance.aggregatePushdown")


def test_many_groups_are_returned_in_chunks(spark, tmp_path):
    # more groups than a task holds at once (2^18): it returns them and starts again; Spark merges
    # (ids in no order: the statistics show no clustering, the aggregation stays partial)
    path = str(tmp_path / "ids.lance")
    spark.range(0, 300_000, numPartitions=1).selectExpr("(id * 7919) % 300000 AS id", "CAST(id % 7 AS INT) AS v") \
        .write.format("lance").save(path)
    spark.read.format("lance").option("splitRows", 10**9).load(path).createOrReplaceTempView("ids")
    sql = "SELECT count(*), sum(c), min(c), max(c), sum(s) FROM (SELECT id, count(*) AS c, sum(v) AS s FROM ids GROUP BY id)"
    plan = _plan(spark, "SELECT id, count(*), sum(v) FROM ids GROUP BY id")
    assert "LanceAggregateScan" in plan and ", complete" not in plan, plan
    assert [tuple(r) for r in spark.sql(sql).collect()] == [(300_000, 300_000, 1, 1, sum(i % 7 for i in range(300_000)))]


def test_sums_without_statistics(spark, tmp_path):
    """pylance's files carry no statistics to bound a SUM's input: a decimal of 10 digits or more
    is pushed anyway (a DECIMAL(15,2) amount), a narrower one is not (a DECIMAL(7,2) price of a
    few thousand would be set aside every few dozen rows). Values near the type's range, whose
    partial sums are set aside every other row, still give the exact sums (Python's decimal)."""
    rnd = random.Random(7)
    schema = T.StructType([T.StructField("g", T.IntegerType()), T.StructField("big", T.DecimalType(15, 2)),
                           T.StructField("amt", T.DecimalType(10, 2)), T.StructField("price", T.DecimalType(7, 2))])
    rows = [(rnd.randint(0, 3),
             None if rnd.random() < 0.05 else decimal.Decimal(rnd.randint(-10**15 + 1, 10**15 - 1)).scaleb(-2),
             decimal.Decimal(rnd.randint(-10**8, 10**8)).scaleb(-2),
             decimal.Decimal(rnd.randint(0, 10**6)).scaleb(-2)) for _ in range(5000)]
    spark_path = str(tmp_path / "sums.lance")
    spark.createDataFrame(rows, schema).repartition(2).write.format("lance").save(spark_path)
    py_path = str(tmp_path / "sums_pylance.lance")
    lance.write_dataset(lance.dataset(spark_path).to_table(), py_path, max_rows_per_file=2000)
    spark.read.format("lance").load(py_path).createOrReplaceTempView("sums_pylance")
    pushed = lambda sql: "LanceAggregateScan" in _plan(spark, sql)   # noqa: E731
    assert pushed("SELECT sum(big), avg(amt) FROM sums_pylance")
    assert pushed("SELECT g, sum(amt), count(*) FROM sums_pylance GROUP BY g")
    assert not pushed("SELECT sum(price) FROM sums_pylance")
    assert not pushed("SELECT g, sum(big), sum(price) FROM sums_pylance GROUP BY g")
    expected = {}
    for g, big, amt, _ in rows:
        s_big, s_amt, n = expected.get(g, (decimal.Decimal(0), decimal.Decimal(0), 0))
        expected[g] = (s_big + (big or 0), s_amt + amt, n + 1)
    got = spark.sql("SELECT g, sum(big), sum(amt), count(*) FROM sums_pylance GROUP BY g").collect()
    assert {r[0]: (r[1], r[2], r[3]) for r in got} == expected
    total = spark.sql("SELECT sum(big), count(big) FROM sums_pylance").collect()[0]
    assert (total[0], total[1]) == (sum(r[1] for r in rows if r[1] is not None), sum(r[1] is not None for r in rows))


def test_many_small_groups_are_left_to_spark(spark, tmp_path):
    """By default a partial GROUP BY is pushed only when its groups average 1,000 rows or more
    by the distinct estimates of the written files (10 for a SUM of decimals over one grouping
    column); without estimates (pylance's files) it is."""
    path = str(tmp_path / "groups.lance")
    spark.range(0, 300_000, numPartitions=1).selectExpr(
        "(id * 7919) % 300000 AS id", "CAST(id % 7 AS INT) AS v", "CAST(id % 1000 AS INT) AS k",
        "CAST((id * 7919) % 100000 / 100 AS DECIMAL(9, 2)) AS d") \
        .write.format("lance").save(path)
    spark.read.format("lance").load(path).createOrReplaceTempView("groups")
    py_path = str(tmp_path / "groups_pylance.lance")
    lance.write_dataset(lance.dataset(path).to_table(), py_path)
    spark.read.format("lance").load(py_path).createOrReplaceTempView("groups_pylance")
    spark.conf.unset("spark.lance.aggregateMinRowsPerGroup")
    try:
        pushed = lambda sql: "LanceAggregateScan" in _plan(spark, sql)   # noqa: E731
        assert not pushed("SELECT id, count(*) FROM groups GROUP BY id")          # 300,000 groups of 1 row
        assert not pushed("SELECT k, sum(v) FROM groups GROUP BY k")               # 1,000 of 300
        assert not pushed("SELECT k, v, count(*) FROM groups WHERE v < 3 GROUP BY k, v")
        assert pushed("SELECT v, count(*), sum(k) FROM groups GROUP BY v")        # 7 of 42,857
        assert pushed("SELECT k, count(*), max(v) FROM groups_pylance GROUP BY k")  # no estimates
        # a SUM of decimals over one grouping column: pushed from 10 rows a group (Spark adds
        # decimals as objects), not below, nor over two columns, nor for counts
        assert pushed("SELECT k, sum(d) FROM groups GROUP BY k")                   # 1,000 of 300
        assert pushed("SELECT k, sum(d * v), count(*) FROM groups GROUP BY k")
        assert not pushed("SELECT id, sum(d) FROM groups GROUP BY id")             # 300,000 of 1
        assert not pushed("SELECT k, v, sum(d) FROM groups GROUP BY k, v")         # 7,000 of 43
        assert not pushed("SELECT k, count(*), max(d) FROM groups GROUP BY k")
        on, off, _ = _both(spark, "SELECT k, sum(d), sum(d * v), avg(d) FROM groups GROUP BY k")
        assert on == off and len(on) == 1000
        spark.conf.set("spark.lance.aggregateMinRowsPerGroup", "200")
        assert pushed("SELECT k, sum(v) FROM groups GROUP BY k")
        on, off, _ = _both(spark, "SELECT k, sum(v), count(*) FROM groups GROUP BY k")
        assert on == off and len(on) == 1000
    finally:
        spark.conf.set("spark.lance.aggregateMinRowsPerGroup", "0")


# --- complete aggregation: GROUP BY a column the statistics show clustered ---------------------

def _clustered_rows(start: int, stop: int):
    """Rows i in [start, stop): key o = i // 3 (runs of 3 that pages and fragments cut through),
    a decimal, an int with nulls, a string that is not grouped on."""
    return [(i // 3, decimal.Decimal(i % 50 + 1), None if i % 11 == 0 else i % 97, f"w{i % 5}") for i in range(start, stop)]


CLUSTERED = T.StructType([
    T.StructField("o", T.LongType()), T.StructField("qty", T.DecimalType(15, 2)),
    T.StructField("v", T.IntegerType()), T.StructField("w", T.StringType()),
])


@pytest.fixture(scope="module", params=["2.0", "2.1"])
def clustered(spark, tmp_path_factory, request):
    """Three appends of consecutive rows (each a fragment; a key's run goes on from one to the
    next), pages of 1,000 rows (also cutting runs), deleted rows."""
    path = str(tmp_path_factory.mktemp("clustered") / "c.lance")
    bounds = [0, 30_001, 61_000, 90_000]
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        spark.createDataFrame(_clustered_rows(a, b), CLUSTERED).coalesce(1).write.format("lance") \
            .option("maxRowsPerPage", 1000).option("fileVersion", request.param).mode("append" if i else "error").save(path)
    lance.dataset(path).delete("o % 13 = 5 AND v > 40")
    return path


def _grouped(spark, path: str, sql: str, split: int):
    spark.read.format("lance").option("splitRows", split).load(path).createOrReplaceTempView("c")
    return _both(spark, sql)


COMPLETE = [
    "SELECT o, sum(qty), count(*), count(v), min(v), max(qty), avg(qty) FROM c GROUP BY o",
    "SELECT w, o, sum(v) FROM c WHERE v > 10 GROUP BY o, w",
    "SELECT o, count(*) FROM c WHERE o BETWEEN 9000 AND 21000 GROUP BY o HAVING count(*) > 2",
]


# make test: the three statements with partitions cut about every 999 rows; make test-long: each
# with none, 999 and 4,000
@pytest.mark.parametrize("sql,split", [(sql, split) for sql in COMPLETE for split in (10**9, 999, 4_000)
                                       if LONG or split == 999])
def test_clustered_group_by_is_completed_in_the_scan(spark, clustered, sql, split):
    # cuts of about `split` rows would fall inside runs of a key: the partitions end only where
    # the statistics show no key on both sides, so each group is whole in one task
    on, off, plan = _grouped(spark, clustered, sql, split)
    assert "LanceAggregateScan" in plan and ", complete" in plan, plan
    assert "HashAggregate" not in plan and "Exchange" not in plan, plan
    assert on == off, sql
    assert len({tuple(r)[:2] for r in on}) == len(on)          # one row per group


def test_many_clustered_groups_are_handed_out_at_cuts(spark, tmp_path):
    # 300,000 groups in one task, more than it holds at once: it hands them out at a cut, never
    # one group twice; expected values from first principles
    path = str(tmp_path / "runs.lance")
    # (runs of 3 offset by one: the 8,192-row batches end inside runs)
    spark.range(0, 900_000, numPartitions=1).selectExpr("(id + 1) DIV 3 AS o", "CAST(id % 7 AS INT) AS v") \
        .write.format("lance").option("maxRowsPerPage", 1000).save(path)
    spark.read.format("lance").option("splitRows", 10**9).load(path).createOrReplaceTempView("runs")
    inner = "SELECT o, count(*) AS c, sum(v) AS s FROM runs GROUP BY o"
    assert ", complete" in _plan(spark, inner)
    got = spark.sql(f"SELECT count(*), count(DISTINCT o), sum(c), min(c), max(c), sum(s) FROM ({inner})").collect()
    groups = len({(i + 1) // 3 for i in range(900_000)})
    assert [tuple(r) for r in got] == [(groups, groups, 900_000, 1, 3, sum(i % 7 for i in range(900_000)))]


@pytest.mark.parametrize("key", ["DATE_ADD(DATE'2024-01-01', CAST(id DIV 700 AS INT))", "CAST(id DIV 300 AS DECIMAL(10,2)) / 4",
                                 "TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, CAST(id DIV 500 AS INT), 0)",
                                 "CAST(id DIV 250 AS INT)"])
def test_clustered_dates_decimals_timestamps_ints(spark, tmp_path, key):
    # a table appended in key order (say one day after another): each append a fragment
    path = str(tmp_path / "k.lance")
    for i in range(3):
        spark.range(i * 4_000, (i + 1) * 4_000, numPartitions=1).selectExpr(f"{key} AS k", "CAST(id % 13 AS INT) AS v") \
            .write.format("lance").option("maxRowsPerPage", 700).mode("append" if i else "error").save(path)
    on, off, plan = _grouped(spark, path, "SELECT k, count(*), sum(v), max(v) FROM c GROUP BY k", 1_500)
    assert ", complete" in plan, plan
    assert on == off and len(on) == len({r[0] for r in on})


@pytest.mark.parametrize("case", ["bigint sum", "decreasing fragment", "null key", "unordered"])
def test_what_is_not_completed(spark, tmp_path, case):
    path = str(tmp_path / "n.lance")
    rows = _clustered_rows(0, 6_000)
    if case == "null key":
        rows[4_000] = (None,) + rows[4_000][1:]
    if case == "unordered":
        rows = rows[3_000:] + rows[:3_000]
    spark.createDataFrame(rows, CLUSTERED).coalesce(1).write.format("lance").option("maxRowsPerPage", 1000).save(path)
    if case == "decreasing fragment":       # an append of keys below the first fragment's
        spark.createDataFrame(_clustered_rows(0, 3), CLUSTERED).write.format("lance").mode("append").save(path)
    sql = "SELECT o, sum(CAST(v AS BIGINT)) FROM c GROUP BY o" if case == "bigint sum" else \
        "SELECT o, sum(qty), count(*) FROM c GROUP BY o"
    on, off, plan = _grouped(spark, path, sql, 1_000)
    assert "LanceAggregateScan" in plan and ", complete" not in plan, plan
    assert on == off
