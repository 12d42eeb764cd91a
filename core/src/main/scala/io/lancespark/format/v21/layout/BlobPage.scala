package io.lancespark.format.v21.layout

import io.lancespark.format.arrow.{Block, Slice}
import io.lancespark.format.arrow.Block.{FixedBlock, PackedBlock, VarBlock}
import io.lancespark.format.file.{ByteBuilder, PageMeta}
import io.lancespark.format.input.{PlannedRead, RandomAccessSource}
import io.lancespark.format.v21.{LayerKind, LeafColumn, LeafRun, RepDef}
import io.lancespark.format.v21.codec.{Codec, FlatCodec, FlatValues, MiniBlockValues}
import io.lancespark.format.v21.write.LeafBuffer
import io.lancespark.proto.encodings21.{BlobLayout, CompressiveEncoding, PackedStruct, PageLayout}
import io.lancespark.schema.{LanceField, LanceFormatException}

/** The blob layout (2.1, for binary columns with `lance-encoding:blob`):
  * the values are stored outside the page, elsewhere in the file, and the page
  * holds one description per entry, laid out by `inner_layout`: the value's
  * position in the file and its size (u64 each). A size of 0 with a position
  * of 0 is an empty value; a size of 0 with another position is a null, whose
  * repetition level is the position's low 16 bits and definition level the
  * next 16. Values are read at their positions.
  *
  * Written (the companion) as pylance writes it: each non-empty value goes
  * into the file, 64-byte aligned, as soon as its batch arrives (streamed
  * from the Arrow buffer, never gathered into a page); the page holds the
  * descriptions as a mini-block page of 16-byte packed structs (flat u64
  * position, u64 size) with no levels of its own, and the blob layout
  * carries the column's layers. */
final class BlobPage(meta: PageMeta, leaf: LeafColumn, layout: BlobLayout) extends StructuralPage(meta, leaf) {

  private val inner: StructuralPage = StructuralPage.of(
    meta.copy(encoding = layout.getInnerLayout.toByteString),
    leaf.copy(path = Vector(LayerKind.Item)), "")

  def describe: String = s"blob (descriptions: ${inner.describe})"

  def plan(from: Long, until: Long, source: RandomAccessSource): Seq[PlannedRead] = inner.plan(from, until, source)

  def decode(from: Long, until: Long, io: PageIO): LeafRun = {
    val path = io.input.path
    val cctx = codecContext(path)
    val map = defMap(layout.getLayersList, path)
    if (leaf.maxRep > 0) fail(path, "blob values inside lists are not supported")
    val descriptions = inner.decode(from, until, io)
    val rows = (until - from).toInt
    val pos = new Array[Long](rows)
    val size = new Array[Long](rows)
    var at = 0
    descriptions.values.foreach { case Slice(block, start, count) =>
      block match {
        case PackedBlock(_, Vector(FixedBlock(_, 8, p), FixedBlock(_, 8, s))) =>
          var i = 0
          while (i < count) { pos(at) = p.getLong(8 * (start + i).toInt); size(at) = s.getLong(8 * (start + i).toInt); at += 1; i += 1 }
        case other => cctx.fail(s"blob descriptions decode to ${other.getClass.getSimpleName}, not (position, size) pairs")
      }
    }
    if (at != rows) cctx.fail(s"$at blob descriptions for $rows rows")
    val defs = new Array[Int](rows)
    var anyNull = false
    val offsets = new Array[Long](rows + 1)
    var i = 0
    while (i < rows) {
      if (size(i) == 0 && pos(i) != 0) {
        // the levels of a null: repetition in the low 16 bits, definition in the next 16
        val d = ((pos(i) >>> 16) & 0xffff).toInt
        if ((pos(i) & 0xffff) != 0 || d >= map.length)
          cctx.fail(s"blob description of row ${from + i}: levels 0x${pos(i).toHexString} out of range")
        defs(i) = d
        anyNull = true
      } else if (size(i) < 0 || pos(i) < 0 || pos(i) + size(i) > io.source.size)
        cctx.fail(s"blob of row ${from + i} at [${pos(i)}, ${pos(i) + size(i)}) lies outside the file")
      offsets(i + 1) = offsets(i) + (if (defs(i) == 0) size(i) else 0)
      i += 1
    }
    if (offsets(rows) > Int.MaxValue - 16) cctx.fail(s"${offsets(rows)} bytes of blobs in one batch")
    val data = new Array[Byte](offsets(rows).toInt)
    i = 0
    while (i < rows) {
      val len = (offsets(i + 1) - offsets(i)).toInt
      if (len > 0) io.input.read(pos(i), len).get(data, offsets(i).toInt, len)
      i += 1
    }
    val levels = canonicalLevels(null, if (anyNull) defs else null, rows, map, path)
    val values: Block = VarBlock(rows, offsets, Codec.wrap(data), None)
    new LeafRun(levels, Vector(LeafRun.whole(values)))
  }
}

