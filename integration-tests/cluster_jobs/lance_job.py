"""Driver programs for the cluster tests (test_cluster.py), run as a separate
process: by `spark-submit --master spark://... --jars <bundle>` (the session
comes from spark-submit's settings, so this file needs only pyspark), or with
`--configure MASTER` by plain Python through `lance_spark.configure`.

    lance_job.py SCENARIO TABLE OUT_JSON [--configure MASTER] [--conf K=V ...] [--rows N] ...

Every row's values are a function of its id, so the tests compute the
expected table from first principles and check it with pylance. The job
writes what Spark itself saw to OUT_JSON, for the tests to check as well.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession


def session(args: argparse.Namespace) -> SparkSession:
    """spark-submit's session, or one made by lance_spark.configure on --configure's master."""
    builder = SparkSession.builder.appName(f"lance-cluster-{args.scenario}")
    if args.configure:
        import lance_spark

        builder = lance_spark.configure(builder.master(args.configure))
    for kv in args.conf:
        k, v = kv.split("=", 1)
        builder = builder.config(k, v)
    return builder.getOrCreate()


def events(spark: SparkSession, start: int, end: int, parts: int) -> DataFrame:
    """Rows [start, end): user, score and a 4-float vector, all functions of id
    (mirrored by test_cluster.event_row)."""
    return spark.range(start, end, numPartitions=parts).selectExpr(
        "id",
        "concat('user-', CAST(id % 100 AS STRING)) AS user",
        "CAST(id % 97 AS DOUBLE) * 0.5 AS score",
        "array(CAST(id % 7 AS FLOAT), CAST(id % 11 AS FLOAT), CAST(id % 13 AS FLOAT), CAST(1 AS FLOAT)) AS embedding")


def pipeline(spark: SparkSession, table: str, args: argparse.Namespace) -> dict[str, Any]:
    """The demo's steps (a vector table, an append, time travel) plus SQL MERGE,
    DELETE, a filtered scan and a CTAS into the catalog's warehouse."""
    n = args.rows
    events(spark, 0, n, 8).write.format("lance").option("vectorColumns", "embedding:4").save(table)   # v1
    events(spark, n, n + 1000, 4).write.format("lance").mode("append").save(table)                      # v2
    spark.range(n + 500, n + 1500, numPartitions=4).selectExpr(
        "id", "'merged' AS user", "-1.0D AS score",
        "array(CAST(0 AS FLOAT), CAST(0 AS FLOAT), CAST(0 AS FLOAT), CAST(0 AS FLOAT)) AS embedding",
        "id % 10 = 0 AS gone").createOrReplaceTempView("src")
    spark.sql(f"""MERGE INTO lance.`{table}` t USING src s ON t.id = s.id
                  WHEN MATCHED AND s.gone THEN DELETE
                  WHEN MATCHED THEN UPDATE SET t.user = s.user, t.score = s.score
                  WHEN NOT MATCHED THEN INSERT (id, user, score, embedding)
                                        VALUES (s.id, s.user, s.score, s.embedding)""")             # v3
    spark.sql(f"DELETE FROM lance.`{table}` WHERE id % 7 = 3 AND id < {n // 2}")                   # v4
    df = spark.read.format("lance").load(table)
    filtered = df.where(f"score >= 40 AND id BETWEEN {n // 4} AND {n // 4 + 1000}").select("id")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lance.db")
    spark.sql(f"""CREATE TABLE lance.db.users USING lance AS
                  SELECT user, count(*) AS n, sum(score) AS total FROM lance.`{table}` GROUP BY user""")
    return {"count": df.count(),
            "v1_count": spark.read.format("lance").option("version", 1).load(table).count(),
            "filtered_ids": sorted(r.id for r in filtered.collect()),
            "users": spark.table("lance.db.users").count()}


