package io.lancespark.spark.read

import org.apache.spark.sql.connector.read.InputPartition

import io.lancespark.table.model.FragmentInfo

/** Physical row ranges [from, until) of one fragment; `first` marks the
  * fragment's first piece (for the fragments-scanned metric). */
final case class FragmentPiece(fragment: FragmentInfo, ranges: Vector[(Long, Long)], first: Boolean) {
  def rows: Long = ranges.map { case (s, e) => e - s }.sum
}

/** What one task reads: pieces of one or more fragments, one after another
  * (small fragments share a task, as Spark packs small files into one). */
final case class LanceInputPartition(pieces: Vector[FragmentPiece]) extends InputPartition {
  def rows: Long = pieces.map(_.rows).sum
}
