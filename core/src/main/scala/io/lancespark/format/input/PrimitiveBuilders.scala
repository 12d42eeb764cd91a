package io.lancespark.format.input

/** Growing arrays of primitives, the same on Scala 2.12 and 2.13 without
  * boxing: `ArrayBuilder.ofLong`'s `+=` boxes each value on 2.13 (it is
  * Growable's generic method there) and its unboxed `addOne` does not exist
  * on 2.12; the decode paths add a value per row. */
sealed abstract class PrimitiveArrayBuilder {
  private var n = 0
  protected def capacity: Int
  /** Doubles the storage, keeping the values added. */
  protected def grow(): Unit
  /** The index of the next value, after growing the storage if it is full. */
  protected final def slot(): Int = {
    if (n == capacity) grow()
    n += 1
    n - 1
  }
  def length: Int = n
}

final class LongArrayBuilder extends PrimitiveArrayBuilder {
  private var a = new Array[Long](16)
  protected def capacity: Int = a.length
  protected def grow(): Unit = a = java.util.Arrays.copyOf(a, a.length * 2)
  def add(v: Long): Unit = { val i = slot(); a(i) = v } // (a(slot()) would store into the array before it grew)
  /** The values added, in a new array of exactly their length. */
  def result(): Array[Long] = java.util.Arrays.copyOf(a, length)
}

final class IntArrayBuilder extends PrimitiveArrayBuilder {
  private var a = new Array[Int](16)
  protected def capacity: Int = a.length
  protected def grow(): Unit = a = java.util.Arrays.copyOf(a, a.length * 2)
  def add(v: Int): Unit = { val i = slot(); a(i) = v }
  /** The values added, in a new array of exactly their length. */
  def result(): Array[Int] = java.util.Arrays.copyOf(a, length)
}
