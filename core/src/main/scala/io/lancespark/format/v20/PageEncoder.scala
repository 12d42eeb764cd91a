package io.lancespark.format.v20

import org.apache.arrow.memory.ArrowBuf
import org.apache.arrow.vector.{BaseFixedWidthVector, BaseLargeVariableWidthVector, BaseVariableWidthVector, BitVector, FieldVector}
import org.apache.arrow.vector.complex.FixedSizeListVector

import io.lancespark.schema.{LanceField, LanceFormatException}
import io.lancespark.format.file.{BitBuilder, ByteBuilder, VectorOffsets}
import io.lancespark.format.stats.PageValues
import io.lancespark.proto.encodings.{ArrayEncoding, Binary, Buffer => PbBuffer, FixedSizeList, Flat, Nullable, SimpleStruct}
import io.lancespark.proto.encodings.{List => PbList}

private[v20] trait PageSink {
  def maxRowsPerPage: Int
  def maxPageBytes: Long
  /** Writes a page; buffers are (bytes, length) pairs; returns the page index. */
  def emitPage(column: Int, buffers: Seq[(Array[Byte], Int)], length: Long,
               encoding: ArrayEncoding, priority: Long): Int
}

/** Builders of the 2.0 ("legacy") array encodings, as pylance writes them. */
private[v20] object Encodings {
  def flat(bits: Long, buffer: Int): ArrayEncoding = ArrayEncoding.newBuilder()
    .setFlat(Flat.newBuilder().setBitsPerValue(bits)
      .setBuffer(PbBuffer.newBuilder().setBufferIndex(buffer).setBufferType(PbBuffer.BufferType.page)))
    .build()

  def noNulls(values: ArrayEncoding): ArrayEncoding = ArrayEncoding.newBuilder()
    .setNullable(Nullable.newBuilder().setNoNulls(Nullable.NoNull.newBuilder().setValues(values))).build()

  def someNulls(validity: ArrayEncoding, values: ArrayEncoding): ArrayEncoding = ArrayEncoding.newBuilder()
    .setNullable(Nullable.newBuilder().setSomeNulls(
      Nullable.SomeNull.newBuilder().setValidity(validity).setValues(values))).build()

  val allNulls: ArrayEncoding = ArrayEncoding.newBuilder()
    .setNullable(Nullable.newBuilder().setAllNulls(Nullable.AllNull.newBuilder())).build()

  val struct: ArrayEncoding = ArrayEncoding.newBuilder().setStruct(SimpleStruct.newBuilder()).build()

  def fixedSizeList(dimension: Int, items: ArrayEncoding): ArrayEncoding = ArrayEncoding.newBuilder()
    .setFixedSizeList(FixedSizeList.newBuilder().setDimension(dimension).setItems(items)).build()

  def binary(indicesBuffer: Int, bytesBuffer: Int, nullAdjustment: Long): ArrayEncoding = ArrayEncoding.newBuilder()
    .setBinary(Binary.newBuilder()
      .setIndices(noNulls(flat(64, indicesBuffer)))
      .setBytes(flat(8, bytesBuffer))
      .setNullAdjustment(nullAdjustment)).build()

  def list(offsetsBuffer: Int, nullOffsetAdjustment: Long, numItems: Long): ArrayEncoding = ArrayEncoding.newBuilder()
    .setList(PbList.newBuilder()
      .setOffsets(noNulls(flat(64, offsetsBuffer)))
      .setNullOffsetAdjustment(nullOffsetAdjustment)
      .setNumItems(numItems)).build()
}

/** Encodes one column of a 2.0 file: accumulates the items of successive
  * batches and writes a page whenever the page reaches the row or byte limit.
  * `rowOf(i)` maps index i of the vector being appended to its top-level row
  * (a page's priority is the top-level row of its first item). */
private[v20] sealed abstract class ColumnEncoder(val field: LanceField, val column: Int, sink: PageSink) {
  protected var rows: Long = 0
  protected var priority: Long = 0
  var pagesWritten: Int = 0

  protected def where: String = s"column '${field.name}' (field id ${field.id})"

  /** Writes the pending page, if any. */
  def flush(): Unit

  protected def emit(buffers: Seq[(Array[Byte], Int)], encoding: ArrayEncoding): Int = {
    val idx = sink.emitPage(column, buffers, rows, encoding, priority)
    pagesWritten += 1
    rows = 0
    idx
  }
}

