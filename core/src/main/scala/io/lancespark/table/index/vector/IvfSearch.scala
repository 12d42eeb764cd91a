package io.lancespark.table.index.vector

import scala.util.Using

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.complex.FixedSizeListVector
import org.apache.arrow.vector.{Float4Vector, Float8Vector}
import org.roaringbitmap.RoaringBitmap

import io.lancespark.table.filter.Filter
import io.lancespark.table.model.FragmentInfo
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.DeletionVector
import io.lancespark.table.storage.Snapshot

/** A nearest-neighbour search through IVF indices (all deltas of one index),
  * with pylance's plan:
  *  1. per delta, the partitions ranked by their centroid's distance to the
  *     query; `nprobes` of them searched (default: [[DefaultProbes]], then
  *     more in rank order while fewer than k candidates were found);
  *  2. each partition scored ([[IvfScorer]]) over its eligible rows (rows of
  *     live fragments the index covers, not deleted, kept by the prefilter),
  *     its best k * refine_factor kept as the reference keeps them
  *     ([[PartitionTopK]]: which rows tied at the k-th place stay is
  *     pylance's choice); over all partitions the best k * refine_factor (by
  *     distance, then row id);
  *  3. with refine_factor: those re-ranked by the exact distance of their
  *     vectors, best k; without: the best k;
  *  4. when live fragments are not covered by the index: their exact top k
  *     (prefilter applied) merged with the index's k, these re-scored with
  *     their exact distance; best k.
  * The returned distances are the index's approximate ones unless step 3 or
  * 4 re-scored them (as pylance returns them). */
object IvfSearch {
  /** Partitions searched first when the query gives no `nprobes` (pylance's
    * long-standing default; pylance 14 itself adapts the number to the query). */
  val DefaultProbes: Int = 20

  def search(snapshot: Snapshot, column: VectorColumn, query: VectorQuery, deltas: Vector[IvfIndex],
      prefilter: Option[Filter], allocator: BufferAllocator): SearchOutcome = {
    val live: Map[Long, FragmentInfo] = snapshot.fragments.map(f => f.id -> f).toMap
    val covered = new RoaringBitmap()
    deltas.foreach(d => covered.or(d.entry.covered))
    val coveredFrags = live.values.filter(f => covered.contains(f.id.toInt)).toVector
    val accept = eligibility(snapshot, coveredFrags, prefilter, allocator)
    val fetch = query.k * query.refineFactor.getOrElse(1)

    val candidates = new TopK(fetch)
    var probed = 0
    var scored = 0L
    deltas.foreach { ix =>
      val scorer = new IvfScorer(ix, query.vector)
      val ranked = ix.rankPartitions(scorer.key)
      val (minProbes, maxProbes) = query.nprobes match {
        case Some(n) => (math.min(n, ranked.size), math.min(n, ranked.size))
        case None => (math.min(IvfSearch.DefaultProbes, ranked.size), ranked.size)
      }
      val first = ix.partitions(ranked.take(minProbes), allocator)
      var found = 0
      var i = 0
      while (i < maxProbes && (i < minProbes || found < query.k)) {
        val p = ranked(i)
        val part = first.getOrElse(p, ix.partition(p, allocator))
        val top = new PartitionTopK(fetch)
        scorer.scan(p, part, accept, top)
        val r = top.result
        found += r.size
        candidates.addAll(r)
        probed += 1
        scored += part.size
        i += 1
      }
    }
    val ann = candidates.result
    val refined = if (query.refineFactor.isDefined) topK(exactDistances(snapshot, column, query, ann, allocator), query.k)
      else ann.take(query.k)

    val uncovered = snapshot.fragments.filter(f => f.numRows > 0 && !covered.contains(f.id.toInt))
    val result = if (uncovered.isEmpty) refined else {
      val flat = VectorSearch.exactTopK(snapshot, uncovered, column, query, prefilter, allocator)
      val rescored = if (query.refineFactor.isDefined) refined else exactDistances(snapshot, column, query, refined, allocator)
      topK(flat ++ rescored, query.k)
    }
    SearchOutcome(result, Some(s"${deltas.head.entry.name} (${deltas.head.indexType})"), probed, scored)
  }

