"""Writes a JDK class-data-sharing archive of the classes a test session loads
(`make cds`; usage: cds_workload.py ARCHIVE).

Every Spark JVM make test starts (local sessions, cluster daemons and executors,
spark-submit drivers, Connect servers) loads and verifies the same ten thousand
classes of Spark's jars before its first query ends. This script starts one
session as the tests do, runs the kinds of statements they run (writes and
scans, joins, aggregates, windows, the catalog's DDL and DML, Arrow transfers,
a Python UDF, Parquet) and stops the JVM, which dumps the classes it loaded into
ARCHIVE (-XX:ArchiveClassesAtExit). JVMs given -XX:SharedArchiveFile=ARCHIVE map
them instead of loading them; a JVM whose class path differs from this one's
(another Spark's jars) ignores the archive (the JVM checks) and loads its
classes as before. It changes how fast the JVMs start, not what they run.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # Python UDF workers: this venv


def main(archive: str) -> None:
    from lance_spark.testing import local_session, restart_jvm

    root = Path(tempfile.mkdtemp(prefix="lance-cds-"))
    spark = local_session({
        "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={archive}",
        "spark.sql.catalog.lance.warehouse": str(root / "warehouse"),
    }, app="lance-spark-cds")
    try:
        run(spark, root)
    finally:
        rc = restart_jvm(timeout=600)   # the JVM dumps the archive as it exits
    if rc != 0 or not Path(archive).is_file():
        raise SystemExit(f"the JVM exited with {rc} and left no archive at {archive}")


def run(spark, root: Path) -> None:
    import pandas as pd
    from pyspark.sql import functions as F

    path = str(root / "t.lance")
    df = spark.range(0, 20000, numPartitions=2).select(
        "id", (F.col("id") % 7).alias("k"), F.concat(F.lit("s"), F.col("id").cast("string")).alias("s"),
        (F.col("id") * 0.5).alias("x"), F.array(F.col("id").cast("float"), F.lit(1.0).cast("float")).alias("v"),
        F.struct(F.col("id").alias("a"), F.lit("b").alias("b")).alias("st"))
    df.write.format("lance").mode("overwrite").save(path)
    df.write.format("lance").mode("append").save(path)
    t = spark.read.format("lance").load(path)
    t.where("k = 3 AND x > 10").select("id", "s").collect()
    t.groupBy("k").agg(F.sum("x"), F.count("*"), F.max("s")).orderBy("k").collect()
    t.toPandas()
    t.limit(5).collect()
    spark.createDataFrame(pd.DataFrame({"id": [1, 2], "n": ["a", "b"]})).createOrReplaceTempView("small")
    t.createOrReplaceTempView("t")
    spark.sql("SELECT t.k, small.n, count(*) FROM t JOIN small ON t.k = small.id GROUP BY t.k, small.n").collect()
    spark.sql("SELECT id, rank() OVER (PARTITION BY k ORDER BY x DESC) r FROM t").where("r < 3").collect()
    spark.sql("SELECT a.id FROM t a JOIN t b ON a.id = b.id + 1 WHERE a.k = 1").count()
    spark.sql("SELECT * FROM t WHERE id IN (SELECT id FROM small) OR exists (SELECT 1 FROM small WHERE small.id = t.k)").count()
    pq = str(root / "p.parquet")
    t.drop("v", "st").write.mode("overwrite").parquet(pq)
    spark.read.parquet(pq).where("k = 2").count()
    double = F.udf(lambda v: v * 2, "long")
    t.select(double("id")).limit(10).collect()

    spark.sql("CREATE NAMESPACE IF NOT EXISTS lance.db")
    spark.sql("CREATE TABLE lance.db.c (id BIGINT, k INT, s STRING, d DATE, m DECIMAL(7,2))")
    spark.sql("INSERT INTO lance.db.c SELECT id, CAST(id % 5 AS INT), CAST(id AS STRING), DATE'2020-01-01' + CAST(id % 30 AS INT),"
              " CAST(id / 7 AS DECIMAL(7,2)) FROM range(1000)")
    spark.sql("UPDATE lance.db.c SET s = 'u' WHERE k = 1")
    spark.sql("DELETE FROM lance.db.c WHERE k = 2")
    spark.sql("MERGE INTO lance.db.c t USING (SELECT id, 9 AS k FROM range(990, 1010)) s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET t.k = s.k WHEN NOT MATCHED THEN INSERT (id, k) VALUES (s.id, s.k)")
    spark.sql("SELECT k, sum(m), avg(id) FROM lance.db.c GROUP BY ROLLUP(k)").collect()
    spark.sql("DESCRIBE TABLE EXTENDED lance.db.c").collect()
    spark.sql("SHOW TABLES IN lance.db").collect()
    spark.sql("DROP TABLE lance.db.c")


if __name__ == "__main__":
    main(sys.argv[1])
