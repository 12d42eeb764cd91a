package io.lancespark.spark.read

import org.apache.spark.sql.connector.metric.{CustomMetric, CustomSumMetric, CustomTaskMetric}

/** SQL metrics of a Lance scan, shown on the scan node in the Spark UI and
  * its REST API. */
object ScanMetrics {
  val FragmentsPruned = "fragmentsPruned"
  val FragmentsScanned = "fragmentsScanned"
  val PagesPruned = "pagesPruned"
  val PagesRead = "pagesRead"
  val BytesRead = "lanceBytesRead"
  val RowsSkippedByStats = "rowsSkippedByStats"

  private final class Sum(metricName: String, desc: String) extends CustomSumMetric {
    override def name(): String = metricName
    override def description(): String = desc
  }

  def all: Array[CustomMetric] = Array(
    new Sum(FragmentsPruned, "fragments pruned by statistics"),
    new Sum(FragmentsScanned, "fragments scanned"),
    new Sum(PagesPruned, "pages pruned by statistics"),
    new Sum(PagesRead, "pages read"),
    new Sum(BytesRead, "bytes read from Lance files"),
    new Sum(RowsSkippedByStats, "rows skipped by statistics"))

  def value(metricName: String, v: Long): CustomTaskMetric = new CustomTaskMetric {
    override def name(): String = metricName
    override def value(): Long = v
  }
}
