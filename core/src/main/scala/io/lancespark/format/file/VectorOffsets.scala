package io.lancespark.format.file

import org.apache.arrow.memory.ArrowBuf
import org.apache.arrow.vector.{BaseLargeVariableWidthVector, BaseVariableWidthVector, FieldVector}
import org.apache.arrow.vector.complex.{LargeListVector, ListVector}

/** The offsets of an Arrow list or variable-width vector being written
  * (`width` 4 or 8 bytes each), read as longs. */
private[format] final class VectorOffsets(buf: ArrowBuf, val width: Int) {
  def apply(i: Long): Long = if (width == 4) buf.getInt(4L * i).toLong else buf.getLong(8L * i)
}

private[format] object VectorOffsets {
  /** A list vector's offsets and items; None for another vector. */
  def ofList(v: FieldVector): Option[(VectorOffsets, FieldVector)] = v match {
    case l: ListVector      => Some((new VectorOffsets(l.getOffsetBuffer, 4), l.getDataVector))
    case l: LargeListVector => Some((new VectorOffsets(l.getOffsetBuffer, 8), l.getDataVector))
    case _ => None
  }

  /** A variable-width vector's offsets and bytes; None for another vector. */
  def ofVariable(v: FieldVector): Option[(VectorOffsets, ArrowBuf)] = v match {
    case s: BaseVariableWidthVector      => Some((new VectorOffsets(s.getOffsetBuffer, 4), s.getDataBuffer))
    case s: BaseLargeVariableWidthVector => Some((new VectorOffsets(s.getOffsetBuffer, 8), s.getDataBuffer))
    case _ => None
  }
}
