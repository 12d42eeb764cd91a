package io.lancespark.format.v21.write

import org.apache.arrow.memory.ArrowBuf
import org.apache.arrow.vector.{BaseFixedWidthVector, BitVector, FieldVector, NullVector}
import org.apache.arrow.vector.complex.{FixedSizeListVector, StructVector}
import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.schema.{LanceField, LanceFormatException, LogicalType}
import io.lancespark.format.file.{BitBuilder, ByteBuilder, IntBuilder, VectorOffsets}
import io.lancespark.format.v21.{LayerKind, RepDef}
import io.lancespark.format.v21.layout.{BlobPage, BlobV2Page}

/** How a leaf's values are stored while a page fills. */
private[v21] sealed trait ValueKind
private[v21] object ValueKind {
  /** Fixed-width values of `width` bytes. */
  final case class Fixed(width: Int) extends ValueKind
  /** Booleans, one bit each. */
  case object Bool extends ValueKind
  /** Variable-width values (strings, binaries) with `offsetBits`-bit offsets
    * (64 for Arrow's large types, as the reference stores them). */
  final case class Var(offsetBits: Int) extends ValueKind
  /** Fixed-size lists (vectors) of `dim` items of `itemWidth` bytes (0: booleans). */
  final case class Fsl(dim: Int, itemWidth: Int) extends ValueKind
  /** Values of the null type: nothing is stored. */
  case object Nothing extends ValueKind
  /** A blob column (`lance-encoding:blob`, 2.1): each value is written out of
    * line into the file as it arrives; the leaf keeps its description (see
    * [[io.lancespark.format.v21.layout.BlobPage]]). */
  case object Blob extends ValueKind
  /** A blob column of file version 2.2 (`lance.blob.v2`, a struct of `data`
    * and `uri`): each value is placed as it arrives (in the data file, or in
    * a blob file: [[BlobV2Files]]); the leaf keeps its description (kind,
    * position, size, blob id, uri), stored as variable-width values. */
  case object BlobV2 extends ValueKind

  def of(f: LanceField, where: String): ValueKind = f.arrowType match {
    case _: ArrowType.Struct if BlobV2Page.isBlobV2(f) => BlobV2
    case _: ArrowType.LargeBinary if BlobPage.isBlobV1(f) => Blob
    case _: ArrowType.Null => Nothing
    case _: ArrowType.Bool => Bool
    case _: ArrowType.Utf8 | _: ArrowType.Binary => Var(32)
    case _: ArrowType.LargeUtf8 | _: ArrowType.LargeBinary => Var(64)
    case fsl: ArrowType.FixedSizeList =>
      val item = LogicalType.toArrow(LogicalType.fixedSizeListItem(f.logicalType), where)
      item match {
        case _: ArrowType.Bool => Fsl(fsl.getListSize, 0)
        case t => Fsl(fsl.getListSize, fixedWidth(t).getOrElse(
          throw new LanceFormatException(s"$where: fixed-size lists of $t are not supported")))
      }
    case t => Fixed(fixedWidth(t).getOrElse(throw new LanceFormatException(s"$where: type $t is not supported")))
  }

  private def fixedWidth(t: ArrowType): Option[Int] = t match {
    case i: ArrowType.Int => Some(i.getBitWidth / 8)
    case f: ArrowType.FloatingPoint => Some(f.getPrecision match {
      case org.apache.arrow.vector.types.FloatingPointPrecision.HALF => 2
      case org.apache.arrow.vector.types.FloatingPointPrecision.SINGLE => 4
      case _ => 8
    })
    case d: ArrowType.Date => Some(if (d.getUnit == org.apache.arrow.vector.types.DateUnit.DAY) 4 else 8)
    case t: ArrowType.Time => Some(t.getBitWidth / 8)
    case _: ArrowType.Timestamp | _: ArrowType.Duration => Some(8)
    case d: ArrowType.Decimal => Some(d.getBitWidth / 8)
    case b: ArrowType.FixedSizeBinary => Some(b.getByteWidth)
    case _ => None
  }
}

/** One leaf column of a 2.1/2.2 file being written: the repetition and
  * definition levels (canonical numbering, see [[RepDef]]) of the rows
  * buffered for its next page, and the values of their visible entries.
  * `blobOut` writes a blob column's value out of line (the source buffer, the
  * value's offset and length in it) and returns where it starts in the file;
  * `blobV2Out` places a 2.2 blob column's value (the same arguments) and
  * returns its description. */
