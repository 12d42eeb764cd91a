package io.lancespark.table.index.vector

import scala.util.Using

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{FieldVector, Float4Vector, Float8Vector}
import org.apache.arrow.vector.complex.FixedSizeListVector
import org.slf4j.LoggerFactory

import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.table.filter.Filter
import io.lancespark.table.model.FragmentInfo
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.DataFiles
import io.lancespark.table.storage.Snapshot

/** Nearest-neighbour search over one version of a dataset: the `k` nearest
  * live rows (deleted rows never count), nearest first.
  *
  * The search is exact (every vector of every fragment scanned, top k kept
  * per fragment, then merged). Vector indices on the column are listed and,
  * until their formats are read here, logged and left unused: the result is
  * then the exact top k, which an index search approximates. */
object VectorSearch {
  private val log = LoggerFactory.getLogger(getClass)

  /** Rows decoded per read of a fragment. */
  val BatchRows: Int = 8192

  def search(snapshot: Snapshot, query: VectorQuery, allocator: BufferAllocator): Vector[Neighbour] = {
    val column = VectorColumn.of(snapshot, query.column, query.vector.length)
    if (query.useIndex) VectorIndexes.on(snapshot, column.field).foreach { ix =>
      log.info(s"${snapshot.storage.uri}: vector index '${ix.name}' (${ix.describe}) on column '${query.column}' " +
        "is not read by this connector yet; searching exactly (brute force)")
    }
    val prefilter = query.filter.filter(_ => query.prefilter)
    val top = new TopK(query.k)
    snapshot.fragments.filter(_.numRows > 0).foreach { f =>
      top.addAll(exact(snapshot, f, column, query, prefilter, allocator))
    }
    val found = top.result
    query.filter.filter(_ => !query.prefilter) match {
      case Some(post) => found.filter(n => keeps(snapshot, post, n, allocator))
      case None => found
    }
  }

  /** The top k of one fragment's live rows that `filter` keeps. */
  def exact(snapshot: Snapshot, fragment: FragmentInfo, column: VectorColumn, query: VectorQuery,
      filter: Option[Filter], allocator: BufferAllocator): Vector[Neighbour] = {
    val top = new TopK(query.k)
    val qn = DistanceMetric.norm(query.vector)
    val dim = column.dim
    var values = new Array[Float](0)
    Using.resource(scanner(snapshot, fragment, Seq(column.field), filter, allocator)) { sc =>
      var from = 0L
      while (from < fragment.physicalRows) {
        val until = math.min(fragment.physicalRows, from + BatchRows)
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
    val fields = filterFields(snapshot, filter)
    Using.resource(scanner(snapshot, fragment, fields.take(1), Some(filter), allocator)) { sc =>
      Using.resource(sc.read(n.offset.toLong, n.offset.toLong + 1))(_.rowCount == 1)
    }
  }

  def filterFields(snapshot: Snapshot, filter: Filter): Seq[LanceField] =
    filter.columns.toSeq.map(_.head).distinct.map(c => snapshot.schema.field(c).getOrElse(
      throw new IllegalArgumentException(s"${snapshot.storage.uri}: the filter names a column '$c' that does not exist")))

  private def scanner(snapshot: Snapshot, fragment: FragmentInfo, fields: Seq[LanceField], filter: Option[Filter],
      allocator: BufferAllocator): FragmentScanner = {
    val storage = snapshot.storage
    new FragmentScanner(storage, snapshot.version, fragment, fields, allocator,
      ref => DataFiles.open(storage, snapshot.schema, ref), filter,
      filter.toSeq.flatMap(f => filterFields(snapshot, f)))
  }
}
