package io.lancespark.table.filter

import java.util.concurrent.{Callable, ExecutorService, Executors, ThreadFactory}

import io.lancespark.format.stats.PageStatistics

/** The page statistics of data files, kept per process (the Spark driver):
  * a data file never changes once a commit has published it (each has a name
  * of its own, and a rewrite writes a new file), so its tail is read once
  * and every later planning of a scan over it, in any query of the session,
  * takes what was read. Entries are keyed by the dataset's root, the file's
  * path and its size; at most `MaxPages` page statistics are kept, the least
  * recently used files' dropped first.
  *
  * As Iceberg keeps manifests and Delta its snapshots between queries: the
  * file statistics of a large table would otherwise be read again for every
  * query planned over it. */
final class StatisticsCache(maxPages: Long) {
  import StatisticsCache.{Entry, Key}

  private val entries = new java.util.LinkedHashMap[Key, Entry](256, 0.75f, true)
  private var pages = 0L

  /** The statistics of the file `path` (of `size` bytes) under `root`: kept
    * ones, else `load()`'s (kept for next time). Errors are not kept. */
  def getOrLoad(root: String, path: String, size: Long)(load: => Option[PageStatistics]): Option[PageStatistics] = {
    val key = Key(root, path, size)
    val hit = synchronized(Option(entries.get(key)))
    hit.map(_.stats).getOrElse {
      val entry = new Entry(load)
      synchronized {
        val old = entries.put(key, entry)
        pages += entry.pages - (if (old == null) 0 else old.pages)
        val it = entries.values().iterator()
        while (pages > maxPages && it.hasNext) { pages -= it.next().pages; it.remove() }
      }
      entry.stats
    }
  }

  /** Files kept, and their page statistics. */
  def size: (Int, Long) = synchronized((entries.size, pages))

  /** Forgets everything. */
  def clear(): Unit = synchronized { entries.clear(); pages = 0 }
}

object StatisticsCache {

  /** Page statistics kept at most (a page's statistics take some 100 to 200 bytes). */
  val MaxPages: Long = 200000L

  /** The process's cache. */
  val shared: StatisticsCache = new StatisticsCache(MaxPages)

  private final case class Key(root: String, path: String, size: Long)

  private final class Entry(val stats: Option[PageStatistics]) {
    // (a file's distinct-value sketch of a column, 2 KiB, weighs as 16 pages)
    val pages: Long = stats.fold(1L)(s => math.max(1, s.pages.size + 16 * s.sketches.size).toLong)
  }

  /** Threads that read the statistics of many files at once when a planning
    * needs them (most of a file's read is waiting on storage). */
  private[filter] lazy val pool: ExecutorService = Executors.newFixedThreadPool(Readers, new ThreadFactory {
    private val n = new java.util.concurrent.atomic.AtomicInteger()
    def newThread(r: Runnable): Thread = {
      val t = new Thread(r, s"lance-statistics-${n.incrementAndGet()}")
      t.setDaemon(true)
      t
    }
  })

  private val Readers = 8

  /** `tasks` run on the pool (the calling thread waits); their results in order.
    * The first failure is rethrown as it was. */
  private[filter] def inParallel[A](tasks: Seq[() => A]): Seq[A] =
    if (tasks.size <= 1) tasks.map(_())
    else {
      val futures = tasks.map(t => pool.submit(new Callable[A] { def call(): A = t() }))
      futures.map { f =>
        try f.get()
        catch { case e: java.util.concurrent.ExecutionException if e.getCause != null => throw e.getCause }
      }
    }
}