/** A struct column: `struct{}` pages hold only a length. pylance 14 reads
  * struct columns of exactly one page, so the whole column is one page,
  * written at the end (priority 0, its first row). */
private[v20] final class StructEncoder(field: LanceField, column: Int, sink: PageSink)
    extends ColumnEncoder(field, column, sink) {
  def append(from: Int, until: Int): Unit = rows += until - from
  def flush(): Unit = if (rows > 0) emit(Nil, Encodings.struct)
}

/** A list column: per page, the end offset of every list relative to the
  * page's first item (no leading 0), null lists as end + null_offset_adjustment
  * (= num_items + 1), and the number of items the page references. Items are
  * encoded by the item column, paginated independently. */
private[v20] final class ListEncoder(field: LanceField, column: Int, sink: PageSink)
    extends ColumnEncoder(field, column, sink) {
  private val ends = new ByteBuilder()
  private val validity = new BitBuilder
  private var items = 0L
  private var nulls = 0L

  def append(vec: FieldVector, from: Int, until: Int, rowOf: Int => Long): Unit = {
    val off = VectorOffsets.ofList(vec).map(_._1).getOrElse(
      throw new LanceFormatException(s"$where: a list needs a list vector, got ${vec.getClass.getSimpleName}"))
    val maxRowsByBytes = math.max(1L, sink.maxPageBytes / 8)
    var i = from
    while (i < until) {
      if (rows == 0) priority = rowOf(i)
      val k = math.min(until - i, math.min(sink.maxRowsPerPage - rows, maxRowsByBytes - rows)).toInt
      val base = off(i)
      var r = i
      while (r < i + k) {
        ends.putLong(items + off(r + 1) - base)
        r += 1
      }
      val set = validity.append(vec.getValidityBuffer, i, k)
      nulls += k - set
      items += off(i + k) - base
      rows += k
      i += k
      if (rows >= sink.maxRowsPerPage || rows >= maxRowsByBytes) flush()
    }
  }

  def flush(): Unit = if (rows > 0) {
    val n = rows.toInt
    val adj = items + 1
    if (nulls > 0) {
      var i = 0
      while (i < n) {
        if (!validity.get(i)) {
          val v = ends.getLong(i) + adj
          var b = 0
          while (b < 8) { ends.arr(8 * i + b) = (v >>> (8 * b)).toByte; b += 1 }
        }
        i += 1
      }
    }
    emit(Seq(ends.arr -> ends.size), Encodings.list(0, adj, items))
    ends.clear(); validity.clear(); items = 0; nulls = 0
  }
}

/** What a leaf page holds when it is written: its validity (bit set = valid),
  * its values and, for variable-width columns, the end offset of every value
  * (relative to the page, no leading 0, nulls not adjusted). The statistics
  * collector reads these. */
private[v20] final class LeafPage(
    val rows: Int,
    val nullCount: Long,
    val validity: BitBuilder,
    val values: Array[Byte],
    val valuesSize: Int,
    val ends: ByteBuilder) extends PageValues {
  def isValid(i: Int): Boolean = validity.get(i)
  def end(i: Int): Long = ends.getLong(i)
}

/** A leaf column: fixed-width values (1-bit booleans), fixed-size lists of
  * fixed-width items, or variable-width strings/binaries. */
