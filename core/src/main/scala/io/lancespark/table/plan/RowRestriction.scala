package io.lancespark.table.plan

import io.lancespark.schema.LanceFormatException
import io.lancespark.table.filter.RowRanges
import io.lancespark.table.storage.{RowIdFiles, Snapshot}

/** The only rows a scan may return, named by the caller (`_rowaddr IN (...)`,
  * `_fragid = n`, or `_rowid` where row ids are addresses): per fragment id,
  * its physical row offsets, or None for all of its rows. Fragments not named
  * are not read at all. */
final case class RowRestriction(fragments: Map[Long, Option[Vector[Long]]]) {

  /** The rows of fragment `id` (of `physicalRows` rows) this restriction
    * keeps: empty when the fragment is not named. */
  def ranges(id: Long, physicalRows: Long): RowRanges = fragments.get(id) match {
    case None => RowRanges.of()
    case Some(None) => RowRanges.all(physicalRows)
    case Some(Some(offsets)) =>
      val b = new RowRanges.Builder
      offsets.filter(o => o >= 0 && o < physicalRows).sorted.foreach(o => b.add(o, o + 1))
      b.result()
  }

  def names(id: Long): Boolean = fragments.contains(id)

  /** Both restrictions at once. */
  def and(o: RowRestriction): RowRestriction = RowRestriction(
    fragments.keySet.intersect(o.fragments.keySet).iterator.map { id =>
      id -> ((fragments(id), o.fragments(id)) match {
        case (None, x) => x
        case (x, None) => x
        case (Some(a), Some(b)) => Some(a.filter(b.toSet))
      })
    }.toMap)
}

object RowRestriction {
  /** Row addresses: fragment id in the high 32 bits, row offset in the low 32. */
  def ofAddresses(addresses: Iterable[Long]): RowRestriction =
    RowRestriction(addresses.groupBy(a => a >>> 32).map { case (f, as) =>
      f -> Some(as.map(_ & 0xffffffffL).toVector.distinct)
    })

  def ofFragments(ids: Iterable[Long]): RowRestriction = RowRestriction(ids.map(id => id -> None).toMap)

  /** Stable row ids: the rows of `snapshot` that carry them (each fragment's
    * row id sequence is read from the manifest, or its row id file). A
    * fragment without row ids is refused: its rows could not be found. */
  def ofRowIds(snapshot: Snapshot, ids: Iterable[Long]): RowRestriction = {
    val wanted = ids.toSet
    RowRestriction(snapshot.fragments.filter(_.numRows > 0).flatMap { f =>
      val seq = RowIdFiles.load(snapshot.storage, f).getOrElse(throw new LanceFormatException(
        s"${snapshot.storage.uri} (version ${snapshot.version}): fragment ${f.id} has no row ids, " +
          "although the dataset has stable row ids"))
      val offsets = seq.offsetsOf(wanted)
      if (offsets.isEmpty) None else Some(f.id -> Some(offsets))
    }.toMap)
  }
}
