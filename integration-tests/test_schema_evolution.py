"""Schema evolution (issue 39, "Schema evolution on write"): ALTER COLUMN TYPE
widens a column by rewriting that column alone (as pylance's alter_columns
does), mergeSchema adds nested struct fields on append, and catalog appends
(INSERT INTO, writeTo().append()) honour mergeSchema. pylance 14 (the oracle)
reads every table after each step with the same rows as Spark; time travel to
the version before returns the old schema; refusals are clear errors."""
from __future__ import annotations

import datetime
import decimal
import os

import lance
import pyarrow as pa
import pytest


@pytest.fixture(scope="module", autouse=True)
def wh(spark, tmp_path_factory):
    wh = tmp_path_factory.mktemp("evolve-warehouse")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    os.makedirs(os.path.join(wh, "default"), exist_ok=True)
    return wh


SPARK_4 = int(__import__("pyspark").__version__.split(".")[0]) >= 4


def data_files(path: str) -> dict[str, tuple[int, int]]:
    d = os.path.join(path, "data")
    return {n: (os.stat(os.path.join(d, n)).st_size, os.stat(os.path.join(d, n)).st_mtime_ns) for n in os.listdir(d)}


def as_spark(v):
    """A pylance or Spark value as a plain tuple/list tree (structs are tuples in field order)."""
    from pyspark.sql import Row

    if isinstance(v, Row):
        return tuple(as_spark(x) for x in v)
    if isinstance(v, dict):
        return tuple(as_spark(x) for x in v.values())
    if isinstance(v, list):
        return [as_spark(x) for x in v]
    return v


def pylance_rows(path: str, version: int | None = None) -> list[tuple]:
    t = lance.dataset(path, version=version).to_table()
    return sorted((as_spark(r) for r in t.to_pylist()), key=repr)


def rows_of(df) -> list[tuple]:
    return sorted((as_spark(r) for r in df.collect()), key=repr)


def spark_rows(spark, table: str, version: int | None = None) -> list[tuple]:
    q = f"SELECT * FROM {table}" + (f" VERSION AS OF {version}" if version is not None else "")
    return rows_of(spark.sql(q))


def typed_table(n0: int, n: int) -> pa.Table:
    ids = list(range(n0, n0 + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "i8": pa.array([i % 100 - 50 if i % 7 else None for i in ids], pa.int8()),
        "i32": pa.array([i * 1000003 % 2147483647 if i % 5 else None for i in ids], pa.int32()),
        "f": pa.array([i / 3 for i in ids], pa.float32()),
        "dec": pa.array([decimal.Decimal(i * 37 % 100000) / 100 for i in ids], pa.decimal128(10, 2)),
        "d": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=i) for i in ids], pa.date32()),
        "s": pa.array([f"s{i}" for i in ids]),
        "big": pa.array([i * 10**12 for i in ids], pa.int64()),
    })


def make_typed(wh, name: str) -> str:
    path = os.path.join(wh, "default", f"{name}.lance")
    lance.write_dataset(typed_table(0, 40), path, max_rows_per_file=15)
    lance.write_dataset(typed_table(40, 20), path, mode="append")
    lance.dataset(path).delete("id % 11 = 3")
    return path


def test_alter_column_type_widens_by_rewriting_only_that_column(spark, wh):
    path = make_typed(wh, "alt_widen")
    t = "lance.default.alt_widen"
    before = pylance_rows(path)
    v0 = lance.dataset(path).version
    files0 = data_files(path)
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN i32 TYPE BIGINT")
    ds = lance.dataset(path)
    assert ds.version == v0 + 1
    assert ds.schema.field("i32").type == pa.int64()
    assert ds.schema.names == ["id", "i8", "i32", "f", "dec", "d", "s", "big"]  # same place
    assert pylance_rows(path) == before  # same values
    assert spark_rows(spark, t) == before
    assert dict(spark.table(t).dtypes)["i32"] == "bigint"
    # the old files are untouched; one new file per fragment holds the column alone
    files1 = data_files(path)
    assert all(files1[n] == files0[n] for n in files0)
    new = set(files1) - set(files0)
    assert len(new) == len(ds.get_fragments())
    for frag in ds.get_fragments():
        added = [f for f in frag.data_files() if f.path in new]
        assert len(added) == 1 and len(added[0].fields) == 1
    # time travel: the old type and values
    old = lance.dataset(path, version=v0)
    assert old.schema.field("i32").type == pa.int32()
    assert pylance_rows(path, v0) == before
    assert dict(spark.sql(f"SELECT * FROM {t} VERSION AS OF {v0}").dtypes)["i32"] == "int"

    # more widenings: several columns in one statement (one job, one version) where Spark parses it
    changes = [("i8", "INT", pa.int32()), ("f", "DOUBLE", pa.float64()),
               ("dec", "DECIMAL(14,3)", pa.decimal128(14, 3)), ("d", "TIMESTAMP_NTZ", pa.timestamp("us"))]
    if SPARK_4:
        v1 = lance.dataset(path).version
        spark.sql(f"ALTER TABLE {t} ALTER COLUMN " + ", ".join(f"{c} TYPE {typ}" for c, typ, _ in changes))
        assert lance.dataset(path).version == v1 + 1
    else:
        for col, typ, _ in changes:
            spark.sql(f"ALTER TABLE {t} ALTER COLUMN {col} TYPE {typ}")
    for col, _, arrow in changes:
        assert lance.dataset(path).schema.field(col).type == arrow, col
    after = lance.dataset(path).to_table()
    old_t = lance.dataset(path, version=v0).to_table()
    for col in ["i8", "f", "dec", "d"]:
        want = old_t.column(col).cast(after.schema.field(col).type)
        assert after.column(col).equals(want), col
    assert spark_rows(spark, t) == pylance_rows(path)
    from lance_spark import reader
    assert reader.dataset(path).to_table().sort_by("id").equals(lance.dataset(path).to_table().sort_by("id"))
    # pylance appends with the new schema and reads it all back
    lance.write_dataset(lance.dataset(path).to_table().slice(0, 3), path, mode="append")
    assert spark_rows(spark, t) == pylance_rows(path)


