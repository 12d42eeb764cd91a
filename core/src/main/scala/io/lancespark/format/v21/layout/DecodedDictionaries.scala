package io.lancespark.format.v21.layout

import java.nio.ByteBuffer

import io.lancespark.format.arrow.{AllNullValues, DictionaryValues, FixedValues, VarValues}

/** Page dictionaries stored compressed (zstd, lz4, FSST), decoded once per
  * process: a scan reads a page's dictionary again in every query (and every
  * task of the page), and decompressing it can cost as much as decoding the
  * page's indices. Keyed by content, the stored bytes and how they are
  * encoded, so an entry can never stand for other bytes (whatever a file's
  * name); least recently used entries go past `MaxBytes` of decoded items. */
private[layout] object DecodedDictionaries {

  /** Decoded bytes kept at most: a sixteenth of the JVM's heap, at most 256
    * MiB (a scan that cycles through more dictionaries than fit decodes every
    * one again each time: least-recently-used order keeps none of them). */
  val MaxBytes: Long = math.min(256L << 20, Runtime.getRuntime.maxMemory / 16)

  private final class Key(val encoding: com.google.protobuf.ByteString, val count: Long, val stored: Array[Byte]) {
    override val hashCode: Int = (encoding.hashCode * 31 + count.hashCode) * 31 + {
      // (CRC32C is an intrinsic: hashing a dictionary of a few hundred KiB costs little next to decoding it)
      val crc = new java.util.zip.CRC32C()
      crc.update(stored, 0, stored.length)
      crc.getValue.toInt
    }
    override def equals(o: Any): Boolean = o match {
      case k: Key => k.hashCode == hashCode && k.count == count && k.encoding == encoding &&
        java.util.Arrays.equals(k.stored, stored)
      case _ => false
    }
  }

  private final class Entry(val values: DictionaryValues, val bytes: Long)

  private val entries = new java.util.LinkedHashMap[Key, Entry](64, 0.75f, true)
  private var total = 0L

  /** The decoded dictionary of `stored` (encoded as `encoding`, `count`
    * items): cached, or `decode`d now and kept. */
  def apply(encoding: com.google.protobuf.ByteString, count: Long, stored: ByteBuffer)
           (decode: => DictionaryValues): DictionaryValues = {
    val bytes = new Array[Byte](stored.remaining())
    stored.duplicate().get(bytes)
    val key = new Key(encoding, count, bytes)
    val hit = entries.synchronized(entries.get(key))
    if (hit != null) hit.values
    else {
      val values = decode
      val size = bytes.length + (values match {
        case v: VarValues   => v.bytes.length + 8L * v.offsets.length
        case v: FixedValues => 2L * v.bytes.length // (and the typed copy a lookup makes)
        case AllNullValues  => 0L
      })
      if (size <= MaxBytes / 4) entries.synchronized {
        val old = entries.put(key, new Entry(values, size))
        total += size - (if (old == null) 0L else old.bytes)
        val it = entries.values().iterator()
        while (total > MaxBytes && it.hasNext) { total -= it.next().bytes; it.remove() }
      }
      values
    }
  }
}
