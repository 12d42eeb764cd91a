package io.lancespark.table.commit

import java.time.Instant

import scala.annotation.tailrec
import scala.jdk.CollectionConverters._

import com.google.protobuf.Timestamp

import io.lancespark.schema.LanceFormatException
import io.lancespark.schema.{LanceSchema, SchemaProto}
import io.lancespark.proto.table.{DataFile, DataFragment, IndexMetadata, IndexSection, Manifest, RowIdSequence => PbRowIds, Transaction, U64Segment}
import io.lancespark.table.model.{DataFileVersion, FeatureFlags, RowVersions}
import io.lancespark.table.storage.{AtomicPut, CommitFaults, Dataset, DatasetStorage, ExternalManifestCommit, FragmentDeletion, Indices, ManifestFile, ManifestMigration, ManifestNaming, RowDeletions, TransactionFile, VersionLookup}
import io.lancespark.table.model.WrittenFragment
import io.lancespark.table.storage.Snapshot

/** What a write commits. */
sealed trait PendingOperation { def fragments: Seq[WrittenFragment] }
final case class AppendFragments(fragments: Seq[WrittenFragment]) extends PendingOperation
/** An append that also adds top-level fields (schema evolution on write):
  * `schema` is the dataset's schema with the new fields (ids above every
  * existing one), which the new fragments' files were written with; existing
  * fragments read the new fields as NULL. Committed in one version as a Merge
  * transaction (its fragments: the existing ones and the new), so it has the
  * conflict rules of an addition of columns. */
final case class AppendWithSchema(fragments: Seq[WrittenFragment], schema: io.lancespark.schema.LanceSchema)
    extends PendingOperation
/** Replaces the dataset's contents and schema (creates it when absent).
  * `schema` has the field ids the files were written with; `version` the file
  * version the dataset stores from now on (the fragments' own). */
final case class OverwriteDataset(fragments: Seq[WrittenFragment], schema: LanceSchema,
    version: DataFileVersion, config: Map[String, String] = Map.empty)
    extends PendingOperation {
  fragments.find(_.version != version).foreach(f =>
    throw new IllegalArgumentException(s"${f.path} is a ${f.version} file; the dataset is being written at $version"))
}

/** Changes only the schema (ALTER TABLE ADD/DROP/RENAME COLUMN): data files
  * stay; added fields read as nulls, dropped fields are no longer read. */
final case class ReplaceSchema(schema: LanceSchema) extends PendingOperation {
  override def fragments: Seq[WrittenFragment] = Nil
}

/** One fragment's file of added columns: `file` holds only the new columns,
  * one row per physical row of the fragment, in its row order. */
final case class FragmentColumns(fragmentId: Long, file: WrittenFragment)

/** Adds columns as new data files beside existing fragments' files (a Merge
  * transaction, as pylance's `add_columns`/`merge`): each listed fragment gains
  * its file; `schema` is the dataset's schema with the new fields. Existing
  * data files are not touched. Built by [[AddColumnsBuild]].
  *
  * `replaces`: field ids (of existing fields) whose values the new files hold
  * instead (an update of columns): in the fragment's older files those ids
  * become -2, the reference's tombstone for a field moved out of a file (as
  * pylance's `LanceFragment.update_columns` writes); the files themselves are
  * not touched. Every new file must then hold only these ids (all of a
  * field's ids: 2.1+ files list only leaves), each one a file of the fragment
  * held before. */
final case class AddColumnFiles(files: Seq[FragmentColumns], schema: io.lancespark.schema.LanceSchema,
    replaces: Set[Int] = Set.empty)
    extends PendingOperation {
  /** The new files (what a failed commit removes); they are no new fragments. */
  override def fragments: Seq[WrittenFragment] = files.map(_.file)
}

