package io.lancespark.table.index.vector

import io.lancespark.table.index.IndexCatalog
import io.lancespark.table.storage.Snapshot

/** The result of a search and what it did: the index used (its name and
  * type), the IVF partitions probed and the candidates scored from them. */
final case class SearchOutcome(
    neighbours: Vector[Neighbour],
    index: Option[String],
    partitionsProbed: Int,
    candidatesScored: Long)

/** Which vector index (all its deltas) a query uses, if any: the first index
  * on the column whose every delta is an IVF index read here, with the
  * query's metric (pylance too falls back to exact search on a metric
  * mismatch). Any other index is logged and left unused (exact search),
  * never an error. */
object VectorIndexChoice {
  def choose(snapshot: Snapshot, column: VectorColumn, metric: DistanceMetric): Option[Vector[IvfIndex]] = {
    val all = IndexCatalog.load(snapshot)
    val on = all.filter(_.fieldIds == Vector(column.field.id))
    if (on.isEmpty) None
    else if (snapshot.hasStableRowIds) {
      IndexCatalog.skip(s"the vector indices on '${column.field.name}' of ${snapshot.storage.uri}: the dataset has " +
        "stable row ids (not read as addresses by the vector index reader); searching exactly")
      None
    } else if (IndexCatalog.hasFragmentReuseIndex(all)) {
      IndexCatalog.skip(s"the vector indices on '${column.field.name}' of ${snapshot.storage.uri}: a deferred " +
        "compaction remap (fragment reuse index) is pending; searching exactly")
      None
    } else {
      val byName = on.groupBy(_.name).toVector.sortBy { case (_, es) => es.map(_.datasetVersion).min }
      byName.iterator.map { case (name, deltas) =>
        val opened = deltas.map { e =>
          try IvfIndex.cached(snapshot.storage, e)
          catch { case ex: Exception => Left(s"could not be read (${ex.getMessage})") }
        }
        opened.collectFirst { case Left(why) => why } match {
          case Some(why) =>
            IndexCatalog.skip(s"vector index '$name' on '${column.field.name}' of ${snapshot.storage.uri}: $why; searching exactly")
            None
          case None =>
            val ixs = opened.collect { case Right(ix) => ix }
            if (ixs.exists(_.metric != metric)) {
              IndexCatalog.skip(s"vector index '$name' on '${column.field.name}' of ${snapshot.storage.uri}: its metric is " +
                s"${ixs.head.metric.name}, the query's ${metric.name}; searching exactly")
              None
            } else if (ixs.exists(_.dim != column.dim)) {
              IndexCatalog.skip(s"vector index '$name': dimension ${ixs.head.dim}, the column's ${column.dim}; searching exactly")
              None
            } else Some(ixs)
        }
      }.collectFirst { case Some(ixs) => ixs }
    }
  }
}
