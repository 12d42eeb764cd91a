package io.lancespark.table.maintenance

import java.util.UUID

import scala.collection.mutable.ArrayBuffer
import scala.util.Using

import org.apache.arrow.memory.BufferAllocator

import io.lancespark.table.commit.RewrittenFragment
import io.lancespark.table.model.{DataFileVersion, FragmentInfo, RowIdSequence, RowVersions}
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.{DataFiles, DatasetStorage, FragmentWriter}
import io.lancespark.table.storage.Snapshot

/** One group rewritten: the new fragments (not yet committed) and the live
  * rows they hold. */
final case class RewrittenGroup(group: CompactionGroup, added: Seq[RewrittenFragment], rowsWritten: Long)

/** Rewrites one compaction group: reads the live rows of its fragments in
  * order (every column of the schema, from whichever data file of the
  * fragment holds it; columns no file holds as nulls) and writes them into new
  * data files of at most `targetRowsPerFragment` rows, at the dataset's file
  * version, with the schema's field ids. With stable row ids each new fragment
  * carries its rows' ids and created/updated versions. Runs on an executor;
  * nothing is visible until the driver commits; on failure the files written
  * are deleted. */
object CompactionRewrite {

  /** A prefix naming a compaction's data files, so a failed one can sweep them. */
  def newPrefix(): String = s"compact-${UUID.randomUUID().toString.take(8)}"

  def rewrite(storage: DatasetStorage, snapshot: Snapshot, group: CompactionGroup, options: CompactionOptions,
      allocator: BufferAllocator, prefix: String): RewrittenGroup = {
    val byId = snapshot.fragments.map(f => f.id -> f).toMap
    val fragments = group.fragmentIds.map(id => byId.getOrElse(id, throw new IllegalArgumentException(
      s"${storage.uri} (version ${snapshot.version}): fragment $id to compact is not in this version")))
    val version = DataFileVersion.ofDataset(snapshot.fileVersion).getOrElse(throw new IllegalArgumentException(
      s"${storage.uri} (version ${snapshot.version}): file version ${snapshot.fileVersion} is not written by this connector"))
    val out = new Output(storage, snapshot, version, options, prefix)
    try {
      fragments.foreach(f => copy(storage, snapshot, f, options, allocator, out))
      val added = out.finish()
      RewrittenGroup(group, added, added.map(_.file.physicalRows).sum)
    } catch {
      case e: Throwable =>
        out.abort()
        throw e
    }
  }

  private def copy(storage: DatasetStorage, snapshot: Snapshot, f: FragmentInfo, options: CompactionOptions,
      allocator: BufferAllocator, out: Output): Unit =
    Using.resource(new FragmentScanner(storage, snapshot.version, f, snapshot.schema.fields, allocator,
        ref => DataFiles.open(storage, snapshot.schema, ref))) { scanner =>
      val ids: Option[RowIdSequence] = scanner.rowIds(snapshot.hasStableRowIds)
      if (snapshot.hasStableRowIds && ids.isEmpty)
        throw new IllegalStateException(s"${storage.uri} (version ${snapshot.version}): fragment ${f.id} has no row " +
          "ids, and the dataset has stable row ids")
      val versions = if (snapshot.hasStableRowIds) Some(rowVersions(storage, snapshot, f)) else None
      var from = 0L
      while (from < f.physicalRows) {
        // never more rows than the open file has room for: no batch is split
        val until = math.min(f.physicalRows, from + math.min(options.maxRowsPerGroup.toLong, out.room))
        Using.resource(scanner.read(from, until)) { batch =>
          if (batch.rowCount > 0) {
            val rowIds = ids.map { seq =>
              val all = seq.slice(from, until)
              batch.offsets.map(o => all((o - from).toInt))
            }
            out.write(batch.vectors, batch.rowCount, rowIds, versions.map { case (c, u) => (batch.offsets.map(c(_)), batch.offsets.map(u(_))) })
          }
        }
        from = until
      }
    }

  /** Each physical row's created-at and last-updated-at version (version 1
    * where the fragment records none, as the reference reads them). */
  private def rowVersions(storage: DatasetStorage, snapshot: Snapshot, f: FragmentInfo): (Array[Long], Array[Long]) = {
    val where = s"${storage.uri} (version ${snapshot.version}, fragment ${f.id})"
    val p = f.proto
    if (p.hasExternalCreatedAtVersions || p.hasExternalLastUpdatedAtVersions)
      throw new UnsupportedOperationException(s"$where: row versions in external files are not supported yet")
    val created =
      if (p.hasInlineCreatedAtVersions) RowVersions.decode(p.getInlineCreatedAtVersions.toByteArray, f.physicalRows, where)
      else RowVersions.uniform(f.physicalRows, 1L)
    val updated =
      if (p.hasInlineLastUpdatedAtVersions)
        RowVersions.decode(p.getInlineLastUpdatedAtVersions.toByteArray, f.physicalRows, where)
      else created
    (created, updated)
  }

  /** The new files of one group, each closed at the target row count. */
  private final class Output(storage: DatasetStorage, snapshot: Snapshot, version: DataFileVersion,
      options: CompactionOptions, prefix: String) {
    private val stable = snapshot.hasStableRowIds
    private val done = ArrayBuffer.empty[RewrittenFragment]
    private var writer: Option[FragmentWriter] = None
    private var rows = 0L
    private val ids = new ArrayBuffer[Array[Long]]
    private val created = new ArrayBuffer[Array[Long]]
    private val updated = new ArrayBuffer[Array[Long]]

    def room: Long = options.targetRowsPerFragment - rows

    def write(columns: Seq[org.apache.arrow.vector.FieldVector], count: Int, rowIds: Option[Array[Long]],
        versions: Option[(Array[Long], Array[Long])]): Unit = {
      val w = writer.getOrElse {
        val opened = new FragmentWriter(storage, snapshot.schema, version, None, prefix)
        writer = Some(opened)
        opened
      }
      w.write(columns)
      rows += count
      rowIds.foreach(ids += _)
      versions.foreach { case (c, u) => created += c; updated += u }
      if (rows >= options.targetRowsPerFragment) close()
    }

    private def close(): Unit = writer.foreach { w =>
      val file = w.finish()
      def concat(parts: ArrayBuffer[Array[Long]]): Array[Long] = { val a = parts.toArray.flatten; parts.clear(); a }
      done += (if (!stable) RewrittenFragment(file, None, None, None)
        else RewrittenFragment(file, Some(RowIdSequence.encode(concat(ids))), Some(RowVersions.encode(concat(created))),
          Some(RowVersions.encode(concat(updated)))))
      writer = None
      rows = 0L
    }

    def finish(): Seq[RewrittenFragment] = { close(); done.toSeq }

    def abort(): Unit = {
      writer.foreach(_.abort())
      done.foreach(f => FragmentWriter.delete(storage, f.file.path))
    }
  }
}
