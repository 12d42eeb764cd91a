package io.lancespark.spark.shim

import org.apache.spark.sql.types.DataType

/** Spark 3.5 and 4.0 have no TIME type (4.1 added it): a Lance TIME column is an
  * error naming it (TypeMapping checks `supported` first). */
object TimeTypes {
  val supported: Boolean = false

  def precision(dt: DataType): Option[Int] = None

  def isTime(dt: DataType): Boolean = false

  def timeType(precision: Int): DataType =
    throw new UnsupportedOperationException("Spark <4.1 has no TIME type")
}
