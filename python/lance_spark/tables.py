"""A small handle on a Lance table for maintenance from PySpark, like
``delta.tables.DeltaTable``: compaction, history, tags, restore, vacuum, indices and column
additions, each running
the connector's SQL procedures (``CALL lance.system.*``) and metadata tables
(``lance.<table>.history``, ``.tags``, ``.fragments``)."""
from __future__ import annotations

import io

import datetime as _dt
from typing import Any, Dict, Optional, Union


def _literal(value: Any) -> str:
    """A SQL literal for a procedure argument."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
            return f"TIMESTAMP '{value.isoformat(sep=' ')}+00:00'"
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def _option_text(value: Any) -> str:
    """An index option's value as the procedure's string map takes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class LanceTags:
    """A table's tags, as pylance's ``ds.tags``: ``list()``, ``create``, ``update``
    (move), ``delete``; ``df()`` is the ``.tags`` metadata table."""

    def __init__(self, table: "LanceTable"):
        self._table = table

    def list(self) -> Dict[str, int]:
        """tag name -> version."""
        return {r["tag"]: r["version"] for r in self.df().collect()}

    def df(self):
        return self._table._spark.table(self._table._metadata_name("tags"))

    def create(self, tag: str, version: Optional[int] = None):
        return self._table._call("create_tag", tag=tag, version=version)

    def update(self, tag: str, version: Optional[int] = None):
        return self._table._call("move_tag", tag=tag, version=version)

    move = update

    def delete(self, tag: str):
        return self._table._call("delete_tag", tag=tag)


