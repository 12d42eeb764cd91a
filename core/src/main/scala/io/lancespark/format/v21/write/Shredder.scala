package io.lancespark.format.v21.write

import scala.jdk.CollectionConverters._

import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.complex.{LargeListVector, ListVector, StructVector}

import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.format.v21.LayerKind
import io.lancespark.format.v21.layout.BlobV2Page

/** Turns Arrow vectors of one top-level field into the levels and values of
  * its leaf columns (the Dremel "striping"): every entry a leaf gets carries
  * its repetition level (a new row is the highest level; a new element of a
  * list at depth d, counted from the leaf's innermost list, is d - 1) and its
  * definition level (0 when valid, else the canonical level of the layer
  * where it is null or empty). An entry null at an item layer outside any list
  * below it keeps a value slot (a placeholder); entries of null or empty lists
  * have none. */
private[v21] final class Shredder(top: LanceField, leafOf: LanceField => LeafBuffer) {

  import Shredder._

  private def build(f: LanceField, depth: Int): Node =
    if (f.isStruct && BlobV2Page.isBlobV2(f)) Leaf(f, depth, leafOf(f))  // one column of descriptions
    else if (f.isStruct) Struct(f, depth, f.children.map(build(_, depth + 1)))
    else if (f.isList || f.isMap) ListNode(f, depth, build(f.children.head, depth + 1))
    else Leaf(f, depth, leafOf(f))

  private val root: Node = build(top, 0)

  /** Per leaf, indexed by the depth (from the top) of a node on its path:
    * the canonical level of a null there, of an empty list there, the
    * repetition level of a new element of a list there, and whether a null
    * item there keeps a value slot (no list between it and the leaf). */
  private final class LeafLevels(val nullDef: Array[Int], val emptyDef: Array[Int], val newElementRep: Array[Int],
                                 val keepsSlot: Array[Boolean], val maxRep: Int)

  private val levels: Map[LeafBuffer, LeafLevels] = root.leaves.map { lb =>
    val path = lb.path // innermost first
    val n = path.size
    val nullDef = new Array[Int](n)
    val emptyDef = new Array[Int](n)
    val rep = new Array[Int](n)
    val slot = new Array[Boolean](n)
    var base = 0
    var listsInside = 0
    (0 until n).foreach { j =>
      val k = n - 1 - j // depth from the top
      path(j) match {
        case LayerKind.Item =>
          nullDef(k) = base + 1
          slot(k) = listsInside == 0
          base += 1
        case LayerKind.List =>
          nullDef(k) = base + 1
          emptyDef(k) = base + 2
          listsInside += 1
          rep(k) = listsInside - 1
          base += 2
      }
    }
    lb -> new LeafLevels(nullDef, emptyDef, rep, slot, listsInside)
  }.toMap

  /** Rows [a, b) of the field's vector. */
  def write(v: FieldVector, a: Int, b: Int): Unit = root match {
    case Leaf(_, _, lb) if lb.rep == null =>
      // a top-level leaf: levels from the validity bitmap, values in bulk
      val nullDef = levels(lb).nullDef(0)
      if (v.getNullCount == 0) lb.defs.fill(0, b - a)
      else {
        var i = a
        while (i < b) { val d = if (v.isNull(i)) nullDef else 0; lb.defs.add(d); if (d != 0) lb.nulls += 1; i += 1 }
      }
      lb.appendValues(v, a, b)
      lb.rows += b - a
    case node =>
      denseVectors.clear()  // (vectors are refilled between batches)
      var i = a
      while (i < b) { walk(node, v, i, -1); i += 1 }
      node.leaves.foreach(_.rows += b - a)
  }

  /** The repetition level of an entry of `lb` caused by `cause` (the depth of
    * the list whose new element starts here, -1 for a new row). */
  private def repOf(lb: LeafBuffer, cause: Int): Int = {
    val l = levels(lb)
    if (cause < 0) l.maxRep else l.newElementRep(cause)
  }

  /** Every leaf below `node` gets one entry: null or empty at this node. */
  private def absent(node: Node, cause: Int, empty: Boolean): Unit = node.leaves.foreach { lb =>
    val l = levels(lb)
    val d = if (empty) l.emptyDef(node.depth) else l.nullDef(node.depth)
    lb.entry(repOf(lb, cause), d)
    if (!empty && l.keepsSlot(node.depth) && !node.isInstanceOf[ListNode]) lb.placeholder()
  }

  /** Whether a list's item vector holds no null (nor a kind of value that
    * is placed one by one). */
  private def dense(items: FieldVector): Boolean = {
    // once per vector and batch: counting its nulls reads its whole validity
    val known = denseVectors.get(items)
    if (known != null) known.booleanValue()
    else {
      val d = items match {
        case _: org.apache.arrow.vector.BaseFixedWidthVector | _: org.apache.arrow.vector.BaseVariableWidthVector |
             _: org.apache.arrow.vector.BaseLargeVariableWidthVector => items.getNullCount == 0
        case _ => false
      }
      denseVectors.put(items, java.lang.Boolean.valueOf(d))
      d
    }
  }
  private val denseVectors = new java.util.IdentityHashMap[FieldVector, java.lang.Boolean]()

  private def walk(node: Node, v: FieldVector, i: Int, cause: Int): Unit = node match {
    case Leaf(_, depth, lb) =>
      if (v.isNull(i)) {
        lb.entry(repOf(lb, cause), levels(lb).nullDef(depth))
        if (levels(lb).keepsSlot(depth)) lb.placeholder()
      } else {
        lb.entry(repOf(lb, cause), 0)
        lb.appendValues(v, i, i + 1)
      }
    case s: Struct =>
      if (v.isNull(i)) absent(s, cause, empty = false)
      else {
        val kids = v.asInstanceOf[StructVector].getChildrenFromFields.asScala
        if (kids.size != s.children.size)
          throw new LanceFormatException(s"column '${s.field.name}': ${kids.size} child vectors for ${s.children.size} fields")
        s.children.zip(kids).foreach { case (c, k) => walk(c, k, i, cause) }
      }
    case l: ListNode =>
      if (v.isNull(i)) absent(l, cause, empty = false)
      else {
        val (start, end, items) = v match {
          case lv: ListVector => (lv.getOffsetBuffer.getInt(4L * i).toLong, lv.getOffsetBuffer.getInt(4L * (i + 1)).toLong, lv.getDataVector)
          case lv: LargeListVector => (lv.getOffsetBuffer.getLong(8L * i), lv.getOffsetBuffer.getLong(8L * (i + 1)), lv.getDataVector)
          case other => throw new LanceFormatException(s"column '${l.field.name}' is a list but its vector is ${other.getClass.getSimpleName}")
        }
        if (end == start) absent(l, cause, empty = true)
        else if (l.child.isInstanceOf[Leaf] && dense(items)) {
          // a list of values none of which is null (embeddings): levels and values in bulk
          val lb = l.child.asInstanceOf[Leaf].buffer
          val n = (end - start).toInt
          lb.rep.add(repOf(lb, cause))
          lb.rep.fill(levels(lb).newElementRep(l.depth), n - 1)
          lb.defs.fill(0, n)
          lb.appendValues(items, start.toInt, end.toInt)
        } else {
          var j = start
          while (j < end) {
            walk(l.child, items, j.toInt, if (j == start) cause else l.depth)
            j += 1
          }
        }
      }
  }
}

private object Shredder {
  sealed trait Node { def field: LanceField; def depth: Int; def leaves: Vector[LeafBuffer] }
  final case class Leaf(field: LanceField, depth: Int, buffer: LeafBuffer) extends Node {
    def leaves: Vector[LeafBuffer] = Vector(buffer)
  }
  final case class Struct(field: LanceField, depth: Int, children: Vector[Node]) extends Node {
    val leaves: Vector[LeafBuffer] = children.flatMap(_.leaves)
  }
  final case class ListNode(field: LanceField, depth: Int, child: Node) extends Node {
    val leaves: Vector[LeafBuffer] = child.leaves
  }

}
