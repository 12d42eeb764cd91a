package io.lancespark.format.v20.codec

import scala.collection.mutable.ArrayBuffer

import io.lancespark.format.arrow.{Bits, Block, DictionaryItems, FixedValues, VarValues, AllNullValues}
import io.lancespark.format.arrow.Block.{AllNullBlock, DictBlock, NullableBlock, VarBlock}
import io.lancespark.format.input.PlannedRead
import io.lancespark.proto.encodings.Dictionary

/** Dictionary-encoded values: indices into a page's dictionary of items
  * (decoded once per page and cached). Strings dictionary-encoded by the
  * writer use index 0 for null and k for item k-1; columns of Arrow dictionary
  * type (`directDictionary`) store the indices as they are. */
private[v20] final case class DictionaryCodec(dict: Dictionary) extends ArrayCodec {
  private val indices = ArrayCodec.of(dict.getIndices)
  private val items = ArrayCodec.of(dict.getItems)
  private val numItems = dict.getNumDictionaryItems

  private def loadItems(ctx: PageContext): DictionaryItems = {
    if (numItems < 0 || numItems > Int.MaxValue - 2) ctx.fail(s"a dictionary of $numItems items")
    val shift = if (ctx.directDictionary) 0 else 1
    ctx.dictionaries(ctx.column, ctx.page) {
      items.decode(numItems, 0, numItems, top = false, ctx) match {
        case NullableBlock(v, inner) => DictionaryItems(Some(v), inner, numItems.toInt, shift, ctx.fail)
        case v: VarBlock             => DictionaryItems(v.validity, v, numItems.toInt, shift, ctx.fail)
        case other                   => DictionaryItems(None, other, numItems.toInt, shift, ctx.fail)
      }
    }
  }

  def decode(n: Long, from: Long, until: Long, top: Boolean, ctx: PageContext): Block = {
    val count = until - from
    val c = ctx.checkCount(count)
    val (idxValidity, idxBlock) = indices.decode(n, from, until, top = false, ctx) match {
      case NullableBlock(v, inner) => (Some(v), inner)
      case AllNullBlock(_)         => return AllNullBlock(count)
      case other                   => (None, other)
    }
    val idx = EndOffsets.integers(idxBlock, "dictionary indices", ctx)
    val dictionary = loadItems(ctx)
    if (dictionary.values == AllNullValues) return AllNullBlock(count)
    val remap = dictionary.remap
    val checkValid = idxValidity.isDefined
    val idxBits = idxValidity.getOrElse(Bits.Empty)
    val which = new Array[Int](c)
    var anyNull = false
    var i = 0
    while (i < c) {
      val raw = idx(i)
      val k =
        if (checkValid && !idxBits.get(i)) -1
        else if (raw < 0 || raw >= remap.length) ctx.fail(s"dictionary index $raw out of range ($numItems items)")
        else remap(raw.toInt)
      which(i) = k
      if (k < 0) anyNull = true
      i += 1
    }
    val validity = if (anyNull) Some(Bits.tabulate(c)(j => which(j) >= 0)) else None
    dictionary.values match {
      case v: VarValues if top => DictBlock(count, which, v, validity)
      case v: VarValues        => DictionaryItems.toVarBlock(which, v, validity, ctx.fail)
      case v: FixedValues      => DictionaryItems.toFixedBlock(which, v, validity, ctx.fail)
      case AllNullValues       => AllNullBlock(count)
    }
  }

  def plan(n: Long, from: Long, until: Long, ctx: PlanContext, out: ArrayBuffer[PlannedRead]): Unit = {
    indices.plan(n, from, until, ctx, out)
    if (ctx.dictionaryItems && !ctx.page.dictionaries.has(ctx.page.column, ctx.page.page))
      items.plan(numItems, 0, numItems, ctx, out)
  }
}
