package io.lancespark.table.storage

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

  /** Writes the transaction; returns its name relative to `_transactions/`. */
  def write(storage: DatasetStorage, t: Transaction): String = {
    val name = fileName(t)
    val out = storage.fs.create(new Path(new Path(storage.root, Dir), name), false)
    try out.write(t.toByteArray) finally out.close()
    name
  }

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