/** DELETE / UPDATE / MERGE (merge-on-read): the deletion files prepared for
  * existing fragments (one per fragment), and new fragments holding updated
  * and inserted rows. With no new fragments it commits a Delete transaction,
  * else an Update. When another writer changed one of those fragments since the
  * read version, the commit merges both deletion sets into a new file (for an
  * update, only if the two changed disjoint rows; else it is a conflict). */
final case class RowLevelChange(
    deletions: Seq[FragmentDeletion],
    fragments: Seq[WrittenFragment],
    predicate: String = "") extends PendingOperation {
  require(deletions.map(_.fragmentId).distinct.size == deletions.size, "one deletion per fragment")
}

/** Restore: the next version's content is `version`'s (schema, fragments,
  * indices, config), committed with a Restore transaction. Fragment and row
  * id counters never go back, so later writes get fresh ids. */
final case class RestoreVersion(version: Long) extends PendingOperation {
  override def fragments: Seq[WrittenFragment] = Nil
}

/** A compaction (Rewrite): each group's old fragments, as the compaction read
  * them, are replaced by the fragments rewritten from their live rows. The
  * commit gives the new fragments their ids; their row ids (stable row ids)
  * and per-row versions are carried from the old rows. */
final case class RewriteFragments(groups: Seq[RewriteGroupResult]) extends PendingOperation {
  require(groups.nonEmpty, "a rewrite of no fragment groups")
  override def fragments: Seq[WrittenFragment] = groups.flatMap(_.added.map(_.file))
  def oldFragmentIds: Seq[Long] = groups.flatMap(_.old.map(_.getId))
}

/** One rewritten group: the fragments it replaces and what replaces them. */
final case class RewriteGroupResult(old: Seq[DataFragment], added: Seq[RewrittenFragment]) {
  require(old.nonEmpty, "a rewrite group replaces at least one fragment")
}

/** A new fragment a compaction wrote: its data file and, with stable row ids,
  * the serialized row id sequence and per-row created/updated versions of its rows. */
final case class RewrittenFragment(
    file: WrittenFragment,
    rowIds: Option[Array[Byte]],
    createdAtVersions: Option[Array[Byte]],
    lastUpdatedAtVersions: Option[Array[Byte]])

/** CreateIndex: index metadata for index files already written under
  * `_indices/<uuid>/`. The new version keeps the fragments; its index section
  * is the previous one without the indices of the same names (or removed),
  * plus these, as the reference builds it. */
final case class CreateIndices(newIndices: Seq[IndexMetadata], removedIndices: Seq[IndexMetadata] = Nil)
    extends PendingOperation {
  require(newIndices.nonEmpty || removedIndices.nonEmpty, "a CreateIndex of no index")
  override def fragments: Seq[WrittenFragment] = Nil
}

final case class CommitSettings(
    stableRowIds: Boolean = false,
    v2ManifestNaming: Boolean = true,
    /** Attempts before a writer that keeps losing the race gives up (each loss backs off up to 1 s):
      * 8 writers appending at once on a loaded machine lost 20 in a row. */
    maxAttempts: Int = 100,
    writerLibrary: String = "lance-spark",
    writerVersion: String = "0.1.0",
    /** Recorded in the transaction file's `transaction_properties` (e.g. a
      * streaming query's id and batch id, see [[StreamingCommits]]). */
    transactionProperties: Map[String, String] = Map.empty,
    /** Runs in each attempt after the versions committed so far are checked, before the lookup
      * the new version is built on: tests commit other versions there. */
    betweenLookups: () => Unit = () => ())

/** Another writer committed a change this one cannot be rebased onto. */
final class CommitConflictException(message: String) extends RuntimeException(message)

/** The commit protocol of the spec's "Committing Datasets": write the
  * transaction file, check the transactions committed since the read version,
  * build the next manifest and create it if absent; when another writer won
  * the race, check again and retry, a bounded number of times. */
object Committer {

