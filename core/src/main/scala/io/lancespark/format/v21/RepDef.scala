package io.lancespark.format.v21

import io.lancespark.format.arrow.Bits
import io.lancespark.proto.encodings21.RepDefLayer

/** One layer of a leaf's path, innermost (the leaf itself) first: an item
  * (the leaf, or a struct around it) or a list. */
sealed trait LayerKind

object LayerKind {
  case object Item extends LayerKind
  case object List extends LayerKind
}

/** The repetition and definition levels of a run of a leaf's entries.
  * `rep` is null when the path has no list; `defs` is null when every entry is
  * valid. Definition levels are in this reader's canonical numbering, where
  * every item layer has one level (null) and every list layer two (null,
  * empty) whether or not the page uses them; pages number only the levels
  * their layers need, and [[RepDef.canonical]] maps them. */
final class Levels(val rep: Array[Int], val defs: Array[Int], val size: Int) {

  /** The entries [a, b) of rows [from, until) (counted from the first row
    * these levels start), a row starting at each entry of repetition level
    * `maxRep`; `a` is -1 when row `from` is not found, `b` is `size` when
    * the levels end before row `until`. */
  def rowEntries(maxRep: Int, from: Long, until: Long): (Int, Int) = {
    var k = -1L
    var a = -1
    var b = size
    var i = 0
    while (i < size && b == size) {
      if (rep(i) == maxRep) {
        k += 1
        if (k == from) a = i
        if (k == until) b = i
      }
      i += 1
    }
    (a, b)
  }
}

/** What one layer of a leaf's path holds for the entries decoded: items (a
  * struct or the leaf: `count` of them, and which are valid) or lists (their
  * offsets into the next layer inwards, and which are valid). */
sealed trait LayerOut { def count: Int; def validity: Option[Bits] }

final case class ItemOut(count: Int, validity: Option[Bits]) extends LayerOut

final case class ListOut(count: Int, offsets: Array[Long], validity: Option[Bits]) extends LayerOut

/** Repetition and definition levels (see protos/encodings_v2_1.proto): a
  * repetition level r > 0 starts a new list at list depth r (counted from
  * the innermost list, 1) and so at every depth inside it; 0 continues the
  * innermost list. A definition level 0 is a valid leaf value; d > 0 names the
  * layer, counted from the leaf outwards, where the entry is null (or an empty
  * list). An entry null or empty at a list layer, or null at an item layer
  * outside a list, has no leaf value slot: it is not "visible". */
object RepDef {

  /** Canonical levels per layer kind. */
  private def canonicalLevels(k: LayerKind): Int = k match {
    case LayerKind.Item => 1
    case LayerKind.List => 2
  }

  private def pageLevels(l: RepDefLayer): Int = l match {
    case RepDefLayer.REPDEF_NULLABLE_ITEM | RepDefLayer.REPDEF_NULLABLE_LIST | RepDefLayer.REPDEF_EMPTYABLE_LIST => 1
    case RepDefLayer.REPDEF_NULL_AND_EMPTY_LIST => 2
    case _ => 0
  }

  private def isList(l: RepDefLayer): Boolean = l match {
    case RepDefLayer.REPDEF_ALL_VALID_LIST | RepDefLayer.REPDEF_NULLABLE_LIST | RepDefLayer.REPDEF_EMPTYABLE_LIST |
         RepDefLayer.REPDEF_NULL_AND_EMPTY_LIST => true
    case _ => false
  }

  /** Checks a page's layers against the leaf's path and maps its definition
    * levels to canonical ones: `map(d)` for a page level d. */
  def canonical(pageLayers: Seq[RepDefLayer], path: Vector[LayerKind], fail: String => Nothing): Array[Int] = {
    if (pageLayers.size != path.size)
      fail(s"the page describes ${pageLayers.size} nesting layers (${pageLayers.mkString(", ")}) " +
        s"but the field has ${path.size}")
    val map = new Array[Int](pageLayers.map(pageLevels).sum + 1)
    var pb = 0
    var cb = 0
    pageLayers.zip(path).zipWithIndex.foreach { case ((l, k), i) =>
      if (l == RepDefLayer.REPDEF_UNSPECIFIED || l == RepDefLayer.UNRECOGNIZED)
        fail(s"layer $i of the page has an unknown meaning ($l)")
      if (isList(l) != (k == LayerKind.List))
        fail(s"layer $i of the page is $l but the field's layer $i is ${if (k == LayerKind.List) "a list" else "not a list"}")
      l match {
        case RepDefLayer.REPDEF_NULLABLE_ITEM | RepDefLayer.REPDEF_NULLABLE_LIST => map(pb + 1) = cb + 1
        case RepDefLayer.REPDEF_EMPTYABLE_LIST => map(pb + 1) = cb + 2
        case RepDefLayer.REPDEF_NULL_AND_EMPTY_LIST => map(pb + 1) = cb + 1; map(pb + 2) = cb + 2
        case _ => ()
      }
      pb += pageLevels(l)
      cb += canonicalLevels(k)
    }
    map
  }