private[v21] final class LeafBuffer(val field: LanceField, val column: Int, val path: Vector[LayerKind], val where: String,
    blobOut: Option[(ArrowBuf, Long, Long) => Long] = None,
    blobV2Out: Option[(ArrowBuf, Long, Long) => BlobV2Description] = None) {
  val kind: ValueKind = ValueKind.of(field, where)
  val maxRep: Int = RepDef.maxRep(path)

  val rep: IntBuilder = if (maxRep > 0) new IntBuilder else null
  val defs: IntBuilder = new IntBuilder
  var rows: Long = 0L
  /** Entries whose definition level is not 0. */
  var nulls: Long = 0L
  /** Values of visible entries. */
  var values: Int = 0

  val fixed: ByteBuilder = new ByteBuilder()   // Fixed, Fsl items
  val bits: BitBuilder = new BitBuilder         // Bool, Fsl boolean items
  val ends: ByteBuilder = new ByteBuilder()    // Var: the end of each value (u64)
  val itemValidity: BitBuilder = new BitBuilder // Fsl
  var itemNulls: Long = 0L

  /** Bytes buffered (to bound a page's size). */
  def bytes: Long = fixed.size.toLong + bits.byteSize + ends.size + 4L * defs.size + (if (rep == null) 0 else 4L * rep.size)

  def clear(): Unit = {
    if (rep != null) rep.clear()
    defs.clear(); rows = 0; nulls = 0; values = 0
    fixed.clear(); bits.clear(); ends.clear(); itemValidity.clear(); itemNulls = 0
  }

  def entry(r: Int, d: Int): Unit = {
    if (rep != null) rep.add(r)
    defs.add(d)
    if (d != 0) nulls += 1
  }

  private def varEnd: Long = if (values == 0) 0L else ends.getLong(values - 1)

  /** A value slot of a null entry that has one. */
  def placeholder(): Unit = {
    kind match {
      case ValueKind.Fixed(w) => fixed.putZeros(w)
      case ValueKind.Bool => bits.appendBit(false)
      case ValueKind.Var(_) | ValueKind.BlobV2 => ends.putLong(varEnd)
      case ValueKind.Fsl(dim, w) =>
        if (w == 0) bits.appendBits(false, dim) else fixed.putZeros(dim * w)
        itemValidity.appendOnes(dim)
      case ValueKind.Nothing => ()
      case ValueKind.Blob => throw new LanceFormatException(s"$where: blob values inside structs or lists are not written")
    }
    values += 1
  }

  /** Values [a, b) of `v` (a vector of this leaf's type), nulls included as placeholders. */
  def appendValues(v: FieldVector, a: Int, b: Int): Unit = if (b > a) {
    kind match {
      case ValueKind.Fixed(w) => v match {
        case f: BaseFixedWidthVector => fixed.append(f.getDataBuffer, a.toLong * w, (b - a).toLong * w)
        case other => fail(s"a ${other.getClass.getSimpleName} for fixed-width values")
      }
      case ValueKind.Bool => v match {
        case bv: BitVector => bits.append(bv.getDataBuffer, a, b - a)
        case other => fail(s"a ${other.getClass.getSimpleName} for booleans")
      }
      case ValueKind.Var(_) =>
        val (off, data) = VectorOffsets.ofVariable(v).getOrElse(
          fail(s"a ${v.getClass.getSimpleName} for variable-width values"))
        val start = off(a)
        val base = varEnd
        fixed.append(data, start, off(b) - start)
        var i = a
        while (i < b) { ends.putLong(base + off(i + 1) - start); i += 1 }
      case ValueKind.Fsl(dim, w) => v match {
        case l: FixedSizeListVector =>
          val items = l.getDataVector
          if (w == 0) bits.append(items.asInstanceOf[BitVector].getDataBuffer, a.toLong * dim, (b - a).toLong * dim)
          else fixed.append(items.asInstanceOf[BaseFixedWidthVector].getDataBuffer, a.toLong * dim * w, (b - a).toLong * dim * w)
          val n = (b - a).toLong * dim
          if (items.getNullCount == 0) itemValidity.appendOnes(n)
          else itemNulls += n - itemValidity.append(items.getValidityBuffer, a.toLong * dim, n)
        case other => fail(s"a ${other.getClass.getSimpleName} for fixed-size lists")
      }
      case ValueKind.Blob =>
        val out = blobOut.getOrElse(fail("a blob column without an output for its values"))
        val (off, data) = VectorOffsets.ofVariable(v).getOrElse(fail(s"a ${v.getClass.getSimpleName} for blob values"))
        var i = a
        while (i < b) {
          if (v.isNull(i)) BlobPage.putNull(fixed, defs(defs.size - (b - i)))
          else {
            val len = off(i + 1) - off(i)
            BlobPage.putDescription(fixed, if (len == 0) 0L else out(data, off(i), len), len)
          }
          i += 1
        }
      case ValueKind.BlobV2 =>
        val out = blobV2Out.getOrElse(fail("a blob column without an output for its values"))
        val (data, uri) = v match {
          case s: StructVector if s.size >= 2 => (s.getChildByOrdinal(0), s.getChildByOrdinal(1))
          case other => fail(s"a ${other.getClass.getSimpleName} for blob values (a struct of data and uri)")
        }
        val (off, bytes) = VectorOffsets.ofVariable(data.asInstanceOf[FieldVector]).getOrElse(
          fail(s"a ${data.getClass.getSimpleName} for blob data"))
        var i = a
        while (i < b) {
          if (!v.isNull(i)) {
            if (!uri.isNull(i))
              fail(s"a blob value with a uri (${uri.getObject(i)}): external blobs are not written, " +
                "only values given as data (uri NULL)")
            if (data.isNull(i)) fail("a blob value with neither data nor uri (give NULL for the whole value)")
            val len = off(i + 1) - off(i)
            // (an empty value too: pylance gives it the file's aligned position at that point)
            BlobV2Page.putDescription(fixed, out(bytes, off(i), len))
          }
          ends.putLong(fixed.size.toLong)
          i += 1
        }
      case ValueKind.Nothing => v match {
        case _: NullVector => ()
        case _ => ()
      }
    }
    values += b - a
  }

  private def fail(p: String): Nothing = throw new LanceFormatException(s"$where: $p")
}
