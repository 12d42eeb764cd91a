package io.lancespark.table.model

import scala.jdk.CollectionConverters._

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.{RowDatasetVersionRun, RowDatasetVersionSequence, U64Segment}

/** Per-row dataset versions of a fragment (when each row was created or last
  * updated), as the format stores them with stable row ids: runs of one
  * version over consecutive row positions. */
object RowVersions {

  /** One version per physical row, decoded from a serialized sequence. */
  def decode(bytes: Array[Byte], physicalRows: Long, where: String): Array[Long] = {
    val seq =
      try RowDatasetVersionSequence.parseFrom(bytes)
      catch {
        case e: com.google.protobuf.InvalidProtocolBufferException =>
          throw new LanceFormatException(s"$where: corrupt row version sequence: ${e.getMessage}", e)
      }
    val out = Array.newBuilder[Long]
    seq.getRunsList.asScala.foreach { r =>
      val n = RowIdSequence.segmentLength(r.getSpan, where)
      var i = 0L
      while (i < n) { out += r.getVersion; i += 1 }
    }
    val all = out.result()
    if (all.length.toLong != physicalRows)
      throw new LanceFormatException(s"$where: a row version sequence of ${all.length} rows for $physicalRows rows")
    all
  }

  /** The same version for every one of `rows` rows. */
  def uniform(rows: Long, version: Long): Array[Long] = Array.fill(rows.toInt)(version)

  /** `version` for all of `rows` rows, serialized (one run). */
  def single(rows: Long, version: Long): Array[Byte] =
    RowDatasetVersionSequence.newBuilder().addRuns(RowDatasetVersionRun.newBuilder().setVersion(version)
      .setSpan(U64Segment.newBuilder().setRange(U64Segment.Range.newBuilder().setStart(0L).setEnd(rows))))
      .build().toByteArray

  /** Each physical row's created-at version of fragment `f` (`where` names it
    * in errors): its sequence, or 1 for every row where it records none, as
    * pylance reads such fragments (those of tables without stable row ids too). */
  def createdAt(f: FragmentInfo, where: String): Array[Long] = {
    val p = f.proto
    if (p.hasExternalCreatedAtVersions)
      throw new UnsupportedOperationException(s"$where: row versions in external files are not supported yet")
    if (p.hasInlineCreatedAtVersions) decode(p.getInlineCreatedAtVersions.toByteArray, f.physicalRows, where)
    else uniform(f.physicalRows, 1L)
  }

  /** Each physical row's last-updated-at version of fragment `f`: its
    * sequence, or 1 for every row where it records none (as pylance). */
  def lastUpdatedAt(f: FragmentInfo, where: String): Array[Long] = {
    val p = f.proto
    if (p.hasExternalLastUpdatedAtVersions)
      throw new UnsupportedOperationException(s"$where: row versions in external files are not supported yet")
    if (p.hasInlineLastUpdatedAtVersions) decode(p.getInlineLastUpdatedAtVersions.toByteArray, f.physicalRows, where)
    else uniform(f.physicalRows, 1L)
  }

  /** Runs of equal versions over positions 0..n, serialized. */
  def encode(versions: Array[Long]): Array[Byte] = {
    val b = RowDatasetVersionSequence.newBuilder()
    var start = 0
    while (start < versions.length) {
      var end = start + 1
      while (end < versions.length && versions(end) == versions(start)) end += 1
      b.addRuns(RowDatasetVersionRun.newBuilder().setVersion(versions(start)).setSpan(U64Segment.newBuilder()
        .setRange(U64Segment.Range.newBuilder().setStart(start.toLong).setEnd(end.toLong))))
      start = end
    }
    b.build().toByteArray
  }
}
