"""Writing file versions 2.1 and 2.2: which version a write uses (the
`fileVersion` option for new datasets and overwrites, the dataset's own for
appends and row-level changes), and Spark and pylance taking turns on the same
2.1/2.2 datasets: appends, deletes, UPDATE and MERGE, each side reading what
the other wrote. pylance (the oracle) validates every version."""
from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from compare import assert_same, oracle_rows, spark_rows


def _versions(path: str) -> set[tuple[int, int]]:
    return {(f.file_major_version, f.file_minor_version)
            for frag in lance.dataset(path).get_fragments() for f in frag.metadata.files}


def _people(spark, start: int, n: int, maps: bool = True):
    """Rows with a map column: a Spark MAP (stored as a Lance map at 2.2), or
    (maps=False, for datasets below 2.2) the array of key/value structs a
    dataset below 2.2 stores."""
    attrs = (F.create_map(F.lit("k"), F.col("id")) if maps
             else F.array(F.struct(F.lit("k").alias("key"), F.col("id").alias("value"))))
    return (spark.range(start, start + n, numPartitions=2)
            .withColumn("k", (F.col("id") % 7).cast("int"))
            .withColumn("name", F.concat(F.lit("name-"), (F.col("id") % 50).cast("string")))
            .withColumn("tags", F.when(F.col("id") % 5 == 0, F.lit(None))
                        .otherwise(F.array(F.lit("a"), F.col("k").cast("string"))))
            .withColumn("attrs", F.when(F.col("id") % 9 == 0, F.lit(None))
                        .otherwise(attrs)))


def _agree(spark, path: str, what: str) -> list[dict]:
    ds = lance.dataset(path)
    ds.validate()
    got = spark_rows(spark.read.format("lance").load(path))
    assert_same(got, oracle_rows(ds.to_table()), what)
    return got


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_version_chosen_by_option_kept_by_appends(spark, tmp_path, version):
    path = str(tmp_path / "v.lance")
    _people(spark, 0, 1000).write.format("lance").option("fileVersion", version).save(path)
    assert lance.dataset(path).data_storage_version == version and _versions(path) == {(2, int(version[-1]))}
    # an append without the option writes the dataset's version
    _people(spark, 1000, 500, maps=version == "2.2").write.format("lance").mode("append").save(path)
    assert _versions(path) == {(2, int(version[-1]))}
    _agree(spark, path, f"{version} after a Spark append")
    # asking for another version on append is refused, naming both; nothing is committed or left behind
    other = "2.2" if version == "2.1" else "2.0"
    files = set(Path(path, "data").iterdir())
    with pytest.raises(Exception, match=rf"fileVersion={other}.*stores file version {version}"):
        (_people(spark, 2000, 10, maps=version == "2.2")
         .write.format("lance").mode("append").option("fileVersion", other).save(path))
    assert lance.dataset(path).version == 2 and set(Path(path, "data").iterdir()) == files
    # an overwrite converts, and the old version stays readable at its own file version
    _people(spark, 0, 300).write.format("lance").mode("overwrite").option("fileVersion", other).save(path)
    assert lance.dataset(path).data_storage_version == other and lance.dataset(path).count_rows() == 300
    assert lance.dataset(path, version=2).count_rows() == 1500
    assert spark.read.format("lance").option("version", 2).load(path).count() == 1500


def test_stable_is_2_2_and_unknown_versions_are_refused(spark, tmp_path):
    path = str(tmp_path / "stable.lance")
    spark.range(10).write.format("lance").option("fileVersion", "stable").save(path)
    assert lance.dataset(path).data_storage_version == "2.2"
    for bad in ["2.3", "next", "0.1", "legacy"]:
        with pytest.raises(Exception, match=rf"'fileVersion'.*2\.0, 2\.1, 2\.2 or stable.*got '{bad}'"):
            spark.range(10).write.format("lance").option("fileVersion", bad).save(str(tmp_path / f"{bad}.lance"))


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_spark_and_pylance_take_turns(spark, tmp_path, version):
    """pylance creates, Spark appends, pylance appends and deletes, Spark
    appends again: every version valid, both sides agree at each step."""
    path = str(tmp_path / "turns.lance")
    n = 800
    table = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "k": pa.array([i % 7 for i in range(n)], pa.int32()),
        "name": pa.array([f"name-{i % 50}" for i in range(n)]),
        "tags": pa.array([None if i % 5 == 0 else ["a", str(i % 7)] for i in range(n)], pa.list_(pa.string())),
        "attrs": pa.array([None if i % 9 == 0 else [("k", i)] for i in range(n)], pa.map_(pa.string(), pa.int64()))
        if version == "2.2" else
        pa.array([None if i % 9 == 0 else [{"key": "k", "value": i}] for i in range(n)],
                 pa.list_(pa.struct([pa.field("key", pa.string(), nullable=False), ("value", pa.int64())]))),
    })
    lance.write_dataset(table, path, data_storage_version=version, max_rows_per_file=300)
    maps = version == "2.2"
    _people(spark, n, 400, maps).write.format("lance").mode("append").save(path)
    assert _versions(path) == {(2, int(version[-1]))}
    _agree(spark, path, "Spark append to a pylance dataset")
    lance.write_dataset(table.slice(0, 100), path, mode="append")
    lance.dataset(path).delete("id % 10 = 1")
    _agree(spark, path, "pylance append and delete after Spark")
    _people(spark, 5000, 100, maps).write.format("lance").mode("append").save(path)
    got = _agree(spark, path, "Spark append after pylance's delete")
    assert len(got) == n - n // 10 + 400 - 40 + 100 - 10 + 100


