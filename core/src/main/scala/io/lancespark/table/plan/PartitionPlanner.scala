package io.lancespark.table.plan

import io.lancespark.format.input.RowRangeSums
import io.lancespark.table.model.FragmentInfo

/** Physical row ranges [from, until) of one fragment; `first` marks the
  * fragment's first piece (for the fragments-scanned metric). `cuts`: rows
  * (starts of ranges) before which a task finishing its aggregation's groups
  * may hand out the groups it holds (see [[Clustering]]). */
final case class FragmentPiece(fragment: FragmentInfo, ranges: Vector[(Long, Long)], first: Boolean,
                               cuts: Vector[Long] = Vector.empty) {
  def rows: Long = RowRangeSums.rows(ranges)

  /** Sent to tasks as primitive arrays: a piece of rows an index selected
    * holds up to one range per row, and Java's serialization of that many
    * tuples cost the driver more than the tasks took to read them. */
  private def writeReplace(): AnyRef = {
    val packed = new Array[Long](ranges.size * 2)
    var i = 0
    ranges.foreach { case (s, e) => packed(i) = s; packed(i + 1) = e; i += 2 }
    FragmentPiece.Packed(fragment, packed, first, cuts.toArray)
  }
}

object FragmentPiece {
  private final case class Packed(fragment: FragmentInfo, ranges: Array[Long], first: Boolean, cuts: Array[Long]) {
    private def readResolve(): AnyRef =
      FragmentPiece(fragment, Vector.tabulate(ranges.length / 2)(i => (ranges(2 * i), ranges(2 * i + 1))), first, cuts.toVector)
  }
}

/** How a file scan sizes its partitions (Spark's `FilePartition` rule):
  * at most `maxPartitionBytes` a partition, at least `openCostBytes`, each
  * file costing its bytes plus `openCostBytes`, spread over `cores`. */
final case class SplitTarget(maxPartitionBytes: Long, openCostBytes: Long, cores: Int)

/** The input partitions of a scan: every planned row range, fragment after
  * fragment, cut into partitions of about equal rows. A partition is a
  * vector of [[FragmentPiece]]s read one after another: it may end in one
  * fragment and go on in the next (short tasks of small fragments cost more
  * than they read). */
object PartitionPlanner {

  /** The planned rows of `plans` in partitions of at most `split` rows. With
    * `limit` (only where every planned row but the deleted ones is returned:
    * no filter) the partitions after the first that covers `limit` rows are
    * left out. */
  def partitions(plans: Vector[FragmentPlan], split: Long, limit: Option[Long] = None): Vector[Vector[FragmentPiece]] = {
    val parts = pack(plans.map(p => p -> p.mayMatch.ranges), split).map { part =>
      part.map { case (plan, ranges) =>
        FragmentPiece(plan.fragment, ranges, first = ranges.head._1 == plan.mayMatch.ranges.head._1)
      }
    }
    limit match {
      case Some(n) =>
        // every planned row (minus deletions) is returned: stop once n are covered
        val covered = parts.scanLeft(0L)((acc, p) =>
          acc + p.map(c => c.rows - c.fragment.deletedRows.min(c.rows)).sum)
        parts.take(math.max(1, covered.indexWhere(_ >= n) match { case -1 => parts.size; case i => i }))
      case None => parts
    }
  }

  /** Partitions of about the same rows as [[partitions]]'s, but cut only at
    * `clustering`'s cuts (each value of its column in one partition), each
    * piece listing the cuts inside it (where a task may hand out the groups
    * it holds). */
  def clusteredPartitions(plans: Vector[FragmentPlan], split: Long,
                          clustering: Clustering): Vector[Vector[FragmentPiece]] =
    packAtCuts(plans.map(p => p -> p.mayMatch.ranges), split,
      (p: FragmentPlan, from: Long, until: Long) => clustering.within(p.fragment.id, from, until)).map { part =>
      part.map { case (plan, ranges, cuts) =>
        FragmentPiece(plan.fragment, ranges, first = ranges.head._1 == plan.mayMatch.ranges.head._1, cuts)
      }
    }

