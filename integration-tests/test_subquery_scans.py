"""Scalar subqueries over one Lance table with one filter read it once
(extensions.SharedSubqueryScans), as Spark reads a Parquet table once for them
(TPC-DS q9's shape: per bucket a count(*), an avg of one column and an avg of
another, all over `q BETWEEN lo AND hi`). The oracle is the same query over a
Parquet copy of the same rows (written from Python, deleted rows left out):
equal results and the same number of subquery jobs; with the rule off, one
job per subquery and the same results. Groups that cannot merge (different
filters, a LIMIT, an aggregate Spark does not merge) keep their own scans
and their results."""
from __future__ import annotations

import decimal
import random
import re

import pytest
from pyspark.sql import types as T

from conftest import sliced

SCHEMA = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("q", T.IntegerType()),
    T.StructField("a", T.DecimalType(7, 2)),
    T.StructField("b", T.DecimalType(7, 2)),
    T.StructField("n", T.LongType()),
    T.StructField("s", T.StringType()),
])

ROWS = 9000


def _rows():
    rnd = random.Random(9)

    def maybe(v):
        return None if rnd.random() < 0.05 else v
    return [(i, maybe(rnd.randint(1, 60)), maybe(decimal.Decimal(rnd.randint(0, 9_999_999)) / 100),
             maybe(decimal.Decimal(rnd.randint(-500_000, 500_000)) / 100), maybe(rnd.randint(-10**9, 10**9)),
             maybe(rnd.choice(["x", "y", "zz"]))) for i in range(ROWS)]


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("subq")
    rows = _rows()
    lance_path = str(root / "t.lance")
    spark.createDataFrame(rows, SCHEMA).repartition(3).write.format("lance") \
        .option("maxRowsPerPage", 700).save(lance_path)
    spark.sql(f"DELETE FROM lance.`{lance_path}` WHERE id % 13 = 0")
    kept = [r for r in rows if r[0] % 13 != 0]
    parquet_path = str(root / "t.parquet")
    spark.createDataFrame(kept, SCHEMA).repartition(2).write.parquet(parquet_path)
    spark.read.format("lance").load(lance_path).createOrReplaceTempView("subq_lance")
    spark.read.parquet(parquet_path).createOrReplaceTempView("subq_parquet")
    yield
    spark.conf.unset("spark.lance.shareSubqueryScans")


def _buckets(table: str, n: int = 3) -> str:
    parts = []
    for k in range(n):
        lo, hi = 1 + 20 * k, 20 * (k + 1)
        where = f"FROM {table} WHERE q BETWEEN {lo} AND {hi}"
        parts.append(f"CASE WHEN (SELECT count(*) {where}) > {1000 + k} THEN (SELECT avg(a) {where}) "
                     f"ELSE (SELECT avg(b) {where}) END AS bucket{k}, (SELECT sum(n) {where}) AS total{k}")
    return "SELECT " + ", ".join(parts)


def _jobs(spark, sql: str) -> int:
    """Subqueries the executed plan runs (those it reuses share their plan's id), planned
    without adaptive execution (whose plan string shows its initial plan as well)."""
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        plan = spark.sql(sql)._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
    return len(set(re.findall(r"Subquery (?:scalar-)?subquery#\d+, \[id=#(\d+)\]", plan)))


def _run(spark, sql: str):
    return [tuple(r) for r in spark.sql(sql).collect()]


def test_one_scan_per_filter_as_parquet(spark, tables):
    lance_sql, parquet_sql = _buckets("subq_lance"), _buckets("subq_parquet")
    assert _run(spark, lance_sql) == _run(spark, parquet_sql)
    parquet_jobs = _jobs(spark, parquet_sql)
    assert parquet_jobs == 3
    assert _jobs(spark, lance_sql) == parquet_jobs


def test_rule_off_runs_a_job_per_subquery_with_the_same_results(spark, tables):
    sql = _buckets("subq_lance")
    merged = _run(spark, sql)
    spark.conf.set("spark.lance.shareSubqueryScans", "false")
    try:
        assert _run(spark, sql) == merged
        assert _jobs(spark, sql) == 12
    finally:
        spark.conf.unset("spark.lance.shareSubqueryScans")


