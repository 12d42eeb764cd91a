package io.lancespark.format.v20

import scala.collection.mutable.ArrayBuffer
import scala.util.control.NonFatal

import com.google.protobuf.InvalidProtocolBufferException

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.arrow.Block
import io.lancespark.format.file.{ColumnMeta, PageMeta}
import io.lancespark.format.input.{ByteRange, PlannedRead}
import io.lancespark.format.v20.codec.{ArrayCodec, PageContext, PlanContext}
import io.lancespark.proto.encodings.ArrayEncoding

/** One page of a 2.0 column: its metadata and the codec tree of its
  * ArrayEncoding. Its length and first item count items of the column. */
final class V20Page private[v20] (val meta: PageMeta, private[v20] val codec: ArrayCodec) {
  def index: Int = meta.index
  def length: Long = meta.length
  def first: Long = meta.first
  def end: Long = meta.end

  /** Items [from, until) of the page (counted from its first item). */
  private[v20] def decode(from: Long, until: Long, ctx: PageContext): Block = {
    if (from < 0 || until < from || until > length)
      ctx.fail(s"items [$from, $until) requested from a page of $length")
    codec.decode(length, from, until, top = true, ctx)
  }

  /** The reads `decode(from, until)` makes, as far as known before reading;
    * what cannot be planned is read when the decode asks for it. */
  private[v20] def plan(from: Long, until: Long, ctx: PageContext, listItems: (Long, Long) => Seq[ByteRange],
                        dictionaryItems: Boolean): Seq[PlannedRead] = {
    val out = ArrayBuffer.empty[PlannedRead]
    if (from >= 0 && from <= until && until <= length)
      try codec.plan(length, from, until, new PlanContext(ctx, listItems, dictionaryItems), out)
      catch { case NonFatal(_) => () }
    out.toSeq
  }
}

/** A column of a 2.0 file: its pages in item order. */
final class V20Column private[v20] (val meta: ColumnMeta, val pages: Vector[V20Page]) {
  def index: Int = meta.index
  def numItems: Long = meta.length

  def pagesOverlapping(from: Long, until: Long): Vector[V20Page] = meta.pagesOverlapping(from, until).map(m => pages(m.index))

  /** For a list column: where each page's referenced items start in the item
    * column (the sum of the earlier pages' `num_items`); None if a page is not
    * a list page. */
  lazy val listItemBases: Option[Vector[Long]] = {
    val counts = pages.map(_.codec.listItems)
    if (counts.exists(_.isEmpty)) None
    else Some(counts.flatten.scanLeft(0L)(_ + _).dropRight(1))
  }
}

object V20Column {
  val EncodingType = "lance.encodings.ArrayEncoding"

  /** Parses the pages' ArrayEncodings. */
  def apply(meta: ColumnMeta, path: String): V20Column =
    new V20Column(meta, meta.pages.map { p =>
      val where = s"column ${meta.index} page ${p.index}"
      if (p.encodingType != EncodingType)
        throw LanceFormatException(path, s"$where: unsupported encoding message '${p.encodingType}' " +
          s"(expected $EncodingType; is this a file version this reader does not support?)")
      val enc =
        try ArrayEncoding.parseFrom(p.encoding)
        catch {
          case e: InvalidProtocolBufferException => throw LanceFormatException(path, s"$where: corrupt ArrayEncoding", e)
        }
      new V20Page(p, ArrayCodec.of(enc))
    })
}