def test_alter_column_type_refusals_are_clear(spark, wh):
    path = make_typed(wh, "alt_refuse")
    t = "lance.default.alt_refuse"
    v0 = lance.dataset(path).version
    for col, typ, from_t in [("big", "INT", "bigint"), ("s", "INT", "string"), ("big", "DOUBLE", "bigint"),
                             ("dec", "DECIMAL(10,1)", "decimal(10,2)")]:
        with pytest.raises(Exception) as e:
            spark.sql(f"ALTER TABLE {t} ALTER COLUMN {col} TYPE {typ}")
        msg = str(e.value).lower()
        assert col in msg and from_t in msg and typ.lower().replace("int", "int") in msg.replace("integer", "int"), msg
    # an index over the column: refused, naming the index
    lance.dataset(path).create_scalar_index("i32", "BTREE", name="i32_idx")
    v1 = lance.dataset(path).version
    with pytest.raises(Exception) as e:
        spark.sql(f"ALTER TABLE {t} ALTER COLUMN i32 TYPE BIGINT")
    assert "i32_idx" in str(e.value) and "i32" in str(e.value), str(e.value)
    assert lance.dataset(path).version == v1 and v1 == v0 + 1
    # the same type: nothing to do, no new version
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN big TYPE BIGINT")
    assert lance.dataset(path).version == v1


SPARK_42 = tuple(int(x) for x in __import__("pyspark").__version__.split(".")[:2]) >= (4, 2)


