"""Options reach every entry point and are parsed strictly: DataFrame reads
and writes, catalog tables, the session configuration (spark.lance.<name>)
and table properties (CREATE TABLE ... TBLPROPERTIES), in that order."""
from __future__ import annotations

import lance
import pytest


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory):
    wh = tmp_path_factory.mktemp("options_wh")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    return wh


@pytest.fixture(autouse=True)
def _scans_as_jobs(spark):
    """These tests look at scans' partitions and plans: small scans run as jobs here, not on the
    driver (`localScanRows`, tested in test_local_scans.py)."""
    spark.conf.set("spark.lance.localScanRows", "0")
    yield
    spark.conf.unset("spark.lance.localScanRows")


def _partitions(df) -> int:
    return df.rdd.getNumPartitions()


def test_split_rows_must_be_positive(spark, tmp_path):
    """Regression: splitRows=0 or negative made the driver loop until out of heap."""
    path = str(tmp_path / "t.lance")
    spark.range(1000).write.format("lance").save(path)
    for bad in ("0", "-5"):
        with pytest.raises(Exception, match=rf"option 'splitRows'.*positive integer, got '{bad}'"):
            spark.read.format("lance").option("splitRows", bad).load(path).collect()


@pytest.mark.parametrize("option,value,accepted", [
    ("pushdown", "flase", "one of true, false"),          # regression: any value but "false" was true
    ("readAhead", "yes", "one of auto, true, false"),
    ("batchSize", "0", "positive integer"),
    ("version", "first", "non-negative integer"),
])
def test_bad_read_option_values_name_the_option(spark, tmp_path, option, value, accepted):
    path = str(tmp_path / "t.lance")
    spark.range(10).write.format("lance").save(path)
    with pytest.raises(Exception, match=rf"option '{option}'.*{accepted}.*, got '{value}'"):
        spark.read.format("lance").option(option, value).load(path).collect()


def test_bad_write_option_values_name_the_option(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    with pytest.raises(Exception, match=r"option 'maxRowsPerFile'.*positive integer, got '-1'"):
        spark.range(10).write.format("lance").option("maxRowsPerFile", "-1").save(path)
    with pytest.raises(Exception, match=r"option 'enableStableRowIds'.*one of true, false, got 'yes'"):
        spark.range(10).write.format("lance").option("enableStableRowIds", "yes").save(path)


def test_read_options_apply_to_catalog_tables(spark, warehouse):
    """Regression: LanceTable.newScanBuilder ignored its options, so
    spark.read.option(...).table("lance.db.t") had no effect."""
    spark.sql("CREATE TABLE lance.default.opts USING lance AS SELECT id FROM range(0, 1000, 1, 1)")
    base = _partitions(spark.read.table("lance.default.opts"))
    assert base == 1
    assert _partitions(spark.read.option("splitRows", 100).table("lance.default.opts")) == 10
    with pytest.raises(Exception, match=r"option 'pushdown'"):
        spark.read.option("pushdown", "nope").table("lance.default.opts").collect()
    # pushdown=false: Spark filters every row, and EXPLAIN shows nothing pushed
    plan = spark.read.option("pushdown", "false").table("lance.default.opts").where("id > 5")._jdf \
        .queryExecution().executedPlan().toString()
    assert "pushedFilters" not in plan
    plan = spark.read.table("lance.default.opts").where("id > 5")._jdf.queryExecution().executedPlan().toString()
    assert "pushedFilters" in plan


def test_session_configuration_and_precedence(spark, tmp_path):
    path = str(tmp_path / "t.lance")
    spark.range(0, 1000, 1, 1).write.format("lance").save(path)
    spark.conf.set("spark.lance.splitRows", "250")
    try:
        assert _partitions(spark.read.format("lance").load(path)) == 4
        assert _partitions(spark.read.format("lance").option("splitRows", 500).load(path)) == 2  # own option wins
        spark.conf.set("spark.lance.splitRows", "0")
        with pytest.raises(Exception, match=r"option 'splitRows' \(from session configuration spark.lance.splitRows\)"):
            spark.read.format("lance").load(path).collect()
    finally:
        spark.conf.unset("spark.lance.splitRows")


def test_table_properties_are_kept_and_used_by_writes(spark, warehouse):
    spark.sql("CREATE TABLE lance.default.props (id BIGINT) USING lance TBLPROPERTIES ('maxRowsPerFile' = '10')")
    path = warehouse / "default" / "props.lance"
    ds = lance.dataset(str(path))
    assert ds.config()["maxRowsPerFile"] == "10"                  # kept in the manifest, pylance sees it
    spark.sql("INSERT INTO lance.default.props SELECT id FROM range(0, 35, 1, 1)")
    assert [f.count_rows() for f in lance.dataset(str(path)).get_fragments()] == [10, 10, 10, 5]
    # a DataFrame write's own option overrides the table property
    spark.range(100, 130, 1, 1).write.format("lance").mode("append").option("maxRowsPerFile", 30).save(str(path))
    assert len(lance.dataset(str(path)).get_fragments()) == 5
    props = {r["key"]: r["value"] for r in spark.sql("SHOW TBLPROPERTIES lance.default.props").collect()}
    assert props.get("maxRowsPerFile") == "10"
    with pytest.raises(Exception, match=r"unknown Lance table properties maxRowPerFile.*accepted: maxRowsPerFile"):
        spark.sql("CREATE TABLE lance.default.typo (id BIGINT) USING lance TBLPROPERTIES ('maxRowPerFile' = '10')")
    with pytest.raises(Exception, match=r"option 'maxRowsPerFile'.*got 'ten'"):
        spark.sql("CREATE TABLE lance.default.bad (id BIGINT) USING lance TBLPROPERTIES ('maxRowsPerFile' = 'ten')")
    assert not (warehouse / "default" / "typo.lance").exists() and not (warehouse / "default" / "bad.lance").exists()


def test_missing_path_table_in_sql_names_the_dataset(spark, tmp_path):
    """Regression: said "Unsupported data source type for direct query on files: lance"."""
    missing = tmp_path / "no" / "such.lance"
    with pytest.raises(Exception) as e:
        spark.sql(f"SELECT * FROM lance.`{missing}`").collect()
    msg = str(e.value)
    assert "not a Lance dataset" in msg and str(missing) in msg and "Unsupported data source" not in msg
