"""lance_spark.configure on a live session with the real connector, and column
kinds not in the rich table: Arrow dictionary columns (0.1 DICTIONARY encoding)."""
from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_spark


def test_configure_accepts_a_session_that_has_the_connector(spark):
    assert lance_spark.configure(spark) is spark
    assert spark.conf.get("spark.sql.timeType.enabled") == "true"


@pytest.mark.parametrize("file_version", ["legacy", "2.0"])
def test_dictionary_columns_read_as_their_values(spark, tmp_path, file_version):
    words = ["red", "green", None, "blue", "", "green"] * 200
    table = pa.table({
        "id": pa.array(range(len(words)), pa.int64()),
        "color": pa.array(words, pa.string()).dictionary_encode(),
    })
    path = tmp_path / f"dict_{file_version}.lance"
    lance.write_dataset(table, str(path), data_storage_version=file_version, max_rows_per_file=500)
    expected = lance.dataset(str(path)).to_table()
    want = sorted(zip(expected["id"].to_pylist(), expected["color"].cast(pa.string()).to_pylist()))
    df = spark.read.format("lance").load(str(path))
    assert dict(df.dtypes)["color"] == "string"
    assert sorted((r["id"], r["color"]) for r in df.collect()) == want
