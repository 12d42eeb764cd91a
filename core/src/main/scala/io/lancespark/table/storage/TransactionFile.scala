package io.lancespark.table.storage

import java.nio.file.{Files, StandardOpenOption}
import java.util.UUID

import com.google.protobuf.InvalidProtocolBufferException
import org.apache.hadoop.fs.Path

import io.lancespark.proto.table.Transaction

/** `_transactions/{read_version}-{uuid}.txn`: the serialized Transaction of one
  * commit attempt, written before the manifest that refers to it. */
object TransactionFile {
  val Dir: String = "_transactions"

  def newTransaction(readVersion: Long): Transaction.Builder =
    Transaction.newBuilder().setReadVersion(readVersion).setUuid(UUID.randomUUID().toString)

  def fileName(t: Transaction): String = s"${t.getReadVersion}-${t.getUuid}.txn"

  /** Writes the transaction; returns its name relative to `_transactions/`.
    * The name is new (a fresh uuid), so nothing is checked before the write:
    * on the local file system a plain new file, elsewhere a create that may
    * skip the store's overwrite checks (S3A's create performance option: no
    * HEAD or LIST request). The write is part of every commit attempt, between
    * the lookup of the latest version and the manifest's put: a commit that
    * takes longer loses more races to frequent writers. */
  def write(storage: DatasetStorage, t: Transaction): String = {
    val name = fileName(t)
    val path = new Path(new Path(storage.root, Dir), name)
    val bytes = t.toByteArray
    storage.localPath(path) match {
      case Some(local) =>
        Files.createDirectories(local.getParent)
        Files.write(local, bytes, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)
      case None =>
        val out = storage.fs.createFile(path).overwrite(true).opt(S3ACreatePerformance, true).build()
        try out.write(bytes) finally out.close()
    }
    name
  }

  /** S3A's create option that skips its checks for a file or directory at the path. */
  private val S3ACreatePerformance: String = "fs.s3a.create.performance"

  /** The transaction a version's manifest names, or None if it names none or
    * the file is missing or unreadable (callers treat that as a conflict). */
  def read(storage: DatasetStorage, name: String): Option[Transaction] =
    if (name.isEmpty) None
    else {
      val path = storage.resolve(s"$Dir/$name", "transaction file")
      if (!storage.fs.exists(path)) None
      else
        try Some(Transaction.parseFrom(storage.readFully(path)))
        catch { case _: InvalidProtocolBufferException => None }
    }
}