@pytest.mark.parametrize("sql,jobs", [
    # different filters: one scan each
    ("SELECT (SELECT avg(a) FROM {t} WHERE q < 10), (SELECT avg(b) FROM {t} WHERE q < 11)", 2),
    # the same filter, a count alone with an aggregate Spark does not merge (min of a string)
    ("SELECT (SELECT count(*) FROM {t} WHERE q > 30), (SELECT min(s) FROM {t} WHERE q > 30)", 2),
    # no filter: one scan for max and min; the count from the manifest, no scan
    ("SELECT (SELECT max(a) FROM {t}), (SELECT min(b) FROM {t}), (SELECT count(*) FROM {t})", 2),
    # a LIMIT under an aggregate: its own scan
    ("SELECT (SELECT sum(a) FROM (SELECT a FROM {t} WHERE q = 5 ORDER BY id LIMIT 7)), "
     "(SELECT sum(b) FROM {t} WHERE q = 5)", 2),
    # an aggregate of a computed value and a filter the scan evaluates
    ("SELECT (SELECT sum(a * 2) FROM {t} WHERE s = 'x' AND q IS NOT NULL), "
     "(SELECT count(b) FROM {t} WHERE s = 'x' AND q IS NOT NULL), "
     "(SELECT avg(n) FROM {t} WHERE s = 'x' AND q IS NOT NULL)", 1),
])
def test_groups_that_merge_and_that_do_not(spark, tables, sql, jobs):
    lance_sql, parquet_sql = sql.format(t="subq_lance"), sql.format(t="subq_parquet")
    assert _run(spark, lance_sql) == _run(spark, parquet_sql)
    assert _jobs(spark, lance_sql) == jobs


# -- predicates Spark infers above built scans (extensions.ResidualScanFilters) --------------------

_CTE_TWICE = """
WITH ctr AS (
  SELECT r.cust AS c, a.st AS st, sum(r.amt) AS total
  FROM {p}_ret r, {p}_days d, {p}_addr a
  WHERE r.day = d.d_sk AND d.yr = 2002 AND r.addr = a.addr_sk
  GROUP BY r.cust, a.st)
SELECT c1.c, c1.st, c1.total FROM ctr c1
WHERE c1.total > (SELECT avg(total) * 1.2 FROM ctr c2 WHERE c1.st = c2.st)
"""


