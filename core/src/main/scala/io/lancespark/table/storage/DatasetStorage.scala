package io.lancespark.table.storage

import java.io.FileNotFoundException
import java.net.URI
import java.nio.ByteBuffer

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FSDataInputStream, FileStatus, FileSystem, LocalFileSystem, Path}
import org.apache.hadoop.util.functional.FutureIO

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.input.{CoalescedReads, LocalFileSource, RandomAccessSource}

/** The files of one dataset directory, through Hadoop's FileSystem API (so
  * `file:`, `hdfs:` and object stores work alike). Paths inside the dataset
  * are relative strings; anything that would escape the directory is refused. */
final class DatasetStorage(val root: Path, val fs: FileSystem, conf: Configuration) {

  def uri: String = root.toString

  /** The Hadoop configuration this storage was opened with. */
  def configuration: Configuration = conf

  /** How this store creates a manifest only if absent (the commit point), or
    * why it cannot; asked only by writers, so reads work on any store. */
  lazy val atomicPut: Either[String, AtomicPut] = AtomicPut.forStore(fs, root, conf)

  /** The store's atomic create-if-absent; refuses writing where there is none. */
  def requireAtomicPut(): AtomicPut =
    atomicPut.fold(reason => throw new UnsupportedOperationException(reason), identity)

  /** The external manifest store commits go through (`spark.hadoop.lance.commit.external-store`), if any. */
  lazy val manifestStore: Option[ExternalManifestStore] = ExternalManifestStore.fromConf(conf)

  /** Refuses writing unless commits are safe here: through an external
    * manifest store, or the file system's atomic create-if-absent. */
  def requireSafeCommit(): Unit = if (manifestStore.isEmpty) requireAtomicPut()

  /** Whether the dataset is on a local file system (reads from it are page
    * cache or local disk, not network round trips). */
  def isLocal: Boolean = fs.getUri.getScheme == "file"

  /** Opens `relative` for a driver-side metadata read (a data file's
    * statistics at planning). On local disk through a FileChannel: Hadoop's
    * costs per open (parsing a path, a buffered stream, a status call) are
    * most of the time of planning that reads the tails of 100,000 files
    * (docs/benchmarks-many-fragments.md). These bytes are no task's input, so
    * they need not go through Hadoop's statistics. Elsewhere as [[open]]. */
  def openForMetadata(relative: String, what: String, knownSize: Long): RandomAccessSource =
    localRoot match {
      case Some(dir) =>
        val file = dir.resolve(checkRelative(relative, what).mkString("/"))
        try new LocalFileSource(file)
        catch {
          case e: java.nio.file.NoSuchFileException =>
            throw LanceFormatException(file.toString, "file is missing (referenced by the dataset)", e)
        }
      case None => open(resolve(relative, what), knownSize)
    }

  private lazy val localRoot: Option[java.nio.file.Path] = localPath(root)

  /** `path` as a local file's path, on the local file system; else None. */
  def localPath(path: Path): Option[java.nio.file.Path] =
    if (!isLocal) None else scala.util.Try(java.nio.file.Paths.get(path.toUri)).toOption

  /** The data file `name` (as a manifest lists it) under the data directory. */
  def dataFile(name: String): Path = resolve(s"${DatasetStorage.DataDir}/$name", "data file")

  /** Resolves `relative` (e.g. "data/x.lance") under the root, refusing escapes. */
  def resolve(relative: String, what: String): Path = new Path(root, checkRelative(relative, what).mkString("/"))

  /** The parts of `relative`, checked as [[resolve]] checks them, without
    * building a Hadoop path (which parses a URI: too slow for every file of
    * a manifest of 100,000 fragments). */
  def checkRelative(relative: String, what: String): Array[String] = {
    val parts = relative.split('/').filter(_.nonEmpty)
    if (relative.startsWith("/") || relative.contains("\\") || parts.exists(p => p == ".." || p == ".") ||
        relative.contains(":"))
      throw new LanceFormatException(
        s"$uri: $what path '$relative' escapes the dataset directory; refusing to read it")
    parts
  }

