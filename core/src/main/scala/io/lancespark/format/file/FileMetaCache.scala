package io.lancespark.format.file

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

/** What has been read of one 2.x file's metadata (its footer, global buffer table, file
  * descriptor and schema, column metadata), shared by every reader of that file in the process.
  * Parts are read by the first reader that needs them, outside any lock; when two race, the
  * first stored wins. `bytes`: about the bytes of metadata read into it. */
final class FileMeta private[file] (val footer: Footer, total: AtomicLong) {
  private val parts = new ConcurrentHashMap[Any, AnyRef]()
  private val weight = new AtomicLong(0L)
  @volatile private[file] var evicted: Boolean = false

  /** The part under `key`: the one stored, else `compute`'s (of about `size` bytes), stored. */
  private[file] def part[T <: AnyRef](key: Any, size: Long)(compute: => T): T = {
    val hit = parts.get(key)
    if (hit != null) hit.asInstanceOf[T]
    else {
      val value = compute
      val prev = parts.putIfAbsent(key, value)
      if (prev != null) prev.asInstanceOf[T]
      else {
        weight.addAndGet(size)
        if (!evicted) total.addAndGet(size)
        value
      }
    }
  }

  def bytes: Long = weight.get + FileMetaCache.EntryBytes
}

/** The metadata of the 2.x files read by this process, for the next reader of the same file
  * (this query's other tasks, the next query): a Lance file is never changed once written (data
  * and index files are named by UUIDs and are not rewritten in place), so reading its footer and
  * column metadata again only costs requests (one or more per file and query on an object store)
  * and parsing. Keyed by path and size: a file replaced by one of another size is read afresh.
  * Bounded: past `MaxFiles` files or `MaxBytes` bytes of metadata the least recently opened go. */
object FileMetaCache {
  val MaxFiles: Int = 4096
  val MaxBytes: Long = 64L << 20
  private[file] val EntryBytes: Long = 256L

  private val total = new AtomicLong(0L)
  private val files = new java.util.LinkedHashMap[(String, Long), FileMeta](64, 0.75f, true)

  /** The shared metadata of the file at `path` of `size` bytes whose footer is `footer()`:
    * the one kept, else a new one kept with the footer read now. */
  def of(path: String, size: Long)(footer: => Footer): FileMeta = {
    val key = (path, size)
    val kept = files.synchronized(Option(files.get(key)))
    kept.getOrElse {
      val fresh = new FileMeta(footer, total)
      files.synchronized {
        Option(files.get(key)).getOrElse {
          files.put(key, fresh)
          total.addAndGet(EntryBytes)
          val it = files.values().iterator()
          while ((files.size() > MaxFiles || total.get > MaxBytes) && it.hasNext) {
            val old = it.next()
            if (old ne fresh) {
              old.evicted = true
              total.addAndGet(-old.bytes)
              it.remove()
            }
          }
          fresh
        }
      }
    }
  }

  /** Metadata of a file read apart from the cache (kept by no one else). */
  def detached(footer: Footer): FileMeta = new FileMeta(footer, new AtomicLong(0L))

  /** Files kept (for tests). */
  def size: Int = files.synchronized(files.size())
}
