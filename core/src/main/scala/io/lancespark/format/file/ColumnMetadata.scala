package io.lancespark.format.file

import scala.jdk.CollectionConverters._

import com.google.protobuf.{Any => PbAny, ByteString, InvalidProtocolBufferException}

import io.lancespark.schema.LanceFormatException
import io.lancespark.format.input.RandomAccessSource
import io.lancespark.proto.encodings.ColumnEncoding
import io.lancespark.proto.file2.{ColumnMetadata, Encoding}

/** One page of a column as the column metadata describes it, in any 2.x file
  * version: its buffers, its length (items in 2.0, rows in 2.1+), where it
  * starts in the column, and its encoding message, unwrapped from its
  * `google.protobuf.Any` (`encodingType` is the message's full name). Each
  * file version parses the encoding it expects. */
final case class PageMeta(
    index: Int,
    buffers: Vector[Region],
    length: Long,
    first: Long,
    priority: Long,
    encodingType: String,
    encoding: ByteString) {
  def end: Long = first + length
}

/** The metadata of one column, pages in order. */
final case class ColumnMeta(index: Int, pages: Vector[PageMeta], buffers: Vector[Region]) {
  def length: Long = pages.lastOption.fold(0L)(_.end)

  /** The bytes of the column's buffers and its pages' buffers in the file. */
  def bytes: Long = buffers.iterator.map(_.size).sum + pages.iterator.flatMap(_.buffers).map(_.size).sum

  /** The non-empty pages overlapping [from, until) (binary search). */
  def pagesOverlapping(from: Long, until: Long): Vector[PageMeta] = {
    if (until <= from) return Vector.empty
    var lo = 0
    var hi = pages.size
    while (lo < hi) {
      val mid = (lo + hi) >>> 1
      if (pages(mid).end <= from) lo = mid + 1 else hi = mid
    }
    pages.iterator.drop(lo).takeWhile(_.first < until).filter(_.length > 0).toVector
  }
}

/** Reads and parses the column metadata of a 2.x file, each column once. */
final class ColumnMetadataReader(source: RandomAccessSource, footer: Footer, meta: FileMeta) {
  /** A reader of its own, sharing nothing with other readers of the file. */
  def this(source: RandomAccessSource, footer: Footer) = this(source, footer, FileMetaCache.detached(footer))

  private val path = source.path
  private lazy val table: Vector[Region] =
    meta.part("column metadata table")(
      Footer.readRegions(source, footer.columnMetadataTablePos, footer.numColumns, "column metadata"))

  /** A column's metadata, loaded once for every reader of the file (safe to call from the read pool). */
  def column(index: Int): ColumnMeta = {
    if (index < 0 || index >= footer.numColumns)
      throw LanceFormatException(path, s"column $index does not exist (the file has ${footer.numColumns} columns)")
    meta.part(Integer.valueOf(index))(load(index))
  }

  private def load(index: Int): ColumnMeta = {
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
      val (typeName, body) = unwrapAny(encodingBytes(p.getEncoding, pw), pw)
      val info = PageMeta(i, bufs, p.getLength, start, p.getPriority, typeName, body)
      start += p.getLength
      info
    }.toVector
    ColumnMeta(index, pages, colBuffers)
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
      if (d.getBufferLocation < 0 || d.getBufferLength < 0 || d.getBufferLocation + d.getBufferLength > source.size)
        throw LanceFormatException(path, s"$where: encoding description lies outside the file")
      ByteString.copyFrom(source.read(d.getBufferLocation, d.getBufferLength))
    case other => throw LanceFormatException(path, s"$where: no encoding (location $other)")
  }

  /** The full message name and body of a serialized `google.protobuf.Any`. */
  private def unwrapAny(bytes: ByteString, where: String): (String, ByteString) = {
    val any =
      try PbAny.parseFrom(bytes)
      catch {
        case e: InvalidProtocolBufferException =>
          throw LanceFormatException(path, s"$where: corrupt encoding description", e)
      }
    (any.getTypeUrl.substring(any.getTypeUrl.lastIndexOf('/') + 1), any.getValue)
  }

  private def checkColumnEncoding(enc: Encoding, where: String): Unit = {
    if (enc.getLocationCase == Encoding.LocationCase.NONE ||
        enc.getLocationCase == Encoding.LocationCase.LOCATION_NOT_SET) return
    val (typeName, body) = unwrapAny(encodingBytes(enc, where), where)
    if (typeName != ColumnMetadataReader.ColumnEncodingType)
      throw LanceFormatException(path,
        s"$where: unsupported column encoding message '$typeName' (expected ${ColumnMetadataReader.ColumnEncodingType})")
    val ce =
      try ColumnEncoding.parseFrom(body)
      catch {
        case e: InvalidProtocolBufferException =>
          throw LanceFormatException(path, s"$where: corrupt ColumnEncoding", e)
      }
    ce.getColumnEncodingCase match {
      case ColumnEncoding.ColumnEncodingCase.VALUES | ColumnEncoding.ColumnEncodingCase.COLUMNENCODING_NOT_SET => ()
      // a 2.0 blob column: its pages hold (position, size) descriptions of values stored elsewhere in the file
      case ColumnEncoding.ColumnEncodingCase.BLOB => ()
      case other =>
        throw LanceFormatException(path, s"$where: unsupported column encoding '$other' (only plain values are supported)")
    }
  }
}

object ColumnMetadataReader {
  val ColumnEncodingType = "lance.encodings.ColumnEncoding"
}
