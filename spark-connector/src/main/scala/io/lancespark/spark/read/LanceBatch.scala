package io.lancespark.spark.read

import org.apache.spark.sql.connector.read.{Batch, InputPartition, PartitionReaderFactory, Scan}
import io.lancespark.table.plan.FragmentPiece


/** The batch of a Lance scan (`scan`): its input partitions, the pieces
  * [[io.lancespark.table.plan.PartitionPlanner]] planned (planned again on
  * each call), and its reader factory; `runtime`: predicates Spark gave the
  * scan while the query ran, which each partition carries to its reader. Equal when the scans are equal: Spark
  * compares its scan nodes by their batches (before reusing an exchange, for
  * example), so two scans of the same rows have equal batches. */
final class LanceBatch(private val scan: Scan, partitions: => Vector[Vector[FragmentPiece]],
                       factory: => PartitionReaderFactory, runtime: Option[RuntimeFilter] = None) extends Batch {

  override def planInputPartitions(): Array[InputPartition] = partitions.map(LanceInputPartition(_, runtime)).toArray

  override def createReaderFactory(): PartitionReaderFactory = factory

  override def equals(other: Any): Boolean = other match {
    case that: LanceBatch => that.scan == scan
    case _ => false
  }

  override def hashCode(): Int = scan.hashCode()
}
