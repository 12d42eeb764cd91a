"""The Lance catalog: DDL, INSERT, CTAS, path tables and time travel in SQL;
pylance reads what SQL wrote."""
from __future__ import annotations

import time

import lance
import pytest


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory):
    wh = tmp_path_factory.mktemp("warehouse")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    return wh


def test_create_insert_select_overwrite_drop(spark, warehouse):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lance.db")
    spark.sql("CREATE TABLE lance.db.people (id BIGINT, name STRING, score DOUBLE) USING lance")
    path = warehouse / "db" / "people.lance"
    assert lance.dataset(str(path)).count_rows() == 0
    spark.sql("INSERT INTO lance.db.people VALUES (1, 'ann', 1.5), (2, 'bob', NULL)")
    spark.sql("INSERT INTO lance.db.people SELECT id + 10, concat(name, '!'), score FROM lance.db.people")
    rows = spark.sql("SELECT * FROM lance.db.people ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(1, "ann", 1.5), (2, "bob", None), (11, "ann!", 1.5), (12, "bob!", None)]
    assert lance.dataset(str(path)).to_table().sort_by("id").to_pylist() == [r.asDict() for r in rows]
    assert [r.tableName for r in spark.sql("SHOW TABLES IN lance.db").collect()] == ["people"]
    described = {r.col_name: r.data_type for r in spark.sql("DESCRIBE TABLE lance.db.people").collect()}
    assert described["id"] == "bigint" and described["name"] == "string"
    spark.sql("INSERT OVERWRITE lance.db.people VALUES (7, 'zed', 0.0)")
    assert [tuple(r) for r in spark.sql("SELECT * FROM lance.db.people").collect()] == [(7, "zed", 0.0)]
    assert lance.dataset(str(path)).count_rows() == 1 and lance.dataset(str(path)).version == 4
    spark.sql("DROP TABLE lance.db.people")
    assert not path.exists()
    assert spark.sql("SHOW TABLES IN lance.db").count() == 0


def test_ctas_and_time_travel(spark, warehouse):
    spark.sql("CREATE TABLE lance.default.nums USING lance AS SELECT id, id * id AS sq FROM range(100)")
    path = warehouse / "default" / "nums.lance"
    assert lance.dataset(str(path)).count_rows() == 100
    time.sleep(1.1)
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())   # after the CTAS commit, whole seconds
    time.sleep(1.1)
    spark.sql("INSERT INTO lance.default.nums SELECT id, 0 FROM range(100, 150)")
    assert spark.sql("SELECT count(*) FROM lance.default.nums").first()[0] == 150
    v = lance.dataset(str(path)).version
    assert spark.sql(f"SELECT count(*) FROM lance.default.nums VERSION AS OF {v - 1}").first()[0] == 100
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert spark.sql(f"SELECT count(*) FROM lance.default.nums TIMESTAMP AS OF '{ts}'").first()[0] == 100


def test_path_tables_in_sql(spark, tmp_path):
    path = str(tmp_path / "by_path.lance")
    spark.range(5).write.format("lance").save(path)
    assert spark.sql(f"SELECT sum(id) FROM lance.`{path}`").first()[0] == 10
    spark.sql(f"INSERT INTO lance.`{path}` VALUES (100)")
    assert lance.dataset(path).count_rows() == 6
    assert spark.sql(f"SELECT count(*) FROM lance.`{path}` VERSION AS OF 1").first()[0] == 5
    with pytest.raises(Exception, match="refusing to DROP a path table"):
        spark.sql(f"DROP TABLE lance.`{path}`")


def test_missing_table_is_a_clear_error(spark, warehouse):
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND|cannot be found"):
        spark.sql("SELECT * FROM lance.default.nope").collect()