  private def topK(ns: Seq[Neighbour], k: Int): Vector[Neighbour] = {
    val t = new TopK(k)
    t.addAll(ns)
    t.result
  }

  /** Which row ids of the covered fragments may be returned: not deleted,
    * kept by the prefilter; rows of fragments gone from this version never. */
  private def eligibility(snapshot: Snapshot, covered: Vector[FragmentInfo], prefilter: Option[Filter],
      allocator: BufferAllocator): Long => Boolean = {
    prefilter match {
      case Some(filter) =>
        val kept: Map[Long, RoaringBitmap] = covered.map(f => f.id -> keptRows(snapshot, f, filter, allocator)).toMap
        (id: Long) => kept.get(id >>> 32).exists(_.contains((id & 0xffffffffL).toInt))
      case None =>
        val deleted: Map[Long, (Long, Option[RoaringBitmap])] = covered.map { f =>
          f.id -> (f.physicalRows -> f.deletion.map(d => DeletionVector.read(snapshot.storage, f.id, d, f.physicalRows)))
        }.toMap
        (id: Long) => {
          val off = id & 0xffffffffL
          deleted.get(id >>> 32) match {
            case Some((rows, del)) => off < rows && !del.exists(_.contains(off.toInt))
            case None => false
          }
        }
    }
  }

  /** The offsets of `fragment`'s live rows that `filter` keeps. */
  private def keptRows(snapshot: Snapshot, fragment: FragmentInfo, filter: Filter, allocator: BufferAllocator): RoaringBitmap = {
    val out = new RoaringBitmap()
    val fields = FragmentScanner.filterFields(snapshot, filter)
    Using.resource(FragmentScanner.of(snapshot, fragment, fields.take(1), Some(filter), allocator)) { sc =>
      var from = 0L
      while (from < fragment.physicalRows) {
        val until = math.min(fragment.physicalRows, from + VectorSearch.BatchRows)
        Using.resource(sc.read(from, until)) { b =>
          val offs = b.offsets
          var i = 0
          while (i < b.rowCount) { out.add(offs(i)); i += 1 }
        }
        from = until
      }
    }
    out
  }

  /** `ns` with the exact distance of their vectors to the query (rows whose
    * vector is NULL dropped). */
  private def exactDistances(snapshot: Snapshot, column: VectorColumn, query: VectorQuery, ns: Seq[Neighbour],
      allocator: BufferAllocator): Vector[Neighbour] = {
    val qn = DistanceMetric.norm(query.vector)
    val dim = column.dim
    ns.groupBy(_.fragmentId).toVector.flatMap { case (fid, group) =>
      val fragment = snapshot.fragments.find(_.id == fid).getOrElse(
        throw new IllegalStateException(s"${snapshot.storage.uri}: the index names fragment $fid, not in version ${snapshot.version}"))
      Using.resource(FragmentScanner.of(snapshot, fragment, Seq(column.field), None, allocator)) { sc =>
        group.sortBy(_.offset).flatMap { n =>
          Using.resource(sc.read(n.offset.toLong, n.offset.toLong + 1)) { b =>
            if (b.rowCount != 1) None
            else {
              val list = b.vectors.head.asInstanceOf[FixedSizeListVector]
              if (list.isNull(0)) None
              else {
                val v = list.getDataVector match {
                  case f: Float4Vector => Array.tabulate(dim)(i => f.get(i))
                  case f: Float8Vector => Array.tabulate(dim)(i => f.get(i).toFloat)
                  case other => throw new IllegalStateException(
                    s"${snapshot.storage.uri}: column '${column.field.name}' read as ${other.getClass.getSimpleName}")
                }
                Some(n.copy(distance = query.metric.distance(query.vector, qn, v, 0, dim)))
              }
            }
          }
        }
      }
    }
  }
}