def slow_ids(spark: SparkSession, start: int, end: int, parts: int, sleep: float, pieces: int = 10) -> DataFrame:
    """ids [start, end) in `parts` partitions, and an empty string `pause` whose
    computation makes each task sleep `sleep` seconds in all, in `pieces` naps
    spread over its rows. The nap is a JVM call (reflect) evaluated row by row
    in the stage that consumes the rows, so a write task is lost part way
    through its output, some of its files written, others not yet."""
    if sleep <= 0:
        return spark.range(start, end, numPartitions=parts).selectExpr("id", "'' AS pause")
    every = max(1, (end - start) // parts // pieces)
    nap_ms = max(1, int(sleep * 1000 / pieces))
    return spark.range(start, end, numPartitions=parts).selectExpr(
        "id", "substr(reflect('java.lang.Thread', 'sleep', "
              f"CAST(CASE WHEN id % {every} = 0 THEN {nap_ms} ELSE 0 END AS BIGINT)), 1, 0) AS pause")


#: The job description of the statement a test interrupts: its stages carry it
#: in the driver's REST API, so the test knows when that statement is running.
TARGET = "lance-cluster-target"


def payloads(df: DataFrame, prefix: str) -> DataFrame:
    """(id, '<prefix><id>') from slow_ids (its pause is part of the payload, so no optimizer drops it)."""
    return df.selectExpr("id", f"concat('{prefix}', CAST(id AS STRING), pause) AS payload")


def slow_write(spark: SparkSession, table: str, args: argparse.Namespace) -> dict[str, Any]:
    """One write job of many slow tasks: ids [start, start + rows) with payload
    'p<id>', in files of --files-of rows (so a task's files reach the disk one
    by one while it runs)."""
    df = payloads(slow_ids(spark, args.start, args.start + args.rows, args.parts, args.sleep), "p")
    spark.sparkContext.setJobDescription(TARGET)
    writer = df.write.format("lance")
    if args.files_of:
        writer = writer.option("maxRowsPerFile", args.files_of)
    writer.save(table)
    spark.sparkContext.setJobDescription(None)
    return {"count": spark.read.format("lance").load(table).count()}


def merge(spark: SparkSession, table: str, args: argparse.Namespace) -> dict[str, Any]:
    """A target of ids [0, target) with payload 'p<id>' in `parts` fragments, then
    a MERGE whose source, ids [start, start + rows), has `parts` slow tasks:
    matched ids with id % 3 = 0 are deleted, the other matched get payload
    'm<id>', the unmatched are inserted with 'm<id>'."""
    payloads(slow_ids(spark, 0, args.target, args.parts, 0.0), "p").write.format("lance").save(table)
    src = payloads(slow_ids(spark, args.start, args.start + args.rows, args.parts, args.sleep), "m") \
        .selectExpr("*", "id % 3 = 0 AS gone")
    src.createOrReplaceTempView("src")
    if args.files_of:   # small files: the MERGE's write tasks take long enough to lose a worker in them
        spark.conf.set("spark.lance.maxRowsPerFile", str(args.files_of))
    spark.sparkContext.setJobDescription(TARGET)
    spark.sql(f"""MERGE INTO lance.`{table}` t USING src s ON t.id = s.id
                  WHEN MATCHED AND s.gone THEN DELETE
                  WHEN MATCHED THEN UPDATE SET t.payload = s.payload
                  WHEN NOT MATCHED THEN INSERT (id, payload) VALUES (s.id, s.payload)""")
    spark.sparkContext.setJobDescription(None)
    return {"count": spark.read.format("lance").load(table).count()}


def roundtrip(spark: SparkSession, table: str, args: argparse.Namespace) -> dict[str, Any]:
    """A write, an INSERT INTO and an UPDATE: ids [0, rows) with 'p<id>', then
    [rows, rows + 1000) with 'i<id>', then 'u<id>' where id % 5 = 0."""
    n = args.rows
    payloads(slow_ids(spark, 0, n, 4, 0.0), "p").write.format("lance").save(table)
    spark.sql(f"INSERT INTO lance.`{table}` SELECT id, concat('i', CAST(id AS STRING)) FROM range({n}, {n + 1000}, 1, 2)")
    spark.sql(f"UPDATE lance.`{table}` SET payload = concat('u', CAST(id AS STRING)) WHERE id % 5 = 0")
    df = spark.read.format("lance").load(table)
    return {"count": df.count(), "tail_ids": sorted(r.id for r in df.where(f"id >= {n + 990}").collect())}


def slow_stream(spark: SparkSession, table: str, args: argparse.Namespace) -> dict[str, Any]:
    """A stream into the table: --parts JSON files of ids [start, start + rows), 8 files per
    micro-batch (a task each) (Trigger.AvailableNow), each row's payload 's<id>' computed slowly (a task
    sleeps --sleep seconds in all), so a worker can be lost while a batch's tasks write.
    The query is named TARGET: its batches' job descriptions start with it."""
    src = Path(args.out).parent / "stream_in"
    src.mkdir(parents=True, exist_ok=True)
    per = args.rows // args.parts
    for k in range(args.parts):
        ids = range(args.start + k * per, args.start + (k + 1) * per)
        (src / f"f{k:03d}.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    nap_ms = max(1, int(args.sleep * 1000 / 10))
    every = max(1, per // 10)
    spark.conf.set("spark.sql.files.openCostInBytes", str(256 << 20))   # one file per task
    q = (spark.readStream.schema("id BIGINT").option("maxFilesPerTrigger", 8).json(str(src))
         .selectExpr("id", "concat('s', CAST(id AS STRING), substr(reflect('java.lang.Thread', 'sleep', "
                     f"CAST(CASE WHEN id % {every} = 0 THEN {nap_ms} ELSE 0 END AS BIGINT)), 1, 0)) AS payload")
         .writeStream.format("lance").queryName(TARGET)
         .option("checkpointLocation", str(Path(args.out).parent / "stream_ckpt"))
         .trigger(availableNow=True).start(table))
    q.awaitTermination()
    return {"count": spark.read.format("lance").load(table).count(),
            "batches": len([p for p in q.recentProgress if p["numInputRows"] > 0])}


SCENARIOS = {"pipeline": pipeline, "roundtrip": roundtrip, "slow_write": slow_write, "merge": merge,
             "slow_stream": slow_stream}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("table")
    p.add_argument("out")
    p.add_argument("--configure", metavar="MASTER", help="make the session with lance_spark.configure")
    p.add_argument("--conf", action="append", default=[], metavar="K=V")
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--parts", type=int, default=40)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--files-of", type=int, default=0, help="rows per data file written")
    p.add_argument("--target", type=int, default=0, help="merge: rows of the target table")
    args = p.parse_args()
    spark = session(args)
    result = SCENARIOS[args.scenario](spark, args.table, args)
    sc = spark.sparkContext
    result.update(app_id=sc.applicationId, master=sc.master,
                  executors=sc._jsc.sc().getExecutorMemoryStatus().size() - 1)
    Path(args.out).write_text(json.dumps(result))
    spark.stop()


if __name__ == "__main__":
    main()
