package io.lancespark.format.v01

import java.nio.{ByteBuffer, ByteOrder}

import org.apache.arrow.memory.ArrowBuf
import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.schema.{LanceField, LogicalType}

/** The values of a dictionary column, read once per file. */
private[v01] sealed trait LegacyDictionary { def size: Int }

/** String / binary values; an empty value reads as null, as pylance does. */
private[v01] final case class BinaryDictionary(offsets: Array[Long], data: Array[Byte]) extends LegacyDictionary {
  def size: Int = offsets.length - 1
  def isNull(k: Int): Boolean = offsets(k) == offsets(k + 1)
  def length(k: Int): Long = offsets(k + 1) - offsets(k)
}

/** Fixed-width (integer) values. */
private[v01] final case class FixedDictionary(width: Int, data: Array[Byte]) extends LegacyDictionary {
  def size: Int = data.length / width
}

/** Dictionary encoding ("dict:VALUE:KEY:ordered"): per batch, plain-encoded
  * keys; the values live once in the file, where the file's embedded manifest
  * says (offset, count). The result is the decoded value column. */
private[v01] object DictionaryDecoder {

  final case class DictType(value: String, key: String)

  def dictType(f: LanceField): DictType = {
    val parts = f.logicalType.split(":", -1).toVector
    if (parts.length < 4) throw new IllegalArgumentException(f.logicalType)
    DictType(parts.slice(1, parts.length - 2).mkString(":"), parts(parts.length - 2))
  }

  def isBinary(t: ArrowType): Boolean = t match {
    case _: ArrowType.Utf8 | _: ArrowType.LargeUtf8 | _: ArrowType.Binary | _: ArrowType.LargeBinary => true
    case _ => false
  }

  /** Loads the values at (`offset`, `count`), an offset taken from the file's own manifest. */
  def loadValues(io: PageReader, f: LanceField, offset: Long, count: Long): LegacyDictionary = {
    val dt = dictType(f)
    val valueType = LogicalType.toArrow(dt.value, s"column '${f.name}'")
    if (count < 0 || count > Int.MaxValue - 1) io.fail(f, s"dictionary of $count values")
    if (isBinary(valueType)) {
      val buf = io.bytes(f, -1, offset, (count + 1) * 8) // bounded by the file size
      val pos = new Array[Long](count.toInt + 1)
      buf.asLongBuffer().get(pos)
      VarBinaryDecoder.checkPositions(io, f, -1, pos)
      val len = pos.last - pos.head
      if (len > Int.MaxValue - 16) io.fail(f, s"dictionary of $len bytes is too large")
      val data = new Array[Byte](len.toInt)
      io.bytes(f, -1, pos.head, len).get(data)
      BinaryDictionary(pos.map(_ - pos.head), data)
    } else {
      val width = valueType match {
        case i: ArrowType.Int => i.getBitWidth / 8
        case other => io.fail(f, s"dictionary values of type $other are not supported in 0.1 files")
      }
      val buf = io.bytes(f, -1, offset, count * width)
      val data = new Array[Byte]((count * width).toInt)
      buf.get(data)
      FixedDictionary(width, data)
    }
  }

  /** The keys of `segments`, widened to Long, checked against the dictionary size. */
  def keys(io: PageReader, f: LanceField, segments: Seq[Segment], dictSize: Int): Array[Int] = {
    val keyType = LogicalType.toArrow(dictType(f).key, s"column '${f.name}'") match {
      case i: ArrowType.Int => i
      case other => io.fail(f, s"dictionary key type $other is not an integer")
    }
    val w = keyType.getBitWidth / 8
    val total = segments.map(_.length).sum
    val out = new Array[Int](total.toInt)
    var o = 0
    segments.foreach { s =>
      val buf = io.values(f, s.batch, s.start, s.length, w)
      var i = 0
      while (i < s.length) {
        val k: Long = (w, keyType.getIsSigned) match {
          case (1, true)  => buf.get(i).toLong
          case (1, false) => buf.get(i) & 0xffL
          case (2, true)  => buf.getShort(i * 2).toLong
          case (2, false) => buf.getShort(i * 2) & 0xffffL
          case (4, true)  => buf.getInt(i * 4).toLong
          case (4, false) => buf.getInt(i * 4) & 0xffffffffL
          case _          => buf.getLong(i * 8)
        }
        if (k < 0 || k >= dictSize)
          io.fail(f, s"batch ${s.batch}: dictionary key $k at row ${s.start + i} is outside the dictionary of $dictSize values")
        out(o) = k.toInt
        o += 1
        i += 1
      }
    }
    out
  }

  def decodedBytes(d: BinaryDictionary, keys: Array[Int]): Long = {
    var n = 0L
    keys.foreach(k => n += d.length(k))
    n
  }

  def fillBinary(d: BinaryDictionary, keys: Array[Int], offsetWidth: Int,
                 offsetBuf: ArrowBuf, dataBuf: ArrowBuf, validityBuf: ArrowBuf): Unit = {
    val rows = keys.length
    val offsets = ByteBuffer.allocate((rows + 1) * offsetWidth).order(ByteOrder.LITTLE_ENDIAN)
    val valid = Validity.newBitmap(rows)
    val data = new Array[Byte](decodedBytes(d, keys).toInt)
    var o = 0
    var i = 0
    while (i < rows) {
      val k = keys(i)
      if (offsetWidth == 4) offsets.putInt(i * 4, o) else offsets.putLong(i * 8, o.toLong)
      if (!d.isNull(k)) Validity.set(valid, i)
      val len = d.length(k).toInt
      System.arraycopy(d.data, d.offsets(k).toInt, data, o, len)
      o += len
      i += 1
    }
    if (offsetWidth == 4) offsets.putInt(rows * 4, o) else offsets.putLong(rows * 8, o.toLong)
    offsetBuf.setBytes(0, offsets)
    if (data.nonEmpty) dataBuf.setBytes(0, data)
    Validity.copy(validityBuf, valid)
  }

  def fillFixed(d: FixedDictionary, keys: Array[Int], dataBuf: ArrowBuf, validityBuf: ArrowBuf): Unit = {
    val w = d.width
    val data = new Array[Byte](keys.length * w)
    var i = 0
    while (i < keys.length) {
      System.arraycopy(d.data, keys(i) * w, data, i * w, w)
      i += 1
    }
    if (data.nonEmpty) dataBuf.setBytes(0, data)
    Validity.setAllValid(validityBuf, keys.length)
  }
}
