package io.lancespark.table.filter

/** A set of possible results of a predicate over some rows: a subset of
  * {TRUE, FALSE, NULL}, as a 3-bit mask. */
final class Outcomes private (val mask: Int) extends AnyVal {
  def canBeTrue: Boolean = (mask & 1) != 0
  def canBeFalse: Boolean = (mask & 2) != 0
  def canBeNull: Boolean = (mask & 4) != 0
  def isEmpty: Boolean = mask == 0
  /** No row can match: the rows can be skipped. */
  def skippable: Boolean = !canBeTrue
  /** Every row matches. */
  def allTrue: Boolean = mask == 1
  def |(o: Outcomes): Outcomes = new Outcomes(mask | o.mask)
  def contains(o: Outcomes): Boolean = (mask & o.mask) == o.mask

  /** Kleene NOT, element-wise. */
  def unary_! : Outcomes = new Outcomes((mask & 4) | ((mask & 1) << 1) | ((mask & 2) >> 1))
  /** { x AND y | x in this, y in o }. */
  def and(o: Outcomes): Outcomes = new Outcomes(Outcomes.andTable(mask * 8 + o.mask))
  /** { x OR y | x in this, y in o }. */
  def or(o: Outcomes): Outcomes = !((!this).and(!o))

  override def toString: String =
    Seq(canBeTrue -> "TRUE", canBeFalse -> "FALSE", canBeNull -> "NULL").collect { case (true, s) => s }
      .mkString("{", ", ", "}")
}

object Outcomes {
  val None = new Outcomes(0)
  val True = new Outcomes(1)
  val False = new Outcomes(2)
  val Null = new Outcomes(4)
  val All = new Outcomes(7)

  def apply(canTrue: Boolean, canFalse: Boolean, canNull: Boolean): Outcomes =
    new Outcomes((if (canTrue) 1 else 0) | (if (canFalse) 2 else 0) | (if (canNull) 4 else 0))

  def fromMask(m: Int): Outcomes = new Outcomes(m & 7)

  // single values: 1 = T, 2 = F, 4 = N
  private def and1(a: Int, b: Int): Int =
    if (a == 2 || b == 2) 2 else if (a == 4 || b == 4) 4 else 1

  private val andTable: Array[Int] = Array.tabulate(64) { i =>
    val a = i / 8; val b = i % 8
    var out = 0
    for (x <- Seq(1, 2, 4) if (a & x) != 0; y <- Seq(1, 2, 4) if (b & y) != 0) out |= and1(x, y)
    out
  }
}
