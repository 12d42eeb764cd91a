package io.lancespark.format.v21.layout

import java.nio.ByteBuffer

import scala.jdk.CollectionConverters._

import com.google.protobuf.InvalidProtocolBufferException

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.file.{PageMeta, Region}
import io.lancespark.format.input.{ByteReader, PlannedRead, RandomAccessSource}
import io.lancespark.format.v21.{LeafColumn, LeafRun, Levels, RepDef}
import io.lancespark.format.v21.codec.{ChunkBuffers, Codec, CodecContext}
import io.lancespark.proto.encodings21.{CompressiveEncoding, PageLayout, RepDefLayer}

/** Where a page decode gets bytes: `input` for the batch's planned reads,
  * `source` for the page's own metadata (chunk sizes, repetition index,
  * dictionary), read once per page. One per batch: it also keeps what each
  * page decoded last in the batch (a mini-block page's chunks), which the
  * page's decode of the batch's next range of rows reuses instead of
  * decoding it again (a batch's ranges come in order, so only the last
  * decode can hold rows of the next). */
final class PageIO(val input: ByteReader, val source: RandomAccessSource) {
  private val last = new java.util.IdentityHashMap[StructuralPage, AnyRef]()

  /** What `page` kept of its last decode in this batch, if anything. */
  def recall(page: StructuralPage): Option[AnyRef] = Option(last.get(page))

  def keep(page: StructuralPage, decoded: AnyRef): Unit = { last.put(page, decoded); () }

  /** The decoding thread's bit-unpacking scratch (a batch decodes on one
    * thread), looked up once a batch rather than once a page decode. */
  lazy val scratch: io.lancespark.format.v21.codec.FastLanes.Scratch =
    io.lancespark.format.v21.codec.FastLanes.localScratch()

  private var lender: Option[ChunkBuffers] = None

  /** The arrays this batch's compressed chunks are decompressed into, lent
    * from the decoding thread's pool until [[release]]. */
  def chunkBuffers: ChunkBuffers = lender.getOrElse {
    val b = ChunkBuffers.forThisThread()
    lender = Some(b)
    b
  }

  /** Gives the batch's chunk arrays back: called once its values have been
    * copied out, after which nothing decoded through this PageIO is read. */
  def release(): Unit = {
    lender.foreach(_.release())
    last.clear()
  }
}

/** A page as a layout's writer encodes it: its buffers, its layout and rows. */
private[v21] final case class EncodedPage(buffers: Seq[Array[Byte]], layout: PageLayout, rows: Long)

/** One page of a 2.1/2.2 leaf column, in the file of its layout: how it plans
  * the reads of rows [from, until) (counted from the page's first row) and
  * how it decodes them into levels and values. */
abstract class StructuralPage(val meta: PageMeta, val leaf: LeafColumn) {

  /** The layout and codecs, as `inspect`-style descriptions show them. */
  def describe: String

  def plan(from: Long, until: Long, source: RandomAccessSource): Seq[PlannedRead]

  /** The reads of several ranges of the page's rows (sorted, disjoint). */
  def planRanges(ranges: IndexedSeq[(Long, Long)], source: RandomAccessSource): Seq[PlannedRead] =
    ranges.flatMap { case (from, until) => plan(from, until, source) }

  def decode(from: Long, until: Long, io: PageIO): LeafRun

  /** The rows of several ranges of the page (sorted, disjoint), one after
    * the other, as `decode` of each would give them. */
  def decodeRanges(ranges: IndexedSeq[(Long, Long)], io: PageIO): LeafRun =
    LeafRun.concat(ranges.map { case (from, until) => decode(from, until, io) })


  protected def codecContext(path: String): CodecContext =
    new CodecContext(path, s"${leaf.where}, page ${meta.index}")

  /** A context for a decode of the batch `io` reads (its scratch). */
  protected def codecContext(io: PageIO): CodecContext =
    new CodecContext(io.input.path, s"${leaf.where}, page ${meta.index}", io.scratch, Some(io.chunkBuffers))

  @volatile private var defMapOnce: Array[Int] = _

