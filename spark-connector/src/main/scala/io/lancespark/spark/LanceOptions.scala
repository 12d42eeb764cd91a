package io.lancespark.spark

import java.util.Locale

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.util.CaseInsensitiveStringMap

/** Options of `spark.read.format("lance")` (case-insensitive). */
final case class LanceOptions(
    path: String,
    version: Option[Long],
    batchSize: Int,
    splitRows: Option[Long],
    pushdown: Boolean = true,
    readAhead: Option[Boolean] = None) {
  require(batchSize > 0, s"batchSize must be positive, got $batchSize")
}

object LanceOptions {
  val Path = "path"
  /** Dataset version to read (time travel); default: the latest. */
  val Version = "version"
  /** Rows per columnar batch handed to Spark. */
  val BatchSize = "batchSize"
  /** Largest number of rows one input partition reads; default: sized so every core gets work. */
  val SplitRows = "splitRows"

  /** "false" turns predicate pushdown off (Spark then filters every row read). */
  val Pushdown = "pushdown"

  /** "true": storage reads run on the read pool, the next batch's while the
    * current one decodes; "false": each task reads a batch, then decodes it;
    * "auto" (default): true except for local files, whose reads are CPU work
    * that competes with the decode for the same cores. */
  val ReadAhead = "readAhead"

  val DefaultBatchSize: Int = 8192

  def apply(options: CaseInsensitiveStringMap): LanceOptions = apply(options.asScala.toMap)

  def apply(options: Map[String, String]): LanceOptions = {
    val lower = options.map { case (k, v) => k.toLowerCase(Locale.ROOT) -> v }
    def num(key: String): Option[Long] = lower.get(key.toLowerCase(Locale.ROOT)).map { v =>
      try v.trim.toLong
      catch { case _: NumberFormatException => throw new IllegalArgumentException(s"option '$key' must be an integer, got '$v'") }
    }
    val path = lower.getOrElse(Path, throw new IllegalArgumentException(
      "a Lance dataset path is required: spark.read.format(\"lance\").load(\"/path/to/dataset\")"))
    def flag(key: String): Boolean = lower.get(key.toLowerCase(Locale.ROOT)).forall(!_.trim.equalsIgnoreCase("false"))
    val readAhead = lower.get(ReadAhead.toLowerCase(Locale.ROOT)).map(_.trim.toLowerCase(Locale.ROOT)) match {
      case None | Some("auto") => None
      case Some("true")        => Some(true)
      case Some("false")       => Some(false)
      case Some(other) =>
        throw new IllegalArgumentException(s"option '$ReadAhead' must be true, false or auto, got '$other'")
    }
    LanceOptions(path, num(Version), num(BatchSize).map(_.toInt).getOrElse(DefaultBatchSize), num(SplitRows),
      flag(Pushdown), readAhead)
  }
}
