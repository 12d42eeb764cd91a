"""Joins pruned at run time (Spark's dynamic pruning through the Lance scan's
runtime filtering, LanceScan.filter, and extensions.VisibleScanFilters): a
fact table whose `day` is clustered (written in day order) joined to a small
filtered dimension is read only where its pages hold the dimension's keys, and
a fact table whose `item` has a BTREE index (pylance's) only at the rows the
index selects for the dimension's keys. A key in no order and no index is not
offered to Spark (no pruning to gain), nor a table of few rows. The oracle is the same query over
Parquet copies of the same rows (written from Python, deleted rows left out):
equal results with adaptive execution on and off, with the visible filters on
and off, for inner and semi joins, NULL keys, deleted rows and a dimension
whose filter keeps no row."""
from __future__ import annotations

import decimal
import random

import lance
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from conftest import LONG

DAYS = 600
ROWS = 48_000
ITEMS = 400

SALES = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("day", T.IntegerType()),
    T.StructField("item", T.IntegerType()),
    T.StructField("qty", T.IntegerType()),
    T.StructField("price", T.DecimalType(7, 2)),
])


def _sales() -> list[tuple]:
    rnd = random.Random(41)
    rows = []
    for i in range(ROWS):
        day = i * DAYS // ROWS
        rows.append((i, None if rnd.random() < 0.01 else day, None if rnd.random() < 0.01 else rnd.randrange(ITEMS),
                     rnd.randint(0, 40), decimal.Decimal(rnd.randint(0, 999_999)) / 100))
    return rows


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    # scans of fewer rows are not offered to Spark's pruning by default (500,000)
    spark.conf.set("spark.lance.runtimeFilterRows", "10000")
    root = tmp_path_factory.mktemp("rtf")
    rows = _sales()
    # ours: three fragments in day order, small pages (statistics per 500 rows)
    sales = str(root / "sales.lance")
    spark.createDataFrame(rows, SALES).repartitionByRange(3, "id").sortWithinPartitions("id").write \
        .format("lance").option("maxRowsPerPage", 500).save(sales)
    spark.sql(f"DELETE FROM lance.`{sales}` WHERE qty = 0")
    kept = [r for r in rows if r[3] != 0]
    # pylance's (no page statistics), with a BTREE index on item
    by_pylance = str(root / "sales_pylance.lance")
    table = pa.table({
        "id": pa.array([r[0] for r in rows], pa.int64()),
        "day": pa.array([r[1] for r in rows], pa.int32()),
        "item": pa.array([r[2] for r in rows], pa.int32()),
        "qty": pa.array([r[3] for r in rows], pa.int32()),
        "price": pa.array([r[4] for r in rows], pa.decimal128(7, 2)),
    })
    ds = lance.write_dataset(table, by_pylance, max_rows_per_file=20_000)
    ds.create_scalar_index("item", "BTREE")
    ds.delete("qty = 0")

    days = [(d, d // 100, (d // 10) % 12) for d in range(DAYS)]
    items = [(i, f"c{i // 20}") for i in range(ITEMS)]  # 20 consecutive items a category
    days_schema = "day INT, year INT, month INT"
    items_schema = "item INT, category STRING"
    for name, data, schema in (("days", days, days_schema), ("items", items, items_schema)):
        spark.createDataFrame(data, schema).write.format("lance").save(str(root / f"{name}.lance"))
        spark.createDataFrame(data, schema).write.parquet(str(root / f"{name}.parquet"))
    spark.createDataFrame(kept, SALES).repartition(2).write.parquet(str(root / "sales.parquet"))
    for name in ("sales", "days", "items"):
        spark.read.format("lance").load(str(root / f"{name}.lance")).createOrReplaceTempView(f"rtf_{name}_lance")
        spark.read.parquet(str(root / f"{name}.parquet")).createOrReplaceTempView(f"rtf_{name}_parquet")
    spark.read.format("lance").load(by_pylance).createOrReplaceTempView("rtf_pysales_lance")
    spark.read.parquet(str(root / "sales.parquet")).createOrReplaceTempView("rtf_pysales_parquet")
    yield
    for k in ("spark.lance.showScanFilters", "spark.sql.adaptive.enabled", "spark.lance.localScanRows",
              "spark.lance.runtimeFilterRows"):
        spark.conf.unset(k)


def _sql(query: str, side: str) -> str:
    for name in ("pysales", "sales", "days", "items"):
        query = query.replace("{" + name + "}", f"rtf_{name}_{side}")
    return query


BY_DAY = ("SELECT d.month, count(*), sum(s.qty), sum(s.price) FROM {sales} s JOIN {days} d ON s.day = d.day "
          "WHERE d.year = {year} GROUP BY d.month ORDER BY d.month")
SEMI = ("SELECT count(*), sum(qty) FROM {sales} s LEFT SEMI JOIN (SELECT day FROM {days} WHERE month = 3 AND year < 3) d "
        "ON s.day = d.day")
#: the same as a predicate subquery, which Spark optimizes (and builds its scans) before the query around it:
#: its filter is in its scan, not shown, so not pruned at run time; the same rows
IN_SUBQUERY = "SELECT count(*), sum(qty) FROM {sales} WHERE day IN (SELECT day FROM {days} WHERE month = 3 AND year < 3)"
BY_ITEM = ("SELECT i.category, count(*), sum(s.qty) FROM {pysales} s JOIN {items} i ON s.item = i.item "
           "WHERE i.category = 'c7' GROUP BY i.category")
BY_ITEM_UNINDEXED = ("SELECT i.category, count(*), sum(s.qty) FROM {sales} s JOIN {items} i ON s.item = i.item "
                     "WHERE i.category IN ('c3', 'c4') GROUP BY i.category ORDER BY i.category")


def _rows(spark, query: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(query).collect()]


def _fact_scan(spark, query: str):
    """The executed plan (adaptive execution off, scans run as jobs) and the fact table's scan node."""
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    spark.conf.set("spark.lance.localScanRows", "0")
    try:
        df = spark.sql(query)
        qe = df._jdf.queryExecution()
        df.collect()
        plan = qe.executedPlan()
        leaves = plan.collectLeaves()
        for i in range(leaves.size()):
            leaf = leaves.apply(i)
            if "sales" in leaf.toString() and leaf.metrics().contains("pagesRead"):
                m = leaf.metrics()
                return plan.toString(), leaf.toString(), {
                    k: int(m.get(k).get().value()) for k in
                    ("pagesRead", "pagesPruned", "rowsSkippedByStats", "rowsSelectedByIndex", "numOutputRows")
                    if m.contains(k)}
        raise AssertionError(plan.toString())
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
        spark.conf.unset("spark.lance.localScanRows")


# make test: each year once, adaptive execution on and off among them; make test-long: each both ways
@pytest.mark.parametrize("year,adaptive", [(y, a) for y in (2, 5, 9) for a in ("true", "false")]
                         if LONG else [(2, "true"), (5, "false"), (9, "true")])
def test_join_on_clustered_key_equals_parquet(spark, tables, adaptive, year):
    spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    try:
        q = BY_DAY.replace("{year}", str(year))
        expected = _rows(spark, _sql(q, "parquet"))
        assert _rows(spark, _sql(q, "lance")) == expected
        if year == 9:
            assert expected == []  # no day of year 9: the scan is pruned to nothing
        spark.conf.set("spark.lance.showScanFilters", "false")
        assert _rows(spark, _sql(q, "lance")) == expected
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
        spark.conf.unset("spark.lance.showScanFilters")


def test_clustered_key_prunes_pages(spark, tables):
    q = _sql(BY_DAY.replace("{year}", "2"), "lance")
    plan, scan, m = _fact_scan(spark, q)
    assert "dynamicpruningexpression(day" in scan, plan
    # year 2 is 100 of the 600 days: about a sixth of the table's pages hold them
    total = ROWS // 500 + 3
    assert m["pagesPruned"] >= total * 2 // 3, m
    matching = sum(1 for r in _sales() if r[1] is not None and r[1] // 100 == 2 and r[3] != 0)
    assert m["numOutputRows"] == matching, m  # the rows of other days are dropped in the scan
    spark.conf.set("spark.lance.showScanFilters", "false")
    try:
        plan_off, scan_off, m_off = _fact_scan(spark, q)
    finally:
        spark.conf.unset("spark.lance.showScanFilters")
    assert "dynamicpruningexpression" not in scan_off, plan_off
    assert m_off.get("pagesPruned", 0) == 0 and m_off["numOutputRows"] > matching * 5, m_off


def test_semi_join(spark, tables):
    expected = _rows(spark, _sql(SEMI, "parquet"))
    assert expected[0][0] > 0
    assert _rows(spark, _sql(SEMI, "lance")) == expected
    assert _rows(spark, _sql(IN_SUBQUERY, "lance")) == _rows(spark, _sql(IN_SUBQUERY, "parquet")) == expected
    plan, scan, m = _fact_scan(spark, _sql(SEMI, "lance"))
    assert "dynamicpruningexpression(day" in scan, plan
    assert m["pagesPruned"] > 0, m


def test_indexed_key_uses_the_index(spark, tables):
    expected = _rows(spark, _sql(BY_ITEM, "parquet"))
    assert expected and expected[0][1] > 0
    assert _rows(spark, _sql(BY_ITEM, "lance")) == expected
    plan, scan, m = _fact_scan(spark, _sql(BY_ITEM, "lance"))
    assert "dynamicpruningexpression(item" in scan, plan
    # the index selects the rows of the category's 20 items (deleted ones included)
    selected = sum(1 for r in _sales() if r[2] is not None and r[2] // 20 == 7)
    assert m["rowsSelectedByIndex"] == selected, m


def test_unordered_unindexed_key_is_not_offered(spark, tables):
    assert _rows(spark, _sql(BY_ITEM_UNINDEXED, "lance")) == _rows(spark, _sql(BY_ITEM_UNINDEXED, "parquet"))
    plan, scan, _ = _fact_scan(spark, _sql(BY_ITEM_UNINDEXED, "lance"))
    assert "dynamicpruningexpression" not in scan, plan


def test_small_table_is_not_offered(spark, tables):
    q = _sql(BY_DAY.replace("{year}", "2"), "lance")
    spark.conf.set("spark.lance.runtimeFilterRows", str(ROWS + 1))
    try:
        plan, scan, m = _fact_scan(spark, q)
        assert _rows(spark, q) == _rows(spark, _sql(BY_DAY.replace("{year}", "2"), "parquet"))
    finally:
        spark.conf.set("spark.lance.runtimeFilterRows", "10000")
    assert "dynamicpruningexpression" not in scan, plan
    assert m.get("pagesPruned", 0) == 0, m


def test_keys_on_every_page_are_dropped(spark, tables, tmp_path):
    # a dimension keeping every third day: each 500-row page of `sales` (six days) holds some of its
    # keys, so the keys rule out no page; the scan leaves them to the join (testing each row
    # costs more than the join's own probe) and reads every row, with the same result
    thirds = [(d, d % 3) for d in range(DAYS)]
    spark.createDataFrame(thirds, "day INT, third INT").write.format("lance").save(str(tmp_path / "thirds.lance"))
    spark.createDataFrame(thirds, "day INT, third INT").write.parquet(str(tmp_path / "thirds.parquet"))
    spark.read.format("lance").load(str(tmp_path / "thirds.lance")).createOrReplaceTempView("rtf_thirds_lance")
    spark.read.parquet(str(tmp_path / "thirds.parquet")).createOrReplaceTempView("rtf_thirds_parquet")
    q = ("SELECT count(*), sum(s.qty), sum(s.price) FROM {sales} s JOIN rtf_thirds_{side} t ON s.day = t.day "
         "WHERE t.third = 1")
    expected = _rows(spark, _sql(q.replace("{side}", "parquet"), "parquet"))
    assert expected[0][0] > 0
    lance_q = _sql(q.replace("{side}", "lance"), "lance")
    assert _rows(spark, lance_q) == expected
    plan, scan, m = _fact_scan(spark, lance_q)
    assert "dynamicpruningexpression(day" in scan, plan  # offered: `day` is clustered
    kept = sum(1 for r in _sales() if r[3] != 0 and r[1] is not None)  # (the join's `day IS NOT NULL` is pushed)
    assert m.get("pagesPruned", 0) == 0 and m["numOutputRows"] == kept, m


def _orders(spark, root) -> None:
    """An `orders`-like table with a row for each `sales.id` (its key; 48,000), in key order, small pages:
    `status` bears no relation to the key (a seeded coin), `batch` is the key's thousand."""
    rnd = random.Random(7)
    orders = [(k, "F" if rnd.random() < 0.5 else "O", k // 1000) for k in range(ROWS)]
    schema = "key LONG, status STRING, batch INT"
    spark.createDataFrame(orders, schema).coalesce(1).sortWithinPartitions("key").write.format("lance") \
        .option("maxRowsPerPage", 500).save(str(root / "orders.lance"))
    spark.createDataFrame(orders, schema).write.parquet(str(root / "orders.parquet"))
    spark.read.format("lance").load(str(root / "orders.lance")).createOrReplaceTempView("rtf_orders_lance")
    spark.read.parquet(str(root / "orders.parquet")).createOrReplaceTempView("rtf_orders_parquet")


def test_keys_spread_over_their_range_are_not_offered(spark, tables, tmp_path):
    # `status = 'F'` keeps about 24,000 keys, and the page statistics of `orders` show them anywhere in
    # the key range (no page of it is ruled out by the status): keys that would rule out no page of
    # `sales` (clustered by id). Spark is not shown the filter, so it inserts no dynamic pruning and
    # collects no keys; `batch < 24` keeps as many keys, all in the lower half of the range: shown, pruned
    _orders(spark, tmp_path)
    q = ("SELECT count(*), sum(s.qty), sum(s.price) FROM {sales} s JOIN rtf_orders_{side} o ON s.id = o.key "
         "WHERE o.{where}")
    for where, offered in (("status = 'F'", False), ("batch < 24", True)):
        text = q.replace("{where}", where)
        expected = _rows(spark, _sql(text.replace("{side}", "parquet"), "parquet"))
        assert expected[0][0] > 10_000
        lance_q = _sql(text.replace("{side}", "lance"), "lance")
        assert _rows(spark, lance_q) == expected
        plan, scan, m = _fact_scan(spark, lance_q)
        assert ("dynamicpruningexpression(id" in scan) == offered, plan
        if offered:
            assert m["pagesPruned"] >= (ROWS // 500) * 2 // 5, m
    # the setting that says how many keys are many: past the estimate, the spread keys are offered again
    spark.conf.set("spark.lance.runtimeFilterSpreadKeys", "1e9")
    try:
        lance_q = _sql(q.replace("{where}", "status = 'F'").replace("{side}", "lance"), "lance")
        plan, scan, m = _fact_scan(spark, lance_q)
        assert "dynamicpruningexpression(id" in scan, plan
        assert m.get("pagesPruned", 0) == 0, m  # the keys arrive, rule out no page and are dropped
    finally:
        spark.conf.unset("spark.lance.runtimeFilterSpreadKeys")
