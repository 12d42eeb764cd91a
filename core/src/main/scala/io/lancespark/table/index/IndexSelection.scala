package io.lancespark.table.index

import scala.collection.mutable

import org.apache.arrow.memory.RootAllocator
import org.roaringbitmap.RoaringBitmap

import io.lancespark.table.filter.{CompareOp, Filter, RowRanges}
import io.lancespark.table.filter.Filter._
import io.lancespark.table.storage.Snapshot

/** What the scalar indices of a dataset version answer of a filter: for
  * each fragment they decide, the offsets of the rows that may match (a
  * superset of the matching rows: the filter is still evaluated on the rows
  * read). A fragment no index on the filter's columns covers (appended or
  * rewritten after the build) is not decided: every row is read. Deleted
  * rows are left to the scan (an index may still list them).
  *
  * Each node of the filter is answered for an outcome (TRUE, or FALSE under
  * a NOT) by the rows that may have it: AND intersects what its sides
  * decide, OR unites where both decide, NOT asks its child for the other
  * outcome; a leaf on an indexed column asks each index on it. */
/** Rows that may have an outcome: `rows(f)` (empty when absent) for the
  * fragments in `known`, any row of the others. */
private final case class Answer(known: RoaringBitmap, rows: Map[Int, RoaringBitmap]) {
  def of(frag: Int): RoaringBitmap = rows.getOrElse(frag, IndexSelection.Empty)
}

final class IndexSelection private (snapshot: Snapshot, filter: Option[Filter], labels: Vector[LabelClause],
    indices: Vector[ScalarIndex], labelIndices: Vector[ScalarIndex]) {

  private val byColumn: Map[Column, Vector[ScalarIndex]] = indices.groupBy(_.column)
  private val labelsByColumn: Map[Column, Vector[ScalarIndex]] = labelIndices.groupBy(_.column)
  private val rowsOf: Map[Int, Long] = snapshot.fragments.map(f => f.id.toInt -> f.physicalRows).toMap
  private val allFragments: RoaringBitmap = {
    val b = new RoaringBitmap(); rowsOf.keys.foreach(b.add); b
  }
  /** Indices that answered a leaf of the filter. */
  private val used = mutable.LinkedHashSet.empty[String]

  private val Unknown = Answer(new RoaringBitmap(), Map.empty)

  private def both(a: Answer, b: Answer): Answer = {
    val known = RoaringBitmap.or(a.known, b.known)
    val rows = known.toArray.toSeq.map { f =>
      val r = (a.known.contains(f), b.known.contains(f)) match {
        case (true, true) => RoaringBitmap.and(a.of(f), b.of(f))
        case (true, false) => a.of(f)
        case _ => b.of(f)
      }
      f -> r
    }.filterNot(_._2.isEmpty).toMap
    Answer(known, rows)
  }

  private def either(a: Answer, b: Answer): Answer = {
    val known = RoaringBitmap.and(a.known, b.known)
    val rows = known.toArray.toSeq.map(f => f -> RoaringBitmap.or(a.of(f), b.of(f))).filterNot(_._2.isEmpty).toMap
    Answer(known, rows)
  }

  private def answer(f: Filter, outcome: Boolean): Answer = f match {
    case a: And if outcome =>
      // rows that may be TRUE under every conjunct. `c IS NOT NULL` beside a conjunct on c that is
      // never TRUE for a NULL (as Spark adds it to `c = k`) decides nothing that one does not, and
      // asking an index for it reads most of the index (every page of a BTREE's lookup, every
      // bitmap of a BITMAP): leaving it out answers the same rows, or more (a superset stays exact)
      val parts = IndexSelection.conjuncts(a)
      val rejecting = parts.collect { case x if IndexSelection.rejectsNull(x) => x.columns.head }.toSet
      parts.filter {
        case IsNotNull(c) => !rejecting(c)
        case _ => true
      }.map(answer(_, true)).reduce(both)
    case And(l, r) => either(answer(l, false), answer(r, false))
    case Or(l, r) =>
      if (outcome) either(answer(l, true), answer(r, true)) else both(answer(l, false), answer(r, false))
    case Not(c) => answer(c, !outcome)
    case AlwaysTrue => if (outcome) Unknown else Answer(allFragments.clone(), Map.empty)
    case AlwaysFalse => if (outcome) Answer(allFragments.clone(), Map.empty) else Unknown
    case leaf if ScalarIndex.isLeaf(leaf) =>
      val column = leaf.columns.head
      byColumn.getOrElse(column, Vector.empty).iterator.map(ix => fromIndex(ix, ix.rows(leaf, outcome)))
        .foldLeft(Unknown)(both)
    case _ => Unknown
  }

  /** What index `ix` answered (`rows`), for the fragments it may decide. */
  private def fromIndex(ix: ScalarIndex, answered: Option[RowAddrMap.Rows]): Answer = answered match {
    case Some(rows) =>
      used += ix.entry.name
      // only the fragments it covers, and only where it names no row beyond the fragment's
      val known = ix.trusted.clone()
      known.toArray.foreach { frag =>
        val r = rows.getOrElse(frag, IndexSelection.Empty)
        if (!r.isEmpty && (r.last() & 0xffffffffL) >= rowsOf.getOrElse(frag, 0L)) {
          IndexCatalog.skip(s"${ix.entry.describe} for fragment $frag: it names rows beyond the fragment's")
          known.remove(frag)
        }
      }
      Answer(known, rows.filter { case (k, _) => known.contains(k) })
    case None => Unknown
  }

  /** The rows whose list holds one of the term's non-null values, by the
    * LABEL_LIST indices on its column (a bitmap of the lists' elements: the
    * union of the values' bitmaps). */
  private def term(t: LabelTerm): Answer = {
    val leaf = In(Vector("_"), t.values.filterNot(_.isNull))
    labelsByColumn.getOrElse(t.column, Vector.empty).iterator
      .map(ix => fromIndex(ix, ix.rows(leaf, outcome = true))).foldLeft(Unknown)(both)
  }

  private def clause(c: LabelClause): Answer = c.terms.map(term).reduce(either)

  /** For each fragment the indices decide: the offsets of the rows that may match. */
  lazy val selected: Map[Int, RoaringBitmap] = {
    val parts = filter.map(answer(_, outcome = true)).toVector ++ labels.map(clause)
    val a = parts.reduceOption(both).getOrElse(Unknown)
    a.known.toArray.toSeq.map(f => f -> a.of(f)).toMap
  }

  /** The rows to read of fragment `frag` (its offsets, as ranges), if decided. */
  def ranges(frag: Int): Option[RowRanges] = selected.get(frag).map(IndexSelection.toRanges)

  /** Names of the indices that answered part of the filter. */
  def indicesUsed: Vector[String] = { selected; used.toVector }

  /** Bytes read from index files. */
  def bytesRead: Long = (indices ++ labelIndices).map(_.bytesRead).sum
}

