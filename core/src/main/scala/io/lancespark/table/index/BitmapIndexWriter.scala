package io.lancespark.table.index

import java.nio.{ByteBuffer, ByteOrder}

import scala.collection.mutable
import scala.collection.mutable.ArrayBuffer

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.VarBinaryVector
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType}
import org.roaringbitmap.RoaringBitmap

import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.DatasetStorage

/** Writes a BITMAP index in the reference's layout (see [[BitmapIndex]]) from
  * (value, row address) pairs in the index's order: `bitmap_page_lookup.lance`
  * with one row per distinct value, sorted with the null key first, as pylance
  * 14 writes it (`keys`, `bitmaps`: the key's row addresses serialized as
  * [[RowAddrMap.parseInto]] reads them), and the schema metadata
  * `lance:index_stats` = {"num_bitmaps":N}. Keys and bitmaps are held in
  * memory until `finish` (the reference holds them too). */
final class BitmapIndexWriter(storage: DatasetStorage, uuid: String, valueType: ArrowType, version: DataFileVersion,
                              allocator: BufferAllocator, extraMetadata: Map[String, String] = Map.empty)
    extends SortedIndexWriter {

  private val keys = ArrayBuffer.empty[Any]
  private val bitmaps = ArrayBuffer.empty[Array[Byte]]
  private var current: mutable.TreeMap[Int, RoaringBitmap] = mutable.TreeMap.empty
  private var last: Any = null
  private var rows = 0L

  def add(value: Any, addr: Long): Unit = {
    if (rows > 0) {
      val c = IndexValues.ordering.compare(last, value)
      if (c > 0) throw new IllegalArgumentException(s"index input out of order at row $rows: $value after $last")
      if (c != 0) close()
    }
    keyed = false
    put(addr)
    last = value
    rows += 1
  }

  // keys of a keyed column in bulk: the value is made once per distinct key
  private var keyed = false
  private var lastKey = 0L

  override def addKeys(codec: KeyCodec, keys: Array[Long], addrs: Array[Long], n: Int): Unit = {
    var i = 0
    while (i < n) {
      val k = keys(i)
      if (!(keyed && k == lastKey)) {
        val value = codec.value(k)
        if (rows > 0) {
          val c = if (keyed) java.lang.Long.compare(lastKey, k) else IndexValues.ordering.compare(last, value)
          if (c > 0) throw new IllegalArgumentException(s"index input out of order at row $rows: $value after $last")
          if (c != 0) close()
        }
        last = value; lastKey = k; keyed = true
      }
      put(addrs(i))
      rows += 1
      i += 1
    }
  }

  // the bitmap of the fragment last added to (rows come mostly fragment by fragment)
  private var lastFragment = -1
  private var lastBitmap: RoaringBitmap = null

  private def put(addr: Long): Unit = {
    val frag = (addr >>> 32).toInt
    if (frag != lastFragment || lastBitmap == null) {
      lastBitmap = current.getOrElseUpdate(frag, new RoaringBitmap())
      lastFragment = frag
    }
    lastBitmap.add((addr & 0xffffffffL).toInt)
  }

  /** Ends the current key. */
  private def close(): Unit = if (current.nonEmpty) {
    keys += last
    bitmaps += BitmapIndexWriter.serialize(current)
    current = mutable.TreeMap.empty
    lastBitmap = null
  }

  def finish(): Seq[(String, Long)] = {
    close()
    val file = new IndexFileWriter(storage, uuid, BitmapIndex.File, Seq(
      new Field("keys", FieldType.nullable(valueType), null),
      new Field("bitmaps", FieldType.nullable(ArrowType.Binary.INSTANCE), null)),
      extraMetadata ++ Map("lance:index_stats" -> s"""{"num_bitmaps":${keys.size}}"""), version)
    try {
      // batches of at most ~64 MB of bitmaps
      var from = 0
      while (from < keys.size) {
        var until = from
        var bytes = 0L
        while (until < keys.size && (until == from || bytes + bitmaps(until).length <= BitmapIndexWriter.BatchBytes)) {
          bytes += bitmaps(until).length; until += 1
        }
        val k = IndexValues.vector("keys", valueType, keys.slice(from, until).toIndexedSeq, allocator)
        val b = new VarBinaryVector(new Field("bitmaps", FieldType.nullable(ArrowType.Binary.INSTANCE), null), allocator)
        try {
          b.allocateNew(bytes, until - from)
          (from until until).foreach(i => b.setSafe(i - from, bitmaps(i)))
          b.setValueCount(until - from)
          file.write(Seq(k, b))
        } finally { k.close(); b.close() }
        from = until
      }
      Seq(BitmapIndex.File -> file.finish())
    } catch { case e: Throwable => file.close(); throw e }
  }

  def rowsAdded: Long = rows
  def abort(): Unit = IndexFileWriter.removeDir(storage, uuid)
}

object BitmapIndexWriter {
  private val BatchBytes = 64L << 20

  /** The reference's serialized row address set: u32 count of fragments,
    * then per fragment (ascending) u32 id, u32 size and a portable roaring
    * bitmap of its offsets. Little endian. */
  def serialize(byFragment: collection.SortedMap[Int, RoaringBitmap]): Array[Byte] = {
    val size = 4 + byFragment.values.map(b => 8 + b.serializedSizeInBytes()).sum
    val out = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN)
    out.putInt(byFragment.size)
    byFragment.foreach { case (frag, b) =>
      out.putInt(frag)
      out.putInt(b.serializedSizeInBytes())
      b.serialize(out)
    }
    out.array()
  }
}
