package io.lancespark.spark.read

import org.apache.spark.unsafe.types.UTF8String

import io.lancespark.table.scan.ColumnDictionary

/** The strings of one column's current page dictionary, kept across the
  * batches of a partition: a page's batches share its dictionary, so each item
  * becomes a `UTF8String` once per page rather than once per batch. */
sealed trait DictionaryStrings {
  /** The (lazily filled) strings of the vector's dictionary, one slot per item. */
  def of(v: ColumnDictionary): Array[UTF8String]
}

object DictionaryStrings {
  /** Nothing kept: fresh slots for every vector. */
  val Fresh: DictionaryStrings = new DictionaryStrings {
    override def of(v: ColumnDictionary): Array[UTF8String] = new Array[UTF8String](v.itemCount)
  }

  /** Keeps the slots of the last dictionary seen. */
  def perColumn(): DictionaryStrings = new DictionaryStrings {
    private var last: Option[(AnyRef, Array[UTF8String])] = None
    override def of(v: ColumnDictionary): Array[UTF8String] = last match {
      case Some((d, strings)) if d eq v.dictionary => strings
      case _ =>
        val strings = new Array[UTF8String](v.itemCount)
        last = Some(v.dictionary -> strings)
        strings
    }
  }
}
