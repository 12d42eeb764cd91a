package io.lancespark.table.index

import java.nio.{ByteBuffer, ByteOrder}

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{BitVector, UInt8Vector, VarBinaryVector}
import org.apache.arrow.vector.types.FloatingPointPrecision
import org.apache.arrow.vector.types.pojo.ArrowType
import org.roaringbitmap.RoaringBitmap

import io.lancespark.table.filter.{CompareOp, Filter, Lit}
import io.lancespark.table.filter.Filter._
import io.lancespark.table.storage.DatasetStorage

/** A BLOOMFILTER index as the reference writes it: `bloomfilter.lance`, one
  * row per zone of a fragment (`fragment_id`, `zone_start`, `zone_length`,
  * `has_null`, `bloom_filter_data`: a split-block bloom filter as Parquet's,
  * of the values' little-endian bytes hashed with XXH64). Answers `=`, `<=>`,
  * `IN` (the zones whose filter may hold a value) and `IS NULL` (zones with
  * nulls), for the TRUE outcome only: a superset. Zones are trusted as the
  * zone map's are (their lengths add up to the fragment's rows). */
final class BloomFilterIndex private (val entry: IndexEntry, arrowType: ArrowType,
                                      zones: Map[Int, IndexedSeq[BloomFilterIndex.Zone]], rowsOf: Int => Long,
                                      read: Long) extends ScalarIndex {
  import BloomFilterIndex._
  val column: Column = entry.fields.head

  override val trusted: RoaringBitmap =
    ScalarIndex.zonesAddingUp(entry, f => zones.get(f).map(_.map(_.length).sum), rowsOf)

  /** The byte forms a literal may take in the column (several for 0.0 and
    * -0.0), None when it cannot be hashed exactly as the column's values are. */
  private def forms(l: Lit): Option[Seq[Array[Byte]]] = (arrowType, l) match {
    case (i: ArrowType.Int, Lit.LongLit(v)) if i.getIsSigned =>
      val bits = i.getBitWidth
      if (bits < 64 && (v < -(1L << (bits - 1)) || v >= (1L << (bits - 1)))) Some(Nil)
      else Some(Seq(le(v, bits / 8)))
    case (_: ArrowType.Date, Lit.LongLit(v)) if arrowType == DateDay =>
      if (v.toInt != v) Some(Nil) else Some(Seq(le(v, 4)))
    case (f: ArrowType.FloatingPoint, Lit.DoubleLit(v)) if !v.isNaN =>
      val vs = if (v == 0.0) Seq(0.0, -0.0) else Seq(v)
      f.getPrecision match {
        case FloatingPointPrecision.DOUBLE => Some(vs.map(d => le(java.lang.Double.doubleToRawLongBits(d), 8)))
        case FloatingPointPrecision.SINGLE =>
          if (vs.exists(d => d.toFloat.toDouble != d)) Some(Nil)
          else Some(vs.map(d => le(java.lang.Float.floatToRawIntBits(d.toFloat).toLong, 4)))
        case _ => None
      }
    case (_: ArrowType.Utf8 | _: ArrowType.LargeUtf8, Lit.BytesLit(b, true)) => Some(Seq(b))
    case (_: ArrowType.Binary | _: ArrowType.LargeBinary, Lit.BytesLit(b, false)) => Some(Seq(b))
    case _ => None
  }

  /** Zones (per fragment) that may hold a row where the test is TRUE. */
  private def zonesWhere(test: Zone => Boolean): RowAddrMap.Rows =
    trusted.toArray.toSeq.map { f =>
      val b = new RoaringBitmap()
      zones(f).foreach(z => if (test(z)) b.add(z.start, z.start + z.length))
      f -> b
    }.toMap

  def rows(leaf: Filter, outcome: Boolean): Option[RowAddrMap.Rows] =
    if (!outcome) None
    else {
      val values: Option[Seq[Lit]] = leaf match {
        case Compare(_, CompareOp.Eq | CompareOp.EqNullSafe, l) if !l.isNull => Some(Seq(l))
        case In(_, vs) if vs.nonEmpty => Some(vs.filterNot(_.isNull))
        case _ => None
      }
      leaf match {
        case _: IsNull => Some(zonesWhere(_.hasNull))
        case _ => values.flatMap { ls =>
          val fs = ls.map(forms)
          if (fs.exists(_.isEmpty)) None
          else {
            val hashes = fs.flatMap(_.get).map(XxHash64.hash(_))
            Some(zonesWhere(z => hashes.exists(z.mayHold)))
          }
        }
      }
    }

  def bytesRead: Long = read
  override def close(): Unit = ()
}

object BloomFilterIndex {
  val File = "bloomfilter.lance"
  private val DateDay = new ArrowType.Date(org.apache.arrow.vector.types.DateUnit.DAY)

  private def le(v: Long, bytes: Int): Array[Byte] = {
    val out = new Array[Byte](bytes)
    var i = 0
    while (i < bytes) { out(i) = (v >>> (8 * i)).toByte; i += 1 }
    out
  }

  private val Salt: Array[Int] = Array(0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d,
    0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31)

  /** One zone: rows [start, start + length) of its fragment; `words`: the
    * filter's blocks, 8 little-endian 32-bit words each. */
  final case class Zone(start: Long, length: Long, hasNull: Boolean, words: Array[Int]) {
    private val blocks = words.length / 8
    def mayHold(hash: Long): Boolean =
      if (blocks == 0) false
      else {
        val block = (((hash >>> 32) * blocks) >>> 32).toInt
        val x = hash.toInt
        var i = 0
        var all = true
        while (all && i < 8) {
          val bit = 1 << ((x * Salt(i)) >>> 27)
          all = (words(block * 8 + i) & bit) != 0
          i += 1
        }
        all
      }
  }

  def open(storage: DatasetStorage, entry: IndexEntry, columnType: ArrowType, rowsOf: Int => Long,
           allocator: BufferAllocator): BloomFilterIndex = {
    val file = IndexFile.open(storage, entry, File)
    try {
      val n = file.numRows
      val vs = file.read(Seq("fragment_id", "zone_start", "zone_length", "has_null", "bloom_filter_data"), 0, n, allocator)
      try {
        val frag = vs(0).asInstanceOf[UInt8Vector]
        val start = vs(1).asInstanceOf[UInt8Vector]
        val length = vs(2).asInstanceOf[UInt8Vector]
        val nulls = vs(3).asInstanceOf[BitVector]
        val data = vs(4).asInstanceOf[VarBinaryVector]
        val zones = (0 until n.toInt).map { i =>
          val bytes = if (data.isNull(i)) Array.emptyByteArray else data.get(i)
          val bb = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer()
          val words = new Array[Int](bb.remaining() / 8 * 8)
          bb.get(words)
          frag.get(i).toInt -> Zone(start.get(i), length.get(i), nulls.get(i) == 1, words)
        }.groupBy(_._1).map { case (f, zs) => f -> zs.map(_._2).sortBy(_.start).toIndexedSeq }
        new BloomFilterIndex(entry, columnType, zones, rowsOf, file.bytesRead)
      } finally vs.foreach(_.close())
    } finally file.close()
  }
}
