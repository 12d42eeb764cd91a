"""What every supported Spark line must do, in one short module: `make test`
runs it in the primary venv with the other suites, and `make test-lines` again
in a venv of each other line's pip pyspark (issue 36). Each result is compared
with pylance (the oracle) or with a model computed here in Python."""
from __future__ import annotations

import os
import re

import lance
import pyarrow as pa
import pytest

import lance_spark
from compare import assert_same, assert_same_table, oracle_rows, spark_rows
from datagen import rich_table
from lance_datasets import build_history

FILE_VERSIONS = ["legacy", "2.0", "2.1", "2.2"]
#: datagen.rich_table's TIME columns: Spark before 4.1 has no TIME type.
TIME_COLUMNS = ["t32s", "t32ms", "t64us", "t64ns"]


def line_of(spark) -> tuple:
    return tuple(int(p) for p in spark.version.split(".")[:2])


def has_time(spark) -> bool:
    return line_of(spark) >= (4, 1)


def rich(spark, n: int, seed: int) -> pa.Table:
    """datagen.rich_table, without the TIME columns on a line that cannot hold them."""
    t = rich_table(n, seed=seed)
    return t if has_time(spark) else t.drop_columns(TIME_COLUMNS)


def test_the_bundle_is_the_running_line(spark):
    """configure() put the bundle of this Spark line on the session."""
    line = ".".join(spark.version.split(".")[:2])
    bundle_line = {"4.3": "4.2"}.get(line, line)
    jars = spark.conf.get("spark.jars")
    assert f"lance-spark-bundle-{bundle_line}_" in jars or (
        bundle_line == "4.2" and "lance-spark-bundle_2.13" in jars), (spark.version, jars)
    assert os.path.basename(lance_spark.jar_path()) in jars


def test_the_package_carries_every_bundle():
    """Every line's bundle is in the package (setup.py packs target/bundles: `make jar`)."""
    assert set(lance_spark.bundles()) >= {("3.5", "2.12"), ("3.5", "2.13"), ("4.0", "2.13"), ("4.1", "2.13"),
                                          ("4.2", "2.13")}


def test_call_extension_only_where_needed(spark):
    """configure() installed the CALL extension on Spark 3.5 (no CALL for catalogs there) only."""
    exts = spark.conf.get("spark.sql.extensions", "") or ""
    assert ("io.lancespark.spark.extensions.LanceCallExtension" in exts) == (line_of(spark) < (4, 0)), exts


@pytest.mark.parametrize("version", FILE_VERSIONS)
def test_reads_every_file_version_as_pylance(spark, tmp_path, version):
    path = tmp_path / f"h_{version}"
    build_history(path, version, v2_paths=version != "legacy", stable_row_ids=False)
    if not has_time(spark):
        # a TIME column is an error naming it; without them (pylance drops them) the rest reads
        with pytest.raises(Exception, match=r"column 't32s'.*Spark <4.1 has no TIME type"):
            spark.read.format("lance").load(str(path)).count()
        lance.dataset(str(path)).drop_columns(TIME_COLUMNS)
    expected = lance.dataset(str(path)).to_table()
    df = spark.read.format("lance").load(str(path))
    assert df.count() == expected.num_rows
    assert_same_table(df, expected, f"file version {version}")


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_writes_that_pylance_reads(spark, tmp_path, version):
    source = str(tmp_path / "src")
    lance.write_dataset(rich(spark, 3000, seed=5), source, data_storage_version="2.1")
    src = spark.read.format("lance").load(source)
    path = str(tmp_path / f"w_{version}")
    src.where("id < 2000").write.format("lance").option("fileVersion", version).save(path)
    src.where("id >= 2000").write.format("lance").mode("append").save(path)
    written = lance.dataset(path)
    assert written.data_storage_version == version
    assert written.count_rows() == 3000
    back = spark_rows(spark.read.format("lance").load(path))
    assert_same(back, oracle_rows(written.to_table()), f"written at {version}: Spark and pylance read it alike")
    assert_same(back, spark_rows(src), f"written at {version}: the rows written")


