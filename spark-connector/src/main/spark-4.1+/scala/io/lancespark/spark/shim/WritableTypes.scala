package io.lancespark.spark.shim

import org.apache.spark.sql.sources.CreatableRelationProvider
import org.apache.spark.sql.types.{DataType, TimeType}

/** The types `df.write.format("lance")` accepts: Spark's default, which since
  * 4.1 refuses TIME unless the source says otherwise, plus TIME (stored as
  * Lance time64). Spark lines without TIME have their own version of this shim. */
trait WritableTypes extends CreatableRelationProvider {
  override def supportsDataType(dt: DataType): Boolean = dt match {
    case _: TimeType => true
    case other => super.supportsDataType(other)
  }
}