  /** The page's definition levels to canonical ones (RepDef.canonical of its
    * layers), worked out once: a scan of scattered rows decodes a page once
    * per range of rows. */
  protected def defMap(layers: => java.util.List[RepDefLayer], path: String): Array[Int] = {
    var m = defMapOnce
    if (m == null) {
      m = RepDef.canonical(StructuralPage.layers(layers), leaf.path, fail(path, _))
      defMapOnce = m
    }
    m
  }

  protected def fail(path: String, problem: String): Nothing =
    throw LanceFormatException(path, s"${leaf.where}, page ${meta.index}: $problem")

  /** A page buffer, checked to exist. */
  protected def buffer(i: Int, path: String, what: => String): Region = {
    if (i < 0 || i >= meta.buffers.size) fail(path, s"$what: page buffer $i, but the page has ${meta.buffers.size}")
    meta.buffers(i)
  }

  /** Levels (u16 values) from a block buffer, decoded with `codec` if there is one. */
  protected def levels(buf: ByteBuffer, n: Int, codec: Option[Codec], what: String, cctx: CodecContext): Array[Int] =
    codec match {
      case None =>
        cctx.check(0, 2L * n, buf.remaining(), s"$n $what levels")
        val out = new Array[Int](n)
        var i = 0
        while (i < n) { out(i) = buf.getShort(2 * i) & 0xffff; i += 1 }
        out
      case Some(c) =>
        val out = c.blockInts(buf, n, cctx, s"$what levels")
        if (out.length != n) cctx.fail(s"${out.length} $what levels decoded, expected $n")
        out
    }

  /** Canonical levels for `n` entries from page levels (either may be null). */
  protected def canonicalLevels(rep: Array[Int], defs: Array[Int], n: Int, defMap: Array[Int], path: String): Levels = {
    if (rep != null && rep.length != n) fail(path, s"${rep.length} repetition levels for $n entries")
    if (defs != null) {
      if (defs.length != n) fail(path, s"${defs.length} definition levels for $n entries")
      RepDef.mapDefs(defs, 0, n, defMap, fail(path, _))
    }
    if (rep != null) {
      var i = 0
      while (i < n) {
        if (rep(i) < 0 || rep(i) > leaf.maxRep) fail(path, s"repetition level ${rep(i)} out of range (at most ${leaf.maxRep})")
        i += 1
      }
    }
    val r = if (rep == null && leaf.maxRep > 0) Array.fill(n)(leaf.maxRep) else rep
    new Levels(r, defs, n)
  }
}

object StructuralPage {
  val LayoutType = "lance.encodings21.PageLayout"

  /** The page object of a page's layout. */
  def of(meta: PageMeta, leaf: LeafColumn, path: String): StructuralPage = {
    def fail(p: String): Nothing = throw LanceFormatException(path, s"${leaf.where}, page ${meta.index}: $p")
    if (meta.encodingType != LayoutType)
      fail(s"unsupported encoding message '${meta.encodingType}' (expected $LayoutType)")
    val layout =
      try PageLayout.parseFrom(meta.encoding)
      catch { case e: InvalidProtocolBufferException => fail(s"corrupt page layout: ${e.getMessage}") }
    layout.getLayoutCase match {
      case PageLayout.LayoutCase.MINI_BLOCK_LAYOUT => new MiniBlockPage(meta, leaf, layout.getMiniBlockLayout)
      case PageLayout.LayoutCase.FULL_ZIP_LAYOUT   => new FullZipPage(meta, leaf, layout.getFullZipLayout)
      case PageLayout.LayoutCase.CONSTANT_LAYOUT   => new ConstantPage(meta, leaf, layout.getConstantLayout)
      case PageLayout.LayoutCase.BLOB_LAYOUT       => new BlobPage(meta, leaf, layout.getBlobLayout)
      case PageLayout.LayoutCase.DELTA_BLOB_LAYOUT => fail("unsupported page layout: delta blob")
      case other => fail(s"unsupported page layout '$other' (unknown to this reader)")
    }
  }

  def layers(l: java.util.List[RepDefLayer]): Seq[RepDefLayer] = l.asScala.toSeq

  def codec(has: Boolean, e: => CompressiveEncoding): Option[Codec] = if (has) Some(Codec.of(e)) else None
}
