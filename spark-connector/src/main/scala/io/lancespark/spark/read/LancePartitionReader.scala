package io.lancespark.spark.read

import org.apache.spark.sql.connector.metric.CustomTaskMetric
import org.apache.spark.sql.connector.read.PartitionReader
import org.apache.spark.sql.vectorized.ColumnarBatch

import io.lancespark.table.scan.FragmentBatch
import io.lancespark.table.plan.FragmentPiece

/** Reads a partition: its fragments' pieces one after another, each with its
  * own [[LanceColumnarReader]] (opened when reached, closed when done). A
  * pushed LIMIT counts the rows of the whole partition. Task metrics: sums
  * over the pieces, the peak memory the largest piece's. `itemsOnly`: see
  * [[LanceColumnarReader]] (for a caller of [[get]] alone, not [[currentBatch]]). */
final class LancePartitionReader(factory: LanceReaderFactory, partition: LanceInputPartition,
                                 itemsOnly: Boolean = false)
    extends PartitionReader[ColumnarBatch] {

  private val pieces = partition.pieces.iterator
  private var reader: Option[LanceColumnarReader] = None
  private var returned = 0L
  /** The metrics of the pieces read and closed. */
  private var finished = Map.empty[String, Long]

  override def next(): Boolean = {
    var found = false
    while (!found && factory.limit.forall(returned < _) && (reader.isDefined || pieces.hasNext)) {
      val r = reader.getOrElse {
        val opened = new LanceColumnarReader(factory, pieces.next(), factory.limit.map(_ - returned), itemsOnly)
        reader = Some(opened)
        opened
      }
      if (r.next()) { found = true; returned += r.get().numRows() }
      else closeReader()
    }
    found
  }

  override def get(): ColumnarBatch = reader.map(_.get()).getOrElse(throw new NoSuchElementException)

  /** The rows of [[get]] as the scanner read them; valid until the next call to `next`. */
  def currentBatch: FragmentBatch = reader.map(_.currentBatch).getOrElse(throw new NoSuchElementException)

  /** The piece [[get]]'s batch was read from, and the physical rows it spans (see [[LanceColumnarReader.currentSpan]]). */
  def currentPiece: FragmentPiece = reader.map(_.piece).getOrElse(throw new NoSuchElementException)
  def currentSpan: (Long, Long) = reader.map(_.currentSpan).getOrElse(throw new NoSuchElementException)

  /** How many of the rows read for [[get]]'s batch lie before physical row `row` (see [[LanceColumnarReader.positionsBefore]]). */
  def positionsBefore(row: Long): Int = reader.map(_.positionsBefore(row)).getOrElse(throw new NoSuchElementException)

  private def closeReader(): Unit = reader.foreach { r =>
    reader = None
    finished = LancePartitionReader.merge(finished, r.currentMetricsValues())
    r.close()
  }

  override def currentMetricsValues(): Array[CustomTaskMetric] =
    LancePartitionReader.merge(finished, reader.fold(Array.empty[CustomTaskMetric])(_.currentMetricsValues()))
      .map { case (k, v) => ScanMetrics.value(k, v) }.toArray

  override def close(): Unit = closeReader()
}

object LancePartitionReader {
  /** `acc` with `more` added: the peak memory as a maximum, the others as sums. */
  private def merge(acc: Map[String, Long], more: Array[CustomTaskMetric]): Map[String, Long] =
    more.foldLeft(acc) { (m, t) =>
      val before = m.getOrElse(t.name(), 0L)
      m.updated(t.name(), if (t.name() == ScanMetrics.PeakTaskMemory) math.max(before, t.value()) else before + t.value())
    }
}