def test_delete_update_merge_against_a_model(spark, tmp_path):
    path = str(tmp_path / "dml")
    ids = list(range(200))
    lance.write_dataset(pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([i * 10 for i in ids], pa.int64())}),
                        path, max_rows_per_file=50)
    model = {i: i * 10 for i in ids}
    t = f"lance.`{path}`"
    spark.sql(f"DELETE FROM {t} WHERE id % 7 = 0")
    model = {k: v for k, v in model.items() if k % 7 != 0}
    spark.sql(f"UPDATE {t} SET v = v + 1 WHERE id % 5 = 0")
    model = {k: v + 1 if k % 5 == 0 else v for k, v in model.items()}
    spark.createDataFrame([(i, -i) for i in range(150, 260, 3)], "id long, v long").createOrReplaceTempView("src")
    spark.sql(f"""MERGE INTO {t} t USING src s ON t.id = s.id
                  WHEN MATCHED AND s.id % 2 = 0 THEN DELETE
                  WHEN MATCHED THEN UPDATE SET v = s.v
                  WHEN NOT MATCHED THEN INSERT *
                  WHEN NOT MATCHED BY SOURCE AND t.id < 20 THEN DELETE""")
    src = {i: -i for i in range(150, 260, 3)}
    merged = {}
    for k, v in model.items():
        if k in src:
            if k % 2 != 0:
                merged[k] = src[k]
        elif k >= 20:
            merged[k] = v
    for k, v in src.items():
        if k not in model:
            merged[k] = v
    got = lance.dataset(path).to_table().to_pydict()
    assert dict(zip(got["id"], got["v"])) == merged
    rows = spark.sql(f"SELECT id, v FROM {t}").collect()
    assert {r.id: r.v for r in rows} == merged


def test_catalog_writes_with_merge_schema(spark, tmp_path):
    """mergeSchema on catalog writes (issue 39): writeTo().option(), saveAsTable in append mode and SQL
    INSERT with the session conf add columns and struct fields, each in one version pylance reads;
    without it Spark's own check refuses; UPDATE, DELETE and MERGE still resolve on the table."""
    path = str(tmp_path / "cat_merge")
    lance.write_dataset(pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"],
                                  "s": pa.array([{"a": 1}, {"a": 2}], pa.struct([("a", pa.int32())]))}), path)
    t = f"lance.`{path}`"
    v0 = lance.dataset(path).version

    def rows(version=None):
        ds = lance.dataset(path, version=version)
        got = sorted(ds.to_table().to_pylist(), key=lambda r: r["id"])
        q = f"SELECT * FROM {t}" + (f" VERSION AS OF {version}" if version else "")
        assert sorted((r.asDict(recursive=True) for r in spark.sql(q).collect()), key=lambda r: r["id"]) == got
        return got

    # columns in another order, INT into the BIGINT id, a new column and a new struct field
    df = spark.createDataFrame([(3, 0.5, "c", (3, "x"))], "id INT, score DOUBLE, v STRING, s STRUCT<a: INT, b: STRING>")
    with pytest.raises(Exception):
        df.writeTo(t).append()
    assert lance.dataset(path).version == v0
    df.writeTo(t).option("mergeSchema", "true").append()
    ds = lance.dataset(path)
    assert ds.version == v0 + 1 and ds.schema.names == ["id", "v", "s", "score"]
    assert [f.name for f in ds.schema.field("s").type] == ["a", "b"]
    assert rows() == [{"id": 1, "v": "a", "s": {"a": 1, "b": None}, "score": None},
                      {"id": 2, "v": "b", "s": {"a": 2, "b": None}, "score": None},
                      {"id": 3, "v": "c", "s": {"a": 3, "b": "x"}, "score": 0.5}]
    # saveAsTable in append mode (every column given: Spark before 4.0 fills no missing one)
    spark.createDataFrame([(4, "d", None, None, 7)], "id BIGINT, v STRING, s STRUCT<a: INT, b: STRING>, "
                          "score DOUBLE, rank INT").write.format("lance") \
        .mode("append").option("mergeSchema", "true").saveAsTable(t)
    assert lance.dataset(path).schema.names == ["id", "v", "s", "score", "rank"]
    # SQL INSERT by position with the session conf: the query's last column is new
    spark.conf.set("spark.lance.write.mergeSchema", "true")
    try:
        spark.sql(f"INSERT INTO {t} SELECT 5, 'e', named_struct('a', 5, 'b', 'y'), 1.5, 8, 'new' AS tag")
    finally:
        spark.conf.unset("spark.lance.write.mergeSchema")
    assert lance.dataset(path).version == v0 + 3
    assert [r["tag"] for r in rows()] == [None, None, None, None, "new"]
    # row-level statements resolve as before
    spark.sql(f"UPDATE {t} SET v = 'u' WHERE id = 1")
    spark.sql(f"DELETE FROM {t} WHERE id = 2")
    spark.sql(f"MERGE INTO {t} t USING (SELECT 3L AS id, 'm' AS v) s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)")
    assert [(r["id"], r["v"], r["rank"]) for r in rows()] == [(1, "u", None), (3, "m", None), (4, "d", 7), (5, "e", 8)]
    # time travel: the schema before
    assert list(rows(v0)[0]) == ["id", "v", "s"]