  /** Commits `op` read at `readVersion` (None: the dataset is being created).
    * Returns the committed snapshot. Each attempt writes its own transaction
    * file, describing exactly the version it tries to create (a retry may
    * merge deletion sets or renumber fragments). */
  def commit(storage: DatasetStorage, readVersion: Option[Long], op: PendingOperation,
      settings: CommitSettings): Snapshot =
    commit(storage, readVersion, op, settings, new CommittedTransactions(storage))

  /** Like `commit`, with the transactions the caller has already read. */
  def commit(storage: DatasetStorage, readVersion: Option[Long], op: PendingOperation,
      settings: CommitSettings, committed: CommittedTransactions): Snapshot = {
    storage.requireSafeCommit()
    attempt(storage, readVersion, op, settings, committed, 1, Checked(readVersion.getOrElse(0L), Map.empty))
  }

  @tailrec
  private def attempt(storage: DatasetStorage, readVersion: Option[Long], op: PendingOperation,
      settings: CommitSettings, known: CommittedTransactions, n: Int, checked: Checked): Snapshot = {
    // the latest version without listing _versions/; the versions after the read one by name.
    // Losing the race takes only a commit between the lookup the new version is built on and the
    // put, so what grows with the versions committed since the read (their transactions, read and
    // checked against this change, each once per commit) is done first, up to a first lookup; the
    // version is built on a second lookup from there (usually one existence check) and only the
    // versions committed in between (usually none) are checked after it. A compaction racing
    // frequent appends otherwise kept losing: its checks of every version since its read sat
    // between the lookup and the put.
    val ours = probe(readVersion.getOrElse(0L), op)
    val seen = Dataset.latest(storage)
    val caughtUp = checkConflicts(storage, readVersion, seen, ours, known, checked)
    settings.betweenLookups()
    val found = seen.map(VersionLookup.latestSince(storage, _))
    val latest = found.map(_.version)
    val scheme = found.map(_.naming).getOrElse(ManifestNaming.V2)
    val now = checkConflicts(storage, readVersion, found, ours, known, caughtUp)
    val disjoint = now.disjoint
    val base = latest.map(v => baseOf(storage, scheme, v))
    val naming = if (latest.isEmpty) (if (settings.v2ManifestNaming) ManifestNaming.V2 else ManifestNaming.V1) else scheme
    val version = latest.getOrElse(0L) + 1
    val built = op match {
      case RestoreVersion(old) => restore(storage, scheme, base, old, latest.getOrElse(0L), version, settings)
      case r: RewriteFragments => RewriteBuild(storage, base, r, readVersion.getOrElse(0L), version, settings)
      case a: AddColumnFiles => AddColumnsBuild(storage, base, a, readVersion.getOrElse(0L), version, settings)
      case _ => build(storage, base, op, readVersion.getOrElse(0L), version, settings, disjoint)
    }
    val committed = try {
      val txn = if (settings.transactionProperties.isEmpty) built.txn
        else built.txn.toBuilder.putAllTransactionProperties(settings.transactionProperties.asJava).build()
      val txnName = TransactionFile.write(storage, txn)
      val manifest = built.manifest.toBuilder.setTransactionFile(txnName).build()
      val path = Dataset.manifestPath(storage, naming, version)
      CommitFaults.reached(CommitFaults.BeforeManifest)
      val bytes = ManifestFile.serialize(manifest, built.indexSection)
      val won = storage.manifestStore match {
        case Some(store) => ExternalManifestCommit.publish(storage, store, version, path, bytes)
        case None => put(storage, path, bytes, txnName)
      }
      if (won) Some(ManifestFile.stored(manifest, built.indexSection)) else None
    } catch {
      case e: Throwable =>
        built.remerged.foreach(RowDeletions.discard(storage, _))
        throw e
    }
    committed match {
      case Some(manifest) =>
        built.superseded.foreach(RowDeletions.discard(storage, _))
        writeHint(storage, version)
        new Snapshot(storage, manifest, naming)
      case None =>
        built.remerged.foreach(RowDeletions.discard(storage, _))
        if (n >= settings.maxAttempts)
          throw new CommitConflictException(
            s"${storage.uri}: gave up committing after $n attempts: other writers kept committing version $version first")
        backOff(n)
        attempt(storage, readVersion, op, settings, known, n + 1, now)
    }
  }

