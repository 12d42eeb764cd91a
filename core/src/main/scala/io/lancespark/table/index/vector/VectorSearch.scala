package io.lancespark.table.index.vector

import scala.util.Using

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{FieldVector, Float4Vector, Float8Vector}
import org.apache.arrow.vector.complex.FixedSizeListVector

import io.lancespark.schema.LanceFormatException
import io.lancespark.table.filter.Filter
import io.lancespark.table.model.FragmentInfo
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.Snapshot

/** Nearest-neighbour search over one version of a dataset: the `k` nearest
  * live rows (deleted rows never count), nearest first.
  *
  * With `useIndex` and a pylance-built IVF_FLAT, IVF_PQ or IVF_SQ index on
  * the column whose metric is the query's, the search is the index's
  * (approximate, as pylance's: [[IvfSearch]]); otherwise exact (every vector
  * of every fragment scanned, top k kept per fragment, then merged). */
object VectorSearch {

  /** Rows decoded per read of a fragment. */
  val BatchRows: Int = 8192

  def search(snapshot: Snapshot, query: VectorQuery, allocator: BufferAllocator): Vector[Neighbour] =
    run(snapshot, query, allocator).neighbours

  /** The search with what it did (the index used, partitions probed). */
  def run(snapshot: Snapshot, query: VectorQuery, allocator: BufferAllocator): SearchOutcome = {
    val column = VectorColumn.of(snapshot, query.column, query.vector.length)
    val prefilter = query.filter.filter(_ => query.prefilter)
    val index = if (query.useIndex) VectorIndexChoice.choose(snapshot, column, query.metric) else None
    val outcome = index match {
      case Some(deltas) => IvfSearch.search(snapshot, column, query, deltas, prefilter, allocator)
      case None =>
        SearchOutcome(exactTopK(snapshot, snapshot.fragments, column, query, prefilter, allocator), None, 0, 0L)
    }
    query.filter.filter(_ => !query.prefilter) match {
      case Some(post) => outcome.copy(neighbours = outcome.neighbours.filter(n => keeps(snapshot, post, n, allocator)))
      case None => outcome
    }
  }

  /** Rows of a fragment one task of an exact search scans. */
  val ChunkRows: Int = 4 * BatchRows

  private lazy val pool: java.util.concurrent.ExecutorService = {
    val n = math.max(1, Runtime.getRuntime.availableProcessors)
    java.util.concurrent.Executors.newFixedThreadPool(n, (r: Runnable) => {
      val t = new Thread(r, "lance-vector-search")
      t.setDaemon(true)
      t
    })
  }

  /** The exact top k of the live rows of `fragments` that `filter` keeps: the
    * fragments cut into chunks of [[ChunkRows]] rows searched in parallel (one
    * thread per core), their top k merged. */
  def exactTopK(snapshot: Snapshot, fragments: Seq[FragmentInfo], column: VectorColumn, query: VectorQuery,
      filter: Option[Filter], allocator: BufferAllocator): Vector[Neighbour] = {
    val chunks = fragments.filter(_.numRows > 0).flatMap { f =>
      (0L until f.physicalRows by ChunkRows.toLong).map(from => (f, from, math.min(f.physicalRows, from + ChunkRows)))
    }
    val top = new TopK(query.k)
    if (chunks.size <= 1) chunks.foreach { case (f, a, b) => top.addAll(exact(snapshot, f, column, query, filter, allocator, a, b)) }
    else {
      val futures = chunks.map { case (f, a, b) =>
        pool.submit(new java.util.concurrent.Callable[Vector[Neighbour]] {
          def call(): Vector[Neighbour] = exact(snapshot, f, column, query, filter, allocator, a, b)
        })
      }
      try futures.foreach { fu =>
        try top.addAll(fu.get())
        catch { case e: java.util.concurrent.ExecutionException if e.getCause != null => throw e.getCause }
      } finally futures.foreach(_.cancel(true))
    }
    top.result
  }

  /** The top k of one fragment's live rows in [from, until) that `filter` keeps. */
  def exact(snapshot: Snapshot, fragment: FragmentInfo, column: VectorColumn, query: VectorQuery,
      filter: Option[Filter], allocator: BufferAllocator, from0: Long = 0L, until0: Long = -1L): Vector[Neighbour] = {
    val end = if (until0 < 0) fragment.physicalRows else until0
    val top = new TopK(query.k)
    val qn = DistanceMetric.norm(query.vector)
    val dim = column.dim
    var values = new Array[Float](0)
    Using.resource(FragmentScanner.of(snapshot, fragment, Seq(column.field), filter, allocator)) { sc =>
      var from = from0
      while (from < end) {
        val until = math.min(end, from + BatchRows)
        Using.resource(sc.read(from, until)) { b =>
          val list = b.vectors.head.asInstanceOf[FixedSizeListVector]
          val n = b.rowCount
          if (values.length < n * dim) values = new Array[Float](n * dim)
          copyValues(list.getDataVector, n * dim, values, snapshot, column)
          lazy val offsets = b.offsets
          var i = 0
          while (i < n) {
            if (!list.isNull(i)) {
              val d = query.metric.distance(query.vector, qn, values, i * dim, dim)
              if (!d.isNaN && d <= top.bound) top.offer(Neighbour(fragment.id, offsets(i), d))
            }
            i += 1
          }
        }
        from = until
      }
    }
    top.result
  }

  private def copyValues(data: FieldVector, n: Int, out: Array[Float], snapshot: Snapshot, column: VectorColumn): Unit =
    data match {
      case f: Float4Vector =>
        val buf = f.getDataBuffer
        var i = 0
        while (i < n) { out(i) = buf.getFloat(i.toLong * 4); i += 1 }
      case f: Float8Vector =>
        val buf = f.getDataBuffer
        var i = 0
        while (i < n) { out(i) = buf.getDouble(i.toLong * 8).toFloat; i += 1 }
      case other => throw LanceFormatException(snapshot.storage.uri,
        s"column '${column.field.name}': expected float vectors, read ${other.getClass.getSimpleName}")
    }

  /** Whether `filter` keeps the row of `n` (a post-filter). */
  private def keeps(snapshot: Snapshot, filter: Filter, n: Neighbour, allocator: BufferAllocator): Boolean = {
    val fragment = snapshot.fragments.find(_.id == n.fragmentId).getOrElse(
      throw new IllegalStateException(s"${snapshot.storage.uri}: no fragment ${n.fragmentId}"))
    val fields = FragmentScanner.filterFields(snapshot, filter)
    Using.resource(FragmentScanner.of(snapshot, fragment, fields.take(1), Some(filter), allocator)) { sc =>
      Using.resource(sc.read(n.offset.toLong, n.offset.toLong + 1))(_.rowCount == 1)
    }
  }
}
