package io.lancespark.spark.read

import org.apache.spark.sql.connector.read.InputPartition

import io.lancespark.schema.LanceField
import io.lancespark.table.filter.{Filter, Lit}
import io.lancespark.table.plan.FragmentPiece


/** What one task reads: pieces of one or more fragments, one after another
  * (small fragments share a task, as Spark packs small files into one), as
  * [[io.lancespark.table.plan.PartitionPlanner]] planned them; `runtime`:
  * predicates Spark gave the scan while the query ran (see
  * [[LanceScan.filter]]), which the task evaluates with the scan's own filter. */
final case class LanceInputPartition(pieces: Vector[FragmentPiece], runtime: Option[RuntimeFilter] = None)
    extends InputPartition {
  def rows: Long = pieces.map(_.rows).sum
}

/** Predicates known only while a query runs (Spark's dynamic pruning: the
  * join keys a broadcast side holds), ANDed, and the fields of the columns
  * they read. Each task carries them: an IN list of integer keys travels as
  * one array of longs (a join side's keys may number hundreds of thousands,
  * which as objects would take longer to serialize for each task than to read). */
final class RuntimeFilter private (clauses: Vector[RuntimeFilter.Clause], val fields: Seq[LanceField])
    extends Serializable {
  @transient lazy val filter: Filter = Filter.and(clauses.map(_.filter))
}

object RuntimeFilter {
  def apply(predicates: Seq[Filter], fields: Seq[LanceField]): RuntimeFilter =
    new RuntimeFilter(predicates.toVector.map(clause), fields)

  private sealed trait Clause extends Serializable { def filter: Filter }

  /** `column IN (keys)`: sorted distinct keys. */
  private final case class Keys(column: Filter.Column, keys: Array[Long]) extends Clause {
    def filter: Filter = Filter.In(column, keys.iterator.map(k => Lit.LongLit(k): Lit).toVector)
  }

  private final case class Other(filter: Filter) extends Clause

  private def clause(f: Filter): Clause = f match {
    case in @ Filter.In(c, _) if in.keyTest.isDefined => Keys(c, in.keyTest.get.keys)
    case other => Other(other)
  }
}