private[v21] object BlobPage {
  /** Field metadata marking a `large_binary` column as a blob column (blob v1). */
  val MetadataKey: String = "lance-encoding:blob"

  def isBlobV1(f: LanceField): Boolean = f.metadata.get(MetadataKey).contains("true")

  /** Bytes of one description: position and size, u64 each. */
  val DescriptionBytes: Int = 16

  /** The description of a value at `position` of `size` bytes (0, 0: empty). */
  def putDescription(out: ByteBuilder, position: Long, size: Long): Unit = {
    out.ensure(DescriptionBytes)
    putLong(out, position)
    putLong(out, size)
  }

  /** The description of a null of definition level `definition` (top level: no repetition). */
  def putNull(out: ByteBuilder, definition: Int): Unit = {
    if (definition <= 0 || definition > 0xffff) throw new LanceFormatException(s"a blob null of definition level $definition")
    putDescription(out, definition.toLong << 16, 0L)
  }

  private def putLong(out: ByteBuilder, v: Long): Unit = {
    var i = 0
    while (i < 8) { out.arr(out.size + i) = (v >>> (8 * i)).toByte; i += 1 }
    out.size += 8
  }

  /** The descriptions' Lance field: 16 bytes per value, never null. */
  private val DescriptionField: LanceField =
    LanceField(-1, "descriptions", "fixed_size_binary:16", nullable = false, Vector.empty, Map.empty)

  /** The descriptions as a packed struct of two u64 fields, stored flat. */
  private final class Descriptions(src: Array[Byte]) extends MiniBlockValues {
    private val flat = new FlatValues(src, DescriptionBytes)
    val encoding: CompressiveEncoding = CompressiveEncoding.newBuilder().setPackedStruct(
      PackedStruct.newBuilder().addBitsPerValue(64).addBitsPerValue(64).setValues(FlatCodec.encoding(8L * DescriptionBytes)))
      .build()
    def buffersPerChunk: Int = flat.buffersPerChunk
    def preferred(v: Int): Int = flat.preferred(v)
    def chunk(v: Int, n: Int): Seq[Array[Byte]] = flat.chunk(v, n)
  }

  /** The page of a blob leaf's buffered rows (one description each). */
  def write(lb: LeafBuffer, large: Boolean): EncodedPage = {
    val levels = PageLevels.of(lb)
    val n = lb.defs.size
    if (lb.values != n || lb.fixed.size != n * DescriptionBytes)
      throw new LanceFormatException(s"${lb.where}: ${lb.fixed.size / DescriptionBytes} blob descriptions for $n rows")
    val inner = new LeafBuffer(DescriptionField, lb.column, Vector(LayerKind.Item), lb.where)
    inner.defs.fill(0, n)
    inner.fixed.put(lb.fixed.arr, 0, lb.fixed.size)
    inner.values = n
    inner.rows = n.toLong
    val page = MiniBlockPage.write(inner, PageLevels.of(inner), new Descriptions(inner.fixed.arr), None, large)
      .getOrElse(throw new LanceFormatException(s"${lb.where}: blob descriptions do not fit a mini-block page"))
    val layout = BlobLayout.newBuilder().setInnerLayout(page.layout)
    levels.layers.foreach(layout.addLayers)
    EncodedPage(page.buffers, PageLayout.newBuilder().setBlobLayout(layout).build(), lb.rows)
  }
}