@pytest.fixture(scope="module")
def wh(spark, tmp_path_factory):
    """The catalog's warehouse (the catalog reads it once per session)."""
    wh = tmp_path_factory.mktemp("wh")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    return wh


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_row_level_changes_on_pylance_tables(spark, wh, version):
    """UPDATE, DELETE and MERGE through the catalog on a dataset pylance wrote
    at 2.1/2.2: rewritten rows land in files of the dataset's version."""
    name = f"t{version.replace('.', '')}"
    path = wh / "default" / f"{name}.lance"
    n = 5000
    lance.write_dataset(pa.table({"id": pa.array(range(n), pa.int64()),
                                  "k": pa.array([i % 10 for i in range(n)], pa.int64()),
                                  "s": pa.array([f"v{i}" for i in range(n)])}),
                        str(path), data_storage_version=version, max_rows_per_file=2000)
    t = f"lance.default.{name}"
    spark.sql(f"DELETE FROM {t} WHERE id % 97 = 0")
    spark.sql(f"UPDATE {t} SET s = concat(s, '!'), k = k + 100 WHERE k = 3")
    spark.createDataFrame([(5, 0, "merged"), (7, 0, "gone"), (30_000, 1, "new")],
                          "id long, k long, s string").createOrReplaceTempView("src")
    spark.sql(f"""
        MERGE INTO {t} t USING src ON t.id = src.id
        WHEN MATCHED AND src.s = 'gone' THEN DELETE
        WHEN MATCHED THEN UPDATE SET s = src.s
        WHEN NOT MATCHED THEN INSERT (id, k, s) VALUES (src.id, src.k, src.s)""")
    expect = {}
    for i in range(n):
        if i % 97 == 0 or i == 7:
            continue
        k, s = i % 10, f"v{i}"
        if k == 3:
            k, s = k + 100, s + "!"
        expect[i] = (i, k, "merged" if i == 5 else s)
    expect[30_000] = (30_000, 1, "new")
    assert _versions(str(path)) == {(2, int(version[-1]))}
    got = _agree(spark, str(path), f"DML on a pylance {version} table")
    assert sorted((r["id"], r["k"], r["s"]) for r in got) == sorted(expect.values())
    # pylance keeps working on the result: appends, deletes, and random access into our pages
    lance.write_dataset(pa.table({"id": pa.array([40_000, 40_001], pa.int64()), "k": pa.array([1, 2], pa.int64()),
                                  "s": pa.array(["p", "q"])}), str(path), mode="append")
    lance.dataset(str(path)).delete("id < 100")
    assert spark.table(t).count() == len([i for i in expect if i >= 100]) + 2
    _agree(spark, str(path), f"pylance append and delete after DML at {version}")


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_random_access_into_spark_pages(spark, tmp_path, version):
    """pylance's take() starts reads mid-page (repetition index, chunk
    metadata): rows taken at random equal the rows of a full read."""
    import random

    path = str(tmp_path / "take.lance")
    (_people(spark, 0, 20_000, maps=version == "2.2")
     .withColumn("long", F.when(F.col("id") % 3 == 0, F.repeat(F.lit("x"), 400)))   # full-zip pages
     .repartition(1).write.format("lance").option("fileVersion", version).save(path))
    ds = lance.dataset(path)
    full = ds.to_table().to_pylist()
    idx = sorted(random.Random(7).sample(range(len(full)), 300))
    assert ds.take(idx).to_pylist() == [full[i] for i in idx]


