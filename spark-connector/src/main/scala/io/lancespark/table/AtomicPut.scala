package io.lancespark.table

import java.nio.file.{FileAlreadyExistsException => NioExists, Files, Paths}
import java.util.UUID

import org.apache.hadoop.fs.{FileAlreadyExistsException, Path}

/** Create-if-absent of a whole file: the commit point of a new version.
  * Local files use a hard link (link(2) fails atomically if the name exists);
  * other file systems use create(overwrite = false), which HDFS and object
  * stores with conditional puts (GCS, S3 with conditional writes) make atomic. */
object AtomicPut {

  /** True if `path` was created with `bytes`; false if it already existed. */
  def putIfAbsent(storage: DatasetStorage, path: Path, bytes: Array[Byte]): Boolean =
    if (path.toUri.getScheme == "file") putLocal(path, bytes) else putHadoop(storage, path, bytes)

  private def putLocal(path: Path, bytes: Array[Byte]): Boolean = {
    val target = Paths.get(path.toUri)
    Files.createDirectories(target.getParent)
    val tmp = target.resolveSibling(s".${target.getFileName}.${UUID.randomUUID()}.tmp")
    Files.write(tmp, bytes)
    try {
      Files.createLink(target, tmp)
      true
    } catch {
      case _: NioExists => false
    } finally {
      try Files.deleteIfExists(tmp) catch { case _: java.io.IOException => () }
    }
  }

  private def putHadoop(storage: DatasetStorage, path: Path, bytes: Array[Byte]): Boolean =
    try {
      val out = storage.fs.create(path, false)
      try out.write(bytes) finally out.close()
      true
    } catch {
      case _: FileAlreadyExistsException => false
      case e: java.io.IOException if storage.fs.exists(path) && e.getMessage != null &&
          e.getMessage.toLowerCase.contains("exist") => false
    }
}