  /** After losing the race for a version: a randomized, growing pause (25 ms
    * doubling up to 1 s), so that writers that keep colliding spread out
    * instead of retrying in lock step. */
  private def backOff(lostAttempts: Int): Unit = {
    val ceiling = math.min(1000L, 25L << math.min(lostAttempts - 1, 6))
    Thread.sleep(java.util.concurrent.ThreadLocalRandom.current().nextLong(ceiling / 2, ceiling + 1))
  }

  /** Create-if-absent of the manifest. A put that reports the file as already
    * there, or fails ambiguously (a close that throws, a retried request that
    * meets its own first attempt), is ours exactly when the manifest there names
    * our transaction file. Another writer's manifest there: we lost the race.
    * Nothing there after an error: the error propagates, nothing is committed. */
  private def put(storage: DatasetStorage, path: org.apache.hadoop.fs.Path, bytes: Array[Byte], txnName: String): Boolean = {
    val atomic = storage.requireAtomicPut()
    def present: Boolean = storage.fs.exists(path)
    def ours: Boolean =
      try present && ManifestFile.transactionFileOf(storage, path) == txnName
      catch { case _: Exception => false }
    try atomic.putIfAbsent(storage.fs, path, bytes) || ours
    catch {
      case e: java.io.IOException =>
        if (ours) true
        else if (present || AtomicPut.isPreconditionFailure(e)) false
        else throw e
    }
  }

  /** The versions after the read one checked so far (up to `upTo`) and
    * what they require of this change: the fragments that concurrent row-level
    * changes also touched, where ours may only land if the rows differ, each
    * with the first such version. */
  private final case class Checked(upTo: Long, disjoint: Map[Long, Long])

  /** Checks the versions after `checked.upTo` up to `latest` against this
    * change (`txn`, its probe); throws on a conflict. */
  private def checkConflicts(storage: DatasetStorage, readVersion: Option[Long], latest: Option[VersionLookup.Latest],
      txn: Transaction, known: CommittedTransactions, checked: Checked): Checked = readVersion match {
    case None =>
      latest.foreach { l =>
        throw new CommitConflictException(
          s"${storage.uri}: another writer created this dataset concurrently (version ${l.version} exists now)")
      }
      checked
    case Some(read) =>
      latest.filter(_.version > checked.upTo).fold(checked) { l =>
        val disjoint = known.between(l.naming, checked.upTo, l.version).foldLeft(checked.disjoint) {
          case (disjoint, (v, theirs)) =>
            ConflictChecker.check(txn, theirs) match {
              case ConflictChecker.Compatible => disjoint
              case ConflictChecker.CompatibleIfRowsDisjoint(frags) =>
                frags.foldLeft(disjoint)((acc, f) => if (acc.contains(f)) acc else acc.updated(f, v))
              case ConflictChecker.Conflict(reason) =>
                throw new CommitConflictException(
                  s"${storage.uri}: cannot commit a ${ConflictChecker.name(txn.getOperationCase)} read at version $read: " +
                    s"version $v was committed concurrently and $reason")
            }
        }
        Checked(l.version, disjoint)
      }
  }

  private[commit] final case class Base(manifest: Manifest, indexSection: Option[Array[Byte]])

  private[commit] def baseOf(storage: DatasetStorage, scheme: ManifestNaming, v: Long): Base = {
    val path = Dataset.manifestPath(storage, scheme, v)
    val bytes = storage.readFully(path)
    val m = ManifestMigration(storage, ManifestFile.parse(bytes, path.toString), path.toString)
    val unknown = m.getWriterFeatureFlags & ~FeatureFlags.KnownToReader
    if (unknown != 0)
      throw new LanceFormatException(
        s"${storage.uri}: version $v needs writer features this connector does not support " +
          s"(unknown writer_feature_flags bits 0x${unknown.toHexString}); refusing to write to it")
    Base(m, ManifestFile.indexSection(bytes, m, path.toString))
  }

