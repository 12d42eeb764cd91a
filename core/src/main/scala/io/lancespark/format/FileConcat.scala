package io.lancespark.format

import java.io.OutputStream

import scala.jdk.CollectionConverters._

import com.google.protobuf.ByteString
import org.apache.arrow.memory.RootAllocator

import io.lancespark.format.file.{FileContainer, Footer, PositionedOutput, FileTail}
import io.lancespark.format.input.RandomAccessSource
import io.lancespark.format.stats.{PageStatistics, StatsCollector, StatsStore}
import io.lancespark.format.v21.V21FileReader
import io.lancespark.proto.file2.ColumnMetadata
import io.lancespark.schema.LanceFormatException

/** One 2.1+ data file holding, in order, the rows of files that each hold
  * consecutive rows of the same columns (pieces of one fragment's new
  * columns written by different tasks), made without decoding: each input's
  * page bytes are copied as they are, its pages' buffer positions moved by
  * where its bytes now start, and their first rows by the rows before it. A
  * 2.1+ page is self-contained (its encoding, its own buffers), so the pages
  * of several files in sequence are a valid column. The page statistics
  * and distinct-value sketches are joined likewise (dropped unless every
  * input has them).
  *
  * Refused (an error naming the input): other file versions or a mix, inputs
  * whose schemas or column encodings differ, column-level buffers, and blob
  * columns (their pages hold positions in their file). */
object FileConcat {

  /** What was written: rows and bytes. */
  final case class Joined(rows: Long, size: Long)

  def write(inputs: Seq[RandomAccessSource], out: OutputStream, outPath: String): Joined = {
    if (inputs.isEmpty) throw new IllegalArgumentException(s"$outPath: no files to join")
    val files = inputs.map(s => FileContainer.open(s, f => f.major == 2 && f.minor >= 1, "a 2.1 or later file"))
    val first = files.head
    def fail(f: FileContainer, problem: String): Nothing =
      throw LanceFormatException(f.path, s"cannot be joined into $outPath: $problem")
    val schemaFields = first.descriptor.getSchema.getFieldsList
    files.foreach { f =>
      if (f.footer.major != first.footer.major || f.footer.minor != first.footer.minor)
        fail(f, s"file version ${f.footer.versionName}, where ${first.path} is ${first.footer.versionName}")
      if (f.descriptor.getSchema.getFieldsList != schemaFields) fail(f, s"its schema differs from ${first.path}'s")
      if (f.footer.numColumns != first.footer.numColumns) fail(f, "its number of columns differs")
    }
    first.fileSchema.allFields.find(f => V21FileReader.isBlobV1(f) || V21FileReader.isBlobV2(f)).foreach { b =>
      fail(first, s"blob column '${b.name}' (its pages hold positions in their file)")
    }
    val metas: Seq[Vector[ColumnMetadata]] = files.map(columnMetadata)
    files.zip(metas).foreach { case (f, ms) =>
      ms.zipWithIndex.foreach { case (m, c) =>
        if (m.getBufferOffsetsCount > 0) fail(f, s"column $c has column buffers")
        if (m.getEncoding != metas.head(c).getEncoding) fail(f, s"column $c's encoding differs from ${first.path}'s")
      }
    }
    val pos = new PositionedOutput(out)
    try {
      var rowBase = 0L
      val pages = Array.fill(first.footer.numColumns)(Vector.newBuilder[ColumnMetadata.Page])
      val pageCounts = Array.fill(first.footer.numColumns)(0)
      val allocator = new RootAllocator()
      try {
        val stats = files.map(f => StatsStore.raw(f, allocator))
        val keepStats = stats.forall(_.isDefined)
        val joinedStats = Vector.newBuilder[StatsCollector.RawStat]
        files.zip(metas).zipWithIndex.foreach { case ((f, ms), i) =>
          val base = copyData(f, pos)
          ms.zipWithIndex.foreach { case (m, c) =>
            m.getPagesList.asScala.foreach { p =>
              pages(c) += p.toBuilder.clearBufferOffsets()
                .addAllBufferOffsets(p.getBufferOffsetsList.asScala.map(o => java.lang.Long.valueOf(o + base)).asJava)
                .setPriority(p.getPriority + rowBase).build()
            }
          }
          if (keepStats) stats(i).get._1.foreach { s =>
            joinedStats += s.copy(pageIndex = s.pageIndex + pageCounts(s.columnIndex), firstRow = s.firstRow + rowBase)
          }
          ms.zipWithIndex.foreach { case (m, c) => pageCounts(c) += m.getPagesCount }
          rowBase += f.numRows
        }
        val (globals, statsMetadata) =
          if (!keepStats || stats.forall(_.get._1.isEmpty)) (Nil, Map.empty[String, ByteString])
          else {
            val sketches = stats.map(_.get._2).reduce { (a, b) =>
              a.keySet.intersect(b.keySet).iterator.map(k => k -> a(k).merge(b(k))).toMap
            }
            val fields = first.fileSchema.allFields.filter(f => sketches.contains(f.id) ||
              stats.exists(_.get._1.exists(_.fieldId == f.id)))
            (Seq(StatsStore.toIpc(fields, joinedStats.result(), allocator),
              StatsStore.sketchesToIpc(fields.filter(f => sketches.contains(f.id)).map(f => f.id -> sketches(f.id)),
                allocator)),
              Map(PageStatistics.BufferKey -> ByteString.copyFromUtf8("1"),
                PageStatistics.SketchBufferKey -> ByteString.copyFromUtf8("2")))
          }
        val schema = first.descriptor.getSchema.toBuilder
          .removeMetadata(PageStatistics.BufferKey).removeMetadata(PageStatistics.SketchBufferKey)
          .putAllMetadata(statsMetadata.asJava).build()
        val columns = metas.head.indices.map(c => metas.head(c).toBuilder.clearPages().addAllPages(pages(c).result().asJava).build())
        val size = FileTail.writeColumns(pos, schema, rowBase, columns, globals, first.footer.major, first.footer.minor)
        out.close()
        Joined(rowBase, size)
      } finally allocator.close()
    } finally files.foreach(f => try f.source.close() catch { case _: Throwable => () })
  }

  /** Each column's metadata message as the file stores it. */
  private def columnMetadata(f: FileContainer): Vector[ColumnMetadata] =
    Footer.readRegions(f.source, f.footer.columnMetadataTablePos, f.footer.numColumns, "column metadata").map { r =>
      val bb = f.source.read(r.position, r.size)
      ColumnMetadata.parseFrom(bb)
    }

  /** Copies the bytes before the file's global buffers and column metadata
    * (its pages) to `pos`, 64-byte aligned; returns where they start. */
  private def copyData(f: FileContainer, pos: PositionedOutput): Long = {
    val end = (f.globalBuffers.map(_.position) :+ f.footer.columnMetadataStart).min
    val start = pos.writeAligned(Array.emptyByteArray, 0)  // (pads to the alignment)
    val chunk = new Array[Byte](1 << 20)
    var at = 0L
    while (at < end) {
      val n = math.min(chunk.length.toLong, end - at).toInt
      f.source.read(at, n).get(chunk, 0, n)
      pos.write(chunk, n)
      at += n
    }
    start
  }
}
