package io.lancespark.spark

import java.lang.ref.WeakReference

import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.QueryPlanningTracker

/** The session's Hadoop configuration for reading and planning, made once per query plan.
  *
  * Spark's `newHadoopConf()` copies the whole Hadoop configuration (about a thousand entries,
  * a millisecond) and the session's SQL settings over it; planning one query over a few tables
  * asked for it several times per table (the catalog's lookup, the snapshot, the reader
  * factory): a fifth of the planning time the connector adds to a small query. Within the
  * planning of one query (Spark's `QueryPlanningTracker` of the planning thread, where the
  * line sets one) the copy is shared; outside it, or for another query, it is made again, so
  * settings changed between queries (the session's, or the SparkContext's Hadoop
  * configuration) are seen by the next query, as Spark's own file sources see them. Nothing
  * in the connector changes a configuration it is given. */
object HadoopConfs {
  private final class Memo(val tracker: WeakReference[QueryPlanningTracker],
      val session: WeakReference[SparkSession], val conf: Configuration)

  private val memo: ThreadLocal[Memo] = new ThreadLocal[Memo]

  def of(session: SparkSession): Configuration = QueryPlanningTracker.get match {
    case Some(tracker) =>
      val m = memo.get
      if (m != null && (m.tracker.get eq tracker) && (m.session.get eq session)) m.conf
      else {
        val conf = session.sessionState.newHadoopConf()
        memo.set(new Memo(new WeakReference(tracker), new WeakReference(session), conf))
        conf
      }
    case None => session.sessionState.newHadoopConf()
  }

  /** For the active session. */
  def active: Configuration = of(SparkSession.active)
}