  /** Files directly under `dir` (relative); empty if the directory is absent. */
  def list(dir: String): Seq[FileStatus] =
    try fs.listStatus(new Path(root, dir)).toSeq.filter(_.isFile)
    catch { case _: FileNotFoundException => Nil }

  /** The names of the files directly under `dir`, listed lazily: object stores
    * (S3A) fetch a page (1,000 keys on S3) when the iterator reaches it, so a
    * caller that stops early does not pay for the whole directory. In key
    * order only where [[sortedListing]]. */
  def listNames(dir: String): Iterator[String] = {
    val it = try fs.listStatusIterator(new Path(root, dir))
      catch { case _: FileNotFoundException => return Iterator.empty }
    new Iterator[String] {
      private var nextName: Option[String] = None
      private def advance(): Unit =
        while (nextName.isEmpty && (try it.hasNext catch { case _: FileNotFoundException => false })) {
          val st = it.next()
          if (st.isFile) nextName = Some(st.getPath.getName)
        }
      override def hasNext: Boolean = { advance(); nextName.isDefined }
      override def next(): String = { advance(); val n = nextName.get; nextName = None; n }
    }
  }

  /** Whether this store lists a directory in key (byte) order: S3 (S3A),
    * Google Cloud Storage and HDFS do; the local file system does not (the
    * order of the directory on disk). */
  def sortedListing: Boolean = DatasetStorage.SortedListingSchemes.contains(
    Option(root.toUri.getScheme).getOrElse(fs.getUri.getScheme))

  /** Whether `path` is a file: one metadata request (a HEAD on S3A, without
    * the directory listing `exists` adds for an absent key). */
  @scala.annotation.nowarn("cat=deprecation")
  def isFile(path: Path): Boolean = fs.isFile(path)

  /** `path`'s bytes, None if it does not exist. */
  def readIfPresent(path: Path): Option[Array[Byte]] =
    try Some(readFully(path))
    catch { case e: LanceFormatException if e.getCause.isInstanceOf[FileNotFoundException] => None }

  /** Ranges of one batch at most this far apart are read as one request:
    * `lance.read.coalesce-gap` (bytes, `k`/`m` suffixes), by default a storage
    * block on local disks and 1 MiB on object stores and other remote file
    * systems, where a request costs far more than the bytes of a gap. */
  lazy val coalesceGap: Long = {
    val default = if (isLocal) CoalescedReads.MaxGap else DatasetStorage.RemoteCoalesceGap
    val gap = conf.getLongBytes(DatasetStorage.CoalesceGapKey, default)
    if (gap < 0) throw new IllegalArgumentException(s"${DatasetStorage.CoalesceGapKey}: must be >= 0, got $gap")
    gap
  }

  def open(path: Path): RandomAccessSource = open(path, 0L)

  /** Opens `path`, whose length the manifest records as `knownSize` (0:
    * unknown). On remote stores a known length saves the metadata request
    * (a HEAD on S3) of every file opened; local files are always asked. */
  def open(path: Path, knownSize: Long): RandomAccessSource =
    try new HadoopSource(fs, path, coalesceGap, if (isLocal) 0L else knownSize)
    catch {
      case e: FileNotFoundException =>
        throw LanceFormatException(path.toString, "file is missing (referenced by the dataset)", e)
    }

  /** Opens a file outside the dataset (an external blob value's file), with
    * the dataset's Hadoop configuration. */
  def openExternal(path: Path): RandomAccessSource = {
    val efs = path.getFileSystem(conf) match {
      case local: LocalFileSystem => local.getRawFileSystem
      case other => other
    }
    try new HadoopSource(efs, path, coalesceGap, 0L)
    catch {
      case e: FileNotFoundException =>
        throw LanceFormatException(path.toString, "file is missing (an external blob value of the dataset)", e)
    }
  }

  /** The whole of `path`. On remote stores its length is asked once and the
    * file opened with it (one metadata request, not one for the length and
    * one more when the file is opened). */
  def readFully(path: Path): Array[Byte] = {
    val known = if (isLocal) 0L else
      try fs.getFileStatus(path).getLen
      catch { case e: FileNotFoundException => throw LanceFormatException(path.toString, "file is missing (referenced by the dataset)", e) }
    val src = open(path, known)
    try {
      val b = src.read(0, src.size)
      val out = new Array[Byte](b.remaining())
      b.get(out)
      out
    } finally src.close()
  }
}

