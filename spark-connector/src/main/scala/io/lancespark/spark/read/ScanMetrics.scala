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
  val PeakTaskMemory = "peakTaskMemory"
  val ReadRequests = "readRequests"
  val StorageWait = "storageWaitMs"
  val FragmentsPrunedByIndex = "fragmentsPrunedByIndex"
  val FragmentsDecidedByIndex = "fragmentsDecidedByIndex"
  val RowsSelectedByIndex = "rowsSelectedByIndex"

  def all: Array[CustomMetric] = Array(
    new FragmentsPrunedMetric, new FragmentsScannedMetric, new PagesPrunedMetric,
    new PagesReadMetric, new BytesReadMetric, new RowsSkippedMetric, new PeakTaskMemoryMetric,
    new ReadRequestsMetric, new StorageWaitMetric, new FragmentsPrunedByIndexMetric,
    new FragmentsDecidedByIndexMetric, new RowsSelectedByIndexMetric)

  def value(metricName: String, v: Long): CustomTaskMetric = new CustomTaskMetric {
    override def name(): String = metricName
    override def value(): Long = v
  }
}

/** Spark re-creates metric classes by name to aggregate task values (Spark UI,
  * REST API): each needs a public zero-argument constructor. */
abstract class LanceSumMetric(metricName: String, desc: String) extends CustomSumMetric {
  override def name(): String = metricName
  override def description(): String = desc
}
final class FragmentsPrunedMetric extends LanceSumMetric(ScanMetrics.FragmentsPruned, "fragments pruned by statistics")
final class FragmentsScannedMetric extends LanceSumMetric(ScanMetrics.FragmentsScanned, "fragments scanned")
final class PagesPrunedMetric extends LanceSumMetric(ScanMetrics.PagesPruned, "pages pruned by statistics")
final class PagesReadMetric extends LanceSumMetric(ScanMetrics.PagesRead, "pages read")
final class BytesReadMetric extends LanceSumMetric(ScanMetrics.BytesRead, "bytes read from Lance files")
final class ReadRequestsMetric extends LanceSumMetric(ScanMetrics.ReadRequests, "read requests to Lance files")
/** Milliseconds the scan's tasks waited for storage: reads that had not completed
  * when the decode needed their bytes, and reads made on the spot. */
final class StorageWaitMetric extends LanceSumMetric(ScanMetrics.StorageWait, "time waiting for storage (ms)")
final class FragmentsPrunedByIndexMetric
    extends LanceSumMetric(ScanMetrics.FragmentsPrunedByIndex, "fragments pruned by scalar indices")
final class FragmentsDecidedByIndexMetric
    extends LanceSumMetric(ScanMetrics.FragmentsDecidedByIndex, "fragments whose rows scalar indices selected")
final class RowsSelectedByIndexMetric
    extends LanceSumMetric(ScanMetrics.RowsSelectedByIndex, "rows selected by scalar indices")
final class RowsSkippedMetric extends LanceSumMetric(ScanMetrics.RowsSkippedByStats, "rows skipped by statistics")

/** The most memory one task's reader held at once: the peak of its Arrow
  * allocator (the current batch's vectors) plus the heap buffers of its
  * storage reads (one batch's; with read-ahead, the next batch's too). Shown
  * as the maximum over tasks. */
final class PeakTaskMemoryMetric extends CustomMetric {
  override def name(): String = ScanMetrics.PeakTaskMemory
  override def description(): String = "peak reader memory per task"
  override def aggregateTaskMetrics(taskMetrics: Array[Long]): String =
    if (taskMetrics.isEmpty) "0"
    else {
      val max = taskMetrics.max
      s"max ${PeakTaskMemoryMetric.mib(max)} ($max bytes) over ${taskMetrics.length} tasks"
    }
}

object PeakTaskMemoryMetric {
  def mib(bytes: Long): String = f"${bytes / 1048576.0}%.1f MiB"
}
