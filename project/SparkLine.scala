/** A Spark line the connector is built for: its id ("4.2"), the Spark version
  * compiled against, the Scala versions (the last is the default), the shim source
  * directories (spark-connector/src/main/<shim>/scala) added to the shared Spark
  * layer, the Java release its classes target, and whether its bundle carries its
  * own (relocated) Arrow because the line's Spark ships an older one or lacks
  * arrow-compression. */
final case class SparkLine(id: String, spark: String, scalas: Seq[String], shims: Seq[String],
    release: String, bundleArrow: Boolean)