class LanceTable:
    """``LanceTable.forPath(spark, "/data/t.lance")`` or ``LanceTable.forName(spark, "db.t")``."""

    def __init__(self, spark, table: str, sql_name: str, catalog: str = "lance"):
        self._spark = spark
        self._table = table          # the procedures' `table` argument
        self._sql_name = sql_name    # the table in SQL, without the catalog
        self._catalog = catalog

    @classmethod
    def forPath(cls, spark, path: str, catalog: str = "lance") -> "LanceTable":
        quoted = "`" + str(path).replace("`", "``") + "`"
        return cls(spark, quoted, quoted, catalog)

    @classmethod
    def forName(cls, spark, name: str, catalog: str = "lance") -> "LanceTable":
        prefix = catalog + "."
        name = name[len(prefix):] if name.startswith(prefix) and name.count(".") >= 2 else name
        return cls(spark, name, name, catalog)

    for_path = forPath
    for_name = forName

    def _metadata_name(self, kind: str) -> str:
        return f"{self._catalog}.{self._sql_name}.{kind}"

    def _call(self, procedure: str, **args):
        given = {k: v for k, v in args.items() if v is not None}
        text = ", ".join([f"table => {_literal(self._table)}"] + [f"{k} => {_literal(v)}" for k, v in given.items()])
        return self._spark.sql(f"CALL {self._catalog}.system.{procedure}({text})").collect()[0]

    def toDF(self, version: Optional[Union[int, str]] = None):
        """The table (latest, or a version number or tag name)."""
        name = f"{self._catalog}.{self._sql_name}"
        if version is None:
            return self._spark.table(name)
        return self._spark.sql(f"SELECT * FROM {name} VERSION AS OF {_literal(version)}")

    def open_blob(self, column: str, rowid: int) -> Optional[io.BytesIO]:
        """The value of blob column `column` in the row of stable row id (``_rowid``) `rowid`, as
        a seekable read-only file-like object; None for a null value. A 2.2 blob column
        (``struct<data, uri, ...>``) gives its ``data``; blob columns of 2.0/2.1 (``BINARY``) their
        value. The value is fetched with one SQL query (Spark Connect-safe), selecting only this
        row and column; a row id no live row has raises KeyError."""
        from pyspark.sql.types import BinaryType, StructType

        name = f"{self._catalog}.{self._sql_name}"
        fields = {f.name: f for f in self._spark.table(name).schema.fields}
        if column not in fields:
            raise KeyError(f"{name}: no column {column!r}")
        typ = fields[column].dataType
        quoted = "`" + column.replace("`", "``") + "`"
        if isinstance(typ, StructType) and "data" in typ.fieldNames():
            expr = f"{quoted}.data"
        elif isinstance(typ, BinaryType):
            expr = quoted
        else:
            raise TypeError(f"{name}: column {column!r} is {typ.simpleString()}, not a blob column")
        rows = self._spark.sql(f"SELECT {expr} AS v FROM {name} WHERE _rowid = {int(rowid)}").collect()
        if not rows:
            raise KeyError(f"{name}: no live row with _rowid {int(rowid)}")
        value = rows[0][0]
        return None if value is None else io.BytesIO(bytes(value))

    def history(self):
        """Every version: timestamp, operation, rows added/deleted, files, transaction properties."""
        return self._spark.table(self._metadata_name("history")).orderBy("version")

    def fragments(self):
        return self._spark.table(self._metadata_name("fragments"))

    @property
    def tags(self) -> LanceTags:
        return LanceTags(self)

    def restore(self, version: Optional[int] = None, *, timestamp: Optional[_dt.datetime] = None,
                tag: Optional[str] = None):
        """Commits a new version equal to an older one; returns the procedure's result row."""
        return self._call("restore", version=version, timestamp=timestamp, tag=tag)

    def compact(self, target_rows_per_fragment: Optional[int] = None, *,
                max_rows_per_group: Optional[int] = None, materialize_deletions: Optional[bool] = None,
                materialize_deletions_threshold: Optional[float] = None):
        """Merges small fragments and rewrites those with many deleted rows, as
        pylance's ``compact_files`` (same options and defaults: 1,048,576 rows a
        fragment, deletions materialized past 10%); one Spark job, one commit.
        Returns the procedure's result row (``new_version`` is None when there
        was nothing to compact)."""
        return self._call("compact", target_rows_per_fragment=target_rows_per_fragment,
                          max_rows_per_group=max_rows_per_group, materialize_deletions=materialize_deletions,
                          materialize_deletions_threshold=None if materialize_deletions_threshold is None
                          else float(materialize_deletions_threshold))

    def add_columns(self, df=None, *, expressions: Optional[Dict[str, str]] = None,
                    vector_columns: Optional[Dict[str, int]] = None):
        """Adds columns to the table without rewriting it, one commit.

        ``add_columns(df)``: ``df`` has ``_rowaddr`` (or ``_rowid``) and the new
        columns; each fragment gets a data file of the new columns (NULL for rows
        ``df`` does not give). Runs ``CALL <catalog>.system.add_columns`` on a
        temporary view (Spark Connect-safe).

        ``add_columns(expressions={"c2": "a * 2", ...})``: computed columns, each a
        Spark SQL expression over the table's columns, evaluated per fragment on
        the executors (in the order given).

        ``vector_columns={"emb": 384}``: new ``ARRAY<FLOAT>`` / ``ARRAY<DOUBLE>``
        columns stored as fixed-size lists of that dimension (vectors, which vector
        indices and ``lance_knn`` need); a row of another length is an error.
        Returns the procedure's result row."""
        if (df is None) == (expressions is None):
            raise ValueError("add_columns: give either a DataFrame or expressions={name: SQL expression}, not both")
        vectors = None
        if vector_columns:
            vectors = ",".join(f"{name}:{int(dim)}" for name, dim in vector_columns.items())
        if expressions is not None:
            if not expressions:
                raise ValueError("add_columns: expressions is empty")
            pairs = ", ".join(f"{_literal(str(k))}, {_literal(str(v))}" for k, v in expressions.items())
            text = f"table => {_literal(self._table)}, expressions => map({pairs})"
            if vectors is not None:
                text += f", vector_columns => {_literal(vectors)}"
            return self._spark.sql(f"CALL {self._catalog}.system.add_columns({text})").collect()[0]
        import uuid
        view = "lance_add_columns_" + uuid.uuid4().hex[:12]
        df.createOrReplaceTempView(view)
        try:
            return self._call("add_columns", source=view, vector_columns=vectors)
        finally:
            self._spark.catalog.dropTempView(view)

    def update_columns(self, df):
        """Replaces the values of existing columns without rewriting the table's
        other columns, one commit.

        ``df`` has ``_rowaddr`` (or ``_rowid``) and the columns to replace, with
        the table's types; rows ``df`` does not give keep their values. Each
        fragment gets one data file holding only those columns. Runs
        ``CALL <catalog>.system.update_columns`` on a temporary view (Spark
        Connect-safe). Returns the procedure's result row (``read_version``,
        ``new_version``, ``columns_updated``, ``files_added``, ``rows_updated``)."""
        import uuid
        view = "lance_update_columns_" + uuid.uuid4().hex[:12]
        df.createOrReplaceTempView(view)
        try:
            return self._call("update_columns", source=view)
        finally:
            self._spark.catalog.dropTempView(view)

    def create_index(self, column: str, index_type: str = "btree", name: Optional[str] = None,
                     **options: Any):
        """Builds an index over ``column`` (``CALL <catalog>.system.create_index``): ``btree``,
        ``bitmap``, ``zonemap``, ``bloomfilter``, ``label_list``, ``ivf_flat`` or ``ivf_pq``;
        ``name`` defaults to ``<column>_idx``; ``options`` are the index's options (e.g.
        ``num_partitions=16, metric="cosine"``), passed as strings. One commit pylance reads.
        Returns the procedure's result row (name, index_type, uuid, read_version, new_version,
        rows_indexed, fragments_covered, bytes_written)."""
        args = [f"table => {_literal(self._table)}", f"column => {_literal(column)}",
                f"index_type => {_literal(index_type)}"]
        if name is not None:
            args.append(f"name => {_literal(name)}")
        if options:
            pairs = ", ".join(f"{_literal(str(k))}, {_literal(_option_text(v))}" for k, v in options.items())
            args.append(f"options => map({pairs})")
        return self._spark.sql(f"CALL {self._catalog}.system.create_index({', '.join(args)})").collect()[0]

    def drop_index(self, name: str):
        """Removes the index ``name`` (one commit); returns the procedure's result row."""
        return self._call("drop_index", name=name)

    def optimize_indices(self, index: Optional[str] = None):
        """Brings indices that miss appended fragments up to date (all, or ``index``); returns
        the procedure's result row (rebuilt, up_to_date, read_version, new_version)."""
        return self._call("optimize_indices", index=index)

    def indices(self):
        """Every index of the latest version: name, index_type, columns, fragments (covered),
        unindexed_fragments, dataset_version, index_version, uuid, created_at."""
        return self._spark.table(self._metadata_name("indices"))

    def vacuum(self, retain_hours: Optional[float] = None, *, older_than: Optional[_dt.datetime] = None,
               dry_run: bool = False, delete_unverified: bool = False,
               error_if_tagged_old_versions: bool = True):
        """Removes versions older than the retention (default 14 days) and the files only they use."""
        return self._call("vacuum", retain_hours=None if retain_hours is None else float(retain_hours),
                          older_than=older_than, dry_run=dry_run, delete_unverified=delete_unverified,
                          error_if_tagged_old_versions=error_if_tagged_old_versions)
