package io.lancespark.format.v01

import java.nio.{ByteBuffer, ByteOrder}

import org.apache.arrow.memory.ArrowBuf

import io.lancespark.schema.LanceField

/** Var-binary encoding: the value bytes, then `rows + 1` i64 absolute file
  * positions; the page points at the positions. When the field is nullable, a
  * value whose start equals its end reads as null (so "" cannot be told from null). */
private[v01] object VarBinaryDecoder {

  /** File positions of rows `[start, end]` of one segment (`length + 1` values). */
  def positions(io: PageReader, f: LanceField, s: Segment): Array[Long] = {
    val n = (s.length + 1).toInt
    // rows + 1 positions are stored, so the page's value count is length + 1
    val p = io.page(f, s.batch)
    if (s.start < 0 || s.end > p.length)
      io.fail(f, s"batch ${s.batch}: rows [${s.start}, ${s.end}) are outside the page of ${p.length} rows")
    val buf = io.bytes(f, s.batch, p.position + s.start * 8, n.toLong * 8)
    val out = new Array[Long](n)
    buf.asLongBuffer().get(out)
    checkPositions(io, f, s.batch, out)
    out
  }

  def checkPositions(io: PageReader, f: LanceField, batch: Int, pos: Array[Long]): Unit = {
    var i = 0
    while (i < pos.length) {
      if (pos(i) < 0 || pos(i) > io.source.size || (i > 0 && pos(i) < pos(i - 1)))
        io.fail(f, s"batch $batch: var-binary positions are out of order or outside the file (${pos(i)})")
      i += 1
    }
  }

  def dataBytes(positions: Seq[Array[Long]]): Long = positions.map(p => p.last - p.head).sum

  /** Fills the offsets (4 or 8 bytes wide), data and validity of a variable-width vector. */
  def fill(io: PageReader, f: LanceField, segments: Seq[Segment], positions: Seq[Array[Long]],
           nullable: Boolean, rows: Int, offsetWidth: Int,
           offsetBuf: ArrowBuf, dataBuf: ArrowBuf, validityBuf: ArrowBuf): Unit = {
    val offsets = ByteBuffer.allocate((rows + 1) * offsetWidth).order(ByteOrder.LITTLE_ENDIAN)
    val valid = Validity.newBitmap(rows)
    var row = 0
    var dataOut = 0L
    segments.zip(positions).foreach { case (s, pos) =>
      val n = pos.length - 1
      val base = pos(0)
      var i = 0
      while (i < n) {
        val o = dataOut + pos(i) - base
        if (offsetWidth == 4) offsets.putInt((row + i) * 4, o.toInt) else offsets.putLong((row + i) * 8, o)
        if (!nullable || pos(i) != pos(i + 1)) Validity.set(valid, row + i)
        i += 1
      }
      val len = pos(n) - base
      if (len > 0) dataBuf.setBytes(dataOut, io.bytes(f, s.batch, base, len))
      dataOut += len
      row += n
    }
    if (offsetWidth == 4) offsets.putInt(rows * 4, dataOut.toInt) else offsets.putLong(rows * 8, dataOut)
    offsetBuf.setBytes(0, offsets)
    Validity.copy(validityBuf, valid)
  }
}
