"""Nearest-neighbour search from PySpark (docs/vector-search.md).

``vector_search`` runs the SQL table function ``lance_vector_search`` (installed by
``lance_spark.configure`` through ``spark.sql.extensions``): plain SQL, so it works the same on a
classic session and on Spark Connect.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

_OPTIONS = ("nprobes", "refine_factor", "filter", "prefilter", "metric", "use_index")


def _sql_string(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _float_literal(x: float) -> str:
    f = float(x)
    if math.isnan(f) or math.isinf(f):
        raise ValueError(f"vector_search: the query vector holds a non-finite value {x!r}")
    return f"CAST({f!r} AS FLOAT)"


def vector_search_sql(table: str, column: str, vector: Sequence[float], k: int = 10, **options: Any) -> str:
    """The SQL query ``vector_search`` runs (options as named arguments)."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"vector_search: unknown option(s) {', '.join(unknown)}; known: {', '.join(_OPTIONS)}")
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ValueError(f"vector_search: k must be a positive integer, got {k!r}")
    values = list(vector)
    if not values:
        raise ValueError("vector_search: the query vector is empty")
    args = [_sql_string(table), _sql_string(column), "array(" + ", ".join(_float_literal(v) for v in values) + ")",
            str(k)]
    for name in _OPTIONS:
        value: Optional[Any] = options.get(name)
        if value is None:
            continue
        if isinstance(value, bool):
            lit = "true" if value else "false"
        elif isinstance(value, int):
            lit = str(value)
        elif isinstance(value, str):
            lit = _sql_string(value)
        else:
            raise ValueError(f"vector_search: option {name} must be a bool, int or str, got {value!r}")
        args.append(f"{name} => {lit}")
    return f"SELECT * FROM lance_vector_search({', '.join(args)})"


def vector_search(spark: Any, table: str, column: str, vector: Sequence[float], k: int = 10, **options: Any) -> Any:
    """The ``k`` rows of a Lance table (a catalog name or a dataset path) nearest to ``vector`` in
    ``column``, with their ``_distance``, nearest first. Options: nprobes, refine_factor, filter
    (a SQL predicate), prefilter (default False, as pylance), metric ('l2', 'cosine', 'dot'),
    use_index."""
    return spark.sql(vector_search_sql(table, column, vector, k, **options))
