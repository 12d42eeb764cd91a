package io.lancespark.table.commit

import io.lancespark.table.storage.{Dataset, DatasetStorage}

/** Exactly-once commits of a streaming query: each micro-batch's commit
  * records the query's id and the batch id in its transaction's
  * `transaction_properties`; a batch whose id is at most the last one the
  * query committed was already committed (a replay after a crash between the
  * commit and the checkpoint) and is skipped. Like Iceberg's streaming sink,
  * which walks its snapshots back for the query id; Delta keeps the pair as a
  * `txn` action of its log. */
object StreamingCommits {
  val QueryIdKey: String = "lance-spark.streaming.queryId"
  val BatchIdKey: String = "lance-spark.streaming.batchId"

  /** The properties a micro-batch's commit records. */
  def properties(queryId: String, batchId: Long): Map[String, String] =
    Map(QueryIdKey -> queryId, BatchIdKey -> batchId.toString)

  /** One commit of a query: the version it made and its batch id. */
  final case class Committed(version: Long, batchId: Long)

  /** The newest commit of `queryId`, walking the versions back from the latest
    * down to `notBefore` (a version known to hold one of its commits, or 1):
    * the first transaction naming the query decides, since a query commits
    * its batches in order. Stops early at a version whose manifest is gone (a
    * cleanup removed the older ones); None if no commit of the query is found. */
  def lastCommitted(storage: DatasetStorage, queryId: String, notBefore: Long = 1L): Option[Committed] =
    Dataset.latest(storage).flatMap { latest =>
      val known = new CommittedTransactions(storage)
      val versions = Iterator.iterate(latest.version)(_ - 1).takeWhile(_ >= math.max(notBefore, 1L))
      versions.map(v => v -> known(latest.naming, v)).takeWhile(_._2.isDefined).collectFirst {
        case (v, Some(Some(txn))) if txn.getTransactionPropertiesMap.get(QueryIdKey) == queryId =>
          val batch = txn.getTransactionPropertiesMap.get(BatchIdKey)
          Committed(v, scala.util.Try(batch.toLong).getOrElse(throw new IllegalStateException(
            s"${storage.uri}: version $v's transaction names streaming query $queryId with batch id '$batch', not a number")))
      }
    }
}
