package io.lancespark.table.commit

import scala.jdk.CollectionConverters._

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.Transaction
import io.lancespark.table.storage.{DatasetStorage, TransactionFile}

/** The manifest of an addition of columns (Merge), built on the latest
  * version: each fragment keeps its files and deletion file as they are now
  * and gains the file of the new columns; the schema gains the new fields. The
  * transaction lists every fragment of the new version, as the reference's
  * Merge does (its fragments replace the version's).
  *
  * Rebased only onto concurrent deletes (see ConflictChecker): a fragment a
  * delete removed whole is left out (its new file is never referenced); one
  * it gave a new deletion file keeps that file, which hides rows of the new
  * file too. Any fragment whose data files changed, or that the read version
  * did not have, is a conflict (the checker refuses those commits first). */
private[commit] object AddColumnsBuild {

  def apply(storage: DatasetStorage, base: Option[Committer.Base], op: AddColumnFiles, readVersion: Long,
      version: Long, settings: CommitSettings): Committer.Built = {
    val prev = base.map(_.manifest).getOrElse(
      throw new LanceFormatException(s"${storage.uri}: not a Lance dataset; no columns can be added"))
    Committer.requireSameFileFormat(storage, Some(prev), op.fragments)
    val byId = op.files.map(f => f.fragmentId -> f.file).toMap
    val fragments = prev.getFragmentsList.asScala.toVector.map { f =>
      val file = byId.getOrElse(f.getId, throw new CommitConflictException(
        s"${storage.uri}: cannot add columns read at version $readVersion: fragment ${f.getId} was added since; " +
          "its rows would have no values for the new columns (run add_columns again)"))
      val names = f.getFilesList.asScala.flatMap(_.getFieldsList.asScala.map(_.intValue)).toSet
      if (op.replaces.nonEmpty && (file.fieldIds.isEmpty || !file.fieldIds.forall(op.replaces.contains)))
        throw new IllegalStateException(s"${storage.uri}: ${file.path} holds field ids " +
          s"${file.fieldIds.mkString(", ")}; the update replaces ${op.replaces.toSeq.sorted.mkString(", ")}")
      val overlap = file.fieldIds.filter(id => names.contains(id) && !op.replaces.contains(id))
      if (overlap.nonEmpty)
        throw new CommitConflictException(s"${storage.uri}: cannot add columns read at version $readVersion: " +
          s"fragment ${f.getId} already has a data file with field ids ${overlap.mkString(", ")}")
      val gone = if (op.replaces.isEmpty) Vector.empty[Int] else file.fieldIds.filterNot(names.contains)
      if (gone.nonEmpty)
        throw new CommitConflictException(s"${storage.uri}: cannot update columns read at version $readVersion: " +
          s"fragment ${f.getId} has no data file with field ids ${gone.mkString(", ")}")
      val b = f.toBuilder
      if (op.replaces.nonEmpty) {
        val tombstoned = f.getFilesList.asScala.toVector.map { d =>
          val ids = d.getFieldsList.asScala.map(_.intValue)
          if (!ids.exists(op.replaces.contains)) d
          else d.toBuilder.clearFields().addAllFields(
            ids.map(id => Int.box(if (op.replaces.contains(id)) AddColumnsBuild.Tombstone else id)).asJava).build()
        }
        b.clearFiles().addAllFiles(tombstoned.asJava)
      }
      b.addFiles(Committer.dataFile(file)).build()
    }
    val schema = io.lancespark.schema.SchemaProto.encode(op.schema, prev.getFieldsList.asScala.toSeq)
    val b = Committer.stamp(prev.toBuilder, version, settings)
      .clearFragments().addAllFragments(fragments.asJava)
      .clearFields().addAllFields(schema.asJava)
      .clearSchemaMetadata().putAllSchemaMetadata(op.schema.metadataProto.asJava)
    val txn = TransactionFile.newTransaction(readVersion).setMerge(Transaction.Merge.newBuilder()
      .addAllFragments(fragments.asJava).addAllSchema(schema.asJava)
      .putAllSchemaMetadata(op.schema.metadataProto.asJava))
    Committer.Built(b.build(), base.flatMap(_.indexSection), txn.build())
  }

  /** A data file's field id for a field whose values moved to a later file. */
  val Tombstone: Int = -2
}