def test_a_procedure_and_a_metadata_table(spark, tmp_path):
    path = str(tmp_path / "maint")
    for i in range(4):
        lance.write_dataset(pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())}), path,
                            mode="append" if i else "create")
    t = f"`{path}`"
    row = spark.sql(f"CALL lance.system.compact(table => '{t}')").collect()[0]
    assert row.fragments_removed == 4 and row.fragments_added == 1, row
    assert len(lance.dataset(path).get_fragments()) == 1
    assert sorted(lance.dataset(path).to_table()["id"].to_pylist()) == list(range(40))
    # positional arguments (on Spark 3.5 through the CALL extension, on 4.x Spark's own CALL)
    latest = lance.dataset(path).version
    tag = spark.sql(f"CALL lance.system.create_tag('{t}', 'before_v', {latest - 1})").collect()[0]
    assert (tag.tag, tag.version) == ("before_v", latest - 1)
    assert lance.dataset(path).tags.list()["before_v"]["version"] == latest - 1
    # a parameter the procedure does not have: an error naming it, nothing done
    with pytest.raises(Exception, match="no_such_arg"):
        spark.sql(f"CALL lance.system.create_tag(table => '{t}', tag => 'x', no_such_arg => 1)").collect()
    assert "x" not in lance.dataset(path).tags.list()
    history = spark.sql(f"SELECT version, operation FROM lance.{t}.history ORDER BY version").collect()
    assert [r.version for r in history] == [v["version"] for v in lance.dataset(path).versions()]
    assert history[-1].operation == "Rewrite"


