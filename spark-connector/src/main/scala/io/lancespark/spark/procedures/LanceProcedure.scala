package io.lancespark.spark.procedures

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.util.{ArrayData, DateTimeUtils, GenericArrayData}
import org.apache.spark.sql.connector.read.LocalScan
import org.apache.spark.sql.types.{DataType, StructType}
import org.apache.spark.unsafe.types.UTF8String

import io.lancespark.table.storage.DatasetStorage

/** A procedure's one result set: rows already computed on the driver. */
final case class ProcedureResult(schema: StructType, rowsOut: Array[InternalRow]) extends LocalScan {
  override def readSchema(): StructType = schema
  override def rows(): Array[InternalRow] = rowsOut
  override def description(): String = s"lance procedure result (${rowsOut.length} rows)"
}

/** Finds the dataset a procedure's `table` argument names (`db.t`, `lance.db.t`
  * or a path table `` `/path/to/ds.lance` ``). */
trait TableResolver {
  def storageFor(table: String): DatasetStorage
}

/** A procedure parameter, independent of the Spark line: Spark 4's
  * ProcedureParameter is made from it by the 4.x shim, Spark 3.5's CALL
  * extension binds arguments to it itself. `default` is SQL text (None: required). */
final case class ProcParam(name: String, dataType: DataType, default: Option[String], comment: String) {
  def required: Boolean = default.isEmpty
}

/** A Lance maintenance procedure: parameters known up front (no binding on
  * input types), called on the driver, one result row. Optional parameters
  * come after the required ones and default to SQL NULL unless said. Not a
  * Spark interface: the shims adapt it to each line's CALL. */
abstract class LanceProcedure(tables: TableResolver) {

  def name(): String
  def description(): String
  def params: Seq[ProcParam]
  def outputType: StructType
  /** The result row for the arguments (in the order of `params`). */
  protected def run(args: LanceProcedure.Args): InternalRow

  /** Runs the procedure: `input` holds one value per parameter, in the order of `params`. */
  final def invoke(input: InternalRow): InternalRow = run(new LanceProcedure.Args(name(), params, input))

  protected def storage(args: LanceProcedure.Args): DatasetStorage = tables.storageFor(args.string("table").get)
}

object LanceProcedure {
  def required(name: String, t: DataType, comment: String): ProcParam = ProcParam(name, t, None, comment)
  def optional(name: String, t: DataType, comment: String, default: String = "NULL"): ProcParam =
    ProcParam(name, t, Some(default), comment)

  /** Typed access to a call's arguments by parameter name. */
  final class Args(procedure: String, params: Seq[ProcParam], row: InternalRow) {
    private def index(name: String): Int = {
      val i = params.indexWhere(_.name == name)
      require(i >= 0, s"$procedure has no parameter $name")
      i
    }
    private def opt[T](name: String)(get: Int => T): Option[T] = {
      val i = index(name)
      if (row.isNullAt(i)) None else Some(get(i))
    }
    def string(name: String): Option[String] = opt(name)(row.getUTF8String(_).toString)
    def long(name: String): Option[Long] = opt(name)(row.getLong)
    def double(name: String): Option[Double] = opt(name)(row.getDouble)
    /** A MAP<STRING, STRING> argument's entries in their order (a NULL value: an error). */
    def stringMap(name: String): Option[Vector[(String, String)]] = opt(name) { i =>
      val m = row.getMap(i)
      val (ks, vs) = (m.keyArray(), m.valueArray())
      (0 until m.numElements()).toVector.map { j =>
        val k = ks.getUTF8String(j).toString
        if (vs.isNullAt(j)) throw new IllegalArgumentException(s"$procedure: $name has no value for key $k")
        k -> vs.getUTF8String(j).toString
      }
    }
    def boolean(name: String): Option[Boolean] = opt(name)(row.getBoolean)
    /** A TIMESTAMP argument (microseconds since the epoch) as an Instant. */
    def timestamp(name: String): Option[java.time.Instant] = opt(name)(i => DateTimeUtils.microsToInstant(row.getLong(i)))
    def need[T](name: String, v: Option[T]): T =
      v.getOrElse(throw new IllegalArgumentException(s"$procedure: the argument $name is required"))
  }

  def utf8(s: String): UTF8String = UTF8String.fromString(s)
  def utf8(s: Option[String]): UTF8String = s.map(UTF8String.fromString).orNull
  def longs(xs: Seq[Long]): ArrayData = new GenericArrayData(xs.map(Long.box).toArray[Any])
  def micros(i: java.time.Instant): Long = DateTimeUtils.instantToMicros(i)
}
