package io.lancespark.table

/** What a scan hands to the Spark layer, named here so that `spark/` reaches
  * datasets only through `table/`. */
package object scan {
  /** A batch's string column as items of one page dictionary (see [[FragmentBatch.dictionary]]). */
  type DictionaryColumn = io.lancespark.format.arrow.DictionaryColumn
}