  /** The number of list layers of a path (the highest repetition level). */
  def maxRep(path: Vector[LayerKind]): Int = path.count(_ == LayerKind.List)

  /** The highest canonical definition level at which an entry still has a
    * leaf value slot: the levels of the item layers inside the innermost list. */
  def maxVisibleDef(path: Vector[LayerKind]): Int = path.takeWhile(_ == LayerKind.Item).map(canonicalLevels).sum

  /** Maps page definition levels in place (from `from` to `until`) to canonical ones. */
  def mapDefs(defs: Array[Int], from: Int, until: Int, map: Array[Int], fail: String => Nothing): Unit =
    if (isIdentity(map)) {
      // the levels stay as they are (a nullable column outside lists: 0 and 1): only checked
      var bad = 0
      var i = from
      while (i < until) { bad |= defs(i) | (map.length - 1 - defs(i)); i += 1 }
      if (bad < 0) {
        val d = defs.slice(from, until).find(d => d < 0 || d >= map.length).get
        fail(s"definition level $d, but the page's layers allow at most ${map.length - 1}")
      }
    } else {
      var i = from
      while (i < until) {
        val d = defs(i)
        if (d < 0 || d >= map.length) fail(s"definition level $d, but the page's layers allow at most ${map.length - 1}")
        defs(i) = map(d)
        i += 1
      }
    }

  /** Whether `map` maps each level to itself. */
  def isIdentity(map: Array[Int]): Boolean = {
    var i = 0
    while (i < map.length && map(i) == i) i += 1
    i == map.length
  }

  /** Number of visible entries (entries with a leaf value slot) in [from, until). */
  def visible(defs: Array[Int], from: Int, until: Int, maxVisible: Int): Int =
    if (defs == null) until - from
    else {
      var c = 0
      var i = from
      while (i < until) { if (defs(i) <= maxVisible) c += 1; i += 1 }
      c
    }

  /** Turns the levels of whole rows into the validity and offsets of each
    * layer, innermost first. The outermost layer's count is the number of rows. */
  def unravel(levels: Levels, path: Vector[LayerKind], fail: String => Nothing): Vector[LayerOut] =
    if (path.size == 1 && path.head == LayerKind.Item && levels.rep == null && levels.defs != null)
      Vector(nullableItems(levels.defs, levels.size, fail))
    else unravelLayers(levels, path, fail)

  /** A column of nullable values outside any list or struct (the common
    * case): definition level 0 is a value, 1 a null; the validity bitmap is
    * built a byte (8 levels) at a time. */
  private def nullableItems(defs: Array[Int], size: Int, fail: String => Nothing): ItemOut = {
    val valid = new Array[Byte]((size + 7) / 8)
    var bad = 0
    var nulls = 0
    var e = 0
    // eight levels (each 0 or 1) a byte of the bitmap
    while (e + 8 <= size) {
      val d0 = defs(e); val d1 = defs(e + 1); val d2 = defs(e + 2); val d3 = defs(e + 3)
      val d4 = defs(e + 4); val d5 = defs(e + 5); val d6 = defs(e + 6); val d7 = defs(e + 7)
      bad |= (d0 | d1 | d2 | d3 | d4 | d5 | d6 | d7) & ~1
      val isNull = d0 | (d1 << 1) | (d2 << 2) | (d3 << 3) | (d4 << 4) | (d5 << 5) | (d6 << 6) | (d7 << 7)
      valid(e >>> 3) = (~isNull).toByte
      nulls += Integer.bitCount(isNull & 0xff)
      e += 8
    }
    if (e < size) {
      var b = 0
      var k = 0
      while (e + k < size) {
        val d = defs(e + k)
        bad |= d & ~1
        b |= (1 - (d & 1)) << k
        nulls += d & 1
        k += 1
      }
      valid(e >>> 3) = b.toByte
    }
    if (bad != 0) {
      val at = defs.iterator.take(size).indexWhere(d => (d & ~1) != 0)
      fail(s"definition level ${defs(at)} out of range")
    }
    ItemOut(size, if (nulls > 0) Some(new Bits(java.nio.ByteBuffer.wrap(valid), 0)) else None)
  }

