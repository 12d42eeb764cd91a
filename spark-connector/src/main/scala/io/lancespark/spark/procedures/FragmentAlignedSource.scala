package io.lancespark.spark.procedures

import org.apache.spark.rdd.{PartitionCoalescer, PartitionGroup, RDD}
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, Cast, ExprId, Expression}
import org.apache.spark.sql.execution.{ProjectExec, SparkPlan}
import org.apache.spark.sql.execution.datasources.v2.BatchScanExec
import org.apache.spark.sql.types.LongType

import io.lancespark.spark.MetadataColumns
import io.lancespark.spark.read.LanceScan
import io.lancespark.spark.write.AddColumnsTask
import io.lancespark.table.commit.FragmentColumns
import io.lancespark.table.evolution.ColumnAddition
import io.lancespark.table.storage.{DatasetStorage, FragmentWriter}

/** A source of new column values that needs no shuffle: one computed
  * row-by-row from a scan of the very version being extended (the usual
  * `SELECT _rowaddr, f(x) FROM t`). The scan's input partitions are read
  * in groups of consecutive partitions, joined where a fragment continues
  * from one into the next, so each fragment's rows arrive in one task, by
  * address, as [[io.lancespark.spark.write.AddColumnsTask]] needs them: they
  * are written where they are computed.
  *
  * Recognized on the physical plan: only projections, filters and their
  * code-generation wrappers above one Lance batch scan of `uri` at `version`,
  * and the source's `_rowaddr` that scan's `_rowaddr` (passed through, or
  * cast to BIGINT). Anything else (joins, unions, aggregates, a scan read on
  * the driver, another version) is shuffled as before. */
private[procedures] object FragmentAlignedSource {
  /** Partition groups as planned, read one after another in each task. */
  private final class ConsecutiveGroups(groups: Vector[Vector[Int]]) extends PartitionCoalescer with Serializable {
    override def coalesce(maxPartitions: Int, parent: RDD[_]): Array[PartitionGroup] =
      groups.map { g =>
        val group = new PartitionGroup(None)
        g.foreach(i => group.partitions += parent.partitions(i))
        group
      }.toArray
  }

  private val Narrow: Set[String] = Set("WholeStageCodegenExec", "InputAdapter", "FilterExec", "ColumnarToRowExec")

  def rows(source: DataFrame, uri: String, version: Long): Option[RDD[InternalRow]] = {
    val plan = source.queryExecution.executedPlan
    for {
      rowAddr <- plan.output.find(_.name == MetadataColumns.RowAddr)
      scan <- scanOf(plan, rowAddr.exprId)
      if sameDataset(scan.source._1, uri) && scan.source._2 == version
      groups <- fragmentGroups(scan.fragmentsByPartition)
    } yield {
      val rdd = source.queryExecution.toRdd
      if (groups.forall(_.size == 1)) rdd
      else rdd.coalesce(groups.size, shuffle = false, Some(new ConsecutiveGroups(groups)))
    }
  }

  /** Whether a source that is not a scan of the version may still give
    * each task's rows in address order, fragment after fragment (a file
    * written in that order, read in splits): its plan shuffles nothing, or
    * ends sorted by `_rowaddr`; and the new columns can be written in pieces
    * joined afterwards (file version 2.1 or later, no blob column). Tasks
    * then write where they read ([[AddColumnsTask.writePieces]]). */
  def mayBeInOrder(source: DataFrame, plan: ColumnAddition): Boolean = {
    val physical = source.queryExecution.executedPlan
    val joinable = FragmentWriter.joinable(plan.columns, plan.fileVersion)
    def shuffles(p: SparkPlan): Boolean = p match {
      case _: org.apache.spark.sql.execution.exchange.ShuffleExchangeLike => true
      case a: org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec => shuffles(a.executedPlan)
      case other => other.children.exists(shuffles)
    }
    val sortedByAddress = physical.outputOrdering.headOption.exists { o =>
      o.direction == org.apache.spark.sql.catalyst.expressions.Ascending && (o.child match {
        case a: Attribute => a.name == MetadataColumns.RowAddr
        case _ => false
      })
    }
    joinable && (sortedByAddress || !shuffles(physical))
  }

  /** The fragments whose pieces (from [[AddColumnsTask.writePieces]]) are
    * each one whole file, and the pieces of the others by fragment, to be
    * joined; None when two pieces of a fragment overlap (the source's rows
    * were not in order across tasks: it is shuffled instead). */
  def arrangePieces(pieces: Vector[AddColumnsTask.Piece], plan: ColumnAddition)
      : Option[(Vector[FragmentColumns], Vector[(Long, Vector[AddColumnsTask.Piece])])] = {
    val byFragment = pieces.groupBy(_.fragmentId).toVector.sortBy(_._1).map { case (f, ps) => f -> ps.sortBy(_.lo) }
    val overlapping = byFragment.exists { case (_, ps) => ps.zip(ps.drop(1)).exists { case (a, b) => a.hi > b.lo } }
    if (overlapping) None
    else {
      val (whole, partial) = byFragment.partition { case (f, ps) =>
        ps.size == 1 && ps.head.lo == 0 && ps.head.hi == plan.fragment(f).physicalRows
      }
      Some((whole.map { case (f, ps) => FragmentColumns(f, ps.head.file) }, partial))
    }
  }

  /** The same dataset, however its location was written (`/p`, `file:/p`, `file:///p/`). */
  private def sameDataset(a: String, b: String): Boolean = {
    def normalized(u: String): java.net.URI = new java.net.URI(DatasetStorage.normalize(u)).normalize()
    a == b || normalized(a) == normalized(b)
  }

  /** Consecutive input partitions joined where one fragment continues from
    * one into the next (a scan cuts large fragments): in each group every
    * fragment's pieces follow each other, and no fragment is in two groups;
    * None when that cannot be had. */
  private[procedures] def fragmentGroups(parts: Vector[Vector[Long]]): Option[Vector[Vector[Int]]] = {
    val groups = parts.indices.foldLeft(Vector.empty[Vector[Int]]) { (acc, i) =>
      val continues = acc.lastOption.exists(g => parts(g.last).lastOption.exists(parts(i).headOption.contains))
      if (continues) acc.init :+ (acc.last :+ i) else acc :+ Vector(i)
    }
    def runs(frags: Vector[Long]): Vector[Long] =
      frags.foldLeft(Vector.empty[Long])((acc, f) => if (acc.lastOption.contains(f)) acc else acc :+ f)
    val all = groups.flatMap(g => runs(g.flatMap(parts)))
    if (all.distinct.size == all.size) Some(groups) else None
  }

  /** The Lance scan whose `_rowaddr` column `id` is, through narrow operators. */
  private def scanOf(plan: SparkPlan, id: ExprId): Option[LanceScan] = plan match {
    case b: BatchScanExec =>
      b.scan match {
        case s: LanceScan if b.output.exists(a => a.exprId == id && a.name == MetadataColumns.RowAddr) => Some(s)
        case _ => None
      }
    case p: ProjectExec =>
      p.projectList.find(_.exprId == id).flatMap {
        case a: Attribute => Some(a.exprId)
        case Alias(e, _) => passedThrough(e)
        case _ => None
      }.flatMap(scanOf(p.child, _))
    case other if Narrow(other.getClass.getSimpleName) && other.children.size == 1 => scanOf(other.children.head, id)
    case _ => None
  }

  private def passedThrough(e: Expression): Option[ExprId] = e match {
    case a: Attribute => Some(a.exprId)
    case c: Cast if c.dataType == LongType && c.child.dataType == LongType => passedThrough(c.child)
    case _ => None
  }
}
