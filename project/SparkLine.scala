/** A Spark line the connector is built for: its id ("4.2"), the Spark version
  * compiled against, the Scala versions, and the shim source directories
  * (spark-connector/src/main/<shim>/scala) added to the shared Spark layer. */
final case class SparkLine(id: String, spark: String, scalas: Seq[String], shims: Seq[String])
