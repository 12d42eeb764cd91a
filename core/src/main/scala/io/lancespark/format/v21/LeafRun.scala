package io.lancespark.format.v21

import io.lancespark.format.arrow.{Block, Slice}
import io.lancespark.schema.LanceField

/** A leaf column of a 2.1/2.2 file and the path of layers above it,
  * innermost first (the leaf itself, then each struct or list around it). */
final case class LeafColumn(field: LanceField, column: Int, path: Vector[LayerKind], where: String) {
  val maxRep: Int = RepDef.maxRep(path)
  val maxVisibleDef: Int = RepDef.maxVisibleDef(path)
}

/** Decoded rows of a leaf: their levels (canonical) and the values of their
  * visible entries, as slices of decoded blocks, in order. */
final class LeafRun(val levels: Levels, val values: Vector[Slice]) {
  def visible: Long = values.iterator.map(_.count).sum
}

object LeafRun {
  /** Runs of consecutive pages as one. */
  def concat(runs: Seq[LeafRun]): LeafRun =
    if (runs.size == 1) runs.head
    else {
      val size = runs.map(_.levels.size).sum
      val rep = if (runs.exists(_.levels.rep != null)) new Array[Int](size) else null
      val defs = if (runs.exists(_.levels.defs != null)) new Array[Int](size) else null
      var at = 0
      runs.foreach { r =>
        val l = r.levels
        if (rep != null && l.rep != null) System.arraycopy(l.rep, 0, rep, at, l.size)
        if (defs != null && l.defs != null) System.arraycopy(l.defs, 0, defs, at, l.size)
        at += l.size
      }
      new LeafRun(new Levels(rep, defs, size), runs.flatMap(_.values).toVector)
    }

  /** The slices of `values` covering entries [from, until) of their concatenation. */
  def sliceValues(values: Seq[Slice], from: Long, until: Long): Vector[Slice] = {
    val out = Vector.newBuilder[Slice]
    var at = 0L
    values.foreach { s =>
      val a = math.max(from, at)
      val b = math.min(until, at + s.count)
      if (b > a) out += Slice(s.block, s.start + (a - at), b - a)
      at += s.count
    }
    out.result()
  }

  def whole(b: Block): Slice = Slice(b, 0, b.length)
}
