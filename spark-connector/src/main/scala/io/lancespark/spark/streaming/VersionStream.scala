package io.lancespark.spark.streaming

import org.apache.spark.sql.connector.read.streaming.{MicroBatchStream, Offset, ReadLimit, SupportsAdmissionControl, SupportsTriggerAvailableNow}

import io.lancespark.spark.options.StreamConf

/** What the two Lance streams (the appends and the change feed) share: offsets
  * are versions ([[LanceStreamOffset]]), admission control comes from the
  * stream's options (maxRowsPerTrigger, else maxFilesPerTrigger), and
  * `Trigger.AvailableNow` reads up to the version that was latest when it was
  * asked for. */
private[streaming] trait VersionStream
    extends MicroBatchStream with SupportsAdmissionControl with SupportsTriggerAvailableNow {

  protected def streamConf: StreamConf

  /** The dataset's latest version now. */
  protected def latestVersion: Long

  @volatile private var availableNowEnd: Option[Long] = None

  /** The last version a batch may read: the latest, or AvailableNow's end. */
  protected def lastReadable: Long = availableNowEnd.getOrElse(latestVersion)

  override def deserializeOffset(json: String): Offset = LanceStreamOffset.parse(json)

  override def getDefaultReadLimit: ReadLimit =
    streamConf.maxRowsPerTrigger.map(n => ReadLimit.maxRows(n))
      .orElse(streamConf.maxFilesPerTrigger.map(n => ReadLimit.maxFiles(n)))
      .getOrElse(ReadLimit.allAvailable())

  override def prepareForTriggerAvailableNow(): Unit = availableNowEnd = Some(latestVersion)

  override def latestOffset(): Offset =
    throw new UnsupportedOperationException("latestOffset(start, limit) is used with admission control")
}