@pytest.fixture(scope="module")
def star(spark, tmp_path_factory):
    """A fact table of returns and two dimensions (TPC-DS q30's shape), as Lance and as Parquet."""
    root = tmp_path_factory.mktemp("star")
    rnd = random.Random(30)
    ret = [(rnd.randint(1, 400) if rnd.random() > 0.03 else None, rnd.randint(1, 300),
            decimal.Decimal(rnd.randint(0, 99_999)) / 100, rnd.randint(1, 730) if rnd.random() > 0.03 else None)
           for _ in range(6000)]
    days = [(d, 2001 + (d - 1) // 365) for d in range(1, 731)]
    addr = [(a, rnd.choice(["GA", "TX", "OH", None])) for a in range(1, 301)]
    tables = {"ret": (ret, "cust INT, addr INT, amt DECIMAL(7,2), day INT"), "days": (days, "d_sk INT, yr INT"),
              "addr": (addr, "addr_sk INT, st STRING")}
    for name, (rows, schema) in tables.items():
        df = spark.createDataFrame(rows, schema)
        df.write.format("lance").save(str(root / f"{name}.lance"))
        df.write.parquet(str(root / f"{name}.parquet"))
        spark.read.format("lance").load(str(root / f"{name}.lance")).createOrReplaceTempView(f"sl_{name}")
        spark.read.parquet(str(root / f"{name}.parquet")).createOrReplaceTempView(f"sp_{name}")
    yield
    spark.conf.unset("spark.lance.pushResidualFilters")


def _fact_scans(spark, sql: str, table: str = "ret", first_column: str = "cust") -> int:
    """Scans of the fact table `table` (Lance, or Parquet's, whose first column is `first_column`)
    in the executed plan (without adaptive execution); an exchange reused is not a scan."""
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        plan = spark.sql(sql)._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
    return len(re.findall(rf"(?:BatchScan lance\.`[^`]*/{table}\.lance`|FileScan parquet \[{first_column}#)", plan))


def test_inferred_predicates_join_the_scan_and_the_cte_runs_once_as_parquets(spark, star):
    """A CTE read twice, once through a decorrelated subquery: Spark infers `IS NOT NULL`s after
    the subquery's scans were built. With them in the scans both reads of the CTE have one plan,
    computed once (its exchange reused) as Parquet's; without (the rule off), twice. Same rows."""
    lance_sql, parquet_sql = _CTE_TWICE.format(p="sl"), _CTE_TWICE.format(p="sp")
    expected = sorted(_run(spark, parquet_sql), key=repr)
    assert expected and _fact_scans(spark, parquet_sql) == 1
    assert sorted(_run(spark, lance_sql), key=repr) == expected
    assert _fact_scans(spark, lance_sql) == 1
    spark.conf.set("spark.lance.pushResidualFilters", "false")
    try:
        assert sorted(_run(spark, lance_sql), key=repr) == expected
        assert _fact_scans(spark, lance_sql) == 2
    finally:
        spark.conf.unset("spark.lance.pushResidualFilters")


@pytest.mark.parametrize("seed", sliced(range(4), range(2)))   # make test: 2 of the 4 seeds
def test_random_predicates_in_a_cte_read_twice_give_parquets_rows(spark, star, seed):
    """Seeded random predicates (ranges, IN, IS NULL, OR, NOT over the fact table and the
    dimensions) in the CTE read twice: with inferred predicates moved into the scans, the rows
    are Parquet's, and the CTE is computed once, as Parquet's."""
    rnd = random.Random(seed)

    def pred() -> str:
        choices = [
            lambda: f"r.amt {rnd.choice(['<', '>=', '<=', '>'])} {rnd.randint(0, 1000)}",
            lambda: f"r.cust IN ({', '.join(str(rnd.randint(1, 400)) for _ in range(rnd.randint(1, 30)))})",
            lambda: f"r.cust {rnd.choice(['<', '>'])} {rnd.randint(1, 400)}",
            lambda: "a.st IS NULL" if rnd.random() < 0.3 else f"a.st = '{rnd.choice(['GA', 'TX', 'OH'])}'",
            lambda: f"d.d_sk BETWEEN {rnd.randint(1, 365)} AND {rnd.randint(366, 730)}",
        ]
        p = rnd.choice(choices)()
        roll = rnd.random()
        if roll < 0.25:
            return f"({p} OR {rnd.choice(choices)()})"
        if roll < 0.4:
            return f"NOT ({p})"
        return p

    extra = " AND ".join(pred() for _ in range(rnd.randint(1, 3)))
    sql = """
WITH ctr AS (
  SELECT r.cust AS c, a.st AS st, sum(r.amt) AS total
  FROM {p}_ret r, {p}_days d, {p}_addr a
  WHERE r.day = d.d_sk AND r.addr = a.addr_sk AND """ + extra + """
  GROUP BY r.cust, a.st)
SELECT c1.c, c1.st, c1.total FROM ctr c1
WHERE c1.total > (SELECT avg(total) FROM ctr c2 WHERE c1.st <=> c2.st)
"""
    expected = sorted(_run(spark, sql.format(p="sp")), key=repr)
    assert sorted(_run(spark, sql.format(p="sl")), key=repr) == expected, extra
    assert _fact_scans(spark, sql.format(p="sl")) == _fact_scans(spark, sql.format(p="sp")) == 1, extra


_NESTED_CTE = """
WITH ctr AS (
  SELECT r.k.cust AS c, a.st AS st, sum(r.amt) AS total
  FROM {p}_nret r, {p}_days d, {p}_addr a
  WHERE r.day = d.d_sk AND d.yr = 2002 AND r.k.addr = a.addr_sk{extra}
  GROUP BY r.k.cust, a.st)
SELECT c1.c, c1.st, c1.total FROM ctr c1
WHERE c1.total > (SELECT avg(total) * 1.1 FROM ctr c2 WHERE c1.st <=> c2.st)
"""


@pytest.fixture(scope="module")
def nested_star(spark, star, tmp_path_factory):
    """The fact table of [star] with its keys in a struct (null structs and null fields both)."""
    root = tmp_path_factory.mktemp("nstar")
    rnd = random.Random(31)

    def key():
        if rnd.random() < 0.04:
            return None
        return (rnd.randint(1, 400) if rnd.random() > 0.05 else None, rnd.randint(1, 300) if rnd.random() > 0.05 else None)
    rows = [(key(), decimal.Decimal(rnd.randint(0, 99_999)) / 100, rnd.randint(1, 730) if rnd.random() > 0.03 else None)
            for _ in range(6000)]
    df = spark.createDataFrame(rows, "k STRUCT<cust: INT, addr: INT>, amt DECIMAL(7,2), day INT")
    df.write.format("lance").save(str(root / "nret.lance"))
    df.write.parquet(str(root / "nret.parquet"))
    spark.read.format("lance").load(str(root / "nret.lance")).createOrReplaceTempView("sl_nret")
    spark.read.parquet(str(root / "nret.parquet")).createOrReplaceTempView("sp_nret")


def _nested_fact_scans(spark, sql: str) -> int:
    return _fact_scans(spark, sql, table="nret", first_column="k")


@pytest.mark.parametrize("extra", ["", " AND r.k.cust > 150", " AND (r.k IS NULL OR r.k.cust IN (3, 5, 7, 11))",
                                   " AND NOT (r.k.addr BETWEEN 20 AND 200)"])
def test_inferred_predicates_on_struct_fields_give_parquets_rows_and_scans(spark, nested_star, extra):
    """Join keys inside a struct: Spark infers `IS NOT NULL` of the struct (and of its field)
    above the scans it built for the subquery. The rows are Parquet's, and the fact table is
    scanned once, as Parquet's is (twice with the rule off)."""
    lance_sql, parquet_sql = _NESTED_CTE.format(p="sl", extra=extra), _NESTED_CTE.format(p="sp", extra=extra)
    expected = sorted(_run(spark, parquet_sql), key=repr)
    assert sorted(_run(spark, lance_sql), key=repr) == expected
    assert _nested_fact_scans(spark, lance_sql) == _nested_fact_scans(spark, parquet_sql) == 1
    spark.conf.set("spark.lance.pushResidualFilters", "false")
    try:   # without the rule, the struct's inferred IS NOT NULL stays above the subquery's scan
        assert _nested_fact_scans(spark, lance_sql) == 2
    finally:
        spark.conf.unset("spark.lance.pushResidualFilters")
