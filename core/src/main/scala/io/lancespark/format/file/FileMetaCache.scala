package io.lancespark.format.file

import java.util.concurrent.ConcurrentHashMap

import io.lancespark.format.ReadCache

/** What has been read of one 2.x file's metadata (its footer, global buffer table, file
  * descriptor and schema, column metadata), shared by every reader of that file in the process.
  * Parts are read by the first reader that needs them, outside any lock; when two race, the
  * first stored wins. */
final class FileMeta private[file] (val footer: Footer) {
  private val parts = new ConcurrentHashMap[Any, AnyRef]()

  /** The part under `key`: the one stored, else `compute`'s, stored. */
  private[file] def part[T <: AnyRef](key: Any)(compute: => T): T = {
    val hit = parts.get(key)
    if (hit != null) hit.asInstanceOf[T]
    else {
      val value = compute
      val prev = parts.putIfAbsent(key, value)
      if (prev != null) prev.asInstanceOf[T] else value
    }
  }
}

/** The metadata of the 2.x files read by this process, for the next reader of the same file
  * (this query's other tasks, the next query): a Lance file is never changed once written (data
  * and index files are named by UUIDs and are not rewritten in place), so reading its footer and
  * column metadata again only costs requests (one or more per file and query on an object store)
  * and parsing. Keyed by path and size: a file replaced by one of another size is read afresh.
  * Bounded: past `MaxFiles` files or `MaxBytes` bytes of file tails (the column metadata and the
  * tables after it, what a file's metadata can hold) the least recently opened go. */
object FileMetaCache {
  val MaxFiles: Int = 4096
  val MaxBytes: Long = 64L << 20
  private val EntryBytes: Long = 256L

  private val files = new ReadCache[(String, Long), FileMeta](MaxFiles, MaxBytes)

  /** The shared metadata of the file at `path` of `size` bytes whose footer is `footer()`:
    * the one kept, else a new one kept with the footer read now. */
  def of(path: String, size: Long)(footer: => Footer): FileMeta =
    files.get((path, size)).getOrElse {
      val f = footer
      files.put((path, size), new FileMeta(f), EntryBytes + math.max(0L, size - f.columnMetadataStart))
    }

  /** Metadata of a file read apart from the cache (kept by no one else). */
  def detached(footer: Footer): FileMeta = new FileMeta(footer)

  /** Files kept (for tests). */
  def size: Int = files.size
}