  /** Groups row ranges into partitions of at most `split` rows (long ranges are cut). */
  def chunks(ranges: Vector[(Long, Long)], split: Long): Vector[Vector[(Long, Long)]] =
    pack(Vector(() -> ranges), split).map(_.flatMap(_._2))

  /** The row ranges of several sources (fragments), in order, cut into
    * partitions of at most `split` rows: each partition its sources' ranges,
    * a source's ranges in one piece per partition. */
  def pack[K](sources: Vector[(K, Vector[(Long, Long)])], split: Long): Vector[Vector[(K, Vector[(Long, Long)])]] = {
    require(split > 0, s"rows per partition must be positive, got $split")
    // builders, not appends to vectors: a piece of rows an index selected holds a range per row
    val out = Vector.newBuilder[Vector[(K, Vector[(Long, Long)])]]
    var part = Vector.newBuilder[(K, Vector[(Long, Long)])]
    var partEmpty = true
    var rows = 0L
    sources.foreach { case (key, ranges) =>
      var cur = Vector.newBuilder[(Long, Long)]
      var curEmpty = true
      ranges.foreach { case (s0, e) =>
        var s = s0
        while (s < e) {
          val take = math.min(e - s, split - rows)
          cur += ((s, s + take))
          curEmpty = false
          rows += take
          s += take
          if (rows >= split) {
            part += (key -> cur.result()); out += part.result()
            part = Vector.newBuilder; partEmpty = true
            cur = Vector.newBuilder; curEmpty = true
            rows = 0
          }
        }
      }
      if (!curEmpty) { part += (key -> cur.result()); partEmpty = false }
    }
    if (!partEmpty) out += part.result()
    out.result()
  }

  /** Rows per partition when the read sets no `splitRows`: the rows of
    * `fragments` shared evenly among as many partitions as a file scan makes
    * of files of the same bytes (`target`): a partition holds up to the
    * table's cost per core, at least the open cost and at most the maximum
    * partition bytes; the cost of a fragment is its data bytes (see
    * [[fragmentBytes]], `rowBytes` an estimated row's) plus the open cost; a
    * fragment larger than a partition is cut, and the pieces are packed in
    * order. So a table gets one partition per core, one of a few MB a single
    * partition, and many small fragments a partition per few dozen of them,
    * as the same bytes in Parquet files would. Beyond one partition per core
    * the count is rounded up to a multiple of the cores. `share`: the part of
    * each fragment's bytes the scan reads (its columns' share; 1 for all).
    * A scan of a few columns still gets a partition per core where the
    * fragments' whole bytes would fill every core (as a Parquet scan's splits
    * of the same files would): their decode is the tasks' work, and a share
    * below the open cost left a 600 MB one-fragment table in one task. */
  def defaultSplit(fragments: Vector[FragmentInfo], rowBytes: Double, target: SplitTarget, share: Double = 1.0): Long =
    splitOf(fragments.map(f => (f.physicalRows, fragmentBytes(f, rowBytes))), share, target)

  /** Like [[defaultSplit]] over the rows `plans` kept (each fragment's planned
    * rows and their share of its bytes), as Spark sizes the splits of a file
    * scan over the files left after pruning them at run time: a scan pruned
    * to a fifth of its rows still gets a partition per core. */
  def plannedSplit(plans: Vector[FragmentPlan], rowBytes: Double, target: SplitTarget, share: Double = 1.0): Long =
    splitOf(plans.map { p =>
      val rows = p.mayMatch.count
      val f = p.fragment
      (rows, if (f.physicalRows > 0) fragmentBytes(f, rowBytes) * rows / f.physicalRows else 0.0)
    }, share, target)

