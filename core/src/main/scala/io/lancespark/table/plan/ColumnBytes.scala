package io.lancespark.table.plan

import io.lancespark.format.file.{FileContainer, Footer}
import io.lancespark.format.input.TailSource
import io.lancespark.schema.{LanceField, LanceFormatException, LanceSchema}
import io.lancespark.table.model.{DataFileRef, FragmentInfo}
import io.lancespark.table.storage.DatasetStorage

/** How many bytes each top-level field takes in a fragment's data files, from
  * the column metadata of 2.x files (the buffers of its columns, children's
  * included): what a projection of the fragment reads, as the files store it.
  * A file's column sizes are read once per process (data files never change
  * once published), at most [[ColumnBytes.MaxFiles]] files kept. */
object ColumnBytes {

  val MaxFiles: Int = 10000

  private final case class Key(root: String, path: String, size: Long)

  private val kept = new java.util.LinkedHashMap[Key, Option[Vector[Long]]](64, 0.75f, true) {
    override def removeEldestEntry(e: java.util.Map.Entry[Key, Option[Vector[Long]]]): Boolean = size() > MaxFiles
  }

  /** Bytes per top-level field id of `schema` in `fragment`'s data files (each
    * field in the last file that lists it, as a scan reads it); None where a
    * file is not 2.x, does not map its fields to columns, or its column
    * metadata cannot be read (the estimate this serves then takes another
    * way; the scan reports the file's problem when it reads it). */
  def of(storage: DatasetStorage, schema: LanceSchema, fragment: FragmentInfo): Option[Map[Int, Long]] = {
    val fileOf: Seq[(LanceField, Option[DataFileRef])] =
      schema.fields.map(f => f -> fragment.files.reverse.find(_.stores(f)))
    val refs = fileOf.flatMap(_._2).distinct
    val read: Seq[Option[(DataFileRef, Vector[Long])]] =
      if (refs.isEmpty || refs.exists(r => r.majorVersion != 2 || r.columnIndices.size != r.fieldIds.size)) Seq(None)
      else refs.map(r => columns(storage, r).map(r -> _))
    if (read.exists(_.isEmpty)) None
    else {
      val sizes: Map[DataFileRef, Vector[Long]] = read.flatten.toMap
      Some(fileOf.map {
        case (f, Some(ref)) =>
          val ids = f.allFields.iterator.map(_.id).toSet
          val cols = sizes(ref)
          f.id -> ref.fieldIds.indices.iterator
            .filter(i => ids.contains(ref.fieldIds(i)))
            .map(i => ref.columnIndices(i))
            .filter(c => c >= 0 && c < cols.size)
            .map(cols).sum
        case (f, None) => f.id -> 0L
      }.toMap)
    }
  }

  /** The bytes of each column of a data file, by column index. */
  private def columns(storage: DatasetStorage, ref: DataFileRef): Option[Vector[Long]] = {
    val key = Key(storage.uri, ref.relativePath, ref.sizeBytes)
    Option(kept.synchronized(kept.get(key))).getOrElse {
      val bytes =
        try {
          val source = storage.openForMetadata(ref.relativePath, "data file", ref.sizeBytes)
          try {
            // the column metadata and the tables after it, in one read (one request on an object store)
            val tail = new TailSource(source, Footer.read(source).columnMetadataStart)
            val file = FileContainer.open(tail, _ => true, "a 2.x file")
            Some((0 until file.footer.numColumns).map(i => file.columns.column(i).bytes).toVector)
          } finally source.close()
        } catch { case _: LanceFormatException => None }
      kept.synchronized(kept.put(key, bytes))
      bytes
    }
  }
}