def test_version_through_sql_and_dataframe_writer_v2(spark, wh):
    """CREATE TABLE ... TBLPROPERTIES, CTAS and DataFrameWriterV2 choose the
    version; later INSERTs keep it."""
    spark.sql("CREATE TABLE lance.default.sql21 (id BIGINT, s STRING) USING lance "
              "TBLPROPERTIES ('fileVersion' = '2.1')")
    spark.sql("INSERT INTO lance.default.sql21 VALUES (1, 'a'), (2, NULL)")
    path = str(wh / "default" / "sql21.lance")
    assert lance.dataset(path).data_storage_version == "2.1" and _versions(path) == {(2, 1)}
    spark.sql("CREATE TABLE lance.default.ctas22 USING lance TBLPROPERTIES ('fileVersion' = '2.2') "
              "AS SELECT id, named_struct('x', id) AS st FROM range(10)")
    path = str(wh / "default" / "ctas22.lance")
    assert lance.dataset(path).data_storage_version == "2.2" and _versions(path) == {(2, 2)}
    spark.sql("INSERT INTO lance.default.ctas22 SELECT 10, CAST(NULL AS STRUCT<x: BIGINT>)")  # a null struct
    assert lance.dataset(path).to_table().to_pylist()[-1] == {"id": 10, "st": None}
    spark.range(5).writeTo("lance.default.v2w").using("lance").tableProperty("fileVersion", "2.1").create()
    spark.range(5, 8).writeTo("lance.default.v2w").append()
    path = str(wh / "default" / "v2w.lance")
    assert lance.dataset(path).data_storage_version == "2.1" and _versions(path) == {(2, 1)}
    assert lance.dataset(path).count_rows() == 8


def test_codecs_can_be_turned_off(spark, tmp_path):
    """disabledCodecs (for diagnosis): the same rows without FSST and
    dictionaries take more bytes and read back the same."""
    df = (spark.range(0, 50_000, numPartitions=1)
          .withColumn("url", F.concat(F.lit("https://shop.example.com/products/item-"), F.col("id").cast("string")))
          .withColumn("word", F.element_at(F.array(*[F.lit(w) for w in "abcd"]), (F.col("id") % 4 + 1).cast("int"))))

    def size(path: str) -> int:
        return sum(p.stat().st_size for p in Path(path, "data").iterdir())

    on, off = str(tmp_path / "on.lance"), str(tmp_path / "off.lance")
    df.write.format("lance").option("fileVersion", "2.2").save(on)
    df.write.format("lance").option("fileVersion", "2.2").option("disabledCodecs", "fsst, dictionary").save(off)
    assert size(off) > 1.5 * size(on), (size(on), size(off))
    assert lance.dataset(off).to_table().equals(lance.dataset(on).to_table())
    with pytest.raises(Exception, match=r"'disabledCodecs'.*bitpacking, rle, dictionary, fsst, zstd.*got 'lz4'"):
        df.write.format("lance").option("disabledCodecs", "lz4").save(str(tmp_path / "bad.lance"))


def test_dictionary_encoded_fixed_width_columns_read_as_pylance_reads_them(spark, tmp_path):
    """Low-cardinality columns of each item width (1, 2, 4, 8 and 16 bytes: bytes, shorts,
    ints/dates/floats, longs/doubles, decimals) are dictionary-encoded by the writer; Spark's
    lookups of the items (and the nulls among them) give what pylance reads."""
    n = 40_000
    df = (spark.range(0, n, numPartitions=1)
          .withColumn("b", F.when(F.col("id") % 11 == 0, None).otherwise((F.col("id") % 5 - 2).cast("byte")))
          .withColumn("s", ((F.col("id") * 7) % 6 * 101 + 200).cast("short"))
          .withColumn("i", ((F.col("id") * 13) % 9 * 100003 - 400000).cast("int"))
          .withColumn("f", ((F.col("id") * 3) % 7 / 4).cast("float"))
          .withColumn("d", F.when(F.col("id") % 7 == 3, None).otherwise(((F.col("id") * 5) % 13) * 1.25e9 + 0.5))
          .withColumn("l", ((F.col("id") * 17) % 10) * 1000000007)
          .withColumn("m", (((F.col("id") * 19) % 11) / 100).cast("decimal(15,2)"))
          .withColumn("dt", F.date_add(F.lit("2024-01-01").cast("date"), ((F.col("id") * 23) % 8).cast("int"))))
    path = str(tmp_path / "dict.lance")
    df.write.format("lance").option("fileVersion", "2.2").save(path)
    _agree(spark, path, "dictionary-encoded fixed-width columns")
    assert spark.read.format("lance").load(path).agg(F.sum("m")).first()[0] == \
        df.agg(F.sum("m")).first()[0]