  /** A manifest ready to commit. `remerged`: deletion files this attempt wrote
    * (deleted if it does not land); `superseded`: prepared ones they replace
    * (deleted once it lands). */
  private[commit] final case class Built(manifest: Manifest, indexSection: Option[Array[Byte]], txn: Transaction,
      remerged: Seq[FragmentDeletion] = Nil, superseded: Seq[FragmentDeletion] = Nil)

  private def build(storage: DatasetStorage, base: Option[Base], op: PendingOperation, readVersion: Long,
      version: Long, settings: CommitSettings, disjoint: Map[Long, Long]): Built = {
    val prev = base.map(_.manifest)
    val stable = prev.map(m => (m.getReaderFeatureFlags & FeatureFlags.StableRowIds) != 0)
      .getOrElse(settings.stableRowIds)
    val firstId: Long = prev.map(nextFragmentId).getOrElse(0L)
    var nextRowId = prev.map(_.getNextRowId).getOrElse(0L)
    val added = op.fragments.zipWithIndex.map { case (w, i) =>
      val f = DataFragment.newBuilder()
        .setId(firstId + i)
        .setPhysicalRows(w.physicalRows)
        .addFiles(dataFile(w))
      if (stable) {
        f.setInlineRowIds(PbRowIds.newBuilder().addSegments(U64Segment.newBuilder().setRange(
          U64Segment.Range.newBuilder().setStart(nextRowId).setEnd(nextRowId + w.physicalRows))).build().toByteString)
        nextRowId += w.physicalRows
        // the rows are created (and last updated) by this version, as pylance records it
        val versions = com.google.protobuf.ByteString.copyFrom(RowVersions.single(w.physicalRows, version))
        f.setInlineCreatedAtVersions(versions).setInlineLastUpdatedAtVersions(versions)
      }
      f.build()
    }
    val b = stamp(prev.map(_.toBuilder).getOrElse(Manifest.newBuilder()), version, settings)
      .setNextRowId(nextRowId)
    val lastId = if (added.nonEmpty) Some(added.last.getId) else None
    def keepMaxId(): Unit =
      lastId.orElse(prev.filter(_.hasMaxFragmentId).map(_.getMaxFragmentId.toLong)).foreach(id => b.setMaxFragmentId(id.toInt))
    val txn = TransactionFile.newTransaction(readVersion)
    op match {
      case AppendFragments(_) =>
        requireSameFileFormat(storage, prev, op.fragments)
        b.addAllFragments(added.asJava)
        keepMaxId()
        txn.setAppend(Transaction.Append.newBuilder().addAllFragments(added.asJava))
        Built(b.build(), base.flatMap(_.indexSection), txn.build())
      case AppendWithSchema(_, schema) =>
        requireSameFileFormat(storage, prev, op.fragments)
        b.addAllFragments(added.asJava)
        keepMaxId()
        val fields = SchemaProto.encode(schema, b.getFieldsList.asScala.toSeq)
        b.clearFields().addAllFields(fields.asJava)
          .clearSchemaMetadata().putAllSchemaMetadata(schema.metadataProto.asJava)
        txn.setMerge(Transaction.Merge.newBuilder().addAllFragments(b.getFragmentsList)
          .addAllSchema(fields.asJava).putAllSchemaMetadata(schema.metadataProto.asJava))
        Built(b.build(), base.flatMap(_.indexSection), txn.build())
      case OverwriteDataset(_, lance, version, config) =>
        val schema = SchemaProto.encode(lance, Nil)  // a new schema: nothing of the old fields kept
        val schemaMetadata = lance.metadata
        b.putAllConfig(config.asJava)
        val flags = if (stable) FeatureFlags.StableRowIds else 0L
        b.clearFragments().addAllFragments(added.asJava)
          .clearFields().addAllFields(schema.asJava)
          .clearSchemaMetadata()
          .putAllSchemaMetadata(utf8(schemaMetadata))
          .setReaderFeatureFlags(flags)
          .setWriterFeatureFlags(flags | (if (b.getConfigCount > 0) FeatureFlags.TableConfig else 0L))
          .setDataFormat(Manifest.DataStorageFormat.newBuilder().setFileFormat("lance").setVersion(version.name))
        lastId.orElse(if (firstId > 0) Some(firstId - 1) else None) match {
          case Some(id) => b.setMaxFragmentId(id.toInt)
          case None => b.clearMaxFragmentId()
        }
        txn.setOverwrite(Transaction.Overwrite.newBuilder().addAllFragments(added.asJava).addAllSchema(schema.asJava)
          .putAllSchemaMetadata(utf8(schemaMetadata)).putAllConfigUpsertValues(config.asJava))
        Built(b.build(), None, txn.build())  // indices describe the replaced data
      case ReplaceSchema(lance) =>
        val schema = SchemaProto.encode(lance, b.getFieldsList.asScala.toSeq)
        val schemaMetadata = lance.metadata
        b.clearFields().addAllFields(schema.asJava)
          .clearSchemaMetadata()
          .putAllSchemaMetadata(utf8(schemaMetadata))
        txn.setProject(Transaction.Project.newBuilder().addAllSchema(schema.asJava))
        Built(b.build(), base.flatMap(_.indexSection), txn.build())
      case change: RowLevelChange =>
        requireSameFileFormat(storage, prev, change.fragments)
        val current = prev.map(_.getFragmentsList.asScala.toVector).getOrElse(Vector.empty)
        val deletions = DeletionRebase.plan(storage, change, current, disjoint, readVersion)
          .flatMap(_.write(storage, readVersion))
        val byId = current.map(f => f.getId -> f).toMap
        val updated = deletions.flatMap(d => d.result.map(file => d.fragmentId ->
          byId(d.fragmentId).toBuilder.setDeletionFile(file).build())).toMap
        val removed = deletions.filter(_.removesFragment).map(_.fragmentId).toSet
        val kept = current.flatMap { f =>
          if (removed.contains(f.getId)) None else Some(updated.getOrElse(f.getId, f))
        }
        b.clearFragments().addAllFragments((kept ++ added).asJava)
        if (updated.nonEmpty) b.setReaderFeatureFlags(b.getReaderFeatureFlags | FeatureFlags.DeletionFiles)
          .setWriterFeatureFlags(b.getWriterFeatureFlags | FeatureFlags.DeletionFiles)
        keepMaxId()
        if (change.fragments.isEmpty)
          txn.setDelete(Transaction.Delete.newBuilder().addAllUpdatedFragments(updated.values.asJava)
            .addAllDeletedFragmentIds(removed.map(Long.box).asJava).setPredicate(change.predicate))
        else
          txn.setUpdate(Transaction.Update.newBuilder().addAllUpdatedFragments(updated.values.asJava)
            .addAllRemovedFragmentIds(removed.map(Long.box).asJava).addAllNewFragments(added.asJava)
            .setUpdateMode(Transaction.UpdateMode.REWRITE_ROWS))
        val prepared = change.deletions.map(d => d.fragmentId -> d).toMap
        val remerged = deletions.filterNot(d => prepared.get(d.fragmentId).contains(d))
        Built(b.build(), base.flatMap(_.indexSection), txn.build(), remerged,
          change.deletions.filterNot(deletions.contains))
      case CreateIndices(created, removed) =>
        val fieldIds = b.getFieldsList.asScala.map(_.getId).toSet
        created.find(_.getFieldsList.asScala.exists(id => !fieldIds.contains(id))).foreach { i =>
          throw new CommitConflictException(s"${storage.uri}: cannot commit index '${i.getName}': its column " +
            "is no longer in the dataset's schema (dropped concurrently)")
        }
        val existing = base.flatMap(_.indexSection).map(Indices.parse(_, storage.uri)).getOrElse(Nil)
        val names = created.map(_.getName).toSet
        val gone = removed.map(_.getUuid).toSet
        val kept = existing.filterNot(i => names.contains(i.getName) || gone.contains(i.getUuid))
        val section = IndexSection.newBuilder().addAllIndices((kept ++ created).asJava).build().toByteArray
        txn.setCreateIndex(Transaction.CreateIndex.newBuilder().addAllNewIndices(created.asJava)
          .addAllRemovedIndices(removed.asJava))
        Built(b.build(), Some(section), txn.build())
      case RestoreVersion(v) =>
        throw new IllegalStateException(s"${storage.uri}: a restore of version $v is built from the old manifest")
      case _: RewriteFragments =>
        throw new IllegalStateException(s"${storage.uri}: a rewrite is built by RewriteBuild")
      case _: AddColumnFiles =>
        throw new IllegalStateException(s"${storage.uri}: an addition of columns is built by AddColumnsBuild")
    }
  }