def test_vector_search_and_point_reads(spark, tmp_path):
    """lance_vector_search and knn_join's lance_knn (the session extension on every line)
    equal a numpy brute force; `_rowaddr IN (...)` returns the rows pylance places there."""
    import numpy as np
    path = str(tmp_path / "vec")
    rng = np.random.default_rng(4)
    vecs = rng.normal(size=(600, 8)).astype(np.float32)
    lance.write_dataset(pa.table({"id": pa.array(range(600), pa.int64()),
                                  "emb": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), 8)}),
                        path, max_rows_per_file=200)
    q = rng.normal(size=8).astype(np.float32)
    want = list(np.argsort(((vecs - q) ** 2).sum(axis=1), kind="stable")[:5])
    arr = ", ".join(f"CAST({float(x)!r} AS FLOAT)" for x in q)
    got = spark.sql(f"SELECT id, _distance FROM lance_vector_search('{path}', 'emb', array({arr}), 5)").collect()
    assert [r.id for r in got] == want
    # batch KNN: lance_knn evaluated on the executors, the neighbours joined back by row address
    import lance_spark
    qs = spark.createDataFrame([(0, [float(x) for x in q]), (1, None)], "qid INT, qv ARRAY<FLOAT>")
    assert [r.id for r in lance_spark.knn_join(qs, path, "qv", "emb", k=5).collect()] == want
    t = lance.dataset(path).to_table(columns=["id"], with_row_address=True)
    addrs = dict(zip(t["_rowaddr"].to_pylist(), t["id"].to_pylist()))
    picks = sorted(addrs)[::97]
    rows = spark.read.format("lance").load(path).where(
        f"_rowaddr IN ({', '.join(map(str, picks))})").select("id").collect()
    assert sorted(r.id for r in rows) == sorted(addrs[a] for a in picks)


def test_add_columns_by_expression(spark, tmp_path):
    """CALL add_columns with computed columns (a map argument): no rewrite, pylance reads them."""
    path = str(tmp_path / "evolve")
    lance.write_dataset(pa.table({"a": pa.array(range(50), pa.int64())}), path, max_rows_per_file=20)
    spark.sql(f"CALL lance.system.add_columns(table => '`{path}`', expressions => map('c2', 'a * 2'))").collect()
    t = lance.dataset(path).to_table()
    assert t.column_names == ["a", "c2"]
    assert sorted(zip(t["a"].to_pylist(), t["c2"].to_pylist())) == [(i, 2 * i) for i in range(50)]
    assert type(lance.dataset(path).read_transaction(lance.dataset(path).version).operation).__name__ == "Merge"


def test_add_columns_from_parquet_in_address_order(spark, tmp_path):
    """CALL add_columns with values saved keyed by _rowaddr (Parquet, several files): written in
    pieces where read and joined per fragment (one stage per job); pylance reads them."""
    path = str(tmp_path / "pieces")
    lance.write_dataset(pa.table({"a": pa.array(range(3000), pa.int64())}), path, max_rows_per_file=1000)
    src = str(tmp_path / "src.parquet")
    spark.read.format("lance").load(path).selectExpr("_rowaddr", "a * 3 AS c3").coalesce(1) \
        .write.option("maxRecordsPerFile", 700).parquet(src)
    # a split per file, as files of the size of real embeddings get (small files packed into one
    # split are read largest first: not in address order, so shuffled)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4096")
    sc = spark.sparkContext
    sc.setJobGroup("line_pieces", "line_pieces")
    try:
        spark.read.parquet(src).createOrReplaceTempView("line_pieces")
        spark.sql(f"CALL lance.system.add_columns(table => '`{path}`', source => 'line_pieces')").collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    tracker = sc.statusTracker()
    assert max(len(tracker.getJobInfo(j).stageIds) for j in tracker.getJobIdsForGroup("line_pieces")) == 1
    t = lance.dataset(path).to_table()
    assert sorted(zip(t["a"].to_pylist(), t["c3"].to_pylist())) == [(i, 3 * i) for i in range(3000)]


def test_update_columns_subset(spark, tmp_path):
    """CALL update_columns for some rows: the others keep their values, the other column's file is untouched."""
    path = str(tmp_path / "backfill")
    lance.write_dataset(pa.table({"a": pa.array(range(50), pa.int64()), "b": pa.array([0.5] * 50)}), path,
                        max_rows_per_file=20)
    before = {n: os.stat(os.path.join(path, "data", n)).st_mtime_ns for n in os.listdir(os.path.join(path, "data"))}
    spark.read.format("lance").load(path).where("a % 2 = 0").selectExpr("_rowaddr", "CAST(a AS DOUBLE) AS b") \
        .createOrReplaceTempView("line_backfill")
    spark.sql(f"CALL lance.system.update_columns(table => '`{path}`', source => 'line_backfill')").collect()
    t = lance.dataset(path).to_table()
    assert sorted(zip(t["a"].to_pylist(), t["b"].to_pylist())) == \
        [(i, float(i) if i % 2 == 0 else 0.5) for i in range(50)]
    assert {n: os.stat(os.path.join(path, "data", n)).st_mtime_ns for n in before} == before


