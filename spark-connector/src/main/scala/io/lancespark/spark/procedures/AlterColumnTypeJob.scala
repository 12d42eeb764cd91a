package io.lancespark.spark.procedures

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, Literal}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types._

import io.lancespark.spark.MetadataColumns
import io.lancespark.spark.write.SparkToArrow
import io.lancespark.table.evolution.ColumnAddition
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.{DatasetStorage, Snapshot}

/** `ALTER TABLE t ALTER COLUMN c TYPE <wider type>`. The Lance format has no
  * metadata-only type change: a field's type is fixed by its id, and a data
  * file stores the values in that type. As pylance's `alter_columns` with a
  * `data_type`, the column is rewritten alone: each fragment gets one new data
  * file holding only the cast column under a new field id, the schema's field
  * takes the new id and type in the same place, the old files stay as they
  * are (their old field id is no longer in the schema; time travel reads it).
  * The add_columns job (AddColumnsJob.runPlanned) writes and commits it (a
  * Merge). Only lossless widenings are accepted ([[ColumnTypeWidening]]). */
object AlterColumnTypeJob {

  def run(spark: SparkSession, storage: DatasetStorage, table: String,
      changes: Seq[(String, DataType)]): AddColumnsResult =
    AddColumnsJob.runPlanned(spark, storage, "alter_column_type", snapshot => plan(spark, snapshot, table, changes))

  private def plan(spark: SparkSession, snapshot: Snapshot, table: String,
      changes: Seq[(String, DataType)]): AddColumnsJob.Planned = {
    val uri = snapshot.storage.uri
    val df = spark.read.format("lance").option("version", snapshot.version.toString).load(uri)
    val current = df.schema.fields.filterNot(f => MetadataColumns.names.contains(f.name))
    changes.map(_._1).diff(changes.map(_._1).distinct).headOption.foreach { n =>
      throw new IllegalArgumentException(s"$table: the type of column '$n' is changed twice in one statement")
    }
    val fields = changes.map { case (name, to) =>
      val from = current.find(_.name == name).getOrElse(throw new IllegalArgumentException(
        s"$table: cannot change the type of column '$name': no such top-level column (columns: " +
          s"${current.map(_.name).mkString(", ")})"))
      ColumnTypeWidening.check(table, name, from.dataType, to)
      StructField(name, to, nullable = true, from.metadata)
    }.toVector
    val sparkSchema = StructType(fields)
    val version = DataFileVersion.ofDataset(snapshot.fileVersion).getOrElse(DataFileVersion.Default)
    val plan = ColumnAddition.planTypeChange(snapshot, SparkToArrow.schema(sparkSchema, Map.empty, version))
    val keyed = df.select((col(MetadataColumns.RowAddr) +: fields.map(f => col(f.name).cast(f.dataType).as(f.name))): _*)
    // deleted rows' slots: NULL, or a default value where the column is non-nullable
    val arrow = plan.columns.toArrow.getFields
    val deleted = new GenericInternalRow(fields.length + 1)
    fields.zipWithIndex.foreach { case (f, i) =>
      if (!arrow.get(i).isNullable) deleted.update(i + 1, Literal.default(f.dataType).value)
    }
    AddColumnsJob.Planned(keyed, plan, sparkSchema, deletedRow = Some(deleted))
  }
}

/** The type changes ALTER COLUMN TYPE accepts: lossless widenings (Delta Lake's
  * type-widening list): a smaller integer to a bigger one, FLOAT to DOUBLE,
  * BYTE/SHORT/INT to DOUBLE, an integer to a DECIMAL with room for its digits,
  * a DECIMAL to one with at least as many integer and fraction digits, and DATE
  * to TIMESTAMP_NTZ. Anything else is refused naming the column, both types and
  * why. */
object ColumnTypeWidening {

  /** Digits of the largest value of each integer type. */
  private def integerDigits(t: DataType): Option[Int] = t match {
    case ByteType => Some(3)
    case ShortType => Some(5)
    case IntegerType => Some(10)
    case LongType => Some(20)
    case _ => None
  }

  private val intRank: Map[DataType, Int] = Map(ByteType -> 1, ShortType -> 2, IntegerType -> 3, LongType -> 4)

  def isWidening(from: DataType, to: DataType): Boolean = (from, to) match {
    case (f, t) if intRank.contains(f) && intRank.contains(t) => intRank(f) < intRank(t)
    case (FloatType, DoubleType) => true
    case (ByteType | ShortType | IntegerType, DoubleType) => true
    case (f, d: DecimalType) if integerDigits(f).isDefined => d.precision - d.scale >= integerDigits(f).get
    case (a: DecimalType, b: DecimalType) =>
      b.scale >= a.scale && b.precision - b.scale >= a.precision - a.scale && a != b
    case (DateType, TimestampNTZType) => true
    case _ => false
  }

  def check(table: String, column: String, from: DataType, to: DataType): Unit =
    if (!isWidening(from, to)) {
      val why = (from, to) match {
        case (a, b) if a == b => "it already has that type"
        case (_: StringType, _) => "strings are not converted to other types in place (a value may not parse)"
        case (a, b) if isWidening(b, a) => s"${b.simpleString} is narrower than ${a.simpleString}: values may not fit"
        case (LongType, FloatType | DoubleType) | (IntegerType, FloatType) =>
          s"${to.simpleString} cannot hold every ${from.simpleString} exactly"
        case (_: DecimalType, _: DecimalType) =>
          s"${to.simpleString} has fewer integer or fraction digits than ${from.simpleString}"
        case _ => "the conversion is not a lossless widening"
      }
      throw new UnsupportedOperationException(
        s"$table: cannot change column '$column' from ${from.simpleString} to ${to.simpleString}: $why. Lance " +
          "tables widen a column type only losslessly (BYTE/SHORT/INT/BIGINT to a bigger integer, FLOAT to " +
          "DOUBLE, BYTE/SHORT/INT to DOUBLE, integers to a DECIMAL with room, DECIMAL(p,s) to DECIMAL(p',s') with " +
          "s' >= s and p'-s' >= p-s, DATE to TIMESTAMP_NTZ); for other changes add a new column " +
          "(add_columns with expressions => map('c2', 'CAST(c AS ...)')) and drop the old one")
    }
}