object IndexSelection {
  /** The conjuncts of nested ANDs, in order. */
  private def conjuncts(f: Filter): Vector[Filter] = f match {
    case And(l, r) => conjuncts(l) ++ conjuncts(r)
    case other => Vector(other)
  }

  /** A leaf that is never TRUE where its column is NULL. */
  private def rejectsNull(f: Filter): Boolean = f match {
    case Compare(_, op, lit) => op != CompareOp.EqNullSafe || !lit.isNull
    case _: In | _: StartsWith => true
    case _ => false
  }

  private[index] val Empty = new RoaringBitmap()

  /** The indices of `snapshot` that may answer part of `filter`, and what
    * they answer (None when none may). Indices that cannot be used are
    * skipped with a log line; reading one never fails the scan's plan
    * unless its files are corrupt. */
  def apply(snapshot: Snapshot, filter: Filter): Option[IndexSelection] = apply(snapshot, Some(filter), Vector.empty)

  /** The same for `filter` (if any) ANDed with `labels` (answered by the
    * LABEL_LIST indices on their columns only). */
  def apply(snapshot: Snapshot, filter: Option[Filter], labels: Vector[LabelClause]): Option[IndexSelection] = {
    val entries = IndexCatalog.load(snapshot)
    val columns = filter.fold(Set.empty[Column])(_.columns)
    val labelColumns = labels.flatMap(_.columns).toSet
    val (labelEntries, scalarEntries) = entries.filter(_.fields.size == 1).partition(_.kind == ScalarIndex.LabelList)
    val scalar = scalarEntries.filter(e => columns.contains(e.fields.head))
    val labelled = labelEntries.filter(e => labelColumns.contains(e.fields.head))
    val relevant = scalar ++ labelled
    if (relevant.isEmpty) None
    else if (snapshot.hasStableRowIds) {
      IndexCatalog.skip(s"the indices of ${snapshot.storage.uri}: the dataset has stable row ids (not read yet)"); None
    } else if (IndexCatalog.hasFragmentReuseIndex(entries)) {
      IndexCatalog.skip(s"the indices of ${snapshot.storage.uri}: a compaction's row address remap is pending"); None
    } else {
      val rowsOf: Map[Int, Long] = snapshot.fragments.map(f => f.id.toInt -> f.physicalRows).toMap
      val allocator = new RootAllocator()
      def open(e: IndexEntry): Option[ScalarIndex] =
        ScalarIndex.open(snapshot.storage, snapshot.schema, e, f => rowsOf.getOrElse(f, 0L), allocator)
      val opened = scalar.flatMap(open)
      val openedLabels = labelled.flatMap(open)
      if (opened.isEmpty && openedLabels.isEmpty) { allocator.close(); None }
      else {
        val sel = new IndexSelection(snapshot, filter, labels, opened, openedLabels)
        try sel.selected
        finally { (opened ++ openedLabels).foreach(_.close()); allocator.close() }
        Some(sel)
      }
    }
  }

  /** Offsets as row ranges (consecutive offsets in one range). */
  def toRanges(b: RoaringBitmap): RowRanges = {
    val out = new RowRanges.Builder
    val it = b.getIntIterator
    var start = -1L
    var end = -1L
    while (it.hasNext) {
      val v = it.next().toLong & 0xffffffffL
      if (v == end) end += 1
      else { if (start >= 0) out.add(start, end); start = v; end = v + 1 }
    }
    if (start >= 0) out.add(start, end)
    out.result()
  }
}
