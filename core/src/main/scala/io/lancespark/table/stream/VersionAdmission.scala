package io.lancespark.table.stream

/** How much one version contributes to a micro-batch: its changed rows and
  * the fragments (files) they are read from. */
final case class VersionSize(rows: Long, files: Int) {
  def isEmpty: Boolean = rows == 0L && files == 0
}

/** Which versions one micro-batch of a change feed stream takes: whole
  * versions only (a version's changes are never split between batches), at
  * least one version with changes however large, then the following ones as
  * long as the batch stays within `maxRows` and `maxFiles`. Versions without
  * changes (compactions, index builds) cost nothing and are taken on the way. */
object VersionAdmission {
  /** The first version after the batch that starts at `from`, where versions
    * up to `last` (included) are committed; `from` when nothing is available. */
  def end(from: Long, last: Long, maxRows: Option[Long], maxFiles: Option[Int], size: Long => VersionSize): Long = {
    var v = from
    var rows = 0L
    var files = 0L
    var taken = false
    var full = false
    while (v <= last && !full) {
      val s = size(v)
      val fits = maxRows.forall(rows + s.rows <= _) && maxFiles.forall(files + s.files <= _)
      if (!taken || s.isEmpty || fits) {
        rows += s.rows
        files += s.files
        taken = taken || !s.isEmpty
        v += 1
      } else full = true
    }
    v
  }
}
