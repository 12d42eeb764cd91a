package io.lancespark.spark.shim

import org.apache.spark.sql.types.{DataType, TimeType}

/** Spark's TIME type, which Spark lines before 4.1 do not have (their version
  * of this shim has no TIME: `supported` is false, `precision` always None). */
object TimeTypes {
  /** Whether this Spark line has a TIME type. */
  val supported: Boolean = true

  /** The fractional-second digits of a TIME type; None for any other type. */
  def precision(dt: DataType): Option[Int] = dt match {
    case t: TimeType => Some(t.precision)
    case _ => None
  }

  def isTime(dt: DataType): Boolean = dt.isInstanceOf[TimeType]

  /** TIME(p). */
  def timeType(precision: Int): DataType = TimeType(precision)
}
