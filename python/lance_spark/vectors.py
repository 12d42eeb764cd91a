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


_KNN_OPTIONS = ("metric", "table_prefix")
_QID = "__lance_knn_qid"
_QVEC = "__lance_knn_query"
_RANK = "__lance_knn_rank"
DISTANCE = "_distance"


def _is_vector_type(dt: Any) -> bool:
    from pyspark.sql.types import ArrayType, DecimalType, DoubleType, FloatType, IntegralType

    return isinstance(dt, ArrayType) and isinstance(dt.elementType, (FloatType, DoubleType, IntegralType,
                                                                     DecimalType))


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _distance_sql(metric: str, q: str, v: str) -> str:
    """Lance's distance of vector ``v`` to query ``q`` (SQL expressions, ARRAY<FLOAT>), as a DOUBLE:
    l2 is the squared Euclidean distance, cosine 1 - cos(angle), dot 1 - q.v."""
    def total(arr: str) -> str:
        return f"aggregate({arr}, CAST(0 AS DOUBLE), (acc, x) -> acc + x)"

    dot = total(f"zip_with({q}, {v}, (a, b) -> CAST(a AS DOUBLE) * CAST(b AS DOUBLE))")
    if metric == "l2":
        return total(f"zip_with({q}, {v}, (a, b) -> (CAST(a AS DOUBLE) - CAST(b AS DOUBLE)) * "
                     f"(CAST(a AS DOUBLE) - CAST(b AS DOUBLE)))")
    if metric == "dot":
        return f"(1.0D - {dot})"
    norms = (f"sqrt({total(f'transform({q}, x -> CAST(x AS DOUBLE) * CAST(x AS DOUBLE))')}) * "
             f"sqrt({total(f'transform({v}, x -> CAST(x AS DOUBLE) * CAST(x AS DOUBLE))')})")
    return f"(CASE WHEN {norms} = 0 THEN CAST('NaN' AS DOUBLE) ELSE 1.0D - {dot} / ({norms}) END)"


def knn_join(queries_df: Any, table: str, query_column: str, column: str, k: int = 10, **options: Any) -> Any:
    """Batch KNN (docs/vector-search.md, "Batch KNN"): for every row of ``queries_df`` whose
    ``query_column`` is not NULL, its ``k`` nearest rows of the Lance ``table`` (a catalog name or a
    dataset path) by ``column``, exact. One output row per (query row, neighbour): the query row's
    columns, then the table's columns (a table column whose name is also a query column, or is
    ``_distance``, is renamed ``table_prefix + name``, default ``table_`` + name), then
    ``_distance`` (FLOAT), ordered by query row (in ``queries_df``'s order) and nearest first.
    Options: metric ('l2' default, 'cosine', 'dot'), table_prefix.

    The query rows are collected on the driver (they should be small: thousands, not millions)
    and broadcast; every task scans its slice of the table's fragments once for all the queries,
    keeps each query's best k (Spark's partial window group limit) and one shuffle by query
    merges them into the global top k. Plain DataFrame operations: Spark Connect-safe."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, FloatType, LongType, StructField, StructType

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

    # The queries, numbered in their order, without those whose vector is NULL (no output rows).
    rows = queries_df.where(F.col(query_column).isNotNull()).collect()
    qschema = StructType([*queries_df.schema.fields, StructField(_QID, LongType(), False)])
    numbered = [tuple(r) + (i,) for i, r in enumerate(rows)]
    if not numbered:
        return spark.createDataFrame([], StructType([
            *queries_df.schema.fields,
            *[StructField(prefix + f.name if f.name in qfields or f.name == DISTANCE else f.name, f.dataType,
                          f.nullable) for f in target.schema.fields],
            StructField(DISTANCE, FloatType(), True)]))

    vectors = [r[query_column] for r in rows]
    first = target.where(F.col(column).isNotNull()).select(F.size(F.col(column)).alias("n")).limit(1).collect()
    if first:
        dim = int(first[0]["n"])
        for i, v in enumerate(vectors):
            if len(v) != dim:
                raise ValueError(f"knn_join: query_column '{query_column}' holds a vector of dimension {len(v)} "
                                 f"(query row {i}); column '{column}' of table {table} has dimension {dim}")
            if any(x is None for x in v):
                raise ValueError(f"knn_join: query_column '{query_column}' holds a vector with a NULL element "
                                 f"(query row {i})")

    queries = spark.createDataFrame(numbered, qschema).withColumn(
        _QVEC, F.col(query_column).cast(ArrayType(FloatType())))

    renamed = [(f.name, prefix + f.name if f.name in qfields or f.name == DISTANCE else f.name)
               for f in target.schema.fields]
    clash = [new for _, new in renamed if new in qfields]
    if clash:
        raise ValueError(f"knn_join: table column(s) renamed with table_prefix '{prefix}' still clash with "
                         f"queries_df's columns: {', '.join(clash)}; pass another table_prefix")
    vec_alias = "__lance_knn_vector"
    side = target.where(F.col(column).isNotNull()).select(
        *[F.col(_quote(old)).alias(new) for old, new in renamed],
        F.col(_quote(column)).cast(ArrayType(FloatType())).alias(vec_alias))

    pairs = side.crossJoin(F.broadcast(queries)).withColumn(
        DISTANCE, F.expr(_distance_sql(metric, _quote(_QVEC), _quote(vec_alias))).cast(FloatType()))
    # Spark (3.5+) turns a row_number() <= k filter into a per-task group limit before the shuffle.
    ranked = pairs.withColumn(_RANK, F.row_number().over(Window.partitionBy(_QID).orderBy(F.col(DISTANCE))))
    top = ranked.where(F.col(_RANK) <= k)
    out = [F.col(_quote(f.name)) for f in queries_df.schema.fields] + \
          [F.col(_quote(new)) for _, new in renamed] + [F.col(DISTANCE)]
    return top.orderBy(F.col(_QID), F.col(DISTANCE)).select(*out)
