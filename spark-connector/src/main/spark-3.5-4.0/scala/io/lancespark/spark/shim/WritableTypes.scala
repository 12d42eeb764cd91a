package io.lancespark.spark.shim

import org.apache.spark.sql.sources.CreatableRelationProvider

/** The types `df.write.format("lance")` accepts: Spark's own rules (3.5 refuses
  * intervals in df.write; 4.0 has supportsDataType's default). No TIME here. */
trait WritableTypes extends CreatableRelationProvider
