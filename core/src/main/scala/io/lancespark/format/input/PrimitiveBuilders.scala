package io.lancespark.format.input

/** Growing arrays of primitives, the same on Scala 2.12 and 2.13 without
  * boxing: `ArrayBuilder.ofLong`'s `+=` boxes each value on 2.13 (it is
  * Growable's generic method there) and its unboxed `addOne` does not exist
  * on 2.12; the decode paths add a value per row. */
final class LongArrayBuilder(initial: Int = 16) {
  private var a = new Array[Long](math.max(1, initial))
  private var n = 0
  def add(v: Long): Unit = {
    if (n == a.length) a = java.util.Arrays.copyOf(a, a.length * 2)
    a(n) = v
    n += 1
  }
  def length: Int = n
  /** The values added, in a new array of exactly their length. */
  def result(): Array[Long] = java.util.Arrays.copyOf(a, n)
}

/** [[LongArrayBuilder]] for ints. */
final class IntArrayBuilder(initial: Int = 16) {
  private var a = new Array[Int](math.max(1, initial))
  private var n = 0
  def add(v: Int): Unit = {
    if (n == a.length) a = java.util.Arrays.copyOf(a, a.length * 2)
    a(n) = v
    n += 1
  }
  def length: Int = n
  /** The values added, in a new array of exactly their length. */
  def result(): Array[Int] = java.util.Arrays.copyOf(a, n)
}
