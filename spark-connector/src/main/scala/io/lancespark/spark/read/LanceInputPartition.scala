package io.lancespark.spark.read

import org.apache.spark.sql.connector.read.InputPartition

import io.lancespark.table.model.FragmentInfo


/** Physical row ranges [from, until) of one fragment; `first` marks the
  * fragment's first partition (for the fragments-scanned metric). */
final case class LanceInputPartition(fragment: FragmentInfo, ranges: Vector[(Long, Long)], first: Boolean)
    extends InputPartition {
  def rows: Long = ranges.map { case (s, e) => e - s }.sum
}