  /** Rows per partition over sources of (rows, whole bytes) of which a scan
    * reads `share`: the tasks of [[tasksOf]] its bytes read, at least one per
    * core where the whole bytes make that many. */
  private def splitOf(sources: Vector[(Long, Double)], share: Double, target: SplitTarget): Long = {
    val whole = tasksOf(sources.map(_._2), target)
    val tasks = math.max(tasksOf(sources.map(_._2 * share), target), math.min(math.max(1L, target.cores.toLong), whole))
    val rows = sources.map(_._1).sum
    math.max(1L, (rows + tasks - 1) / tasks)
  }

  /** The split rule: the tasks a file scan makes of files of `bytes`. */
  private def tasksOf(bytes: Vector[Double], target: SplitTarget): Long = {
    val open = target.openCostBytes.toDouble
    val cores = math.max(1, target.cores)
    val maxSplit = math.min(target.maxPartitionBytes.toDouble, math.max(open, bytes.map(_ + open).sum / cores))
    var partitions = 0L
    var current = 0.0 // the cost packed into the last partition
    bytes.foreach { b =>
      val pieces = math.max(1L, math.ceil(b / maxSplit).toLong)
      (0L until pieces).foreach { i =>
        val piece = math.min(maxSplit, b - i * maxSplit)
        if (partitions == 0 || current + piece > maxSplit) { partitions += 1; current = 0.0 }
        current += piece + open
      }
    }
    // more than one wave of tasks: whole waves, so that no core idles in the
    // last (a Parquet scan cannot cut its row groups so; row ranges can be cut)
    if (partitions > cores) (partitions + cores - 1) / cores * cores else math.max(1L, partitions)
  }

  /** Like [[pack]], but a partition ends only at a position where the rows
    * may be cut: a cut (`cutsWithin(source, from, until)`: the cuts of a
    * source in [from, until], in order) at or after the end of the source's
    * rows before it, and at or before the start of the next rows. Each
    * partition ends at the first such position once it holds `split` rows.
    * Each piece comes with the positions inside it where the rows may be cut. */
  def packAtCuts[K](sources: Vector[(K, Vector[(Long, Long)])], split: Long,
                    cutsWithin: (K, Long, Long) => Vector[Long]): Vector[Vector[(K, Vector[(Long, Long)], Vector[Long])]] = {
    require(split > 0, s"rows per partition must be positive, got $split")
    type Piece = (K, Vector[(Long, Long)], Vector[Long])
    val out = Vector.newBuilder[Vector[Piece]]
    var part = Vector.empty[Piece]
    var rows = 0L
    sources.foreach { case (plan, ranges) =>
      var cur = Vector.empty[(Long, Long)]
      var curCuts = Vector.empty[Long]
      var readUpTo = 0L // end of the rows of this fragment read so far
      ranges.foreach { case (s, e) =>
        // the range's pieces between the cuts inside it
        val inside = cutsWithin(plan, s + 1, e - 1)
        val starts = s +: inside
        val ends = inside :+ e
        starts.zip(ends).foreach { case (a, b) =>
          val safe = cutsWithin(plan, readUpTo, a).nonEmpty
          if (safe && rows >= split) {
            if (cur.nonEmpty) part :+= ((plan, cur, curCuts))
            out += part
            part = Vector.empty; cur = Vector.empty; curCuts = Vector.empty; rows = 0L
          } else if (safe && rows > 0) curCuts :+= a
          // one range across the cuts inside a range (batches are not cut there)
          cur = cur.lastOption match {
            case Some((x, y)) if y == a => cur.init :+ (x -> b)
            case _ => cur :+ (a -> b)
          }
          rows += b - a
          readUpTo = b
        }
      }
      if (cur.nonEmpty) part :+= ((plan, cur, curCuts))
    }
    if (part.nonEmpty) out += part
    out.result()
  }

  /** The bytes of a fragment's data files; for a manifest without file sizes
    * (as older writers leave them), `rowBytes` (an estimated row's) for each row. */
  def fragmentBytes(f: FragmentInfo, rowBytes: Double): Double =
    if (f.files.forall(_.sizeBytes > 0)) f.files.map(_.sizeBytes).sum.toDouble
    else f.physicalRows * rowBytes
}
