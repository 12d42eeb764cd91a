package io.lancespark.table.storage

import java.nio.file.{FileAlreadyExistsException => NioExists, Files, Paths}
import java.util.UUID

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileAlreadyExistsException, FileSystem, Path}

/** Create-if-absent of a whole file: the commit point of a new version. Each
  * store gets the one way it makes this atomic; a store with none is refused
  * (two writers would both "create" version N and one commit would be lost).
  *
  *  - local files: a hard link (link(2) fails atomically if the name exists);
  *  - stores declaring Hadoop's conditional create (S3A with S3 conditional
  *    writes, `If-None-Match: *`): `createFile` with
  *    `fs.option.create.conditional.overwrite`, checked by the store at close;
  *  - file systems whose `create(overwrite = false)` is atomic (HDFS, GCS,
  *    ABFS, Ozone, and schemes listed in [[AtomicPut.AtomicSchemesKey]]). */
sealed trait AtomicPut {
  def name: String

  /** True if `path` was created with `bytes`; false if it already existed. */
  def putIfAbsent(fs: FileSystem, path: Path, bytes: Array[Byte]): Boolean
}

object AtomicPut {

  /** Hadoop's createFile option for an atomic create-if-absent at close. */
  val ConditionalCreate: String = "fs.option.create.conditional.overwrite"

  /** Hadoop configuration key (`spark.hadoop.lance.commit.atomic-create-schemes`):
    * extra comma-separated URI schemes whose `create(overwrite = false)` is atomic. */
  val AtomicSchemesKey: String = "lance.commit.atomic-create-schemes"

  /** Schemes whose Hadoop connector makes `create(overwrite = false)` atomic:
    * HDFS (the NameNode), GCS (generation-match precondition), ABFS
    * (`If-None-Match: *`), Ozone. */
  val DefaultAtomicSchemes: Set[String] = Set("hdfs", "viewfs", "gs", "abfs", "abfss", "ofs", "o3fs")

  /** The way `fs` makes a create-if-absent at `root` atomic. */
  def forStore(fs: FileSystem, root: Path, conf: Configuration): Either[String, AtomicPut] = {
    val scheme = Option(root.toUri.getScheme).getOrElse(fs.getUri.getScheme)
    val extra = conf.getTrimmedStringCollection(AtomicSchemesKey).toArray(Array.empty[String]).toSet
    if (scheme == "file") Right(LocalLink)
    else if (supportsConditionalCreate(fs, root)) Right(Conditional)
    else if (DefaultAtomicSchemes.contains(scheme) || extra.contains(scheme)) Right(CreateNoOverwrite)
    else Left(
      s"$root: cannot commit safely: the '$scheme' file system offers no atomic create-if-absent here, so two " +
        "writers could both create the same version and one commit would be lost. " +
        (if (scheme.startsWith("s3"))
          "On S3 (and S3-compatible stores with conditional writes) use s3a:// with " +
            "spark.hadoop.fs.s3a.create.conditional.enabled=true (Hadoop 3.4.2+). "
        else "") +
        s"If this file system's create(overwrite=false) is atomic, add '$scheme' to " +
        s"spark.hadoop.$AtomicSchemesKey.")
  }

  private def supportsConditionalCreate(fs: FileSystem, root: Path): Boolean =
    try fs.hasPathCapability(root, ConditionalCreate)
    catch { case _: Exception => false }

  object LocalLink extends AtomicPut {
    override val name: String = "hard link"
    override def putIfAbsent(fs: FileSystem, path: Path, bytes: Array[Byte]): Boolean = {
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
  }

  /** The store checks at close that nothing exists at `path` (S3: a PUT with
    * `If-None-Match: *`, answered 412 when another writer's object is there). */
  object Conditional extends AtomicPut {
    override val name: String = "conditional create"
    override def putIfAbsent(fs: FileSystem, path: Path, bytes: Array[Byte]): Boolean =
      try {
        val out = fs.createFile(path).overwrite(false).must(ConditionalCreate, true).build()
        try out.write(bytes) finally out.close()
        true
      } catch {
        case e: java.io.IOException if isPreconditionFailure(e) => false
      }
  }

  object CreateNoOverwrite extends AtomicPut {
    override val name: String = "create without overwrite"
    override def putIfAbsent(fs: FileSystem, path: Path, bytes: Array[Byte]): Boolean =
      try {
        val out = fs.create(path, false)
        try out.write(bytes) finally out.close()
        true
      } catch {
        case _: FileAlreadyExistsException => false
        case e: java.io.IOException if fs.exists(path) && e.getMessage != null &&
            e.getMessage.toLowerCase.contains("exist") => false
      }
  }

  /** A failure that says another object is at the path: S3A raises
    * FileAlreadyExistsException or RemoteFileChangedException for a 412, and S3
    * answers 409 to a conditional write racing another on the same key. */
  def isPreconditionFailure(e: Throwable): Boolean = e match {
    case _: FileAlreadyExistsException => true
    case _ if e.getClass.getSimpleName == "RemoteFileChangedException" => true
    case _ => statusCode(e).exists(s => s == 412 || s == 409)
  }

  private def statusCode(e: Throwable): Option[Int] =
    try Some(e.getClass.getMethod("statusCode").invoke(e).asInstanceOf[Int])
    catch { case _: Exception => None }
}
