package io.lancespark.spark.read

import org.apache.spark.sql.connector.read.InputPartition

import io.lancespark.table.FragmentInfo

/** Physical rows [from, until) of one fragment. */
final case class LanceInputPartition(fragment: FragmentInfo, from: Long, until: Long) extends InputPartition
