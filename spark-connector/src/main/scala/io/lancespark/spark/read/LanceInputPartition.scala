package io.lancespark.spark.read

import org.apache.spark.sql.connector.read.InputPartition
import io.lancespark.table.plan.FragmentPiece


/** What one task reads: pieces of one or more fragments, one after another
  * (small fragments share a task, as Spark packs small files into one), as
  * [[io.lancespark.table.plan.PartitionPlanner]] planned them. */
final case class LanceInputPartition(pieces: Vector[FragmentPiece]) extends InputPartition {
  def rows: Long = pieces.map(_.rows).sum
}
