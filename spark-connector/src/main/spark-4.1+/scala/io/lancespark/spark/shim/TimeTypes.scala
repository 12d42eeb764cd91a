package io.lancespark.spark.shim

import org.apache.spark.sql.types.{DataType, TimeType}

/** Spark's TIME type, which Spark lines before 4.1 do not have (their version
  * of this shim has no TIME: `precision` is always None). */
object TimeTypes {
  /** The fractional-second digits of a TIME type; None for any other type. */
  def precision(dt: DataType): Option[Int] = dt match {
    case t: TimeType => Some(t.precision)
    case _ => None
  }
}
