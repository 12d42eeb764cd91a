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


_KNN_OPTIONS = ("metric", "table_prefix", "nprobes", "refine_factor", "use_index")
_QID = "__lance_knn_qid"
_RANK = "__lance_knn_rank"
_ADDR = "__lance_knn_rowaddr"
_NN = "__lance_knn_nn"
DISTANCE = "_distance"


def _is_vector_type(dt: Any) -> bool:
    from pyspark.sql.types import ArrayType, DecimalType, DoubleType, FloatType, IntegralType

    return isinstance(dt, ArrayType) and isinstance(dt.elementType, (FloatType, DoubleType, IntegralType,
                                                                     DecimalType))


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _positive(name: str, value: Any) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"knn_join: {name} must be a positive integer, got {value!r}")
    return value


def knn_join(queries_df: Any, table: str, query_column: str, column: str, k: int = 10, **options: Any) -> Any:
    """Batch KNN (docs/vector-search.md, "Batch KNN"): for every row of ``queries_df`` whose
    ``query_column`` is not NULL, its ``k`` nearest rows of the Lance ``table`` (a catalog name or a
    dataset path) by ``column``. One output row per (query row, neighbour): the query row's
    columns, then the table's columns (a table column whose name is also a query column, or is
    ``_distance``, is renamed ``table_prefix + name``, default ``table_`` + name), then
    ``_distance`` (FLOAT), ordered by query row (in ``queries_df``'s order) and nearest first.
    Options: metric ('l2' default, 'cosine', 'dot'), nprobes, refine_factor, use_index (default
    true: the column's IVF index when it has one of the metric, as ``vector_search``; false: exact),
    table_prefix.

    Distributed: each query row's search runs where the row is, on an executor, through the SQL
    function ``lance_knn`` (the connector's session extension, which ``lance_spark.configure``
    installs); each executor opens the table once and keeps the index partitions it reads in its
    cache, so they are read once per executor, not once per query. The neighbours' rows are then
    joined from the table by row address. Plain DataFrame operations and SQL: Spark Connect-safe."""
    from pyspark.sql import functions as F

    unknown = sorted(set(options) - set(_KNN_OPTIONS))
    if unknown:
        raise ValueError(f"knn_join: unknown option(s) {', '.join(unknown)}; known: {', '.join(_KNN_OPTIONS)}")
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ValueError(f"knn_join: k must be a positive integer, got {k!r}")
    metric = str(options.get("metric") or "l2").strip().lower()
    if metric == "euclidean":
        metric = "l2"
    if metric not in ("l2", "cosine", "dot"):
        raise ValueError(f"knn_join: metric must be one of l2, cosine, dot, got {options.get('metric')!r}")
    nprobes = _positive("nprobes", options.get("nprobes"))
    refine = _positive("refine_factor", options.get("refine_factor"))
    use_index = options.get("use_index")
    if use_index is not None and not isinstance(use_index, bool):
        raise ValueError(f"knn_join: use_index must be True or False, got {use_index!r}")
    prefix = options.get("table_prefix", "table_")
    if not isinstance(prefix, str) or not prefix:
        raise ValueError(f"knn_join: table_prefix must be a non-empty string, got {prefix!r}")

    spark = queries_df.sparkSession
    if ("/" in table or ":" in table) and "`" not in table:
        target = spark.read.format("lance").load(table)
    else:
        target = spark.table(table)

    qfields = {f.name: f for f in queries_df.schema.fields}
    if query_column not in qfields:
        raise ValueError(f"knn_join: query_column '{query_column}' is not a column of queries_df "
                         f"(columns: {', '.join(qfields)})")
    if not _is_vector_type(qfields[query_column].dataType):
        raise ValueError(f"knn_join: query_column '{query_column}' is not a vector column (an array of numbers), "
                         f"got {qfields[query_column].dataType.simpleString()}")
    if DISTANCE in qfields:
        raise ValueError(f"knn_join: queries_df has a column named {DISTANCE}, the name of the output distance; "
                         "rename it")
    tfields = {f.name: f for f in target.schema.fields}
    if column not in tfields:
        raise ValueError(f"knn_join: column '{column}' is not a column of table {table} "
                         f"(columns: {', '.join(tfields)})")
    if not _is_vector_type(tfields[column].dataType):
        raise ValueError(f"knn_join: column '{column}' of table {table} is not a vector column (an array of "
                         f"numbers), got {tfields[column].dataType.simpleString()}")
    renamed = [(f.name, prefix + f.name if f.name in qfields or f.name == DISTANCE else f.name)
               for f in target.schema.fields]
    clash = [new for _, new in renamed if new in qfields]
    if clash:
        raise ValueError(f"knn_join: table column(s) renamed with table_prefix '{prefix}' still clash with "
                         f"queries_df's columns: {', '.join(clash)}; pass another table_prefix")

    # One small job checks the query vectors' dimension and elements before any search runs.
    qc = F.col(_quote(query_column))
    first = target.where(F.col(_quote(column)).isNotNull()).select(F.size(F.col(_quote(column))).alias("n")) \
        .limit(1).collect()
    if first:
        dim = int(first[0]["n"])
        bad = queries_df.where(qc.isNotNull() & ((F.size(qc) != dim) | F.exists(qc, lambda x: x.isNull()))) \
            .select(F.size(qc).alias("n")).limit(1).collect()
        if bad:
            n = int(bad[0]["n"])
            if n != dim:
                raise ValueError(f"knn_join: query_column '{query_column}' holds a vector of dimension {n}; "
                                 f"column '{column}' of table {table} has dimension {dim}")
            raise ValueError(f"knn_join: query_column '{query_column}' holds a vector with a NULL element")

    def lit(v: Any) -> str:
        return "NULL" if v is None else str(v)

    call = (f"lance_knn({_sql_string(table)}, {_sql_string(column)}, {_quote(query_column)}, {k}, "
            f"{lit(nprobes)}, {lit(refine)}, {_sql_string(metric)}, "
            f"{'NULL' if use_index is None else str(use_index).lower()})")
    queries = queries_df.where(qc.isNotNull()).withColumn(_QID, F.monotonically_increasing_id())
    found = queries.select("*", F.posexplode(F.expr(call)).alias(_RANK, _NN)).select(
        *[F.col(_quote(f.name)) for f in queries.schema.fields], F.col(_RANK),
        F.col(f"{_NN}._rowaddr").alias(_ADDR), F.col(f"{_NN}._distance").alias(DISTANCE))
    side = target.select(*[F.col(_quote(old)).alias(new) for old, new in renamed], F.col("_rowaddr").alias(_ADDR))
    out = [F.col(_quote(f.name)) for f in queries_df.schema.fields] + \
          [F.col(_quote(new)) for _, new in renamed] + [F.col(DISTANCE)]
    return found.join(side, _ADDR).orderBy(F.col(_QID), F.col(_RANK)).select(*out)