def test_streaming_sink_and_source(spark, tmp_path):
    """A file stream into a Lance table (one commit per batch, AvailableNow), then
    the table as a stream source: every row exactly once, pylance the oracle."""
    import pyarrow.parquet as pq
    src, path = tmp_path / "in", str(tmp_path / "stream.lance")
    src.mkdir()
    for i in range(3):
        pq.write_table(pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())}), src / f"p{i}.parquet")
    q = (spark.readStream.schema("id BIGINT").option("maxFilesPerTrigger", 1).parquet(str(src))
         .writeStream.format("lance").option("checkpointLocation", str(tmp_path / "ck1"))
         .trigger(availableNow=True).start(path))
    q.awaitTermination(120)
    assert sorted(lance.dataset(path).to_table()["id"].to_pylist()) == list(range(30))
    assert lance.dataset(path).version == 3                      # one commit per micro-batch
    out = str(tmp_path / "copy")
    q2 = (spark.readStream.format("lance").load(path).writeStream.format("parquet")
          .option("checkpointLocation", str(tmp_path / "ck2")).trigger(availableNow=True).start(out))
    q2.awaitTermination(120)
    assert sorted(r.id for r in spark.read.parquet(out).collect()) == list(range(30))


def test_label_list_index_in_scans(spark, tmp_path):
    """array_contains / arrays_overlap use a pylance-built LABEL_LIST index (the session extension's
    planner strategy; DataSourceV2ScanRelation differs between lines): pylance's rows, the index named."""
    path = str(tmp_path / "labels.lance")
    tags = [None if i % 11 == 0 else [] if i % 13 == 0 else [f"t{i % 4}", f"u{i % 7}"] for i in range(800)]
    lance.write_dataset(pa.table({"id": pa.array(range(800), pa.int64()), "tags": pa.array(tags)}), path,
                        max_rows_per_file=200)
    lance.dataset(path).create_scalar_index("tags", "LABEL_LIST")
    ds = lance.dataset(path)
    spark.conf.set("spark.lance.localScanRows", "0")   # a scan node to show the index (not a driver read)
    try:
        _label_list_queries(spark, path, ds)
    finally:
        spark.conf.unset("spark.lance.localScanRows")


def _label_list_queries(spark, path, ds) -> None:
    for sf, pf in [("array_contains(tags, 't1')", "array_has_any(tags, ['t1'])"),
                   ("arrays_overlap(tags, array('u3', 'zz')) AND id > 100", "array_has_any(tags, ['u3', 'zz']) AND id > 100")]:
        df = spark.read.format("lance").load(path).where(sf).select("id")
        assert sorted(r[0] for r in df.collect()) == sorted(ds.to_table(filter=pf, columns=["id"])["id"].to_pylist())
        assert "indices=[tags_idx]" in df._jdf.queryExecution().executedPlan().toString(), sf


def test_small_lookups_are_read_on_the_driver(spark, tmp_path):
    """A BTREE point lookup leaves one row: read on the driver while planning (the session
    extension's planner strategy and Spark's local relations, on every line), no job; pylance's rows."""
    path = str(tmp_path / "lookup.lance")
    lance.write_dataset(pa.table({"id": pa.array(range(5000), pa.int64()),
                                  "s": pa.array([f"v{i}" for i in range(5000)])}), path, max_rows_per_file=2000)
    lance.dataset(path).create_scalar_index("id", "BTREE")
    df = spark.read.format("lance").load(path).where("id IN (7, 4321)").select("id", "s")
    rows = sorted((r.id, r.s) for r in df.collect())
    assert rows == sorted(zip(*lance.dataset(path).to_table(filter="id IN (7, 4321)", columns=["id", "s"])
                               .to_pydict().values()))
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "LocalTableScan" in plan and "BatchScan" not in plan, plan