  /** Manifest `version` built from the old version's, as the reference's
    * restore does: its fields, fragments, flags, config and index section; the
    * new version number, timestamp, writer and transaction. */
  private def restore(storage: DatasetStorage, scheme: ManifestNaming, latest: Option[Base], old: Long,
      readVersion: Long, version: Long, settings: CommitSettings): Built = {
    val prev = latest.map(_.manifest).getOrElse(
      throw new LanceFormatException(s"${storage.uri}: not a Lance dataset; nothing to restore"))
    if (!VersionLookup.exists(storage, scheme, old)) {
      val (_, present) = Dataset.versions(storage)  // a listing, only for the message
      throw new LanceFormatException(
        s"${storage.uri}: cannot restore version $old: it does not exist (versions ${present.head} to ${present.last} are present)")
    }
    val source = baseOf(storage, scheme, old)
    val b = stamp(source.manifest.toBuilder, version, settings)
      .setNextRowId(math.max(source.manifest.getNextRowId, prev.getNextRowId))
    val maxIds = Seq(source.manifest, prev).filter(_.hasMaxFragmentId).map(_.getMaxFragmentId.toLong & 0xffffffffL) ++
      source.manifest.getFragmentsList.asScala.map(_.getId)
    maxIds.reduceOption(_ max _).foreach(id => b.setMaxFragmentId(id.toInt))
    val txn = TransactionFile.newTransaction(readVersion).setRestore(Transaction.Restore.newBuilder().setVersion(old))
    Built(b.build(), source.indexSection, txn.build())
  }

