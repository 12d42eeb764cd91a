package io.lancespark.table

/** `make test-long` sets LANCE_LONG_TESTS=1: the suites run their cases at length; `make test`
  * runs a slice of them (to stay inside CI's budget). */
object LongTests {
  val enabled: Boolean = sys.env.get("LANCE_LONG_TESTS").contains("1")

  /** `everything` under make test-long, else make test's slice of it. */
  def sliced[A](everything: Seq[A], makeTest: Seq[A]): Seq[A] = if (enabled) everything else makeTest
}