private[v20] final class LeafEncoder(
    field: LanceField,
    column: Int,
    sink: PageSink,
    onPage: (LeafEncoder, Int, Long, LeafPage) => Unit)
    extends ColumnEncoder(field, column, sink) {

  private sealed trait Kind
  private case class Fixed(bits: Int) extends Kind
  private case class Fsl(dim: Int, itemBits: Int) extends Kind
  private case object Var extends Kind
  private var kind: Kind = null

  private val validity = new BitBuilder
  private val values = new ByteBuilder()
  private val ends = new ByteBuilder()          // Var: value ends
  private val itemValidity = new BitBuilder     // Fsl: item validity
  private var nulls = 0L
  private var itemNulls = 0L

  private def kindOf(vec: FieldVector): Kind = vec match {
    case _: BitVector => Fixed(1)
    case f: FixedSizeListVector =>
      val item = f.getDataVector match {
        case _: BitVector => 1
        case v: BaseFixedWidthVector => v.getTypeWidth * 8
        case other => throw new LanceFormatException(
          s"$where: fixed-size lists of ${other.getField.getType} are not supported")
      }
      Fsl(f.getListSize, item)
    case v: BaseFixedWidthVector => Fixed(v.getTypeWidth * 8)
    case _: BaseVariableWidthVector | _: BaseLargeVariableWidthVector => Var
    case other => throw new LanceFormatException(
      s"$where: unsupported Arrow vector ${other.getClass.getSimpleName} (${other.getField.getType})")
  }

  private def bytesSoFar: Long = kind match {
    case Fixed(_)  => valueBuffer._2 + validity.byteSize
    case Fsl(_, _) => valueBuffer._2 + validity.byteSize + itemValidity.byteSize
    case Var       => values.size + ends.size + validity.byteSize
  }

  def append(vec: FieldVector, from: Int, until: Int, rowOf: Int => Long): Unit = {
    if (kind == null) kind = kindOf(vec)
    var i = from
    while (i < until) {
      if (rows == 0) priority = rowOf(i)
      val k = fit(vec, i, until)
      if (k == 0) flush()
      else {
        appendRange(vec, i, i + k)
        i += k
        if (rows >= sink.maxRowsPerPage || bytesSoFar >= sink.maxPageBytes) flush()
      }
    }
  }

  /** How many of rows [i, until) fit the current page (at least 1 if it is empty). */
  private def fit(vec: FieldVector, i: Int, until: Int): Int = {
    val rowsLeft = math.min(until - i.toLong, sink.maxRowsPerPage - rows)
    val bytesLeft = sink.maxPageBytes - bytesSoFar
    val k: Long = kind match {
      case Fixed(bits) => math.min(rowsLeft, bytesLeft * 8 / (bits + 1))
      case Fsl(dim, ib) => math.min(rowsLeft, bytesLeft * 8 / (dim.toLong * (ib + 1) + 1))
      case Var =>
        val off = varOffsets(vec)
        val base = off(i)
        def cost(n: Long): Long = off(i + n) - base + 8 * n + (n + 7) / 8
        var lo = 0L
        var hi = rowsLeft
        while (lo < hi) { // largest n with cost(n) <= bytesLeft
          val mid = (lo + hi + 1) >>> 1
          if (cost(mid) <= bytesLeft) lo = mid else hi = mid - 1
        }
        lo
    }
    if (k <= 0 && rows == 0) 1 else math.max(k, 0L).toInt
  }

  private def varOffsets(vec: FieldVector): VectorOffsets = VectorOffsets.ofVariable(vec).map(_._1).getOrElse(
    throw new LanceFormatException(s"$where: expected a variable-width vector, got ${vec.getClass.getSimpleName}"))

  private def appendRange(vec: FieldVector, from: Int, until: Int): Unit = {
    val k = until - from
    nulls += k - validity.append(vec.getValidityBuffer, from, k)
    kind match {
      case Fixed(1) => appendBits(vec.getDataBuffer, from, k)
      case Fixed(bits) =>
        val w = bits / 8
        values.append(vec.getDataBuffer, from.toLong * w, k.toLong * w)
      case Fsl(dim, ib) =>
        val child = vec.asInstanceOf[FixedSizeListVector].getDataVector
        val a = from.toLong * dim
        val n = k.toLong * dim
        itemNulls += n - itemValidity.append(child.getValidityBuffer, a, n)
        if (ib == 1) appendBits(child.getDataBuffer, a, n)
        else values.append(child.getDataBuffer, a * (ib / 8), n * (ib / 8))
      case Var =>
        val off = varOffsets(vec)
        val base = off(from)
        val pageBase = values.size.toLong
        ends.ensure(8L * k)
        var j = from
        while (j < until) { ends.putLong(pageBase + off(j + 1) - base); j += 1 }
        values.append(vec.getDataBuffer, base, off(until) - base)
    }
    rows += k
  }

  /** 1-bit values (booleans, items of boolean fixed-size lists). */
  private val valueBits = new BitBuilder
  private def appendBits(src: ArrowBuf, from: Long, n: Long): Unit = { valueBits.append(src, from, n); () }

  private def bitItems: Boolean = kind match {
    case Fixed(1) | Fsl(_, 1) => true
    case _ => false
  }

  /** The page's values: bytes, or the bitmap of 1-bit values. */
  private def valueBuffer: (Array[Byte], Int) =
    if (bitItems) valueBits.arr -> valueBits.byteSize else values.arr -> values.size

  def flush(): Unit = if (rows > 0) {
    val n = rows
    val (valArr, valSize) = valueBuffer
    val page = new LeafPage(n.toInt, nulls, validity, valArr, valSize, ends)
    val pageIndex = kind match {
      case Fixed(bits) =>
        val vals = valArr -> valSize
        if (nulls == 0) emit(Seq(vals), Encodings.noNulls(Encodings.flat(bits, 0)))
        else if (nulls == n) emit(Nil, Encodings.allNulls)
        else emit(Seq(validity.arr -> validity.byteSize, vals),
          Encodings.someNulls(Encodings.flat(1, 0), Encodings.flat(bits, 1)))

      case Fsl(dim, ib) =>
        if (nulls == n) emit(Nil, Encodings.allNulls)
        else {
          val outer = if (nulls == 0) Nil else Seq(validity.arr -> validity.byteSize)
          val b0 = outer.size
          val itemsTotal = n * dim
          val (itemBufs, itemEnc) =
            if (itemNulls == 0) (Seq(valArr -> valSize), Encodings.noNulls(Encodings.flat(ib, b0)))
            else if (itemNulls == itemsTotal) (Nil, Encodings.allNulls)
            else (Seq(itemValidity.arr -> itemValidity.byteSize, valArr -> valSize),
              Encodings.someNulls(Encodings.flat(1, b0), Encodings.flat(ib, b0 + 1)))
          val fsl = Encodings.fixedSizeList(dim, itemEnc)
          emit(outer ++ itemBufs,
            if (nulls == 0) Encodings.noNulls(fsl) else Encodings.someNulls(Encodings.flat(1, 0), fsl))
        }

      case Var =>
        val total = values.size.toLong
        val adj = total + 1
        val stored = new Array[Byte](ends.size)
        System.arraycopy(ends.arr, 0, stored, 0, ends.size)
        if (nulls > 0) {
          var i = 0
          while (i < n) {
            if (!validity.get(i)) {
              val v = ends.getLong(i) + adj
              var b = 0
              while (b < 8) { stored(8 * i + b) = (v >>> (8 * b)).toByte; b += 1 }
            }
            i += 1
          }
        }
        emit(Seq(stored -> stored.length, values.arr -> values.size), Encodings.binary(0, 1, adj))
    }
    onPage(this, pageIndex, priority, page)
    validity.clear(); itemValidity.clear(); valueBits.clear()
    values.clear(); ends.clear()
    nulls = 0; itemNulls = 0
  }

}

