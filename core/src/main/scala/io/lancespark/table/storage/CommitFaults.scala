package io.lancespark.table.storage

/** Named points of the commit protocol where a test can kill the committing
  * JVM (`Runtime.halt`, no shutdown hooks: as a `kill -9` would), to show that
  * an interrupted commit leaves a state the next reader or writer completes or
  * ignores. Armed only by the environment variable or system property
  * `LANCE_TEST_HALT_AT` = a point's name; never set in production. */
object CommitFaults {
  /** Data and transaction files written, the manifest not yet published. */
  val BeforeManifest: String = "before-manifest"
  /** External store: the staged manifest written, no record yet. */
  val StagedManifest: String = "staged-manifest"
  /** External store: the record names the staged manifest; the final one is not written. */
  val ExternalRecord: String = "external-record"
  /** External store: the final manifest written; the record still names the staged one. */
  val FinalManifest: String = "final-manifest"

  private val armed: Option[String] =
    Option(System.getProperty("LANCE_TEST_HALT_AT")).orElse(Option(System.getenv("LANCE_TEST_HALT_AT"))).filter(_.nonEmpty)

  def reached(point: String): Unit =
    if (armed.contains(point)) {
      System.err.println(s"lance-spark: halting at commit point '$point' (LANCE_TEST_HALT_AT)")
      Runtime.getRuntime.halt(137)
    }
}
