package io.lancespark.format.v21.layout

import io.lancespark.format.v21.LayerKind
import io.lancespark.format.v21.write.LeafBuffer
import io.lancespark.proto.encodings21.RepDefLayer

/** The levels of a page being written, as every layout stores them: the
  * page's own layer meanings (only the levels its data uses), its repetition
  * levels (null outside lists) and definition levels (page numbering; null
  * when all are 0), the largest definition level, the largest one of an
  * entry with a value slot (valid ones, and nulls of items inside the
  * innermost list), and the valid entries. Arrays are the writer's own (not
  * shared with the leaf's buffers). */
private[v21] final class PageLevels(
    val layers: Vector[RepDefLayer],
    val rep: Array[Int],
    val defs: Array[Int],
    val maxDef: Int,
    val maxVisible: Int,
    val validValues: Int)

private[v21] object PageLevels {

  /** The levels of the rows buffered for a leaf. */
  def of(lb: LeafBuffer): PageLevels = {
    val (layers, map) = pageLayers(lb)
    val n = lb.defs.size
    // the page's definition levels, their maximum and the valid entries, in
    // one loop over primitive ints (no boxing: this runs for every page)
    val allValid = lb.nulls == 0  // (every entry's level 0: no loop, no array)
    val defs = if (allValid) null else new Array[Int](n)
    var maxDef = 0
    var validValues = if (allValid) n else 0
    if (!allValid) {
      var i = 0
      while (i < n) {
        val d = map(lb.defs(i))
        defs(i) = d
        if (d > maxDef) maxDef = d
        if (d == 0) validValues += 1
        i += 1
      }
    }
    val rep = if (lb.rep == null) null else java.util.Arrays.copyOf(lb.rep.arr, n)
    // entries with a value slot: valid ones, and nulls of items inside the innermost list
    val maxVisible = {
      val itemLevels = lb.path.takeWhile(_ == LayerKind.Item).size
      (0 to itemLevels).map(c => if (c < map.length) map(c) else 0).max
    }
    new PageLevels(layers, rep, if (maxDef > 0) defs else null, maxDef, maxVisible, validValues)
  }

  /** Bits that hold levels up to `max`. */
  def bitsFor(max: Int): Int = 32 - Integer.numberOfLeadingZeros(max)

  /** The page's layers, and canonical -> page definition levels. */
  private def pageLayers(lb: LeafBuffer): (Vector[RepDefLayer], Array[Int]) = {
    val path = lb.path
    val canonicalLevels = path.map { case LayerKind.Item => 1; case LayerKind.List => 2 }
    val bases = canonicalLevels.scanLeft(0)(_ + _)
    val seen = new Array[Boolean](bases.last + 1)
    if (lb.nulls == 0) seen(0) = lb.defs.size > 0
    else {
      var i = 0
      while (i < lb.defs.size) { seen(lb.defs(i)) = true; i += 1 }
    }
    val map = new Array[Int](bases.last + 1)
    var pb = 0
    val layers = path.indices.map { j =>
      val b = bases(j)
      path(j) match {
        case LayerKind.Item =>
          if (seen(b + 1)) { pb += 1; map(b + 1) = pb; RepDefLayer.REPDEF_NULLABLE_ITEM }
          else RepDefLayer.REPDEF_ALL_VALID_ITEM
        case LayerKind.List =>
          (seen(b + 1), seen(b + 2)) match {
            case (true, true) => map(b + 1) = pb + 1; map(b + 2) = pb + 2; pb += 2; RepDefLayer.REPDEF_NULL_AND_EMPTY_LIST
            case (true, false) => pb += 1; map(b + 1) = pb; RepDefLayer.REPDEF_NULLABLE_LIST
            case (false, true) => pb += 1; map(b + 2) = pb; RepDefLayer.REPDEF_EMPTYABLE_LIST
            // a list with neither nulls nor empties under a null struct or list: declared nullable
            // (its level unused), as readers (pylance) attribute levels above an all-valid list
            // to the items below it
            case _ if seen.indexWhere(identity, bases(j + 1) + 1) >= 0 =>
              pb += 1; map(b + 1) = pb; RepDefLayer.REPDEF_NULLABLE_LIST
            case _ => RepDefLayer.REPDEF_ALL_VALID_LIST
          }
      }
    }.toVector
    (layers, map)
  }
}