/** Writes a blob column ([[BlobColumn]]): values out of line through `out` (source buffer,
  * offset, length; returns the position in the file), descriptions in pages
  * of at most `maxRowsPerPage` rows. */
private[v20] final class BlobEncoder(field: LanceField, column: Int, sink: PageSink,
    out: (ArrowBuf, Long, Long) => Long) extends ColumnEncoder(field, column, sink) {
  private val descriptions = new ByteBuilder()

  private def put(v: Long): Unit = {
    var b = 0
    while (b < 8) { descriptions.arr(descriptions.size + b) = (v >>> (8 * b)).toByte; b += 1 }
    descriptions.size += 8
  }

  def append(vec: FieldVector, from: Int, until: Int, rowOf: Int => Long): Unit = {
    val (off, data) = VectorOffsets.ofVariable(vec).getOrElse(
      throw new LanceFormatException(s"$where: a blob column needs a binary vector, got ${vec.getClass.getSimpleName}"))
    var i = from
    while (i < until) {
      if (rows == 0) priority = rowOf(i)
      descriptions.ensure(16)
      if (vec.isNull(i)) { put(BlobColumn.NullPosition); put(0L) }
      else {
        val len = off(i + 1) - off(i)
        put(if (len == 0) 0L else out(data, off(i), len))
        put(len)
      }
      rows += 1
      i += 1
      if (rows >= sink.maxRowsPerPage) flush()
    }
  }

  def flush(): Unit = if (rows > 0) {
    emit(Seq(descriptions.arr -> descriptions.size), BlobColumn.pageEncoding)
    descriptions.clear()
  }
}
