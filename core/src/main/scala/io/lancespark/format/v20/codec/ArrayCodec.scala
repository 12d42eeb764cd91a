package io.lancespark.format.v20.codec

import scala.collection.mutable.ArrayBuffer

import io.lancespark.format.arrow.Block
import io.lancespark.format.input.{ByteRange, PlannedRead}
import io.lancespark.proto.encodings.ArrayEncoding

/** One node of a 2.0 page's encoding tree (an ArrayEncoding), in the file of
  * its encoding: it knows which byte ranges decoding items [from, until) of
  * an array of `n` items reads ([[plan]]) and how to decode them ([[decode]]).
  * The two must agree; keeping them in one class keeps them in step. */
private[v20] trait ArrayCodec {

  /** Items [from, until) of an array of `n` items. At the `top` of a page's
    * tree, dictionary-encoded strings stay a DictBlock (the vector loader
    * expands them); elsewhere they are expanded here. */
  def decode(n: Long, from: Long, until: Long, top: Boolean, ctx: PageContext): Block

  /** The reads `decode(n, from, until)` makes, as far as known before any byte
    * is read. May throw: the caller then plans nothing for the page, and the
    * decode reports what is wrong. */
  def plan(n: Long, from: Long, until: Long, ctx: PlanContext, out: ArrayBuffer[PlannedRead]): Unit

  /** The number of items a list page references, looking through nullable wrappers. */
  def listItems: Option[Long] = None
}

/** Planning state: for a list page, `listItems(first, last)` plans its items
  * [first, last) (counted from the page's first referenced item), once its
  * offsets are read; `dictionaryItems` says whether dictionary items not yet
  * cached are planned too. */
private[v20] final class PlanContext(
    val page: PageContext,
    val listItems: (Long, Long) => Seq[ByteRange],
    val dictionaryItems: Boolean)

private[v20] object ArrayCodec {

  /** The codec of an encoding tree; encodings this reader does not decode
    * become [[UnsupportedCodec]]s, refused when decoded. */
  def of(enc: ArrayEncoding): ArrayCodec = {
    import ArrayEncoding.ArrayEncodingCase._
    enc.getArrayEncodingCase match {
      case FLAT              => FlatCodec(enc.getFlat)
      case NULLABLE          => NullableCodec(enc.getNullable)
      case FIXED_SIZE_LIST   => FixedSizeListCodec(enc.getFixedSizeList)
      case FIXED_SIZE_BINARY => FixedSizeBinaryCodec(enc.getFixedSizeBinary)
      case BINARY            => BinaryCodec(enc.getBinary)
      case DICTIONARY        => DictionaryCodec(enc.getDictionary)
      case LIST              => ListCodec(enc.getList)
      case STRUCT            => StructCodec
      case PACKED_STRUCT     => PackedStructCodec(enc.getPackedStruct)
      case other             => UnsupportedCodec(other.name.toLowerCase)
    }
  }
}