  /** The id the next new fragment of a version built on `m` gets: ids are never reused. */
  private[commit] def nextFragmentId(m: Manifest): Long =
    if (m.hasMaxFragmentId) (m.getMaxFragmentId.toLong & 0xffffffffL) + 1
    else m.getFragmentsList.asScala.map(_.getId + 1).reduceOption(_ max _).getOrElse(0L)

  /** `b` as manifest `version`: its number, timestamp and writer; no
    * transaction section or tag of the manifest it was copied from. */
  private[commit] def stamp(b: Manifest.Builder, version: Long, settings: CommitSettings): Manifest.Builder = {
    val now = Instant.now()
    b.setVersion(version)
      .setTimestamp(Timestamp.newBuilder().setSeconds(now.getEpochSecond).setNanos(now.getNano))
      .setWriterVersion(Manifest.WriterVersion.newBuilder()
        .setLibrary(settings.writerLibrary).setVersion(settings.writerVersion))
      .clearTransactionSection()
      .clearTag()
      // Fields this connector does not know may point into the base manifest's
      // file (pylance 14 keeps the position of an inline transaction in one):
      // copied into a new file they would point at the wrong bytes.
      .setUnknownFields(com.google.protobuf.UnknownFieldSet.getDefaultInstance)
  }

  private def utf8(m: Map[String, String]): java.util.Map[String, com.google.protobuf.ByteString] =
    m.map { case (k, v) => k -> com.google.protobuf.ByteString.copyFromUtf8(v) }.asJava

