package io.lancespark.format.v2

import scala.jdk.CollectionConverters._

import com.google.protobuf.{Any => PbAny, ByteString, InvalidProtocolBufferException}

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.input.RandomAccessSource
import io.lancespark.proto.encodings.{ArrayEncoding, ColumnEncoding}
import io.lancespark.proto.file2.{ColumnMetadata, Encoding}

/** One page of a column: its buffers, how many items it holds, where it starts
  * in the column's item space, and its (already unwrapped) encoding. */
final case class PageInfo(
    index: Int,
    buffers: Vector[Region],
    length: Long,
    firstItem: Long,
    priority: Long,
    encoding: ArrayEncoding) {
  def endItem: Long = firstItem + length
}

/** The metadata of one column, pages in item order. */
final case class ColumnInfo(index: Int, pages: Vector[PageInfo], buffers: Vector[Region]) {
  def numItems: Long = pages.lastOption.fold(0L)(_.endItem)

  /** Pages overlapping [from, until) of the column's item space (binary search). */
  def pagesOverlapping(from: Long, until: Long): Vector[PageInfo] = {
    if (until <= from) return Vector.empty
    // first page whose end is past `from`
    var lo = 0
    var hi = pages.size
    while (lo < hi) {
      val mid = (lo + hi) >>> 1
      if (pages(mid).endItem <= from) lo = mid + 1 else hi = mid
    }
    pages.iterator.drop(lo).takeWhile(_.firstItem < until).filter(_.length > 0).toVector
  }

  /** For a list column: where each page's referenced items start in the item
    * column (the sum of the earlier pages' `num_items`); None if a page is not
    * a list page. */
  lazy val listItemBases: Option[Vector[Long]] = {
    val counts = pages.map(p => PageDecoder.listItems(p.encoding))
    if (counts.exists(_.isEmpty)) None
    else Some(counts.flatten.scanLeft(0L)(_ + _).dropRight(1))
  }
}

/** Reads and parses column metadata; encodings in the metadata are serialized
  * `google.protobuf.Any` messages that this unwraps. */
final class ColumnMetadataReader(source: RandomAccessSource, footer: Footer) {
  private val path = source.path
  private lazy val table: Vector[Region] =
    Footer.readRegions(source, footer.columnMetadataTablePos, footer.numColumns, "column metadata")
  private val cache = scala.collection.mutable.Map.empty[Int, ColumnInfo]

  /** A column's metadata, loaded once (the read pool plans list items from it too). */
  def column(index: Int): ColumnInfo = {
    if (index < 0 || index >= footer.numColumns)
      throw LanceFormatException(path, s"column $index does not exist (the file has ${footer.numColumns} columns)")
    cache.synchronized(cache.getOrElseUpdate(index, load(index)))
  }

  private def load(index: Int): ColumnInfo = {
    val region = table(index)
    val bytes = source.read(region.position, region.size)
    val meta =
      try ColumnMetadata.parseFrom(bytes)
      catch {
        case e: InvalidProtocolBufferException =>
          throw LanceFormatException(path, s"column $index: corrupt column metadata", e)
      }
    val where = s"column $index"
    if (meta.hasEncoding) checkColumnEncoding(meta.getEncoding, where)
    val colBuffers = regions(meta.getBufferOffsetsList.asScala, meta.getBufferSizesList.asScala, where)
    var start = 0L
    val pages = meta.getPagesList.asScala.zipWithIndex.map { case (p, i) =>
      val pw = s"$where page $i"
      val bufs = regions(p.getBufferOffsetsList.asScala, p.getBufferSizesList.asScala, pw)
      val enc = arrayEncoding(p.getEncoding, pw)
      val info = PageInfo(i, bufs, p.getLength, start, p.getPriority, enc)
      start += p.getLength
      info
    }.toVector
    ColumnInfo(index, pages, colBuffers)
  }

  private def regions(offs: Iterable[java.lang.Long], sizes: Iterable[java.lang.Long], where: String): Vector[Region] = {
    if (offs.size != sizes.size)
      throw LanceFormatException(path, s"$where: ${offs.size} buffer offsets but ${sizes.size} sizes")
    offs.zip(sizes).map { case (o, s) =>
      val r = Region(o.longValue, s.longValue)
      if (r.position < 0 || r.size < 0 || r.position + r.size > source.size || r.position + r.size < 0)
        throw LanceFormatException(path,
          s"$where: buffer at [${r.position}, ${r.position + r.size}) lies outside the file of ${source.size} bytes")
      r
    }.toVector
  }

  private def encodingBytes(enc: Encoding, where: String): ByteString = enc.getLocationCase match {
    case Encoding.LocationCase.DIRECT => enc.getDirect.getEncoding
    case Encoding.LocationCase.INDIRECT =>
      val d = enc.getIndirect
      val b = source.read(d.getBufferLocation, d.getBufferLength)
      ByteString.copyFrom(b)
    case other => throw LanceFormatException(path, s"$where: no encoding (location $other)")
  }

  private def unwrapAny(bytes: ByteString, expectedType: String, where: String): ByteString = {
    val any =
      try PbAny.parseFrom(bytes)
      catch {
        case e: InvalidProtocolBufferException =>
          throw LanceFormatException(path, s"$where: corrupt encoding description", e)
      }
    val typeName = any.getTypeUrl.substring(any.getTypeUrl.lastIndexOf('/') + 1)
    if (typeName != expectedType)
      throw LanceFormatException(path,
        s"$where: unsupported encoding message '${any.getTypeUrl}' (expected $expectedType; " +
          s"is this a file version this reader does not support?)")
    any.getValue
  }

  private def arrayEncoding(enc: Encoding, where: String): ArrayEncoding = {
    val body = unwrapAny(encodingBytes(enc, where), "lance.encodings.ArrayEncoding", where)
    try ArrayEncoding.parseFrom(body)
    catch {
      case e: InvalidProtocolBufferException =>
        throw LanceFormatException(path, s"$where: corrupt ArrayEncoding", e)
    }
  }

  private def checkColumnEncoding(enc: Encoding, where: String): Unit = {
    if (enc.getLocationCase == Encoding.LocationCase.NONE ||
        enc.getLocationCase == Encoding.LocationCase.LOCATION_NOT_SET) return
    val body = unwrapAny(encodingBytes(enc, where), "lance.encodings.ColumnEncoding", where)
    val ce =
      try ColumnEncoding.parseFrom(body)
      catch {
        case e: InvalidProtocolBufferException =>
          throw LanceFormatException(path, s"$where: corrupt ColumnEncoding", e)
      }
    ce.getColumnEncodingCase match {
      case ColumnEncoding.ColumnEncodingCase.VALUES | ColumnEncoding.ColumnEncodingCase.COLUMNENCODING_NOT_SET => ()
      case other =>
        throw LanceFormatException(path, s"$where: unsupported column encoding '$other' (only plain values are supported)")
    }
  }
}