  private def unravelLayers(levels: Levels, path: Vector[LayerKind], fail: String => Nothing): Vector[LayerOut] = {
    val n = path.size
    val bases = path.scanLeft(0)(_ + canonicalLevels(_))
    val listsInside = path.scanLeft(0)((c, k) => c + (if (k == LayerKind.List) 1 else 0))
    // the number of list layers at or inside the layer a canonical level belongs to
    val levelToRep = new Array[Int](bases(n) + 1)
    (0 until n).foreach { i =>
      (1 to canonicalLevels(path(i))).foreach { j =>
        levelToRep(bases(i) + j) = listsInside(i) + (if (path(i) == LayerKind.List) 1 else 0)
      }
    }
    val totalLists = listsInside(n)
    var size = levels.size
    var rep: Array[Int] =
      if (levels.rep != null) java.util.Arrays.copyOf(levels.rep, size)
      else if (totalLists > 0) Array.fill(size)(totalLists) // every entry a row of its own
      else null
    val defs: Array[Int] = if (levels.defs == null) null else java.util.Arrays.copyOf(levels.defs, size)
    if (defs != null) {
      var i = 0
      while (i < size) {
        if (defs(i) < 0 || defs(i) > bases(n)) fail(s"definition level ${defs(i)} out of range")
        i += 1
      }
    }
    var curRep = 0
    val out = Vector.newBuilder[LayerOut]
    (0 until n).foreach { i =>
      path(i) match {
        case LayerKind.Item =>
          if (defs == null) out += ItemOut(size, None)
          else {
            val valid = new Array[Byte]((size + 7) / 8)
            var count = 0
            var anyNull = false
            var e = 0
            val curDef = bases(i)
            while (e < size) {
              val d = defs(e)
              if (levelToRep(d) <= curRep) {
                if (d <= curDef) valid(count >>> 3) = (valid(count >>> 3) | (1 << (count & 7))).toByte
                else anyNull = true
                count += 1
              }
              e += 1
            }
            out += ItemOut(count, if (anyNull) Some(new Bits(java.nio.ByteBuffer.wrap(valid), 0)) else None)
          }
        case LayerKind.List =>
          if (rep == null) fail("a list layer without repetition levels")
          val nullL = bases(i) + 1
          val emptyL = bases(i) + 2
          val upperNull = emptyL
          // item layers right outside this list (up to the next list) mask it with their nulls
          val maxLevel = upperNull + path.drop(i + 1).takeWhile(_ == LayerKind.Item).map(canonicalLevels).sum
          val offsets = new Array[Long](size + 1)
          val valid = new Array[Byte]((size + 8) / 8)
          var lists = 0
          var anyNull = false
          var w = 0
          var cur = 0L
          var e = 0
          while (e < size) {
            val r = rep(e)
            if (r != 0) {
              val d = if (defs == null) 0 else defs(e)
              rep(w) = r - 1
              if (defs != null) defs(w) = d
              w += 1
              if (d <= maxLevel) {
                offsets(lists) = cur
                val isNull = d == nullL || d > upperNull
                if (isNull) anyNull = true
                else valid(lists >>> 3) = (valid(lists >>> 3) | (1 << (lists & 7))).toByte
                if (d != nullL && d != emptyL && d <= upperNull) cur += 1 // the list's first element
                lists += 1
              }
            } else cur += 1
            e += 1
          }
          offsets(lists) = cur
          size = w
          curRep += 1
          out += ListOut(lists, java.util.Arrays.copyOf(offsets, lists + 1),
            if (anyNull) Some(new Bits(java.nio.ByteBuffer.wrap(valid), 0)) else None)
      }
    }
    out.result()
  }
}
