package io.lancespark.spark.procedures

import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, Literal}
import org.apache.spark.sql.catalyst.util.GenericArrayData
import org.apache.spark.sql.functions.{coalesce, col, lit, when}
import org.apache.spark.sql.types._

import io.lancespark.spark.MetadataColumns
import io.lancespark.spark.procedures.LanceProcedure._
import io.lancespark.table.evolution.ColumnAddition
import io.lancespark.table.storage.{DatasetStorage, Snapshot}

/** `CALL lance.system.update_columns(table => 'db.t', source => 'view_or_table')`:
  * replaces the values of the existing columns the source names (all but its
  * row key, `_rowaddr` or `_rowid`) without rewriting the table's other
  * columns. Executors write, per fragment, one data file holding only those
  * columns: the source's value where it has the row, the old value (read from
  * the version the update started from) where it has not. The driver commits
  * one version: a `DataReplacement` when every new file takes the place of a
  * file that held exactly those columns, else an `Update` (`fields_modified`)
  * that tombstones the columns in the fragments' older files, as pylance's
  * `LanceFragment.update_columns`. */
final class UpdateColumnsProcedure(tables: TableResolver) extends LanceProcedure(tables) {
  override def name(): String = "update_columns"
  override def description(): String =
    "Replaces existing columns' values from a view or table keyed by _rowaddr (or _rowid); rows the source " +
      "lacks keep their values; other columns' files are not touched"

  override val params: Seq[ProcParam] = Seq(
    required("table", StringType, "db.t, lance.db.t or `/path/to/dataset.lance`"),
    required("source", StringType, "a view or table with _rowaddr (or _rowid) and the columns to replace"))

  override val outputType: StructType = new StructType()
    .add("read_version", LongType).add("new_version", LongType)
    .add("columns_updated", ArrayType(StringType, containsNull = false))
    .add("files_added", LongType).add("rows_updated", LongType)

  override protected def run(args: Args): InternalRow = {
    val spark = SparkSession.active
    val source = args.string("source").getOrElse(throw new IllegalArgumentException(
      "update_columns: give source => '<view with _rowaddr and the columns to replace>'"))
    val r = UpdateColumnsJob.run(spark, storage(args), spark.table(source), s"source '$source'")
    InternalRow(r.readVersion, r.newVersion, new GenericArrayData(r.columns.map(utf8).toArray[Any]), r.filesAdded,
      r.rowsWithValues)
  }
}

/** An update of columns: the add_columns job (AddColumnsJob.runPlanned) over
  * the table's old values of the columns, full-outer-joined with the source by
  * `_rowaddr`. */
object UpdateColumnsJob {

  private val Present = "__lance_update_present"
  private val OldAddr = "__lance_update_old_addr"
  private val SrcAddr = "__lance_update_src_addr"

  def run(spark: SparkSession, storage: DatasetStorage, source: DataFrame, what: String): AddColumnsResult =
    AddColumnsJob.runPlanned(spark, storage, "update_columns", snapshot => plan(spark, snapshot, source, what))

  private def plan(spark: SparkSession, snapshot: Snapshot, source: DataFrame,
      what: String): AddColumnsJob.Planned = {
    val uri = snapshot.storage.uri
    val keyed = AddColumnsJob.withRowAddress(spark, snapshot, source, what)
    val cols = keyed.schema.fields.toVector.filterNot(f => MetadataColumns.names.contains(f.name))
    val table = spark.read.format("lance").option("version", snapshot.version.toString).load(uri)
    val tableCols = table.schema.fields.filterNot(f => MetadataColumns.names.contains(f.name))
    // names first (a clear message before any type check), then the core's plan
    cols.find(c => !tableCols.exists(_.name == c.name)).foreach { c =>
      val caseOnly = tableCols.find(_.name.equalsIgnoreCase(c.name)).map(t => s" (the table has '${t.name}')").getOrElse("")
      throw new IllegalArgumentException(
        s"$uri: the $what's column '${c.name}' is not a column of the table$caseOnly; update_columns replaces " +
          s"existing columns (${tableCols.map(_.name).mkString(", ")}); to add a new column use add_columns")
    }
    val plan = ColumnAddition.planUpdate(snapshot, cols.map(_.name))
    val types = cols.map { c =>
      val t = tableCols.find(_.name == c.name).get.dataType
      if (!sameType(c.dataType, t))
        throw new IllegalArgumentException(
          s"$uri: the $what's column '${c.name}' is ${c.dataType.simpleString}; the table's column is " +
            s"${t.simpleString}; cast it in the source (CAST(${c.name} AS ${t.sql}))")
      StructField(c.name, t, nullable = true)
    }
    val sparkSchema = StructType(types)
    // (every column renamed apart: the source may be a query over this same table)
    val src = keyed.select((col(MetadataColumns.RowAddr).as(SrcAddr) +: lit(true).as(Present) +:
      cols.indices.map(i => col(cols(i).name).as(s"__lance_new_$i"))): _*)
    val old = table.select((col(MetadataColumns.RowAddr).as(OldAddr) +:
      cols.indices.map(i => col(cols(i).name).as(s"__lance_old_$i"))): _*)
    val merged = old.join(src, col(OldAddr) === col(SrcAddr), "full_outer")
      .select((coalesce(col(SrcAddr), col(OldAddr)).as(MetadataColumns.RowAddr) +:
        cols.indices.map(i => when(col(Present), col(s"__lance_new_$i")).otherwise(col(s"__lance_old_$i")).as(cols(i).name))
        :+ col(Present)): _*)
    // deleted rows' slots: NULL, or a default value where the column is non-nullable
    val arrow = plan.columns.toArrow.getFields
    val deleted = new GenericInternalRow((MetadataColumns.RowAddr +: types.map(_.name)).length)
    types.zipWithIndex.foreach { case (f, i) =>
      if (!arrow.get(i).isNullable) deleted.update(i + 1, Literal.default(f.dataType).value)
    }
    AddColumnsJob.Planned(merged, plan, sparkSchema, counted = Some(Present), deletedRow = Some(deleted))
  }

  /** Equal types, nullability aside (at every level). */
  private def sameType(a: DataType, b: DataType): Boolean = (a, b) match {
    case (x: StructType, y: StructType) =>
      x.length == y.length && x.fields.zip(y.fields).forall { case (f, g) => f.name == g.name && sameType(f.dataType, g.dataType) }
    case (x: ArrayType, y: ArrayType) => sameType(x.elementType, y.elementType)
    case (x: MapType, y: MapType) => sameType(x.keyType, y.keyType) && sameType(x.valueType, y.valueType)
    case _ => a == b
  }
}