def test_scalar_subqueries_over_one_table_share_one_scan(spark, tmp_path):
    """count(*), sum and avg over one table with one filter, as three scalar subqueries: one scan
    (the session extension's analyzer and optimizer rules, then Spark's own merge, on every
    line); the results of a model computed here."""
    path = str(tmp_path / "subq.lance")
    n = 3000
    lance.write_dataset(pa.table({"q": pa.array([i % 50 for i in range(n)], pa.int32()),
                                  "a": pa.array([i * 3 for i in range(n)], pa.int64()),
                                  "b": pa.array([float(i) / 4 for i in range(n)])}), path, max_rows_per_file=1000)
    spark.read.format("lance").load(path).createOrReplaceTempView("line_subq")
    where = "FROM line_subq WHERE q BETWEEN 10 AND 19"
    sql = f"SELECT (SELECT count(*) {where}), (SELECT sum(a) {where}), (SELECT avg(b) {where})"
    kept = [i for i in range(n) if 10 <= i % 50 <= 19]
    count, total, mean = spark.sql(sql).collect()[0]
    assert (count, total) == (len(kept), sum(3 * i for i in kept))
    assert mean == pytest.approx(sum(i / 4 for i in kept) / len(kept), rel=1e-12)
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        plan = spark.sql(sql)._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.unset("spark.sql.adaptive.enabled")
    assert len(set(re.findall(r"Subquery (?:scalar-)?subquery#\d+, \[id=#(\d+)\]", plan))) == 1, plan


def test_joins_pruned_at_run_time(spark, tmp_path):
    """A fact table written in `day` order joined to a filtered small table: Spark's dynamic pruning
    gives the scan the small side's keys where that side's filter keeps days in a narrow range (the
    scan's runtime filtering and the session extension's visible filters, on every line), and not
    where its statistics show the kept keys spread over their whole range; the rows of a model."""
    n, days = 20_000, 400
    fact = str(tmp_path / "fact.lance")
    spark.createDataFrame([(i, i * days // n, i % 7) for i in range(n)], "id LONG, day INT, qty INT") \
        .coalesce(1).write.format("lance").option("maxRowsPerPage", 500).save(fact)
    dim = str(tmp_path / "dim.lance")
    # per day: its year (in day order) and a parity (no relation to the day's place in the range)
    spark.createDataFrame([(d, d // 100, d % 2) for d in range(days)], "day INT, year INT, odd INT") \
        .coalesce(1).write.format("lance").option("maxRowsPerPage", 50).save(dim)
    spark.read.format("lance").load(fact).createOrReplaceTempView("line_fact")
    spark.read.format("lance").load(dim).createOrReplaceTempView("line_dim")
    q = "SELECT count(*), sum(f.qty) FROM line_fact f JOIN line_dim d ON f.day = d.day WHERE d.{where}"
    settings = {"spark.lance.runtimeFilterRows": "1000", "spark.lance.runtimeFilterSpreadKeys": "100",
                "spark.sql.adaptive.enabled": "false"}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        for where, keep, pruned in (("year = 2", lambda d: d // 100 == 2, True),
                                    ("odd = 1", lambda d: d % 2 == 1, False)):
            df = spark.sql(q.replace("{where}", where))
            kept = [i for i in range(n) if keep(i * days // n)]
            assert tuple(df.collect()[0]) == (len(kept), sum(i % 7 for i in kept))
            plan = df._jdf.queryExecution().executedPlan().toString()
            assert ("dynamicpruningexpression(day" in plan) == pruned, plan
    finally:
        for k in settings:
            spark.conf.unset(k)