object HadoopSource {
  /** Hadoop's openFile option giving the file's length (no metadata request). */
  val OpenFileLength: String = "fs.option.openfile.length"
}

object DatasetStorage {
  /** The directory of a dataset's data files. */
  val DataDir: String = io.lancespark.table.model.DataFileRef.Dir
  /** Hadoop configuration key (`spark.hadoop.` prefix, or a session SQL conf) of [[DatasetStorage.coalesceGap]]. */
  val CoalesceGapKey: String = "lance.read.coalesce-gap"
  val RemoteCoalesceGap: Long = 1L << 20
  /** URI schemes whose directory listings come back in key order. */
  val SortedListingSchemes: Set[String] = Set("s3a", "s3", "gs", "hdfs")
  def apply(uri: String, conf: Configuration): DatasetStorage = {
    val p = new Path(new URI(normalize(uri)))
    val fs = p.getFileSystem(conf) match {
      case local: LocalFileSystem => local.getRawFileSystem  // no .crc side files in the dataset
      case other => other
    }
    new DatasetStorage(fs.makeQualified(p), fs, conf)
  }

  /** Plain local paths become file: URIs; trailing slashes are dropped. */
  def normalize(uri: String): String = {
    val trimmed = if (uri.length > 1) uri.stripSuffix("/") else uri
    if (trimmed.contains("://") || trimmed.startsWith("file:")) trimmed
    else new java.io.File(trimmed).getAbsoluteFile.toURI.toString.stripSuffix("/")
  }
}

/** Positional reads through an FSDataInputStream (thread-safe: positioned
  * reads do not move the stream).
  *
  * Spark counts a task's input bytes from Hadoop's per-thread file system
  * statistics of the task's thread. Reads made on the read pool are moved
  * there: subtracted from the pool thread's statistics when they complete, and
  * added to the opening thread's (the task's) at its next `attributeReads`. */
final class HadoopSource(fs: FileSystem, file: Path, override val coalesceGap: Long = CoalescedReads.MaxGap,
    knownSize: Long = 0L) extends RandomAccessSource {
  override val size: Long = if (knownSize > 0) knownSize else fs.getFileStatus(file).getLen
  private val in: FSDataInputStream =
    if (knownSize <= 0) fs.open(file)
    else FutureIO.awaitFuture(fs.openFile(file).opt(HadoopSource.OpenFileLength, knownSize.toString).build())  // opt(key, String): Hadoop 3.3.4 (Spark 3.5) has no optLong
  override val path: String = file.toString

  private val owner: Thread = Thread.currentThread()
  // the per-thread statistics Spark reads have no non-deprecated accessor
  @scala.annotation.nowarn("cat=deprecation")
  private val statistics: Option[FileSystem.Statistics] =
    scala.util.Try(FileSystem.getStatistics(fs.getUri.getScheme, fs.getClass)).toOption
  private val readElsewhere = new java.util.concurrent.atomic.AtomicLong

  override protected def readFully(position: Long, dst: ByteBuffer): Unit = {
    val n = dst.remaining()
    try {
      if (dst.hasArray) {
        in.readFully(position, dst.array(), dst.arrayOffset() + dst.position(), n)
        dst.position(dst.limit())
      } else {
        val tmp = new Array[Byte](n)
        in.readFully(position, tmp)
        dst.put(tmp)
      }
    } catch {
      case e: java.io.EOFException => throw LanceFormatException(path,
        s"file ends before byte ${position + n} (its length is taken as $size bytes" +
          (if (knownSize > 0) ", as the manifest records it)" else ")"), e)
    }
    if (Thread.currentThread() ne owner) statistics.foreach { s =>
      s.incrementBytesRead(-n.toLong)
      readElsewhere.addAndGet(n.toLong)
    }
  }

  override def attributeReads(): Unit =
    if (Thread.currentThread() eq owner) {
      val n = readElsewhere.getAndSet(0L)
      if (n != 0) statistics.foreach(_.incrementBytesRead(n))
    }

  override def close(): Unit = in.close()
}
