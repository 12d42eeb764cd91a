package io.lancespark.spark.read

import org.apache.spark.sql.connector.read.InputPartition

import io.lancespark.table.model.FragmentInfo

/** Physical row ranges [from, until) of one fragment; `first` marks the
  * fragment's first piece (for the fragments-scanned metric). `cuts`: rows
  * (starts of ranges) before which a task finishing its aggregation's groups
  * may hand out the groups it holds (see [[io.lancespark.table.scan.Clustering]]). */
final case class FragmentPiece(fragment: FragmentInfo, ranges: Vector[(Long, Long)], first: Boolean,
                               cuts: Vector[Long] = Vector.empty) {
  def rows: Long = ranges.map { case (s, e) => e - s }.sum
}

/** What one task reads: pieces of one or more fragments, one after another
  * (small fragments share a task, as Spark packs small files into one). */
final case class LanceInputPartition(pieces: Vector[FragmentPiece]) extends InputPartition {
  def rows: Long = pieces.map(_.rows).sum
}
