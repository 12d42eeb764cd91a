"""lance_spark.vector_search's SQL text and the spark.sql.extensions merge (no Spark needed)."""
from __future__ import annotations

import pytest

from lance_spark import _spark
from lance_spark.vectors import vector_search_sql


def test_sql_text():
    sql = vector_search_sql("/d/it's.lance", "emb", [1, 2.5], k=3, nprobes=4, filter="name = 'a'", prefilter=True,
                            metric="cosine", use_index=False)
    assert sql == ("SELECT * FROM lance_vector_search('/d/it\\'s.lance', 'emb', "
                   "array(CAST(1.0 AS FLOAT), CAST(2.5 AS FLOAT)), 3, nprobes => 4, filter => 'name = \\'a\\'', "
                   "prefilter => true, metric => 'cosine', use_index => false)")


@pytest.mark.parametrize("bad,msg", [({"k": 0}, "k must be"), ({"k": True}, "k must be"), ({"kk": 1}, "unknown option"),
                                     ({"vector": []}, "empty"), ({"vector": [float("nan")]}, "non-finite"),
                                     ({"nprobes": 1.5}, "nprobes")])
def test_bad_arguments(bad, msg):
    args = {"table": "/t", "column": "emb", "vector": [1.0], "k": 2}
    args.update(bad)
    with pytest.raises(ValueError, match=msg):
        vector_search_sql(**args)


def test_extensions_keep_the_builders_own():
    fn = "io.lancespark.spark.extensions.LanceTableFunctionsExtension"
    call = "io.lancespark.spark.extensions.LanceCallExtension"
    for line in ("3.5", "4.0", "4.1", "4.2", "4.3"):
        ours = _spark.connector_settings(line)["spark.sql.extensions"].split(",")
        assert fn in ours
        assert (call in ours) == (line == "3.5")
    delta = "io.delta.sql.DeltaSparkSessionExtension"
    assert _spark._merge_extensions(None, [fn]) == fn
    assert _spark._merge_extensions(delta, [fn]) == f"{delta},{fn}"
    assert _spark._merge_extensions(f"{fn}, {delta}", [fn]) == f"{fn},{delta}"
    assert "spark.sql.extensions" in _spark.STATIC_SETTINGS