  /** Files added to a dataset are at its file version: a dataset never mixes versions. */
  private[commit] def requireSameFileFormat(storage: DatasetStorage, prev: Option[Manifest],
      files: Seq[WrittenFragment]): Unit = {
    val dataFormat = prev.map(_.getDataFormat.getVersion).getOrElse("(none)")
    files.find(_.version.name != dataFormat).foreach { f =>
      throw new LanceFormatException(
        s"${storage.uri}: the dataset stores file version $dataFormat and ${f.path} is a ${f.version} file; " +
          "a dataset may not mix file versions, so adding it is refused (overwrite the dataset to convert it)")
    }
  }

  private[commit] def dataFile(w: WrittenFragment): DataFile.Builder =
    DataFile.newBuilder()
      .setPath(w.path)
      .addAllFields(w.fieldIds.map(Int.box).asJava)
      .addAllColumnIndices(w.columnIndices.map(Int.box).asJava)
      .setFileMajorVersion(w.version.major).setFileMinorVersion(w.version.minor)
      .setFileSizeBytes(w.sizeBytes)

  /** The operation kind and touched fragments of `op`, for conflict checks. */
  private def probe(readVersion: Long, op: PendingOperation): Transaction = {
    val t = TransactionFile.newTransaction(readVersion)
    op match {
      case AppendFragments(_) => t.setAppend(Transaction.Append.getDefaultInstance)
      case AppendWithSchema(_, _) => t.setMerge(Transaction.Merge.getDefaultInstance)
      case OverwriteDataset(_, _, _, _) => t.setOverwrite(Transaction.Overwrite.getDefaultInstance)
      case ReplaceSchema(_) => t.setProject(Transaction.Project.getDefaultInstance)
      case RestoreVersion(v) => t.setRestore(Transaction.Restore.newBuilder().setVersion(v))
      case CreateIndices(created, removed) =>
        t.setCreateIndex(Transaction.CreateIndex.newBuilder().addAllNewIndices(created.asJava)
          .addAllRemovedIndices(removed.asJava))
      case a: AddColumnFiles if a.replaces.nonEmpty =>
        t.setUpdate(Transaction.Update.newBuilder().addAllUpdatedFragments(
          a.files.map(f => DataFragment.newBuilder().setId(f.fragmentId).build()).asJava)
          .addAllFieldsModified(a.replaces.toSeq.sorted.map(i => Int.box(i)).asJava)
          .setUpdateMode(Transaction.UpdateMode.REWRITE_COLUMNS))
      case a: AddColumnFiles =>
        t.setMerge(Transaction.Merge.newBuilder().addAllFragments(
          a.files.map(f => DataFragment.newBuilder().setId(f.fragmentId).build()).asJava))
      case r: RewriteFragments =>
        val ids = r.oldFragmentIds.map(id => DataFragment.newBuilder().setId(id).build()).asJava
        t.setRewrite(Transaction.Rewrite.newBuilder().addGroups(Transaction.Rewrite.RewriteGroup.newBuilder()
          .addAllOldFragments(ids)))
      case change: RowLevelChange =>
        val touched = change.deletions.map(d => DataFragment.newBuilder().setId(d.fragmentId).build()).asJava
        if (change.fragments.isEmpty) t.setDelete(Transaction.Delete.newBuilder().addAllUpdatedFragments(touched))
        else t.setUpdate(Transaction.Update.newBuilder().addAllUpdatedFragments(touched))
    }
    t.build()
  }

  /** `_versions/latest_version_hint.json` as pylance writes it (`{"version":N}`):
    * where lookups of the latest version start; best effort. */
  private def writeHint(storage: DatasetStorage, version: Long): Unit = VersionLookup.writeHint(storage, version)
}