def test_schema_evolution_is_metadata_only(spark, warehouse):
    spark.sql("CREATE TABLE lance.default.evo USING lance AS SELECT id, CAST(id AS STRING) AS s FROM range(10)")
    path = str(warehouse / "default" / "evo.lance")
    files_before = set(f.path for fr in lance.dataset(path).get_fragments() for f in fr.data_files())
    spark.sql("ALTER TABLE lance.default.evo ADD COLUMNS (extra DOUBLE, tag STRING)")
    assert set(f.path for fr in lance.dataset(path).get_fragments() for f in fr.data_files()) == files_before
    assert spark.sql("SELECT count(*) FROM lance.default.evo WHERE extra IS NULL AND tag IS NULL").first()[0] == 10
    spark.sql("INSERT INTO lance.default.evo VALUES (100, 'x', 2.5, 't')")
    spark.sql("ALTER TABLE lance.default.evo RENAME COLUMN s TO label")
    spark.sql("ALTER TABLE lance.default.evo DROP COLUMN tag")
    got = sorted(tuple(r) for r in spark.sql("SELECT * FROM lance.default.evo").collect())
    want = sorted(tuple(r.values()) for r in lance.dataset(path).to_table().to_pylist())
    assert got == want and len(got) == 11
    assert lance.dataset(path).schema.names == ["id", "label", "extra"]
    assert (100, "x", 2.5) in got and (3, "3", None) in got
    from lance_spark import reader
    ops = [v.get("operation") for v in reader.dataset(path).versions()]
    assert ops[-4:] == ["Project", "Append", "Project", "Project"], ops


def test_uri_path_tables_in_every_statement(spark, tmp_path):
    """``lance.`file:///...` `` works like a plain path, through CREATE, INSERT,
    DML, ALTER, time travel and reads; pylance agrees at the end."""
    path = str(tmp_path / "by_uri.lance")
    t = f"lance.`file://{path}`"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, s STRING) USING lance")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql(f"UPDATE {t} SET s = 'B' WHERE id = 2")
    spark.sql(f"DELETE FROM {t} WHERE id = 3")
    spark.sql("SELECT 4L AS id, 'd' AS s UNION ALL SELECT 1L, 'A'").createOrReplaceTempView("uri_src")
    spark.sql(f"MERGE INTO {t} x USING uri_src y ON x.id = y.id "
              "WHEN MATCHED THEN UPDATE SET s = y.s WHEN NOT MATCHED THEN INSERT *")
    spark.sql(f"ALTER TABLE {t} ADD COLUMNS (extra INT)")
    got = sorted(tuple(r) for r in spark.sql(f"SELECT id, s, extra FROM {t}").collect())
    assert got == [(1, "A", None), (2, "B", None), (4, "d", None)]
    assert spark.sql(f"SELECT count(*) FROM {t} VERSION AS OF 2").first()[0] == 3
    assert sorted(tuple(r.values()) for r in lance.dataset(path).to_table().to_pylist()) == got


def test_hadoop_settings_changed_between_queries_are_seen(spark, warehouse):
    """The connector shares one copy of the session's Hadoop configuration within a query's
    planning; a setting changed between queries, on the SparkContext's Hadoop configuration or
    as a session setting, is seen by the next query (here an external manifest store that does
    not exist: the read must fail naming it, and read again once it is unset)."""
    spark.sql("CREATE TABLE lance.default.conf_probe USING lance AS SELECT id FROM range(10)")
    q = "SELECT count(*) FROM lance.default.conf_probe"
    assert spark.sql(q).first()[0] == 10
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set("lance.commit.external-store", "bogus-context")
    try:
        with pytest.raises(Exception, match="unknown external manifest store 'bogus-context'"):
            spark.sql(q).collect()
    finally:
        hadoop.unset("lance.commit.external-store")
    assert spark.sql(q).first()[0] == 10
    spark.conf.set("lance.commit.external-store", "bogus-session")
    try:
        with pytest.raises(Exception, match="unknown external manifest store 'bogus-session'"):
            spark.sql(q).collect()
    finally:
        spark.conf.unset("lance.commit.external-store")
    assert spark.sql(q).first()[0] == 10
