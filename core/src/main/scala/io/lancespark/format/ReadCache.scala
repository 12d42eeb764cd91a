package io.lancespark.format

/** A process-wide cache of what was read from files that never change (an index's files, a
  * data file's metadata): least recently used entries go first, to stay within
  * `maxEntries` entries and `maxBytes` bytes. A value larger than a quarter
  * of the bytes is not kept. Values must not be changed by callers. */
final class ReadCache[K, V](maxEntries: Int, maxBytes: Long) {
  private val map = new java.util.LinkedHashMap[K, (V, Long)](16, 0.75f, true)
  private var bytes = 0L

  def get(key: K): Option[V] = map.synchronized(Option(map.get(key)).map(_._1))

  /** Keeps `value` (of about `size` bytes) under `key`; returns it. */
  def put(key: K, value: V, size: Long): V = {
    if (size <= maxBytes / 4) map.synchronized {
      Option(map.put(key, (value, size))).foreach(old => bytes -= old._2)
      bytes += size
      val it = map.entrySet().iterator()
      while ((map.size() > maxEntries || bytes > maxBytes) && it.hasNext) {
        bytes -= it.next().getValue._2
        it.remove()
      }
    }
    value
  }

  /** Entries kept. */
  def size: Int = map.synchronized(map.size())
}
