package io.lancespark.format.v01

import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.vector.BigIntVector
import org.apache.arrow.vector.complex.StructVector

import io.lancespark.schema.{FieldEncoding, LanceFormatException, LanceSchema}
import io.lancespark.format.input.RandomAccessSource
import io.lancespark.format.stats.{PageStat, PageStatistics, StatsStore}

/** The page statistics pylance (lance 0.x, `data_storage_version="legacy"`)
  * writes into 0.1 files: `Metadata.statistics` holds a schema of one struct
  * per data field (named by the field id: null_count int64, min_value and
  * max_value of the field's type; their own field ids), and a page table
  * (stats field ids x 1 batch) of 0.1 pages with one value per data batch.
  * Read into the [[PageStat]] shape: one page per batch, `columnIndex` -1,
  * adjusted to what [[LegacyFileReader]] returns (pylance's statistics
  * describe the data before it was written): fixed-width (plain) columns
  * have no validity in 0.1, so the reader returns values, never NULL, where
  * pylance wrote nulls: such pages get a null count of 0 and unknown bounds
  * when pylance counted nulls. Var-binary columns read empty values as NULL:
  * the null count is kept only when it is certain (no empty values: a
  * non-empty min, or an all-null page), else it is unknown (-1). */
object LegacyStatistics {

  private def nonEmpty(v: Any): Boolean = v match {
    case s: String => s.nonEmpty
    case b: Array[Byte] => b.nonEmpty
    case _ => true
  }

  def read(source: RandomAccessSource): Option[PageStatistics] = {
    val allocator = new RootAllocator()
    try read(source, allocator) finally allocator.close()
  }

  def read(source: RandomAccessSource, allocator: BufferAllocator): Option[PageStatistics] =
    read(source, LegacyFooter.read(source), allocator)

  def read(source: RandomAccessSource, footer: LegacyFooter, allocator: BufferAllocator): Option[PageStatistics] =
    footer.statistics.flatMap { sm =>
      val where = s"${source.path}: statistics"
      val schema = LanceSchema.fromProto(sm.getSchemaList.asScala.toSeq, Map.empty, where)
      val ids = schema.allFields.map(_.id)
      val pages = footer.numBatches
      if (ids.isEmpty || pages == 0) None
      else {
        val table = PageTable.read(source, sm.getPageTablePosition, ids.min, ids.max, 1)
        val statsFooter = footer.copy(batchOffsets = Array(0L, pages.toLong), statistics = None)
        val reader = LegacyFileReader.forColumns(source, schema, statsFooter, table)
        // structs whose name is a field id and that have the three children
        val usable = schema.fields.filter(f => scala.util.Try(f.name.toInt).isSuccess &&
          Seq("null_count", "min_value", "max_value").forall(n => f.children.exists(_.name == n)))
        val vectors = try reader.read(usable, 0, pages, allocator) catch {
          case e: LanceFormatException => throw LanceFormatException(source.path, s"corrupt statistics: ${e.getMessage}", e)
        }
        try {
          val out = Vector.newBuilder[PageStat]
          usable.zip(vectors).foreach { case (f, v) =>
            val sv = v.asInstanceOf[StructVector]
            val nc = sv.getChild("null_count") match {
              case b: BigIntVector => Some(b)
              case _ => None
            }
            val mn = sv.getChild("min_value")
            val mx = sv.getChild("max_value")
            val varBinary = f.children.find(_.name == "min_value").exists(_.encoding == FieldEncoding.VarBinary)
            (0 until pages).foreach { b =>
              val rows = footer.batchEnd(b) - footer.batchStart(b)
              val nulls = nc.filterNot(_.isNull(b)).map(_.get(b)).getOrElse(-1L)
              val (min, max) = (StatsStore.decode(mn, b), StatsStore.decode(mx, b))
              val stat =
                if (!varBinary) {
                  // plain pages have no validity: the reader returns the bytes under
                  // the written nulls as values, so with nulls the bounds are unknown
                  if (nulls == 0) PageStat(-1, f.name.toInt, b, footer.batchStart(b), rows, 0L, min, max)
                  else PageStat(-1, f.name.toInt, b, footer.batchStart(b), rows, 0L, None, None)
                } else {
                  // var-binary: empty values read as NULL; an empty (or null) min
                  // reads as None, and then the number of NULLs read is unknown
                  val exact = nulls == rows || min.exists(nonEmpty)
                  PageStat(-1, f.name.toInt, b, footer.batchStart(b), rows, if (exact) nulls else -1L,
                    min.filter(nonEmpty), max.filter(nonEmpty))
                }
              out += stat
            }
          }
          Some(PageStatistics(out.result()))
        } finally vectors.foreach(_.close())
      }
    }
}
