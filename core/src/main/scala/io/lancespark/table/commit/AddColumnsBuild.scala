package io.lancespark.table.commit

import scala.jdk.CollectionConverters._

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.Transaction
import io.lancespark.proto.table.DataFragment
import io.lancespark.table.storage.{DatasetStorage, Indices, TransactionFile}

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
  * did not have, is a conflict (the checker refuses those commits first).
  *
  * An update of columns (`replaces`): in each fragment the new file takes the
  * place of the file holding exactly the same fields, or else is added with
  * the replaced ids tombstoned (-2) in the older files. The transaction is a
  * DataReplacement when every fragment's file took a place, else an Update
  * (REWRITE_COLUMNS, `fields_modified`). Also rebased onto concurrent appends:
  * their fragments are kept as they are. An index over a replaced field is
  * refused (it would keep the old values). */
private[commit] object AddColumnsBuild {

  def apply(storage: DatasetStorage, base: Option[Committer.Base], op: AddColumnFiles, readVersion: Long,
      version: Long, settings: CommitSettings): Committer.Built = {
    val prev = base.map(_.manifest).getOrElse(
      throw new LanceFormatException(s"${storage.uri}: not a Lance dataset; no columns can be added"))
    Committer.requireSameFileFormat(storage, Some(prev), op.fragments)
    val byId = op.files.map(f => f.fragmentId -> f.file).toMap
    val update = op.replaces.nonEmpty
    if (update) base.flatMap(_.indexSection).foreach { section =>
      Indices.parse(section, storage.uri).find(_.getFieldsList.asScala.exists(id => op.replaces.contains(id.intValue)))
        .foreach { i =>
          throw new CommitConflictException(s"${storage.uri}: cannot update columns read at version $readVersion: " +
            s"index '${i.getName}' covers a replaced column (field ids " +
            s"${i.getFieldsList.asScala.mkString(", ")}); drop it, update, and build it again")
        }
    }
    // per fragment: the new manifest entry, and whether the new file took the
    // place of one holding exactly its fields (a DataReplacement)
    val changed = prev.getFragmentsList.asScala.toVector.map { f =>
      byId.get(f.getId) match {
        // an update of columns leaves a fragment appended since as it is: its
        // files hold the values it was written with (the checker refuses the
        // concurrent rewrites and updates that could have made one otherwise)
        case None if update => (f, None)
        case None => throw new CommitConflictException(
          s"${storage.uri}: cannot add columns read at version $readVersion: fragment ${f.getId} was added since; " +
            "its rows would have no values for the new columns (run add_columns again)")
        case Some(file) => rebuilt(storage, op, readVersion, f, file)
      }
    }
    val fragments = changed.map(_._1)
    val schema = io.lancespark.schema.SchemaProto.encode(op.schema, prev.getFieldsList.asScala.toSeq)
    val b = Committer.stamp(prev.toBuilder, version, settings)
      .clearFragments().addAllFragments(fragments.asJava)
      .clearFields().addAllFields(schema.asJava)
      .clearSchemaMetadata().putAllSchemaMetadata(op.schema.metadataProto.asJava)
    val txn = TransactionFile.newTransaction(readVersion)
    val touched = changed.collect { case (f, Some(_)) => f }
    if (!update)
      txn.setMerge(Transaction.Merge.newBuilder()
        .addAllFragments(fragments.asJava).addAllSchema(schema.asJava)
        .putAllSchemaMetadata(op.schema.metadataProto.asJava))
    else if (changed.forall(c => c._2.forall(identity)))
      // every new file took the place of a file holding exactly its fields
      txn.setDataReplacement(Transaction.DataReplacement.newBuilder().addAllReplacements(op.files.map { c =>
        Transaction.DataReplacementGroup.newBuilder().setFragmentId(c.fragmentId)
          .setNewFile(Committer.dataFile(c.file)).build()
      }.asJava))
    else
      // as pylance's LanceFragment.update_columns commits: the fragments with
      // the fields tombstoned in their older files and the new file added
      txn.setUpdate(Transaction.Update.newBuilder().addAllUpdatedFragments(touched.asJava)
        .addAllFieldsModified(op.replaces.toSeq.sorted.map(i => Int.box(i)).asJava)
        .setUpdateMode(Transaction.UpdateMode.REWRITE_COLUMNS))
    Committer.Built(b.build(), base.flatMap(_.indexSection), txn.build())
  }

  /** Fragment `f` with `file` added (or, for an update, put in place of the
    * file holding exactly the same fields, or added with the replaced fields
    * tombstoned in the older files); `Some(swapped)` for a changed fragment. */
  private def rebuilt(storage: DatasetStorage, op: AddColumnFiles, readVersion: Long, f: DataFragment,
      file: io.lancespark.table.model.WrittenFragment): (DataFragment, Option[Boolean]) = {
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
    if (op.replaces.isEmpty) (b.addFiles(Committer.dataFile(file)).build(), Some(false))
    else {
      val files = f.getFilesList.asScala.toVector
      val same = files.indexWhere(d => d.getFieldsList.asScala.map(_.intValue).toVector == file.fieldIds.toVector &&
        d.getFileMajorVersion == file.version.major && d.getFileMinorVersion == file.version.minor)
      if (same >= 0) (b.setFiles(same, Committer.dataFile(file)).build(), Some(true))
      else {
        val tombstoned = files.map { d =>
          val ids = d.getFieldsList.asScala.map(_.intValue)
          if (!ids.exists(op.replaces.contains)) d
          else d.toBuilder.clearFields().addAllFields(
            ids.map(id => Int.box(if (op.replaces.contains(id)) AddColumnsBuild.Tombstone else id)).asJava).build()
        }
        (b.clearFiles().addAllFiles(tombstoned.asJava).addFiles(Committer.dataFile(file)).build(), Some(false))
      }
    }
  }

  /** A data file's field id for a field whose values moved to a later file. */
  val Tombstone: Int = -2
}