@pytest.mark.skipif(not SPARK_42, reason="INSERT WITH SCHEMA EVOLUTION is Spark 4.2's")
def test_catalog_appends_with_schema_evolution(spark, wh):
    t = "lance.default.cat_evolve"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING) USING lance")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    path = os.path.join(wh, "default", "cat_evolve.lance")
    v0 = lance.dataset(path).version
    # without schema evolution: Spark's own check refuses the extra column
    with pytest.raises(Exception) as e:
        spark.sql(f"INSERT INTO {t} SELECT 3 AS id, 'c' AS v, 0.5 AS score")
    assert "score" in str(e.value) or "column" in str(e.value).lower(), str(e.value)
    assert lance.dataset(path).version == v0
    # SQL: by name, the new column added (nullable, after the old ones), INT cast into BIGINT
    spark.sql(f"INSERT WITH SCHEMA EVOLUTION INTO {t} BY NAME SELECT 0.5D AS score, 'c' AS v, 3 AS id")
    ds = lance.dataset(path)
    assert ds.schema.names == ["id", "v", "score"]
    assert ds.schema.field("score").type == pa.float64()
    assert spark_rows(spark, t) == pylance_rows(path) == [(1, "a", None), (2, "b", None), (3, "c", 0.5)]
    # DataFrame: writeTo().withSchemaEvolution().append(), a nested struct column is new too
    df = spark.createDataFrame([(4, "d", 1.5, (7, "x"))], "id INT, v STRING, score DOUBLE, s STRUCT<a: INT, b: STRING>")
    # (PySpark 4.2's DataFrameWriterV2 lacks withSchemaEvolution(); the JVM writer has it)
    df.writeTo(t)._jwriter.withSchemaEvolution().append()
    ds = lance.dataset(path)
    assert ds.schema.names == ["id", "v", "score", "s"]
    assert spark_rows(spark, t) == pylance_rows(path)
    assert (4, "d", 1.5, (7, "x")) in spark_rows(spark, t)
    # time travel: the schema before
    assert lance.dataset(path, version=v0).schema.names == ["id", "v"]
    assert spark.sql(f"SELECT * FROM {t} VERSION AS OF {v0}").columns == ["id", "v"]
    # a type Spark would widen is cast instead (no silent column rewrite): BIGINT data into the INT of s.a
    # is refused by Spark's ANSI store assignment only on overflow
    spark.sql(f"INSERT WITH SCHEMA EVOLUTION INTO {t} BY NAME SELECT 5 AS id, 'e' AS v, 2.5D AS score, "
              "named_struct('a', 8, 'b', 'y') AS s")
    assert spark_rows(spark, t) == pylance_rows(path)
    assert len(spark_rows(spark, t)) == 5
    # MERGE INTO WITH SCHEMA EVOLUTION: the new column added, matched rows updated
    spark.createDataFrame([(2, "B", 9), (6, "f", 7)], "id BIGINT, v STRING, rank INT").createOrReplaceTempView("evo_src")
    spark.sql(f"MERGE WITH SCHEMA EVOLUTION INTO {t} t USING evo_src s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    assert lance.dataset(path).schema.names == ["id", "v", "score", "s", "rank"]
    got = spark_rows(spark, t)
    assert got == pylance_rows(path)
    assert [r for r in got if r[0] in (2, 6)] == [(2, "B", None, None, 9), (6, "f", None, None, 7)]


@pytest.mark.parametrize("file_version", ["2.0", "2.1", "2.2"])
def test_merge_schema_adds_nested_struct_fields(spark, tmp_path, file_version):
    path = str(tmp_path / "nested.lance")
    v20_ok = file_version != "2.0"
    base = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        # (file version 2.0 stores no struct validity: no NULL structs there)
        "s": pa.array([{"a": 1, "b": "x"}, None if v20_ok else {"a": 2, "b": "z"}, {"a": 3, "b": None}],
                      pa.struct([("a", pa.int32()), ("b", pa.string())])),
        "l": pa.array([[{"p": 1}], [], None], pa.list_(pa.struct([("p", pa.int64())]))),
    })
    lance.write_dataset(base, path, data_storage_version=file_version)
    v0 = lance.dataset(path).version
    df = spark.createDataFrame(
        [(4, (40, "y", 4.5, (1, "deep")), [(7, "q")]), (5, None if v20_ok else (50, "w", None, (None, None)), None)],
        "id BIGINT, s STRUCT<a: INT, b: STRING, c: DOUBLE, d: STRUCT<e: INT, f: STRING>>, "
        "l ARRAY<STRUCT<p: BIGINT, r: STRING>>")
    # without the option: refused, naming the new fields and the option
    with pytest.raises(Exception) as e:
        df.write.format("lance").mode("append").save(path)
    msg = str(e.value)
    assert "s.c" in msg and "s.d" in msg and "l[].r" in msg and "mergeSchema" in msg, msg
    assert lance.dataset(path).version == v0
    # with it: the sub-fields added after the struct's own; old rows read them NULL
    df.write.format("lance").mode("append").option("mergeSchema", "true").save(path)
    ds = lance.dataset(path)
    assert ds.version == v0 + 1
    s_type = ds.schema.field("s").type
    assert [s_type.field(i).name for i in range(s_type.num_fields)] == ["a", "b", "c", "d"]
    item = ds.schema.field("l").type.value_type
    assert [item.field(i).name for i in range(item.num_fields)] == ["p", "r"]
    want = [
        (1, (1, "x", None, None), [(1, None)]),
        (2, None if v20_ok else (2, "z", None, None), []),
        (3, (3, None, None, None), None),
        (4, (40, "y", 4.5, (1, "deep")), [(7, "q")]),
        (5, None if v20_ok else (50, "w", None, (None, None)), None),
    ]
    got_pylance = pylance_rows(path)
    got_spark = rows_of(spark.read.format("lance").load(path))
    assert got_pylance == sorted(want, key=repr), got_pylance
    assert got_spark == got_pylance
    # the pure-Python reader fills the added sub-fields of old fragments too
    from lance_spark import reader
    assert sorted((as_spark(r) for r in reader.dataset(path).to_table().to_pylist()), key=repr) == got_pylance
    # time travel: the old struct type
    old = lance.dataset(path, version=v0)
    assert old.schema.field("s").type.num_fields == 2
    assert [f.name for f in spark.read.format("lance").option("version", v0).load(path).schema["s"].dataType.fields] == ["a", "b"]
    # sub-fields in another order are matched by name (a struct cast would go by position)
    spark.createDataFrame([(6, ((2, "e"), 1.0, "bb", 60), [("rr", 8)])],
                          "id BIGINT, s STRUCT<d: STRUCT<e: INT, f: STRING>, c: DOUBLE, b: STRING, a: INT>, "
                          "l ARRAY<STRUCT<r: STRING, p: BIGINT>>").write.format("lance").mode("append").save(path)
    assert (6, (60, "bb", 1.0, (2, "e")), [(8, "rr")]) in pylance_rows(path)
    assert rows_of(spark.read.format("lance").load(path)) == pylance_rows(path)
    # pylance appends with the new schema afterwards
    lance.write_dataset(lance.dataset(path).to_table().slice(3, 1), path, mode="append")
    assert len(pylance_rows(path)) == 7
