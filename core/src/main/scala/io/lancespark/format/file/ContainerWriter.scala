package io.lancespark.format.file

import java.io.OutputStream

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import com.google.protobuf.ByteString
import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.complex.{LargeListVector, ListVector, StructVector}
import org.apache.arrow.vector.types.pojo.ArrowType

import io.lancespark.proto.file2.ColumnMetadata
import io.lancespark.schema.{LanceField, LanceFormatException, LanceSchema}

/** Global buffers a writer adds after the file descriptor (buffer 1 on), and
  * the schema metadata entries that name them. */
final case class ExtraGlobals(buffers: Seq[Array[Byte]], metadata: Seq[(String, ByteString)])

object ExtraGlobals {
  val Empty: ExtraGlobals = ExtraGlobals(Nil, Nil)
}

/** What the writers of every 2.x file version share: the output (buffers
  * 64-byte aligned), the pages written to each column, the writer's state
  * (open, failed, finished, closed), the checks of each batch against the
  * schema, and the file's tail.
  *
  * A version says which field each column stores (`columnFields`, in column
  * order), how a checked batch of `n` > 0 rows is written (`append`), what
  * `finish` writes before the tail (`finishPages`) and which global buffers
  * follow the descriptor (`extraGlobals`). */
abstract class ContainerWriter(out: OutputStream, major: Int, minor: Int) extends DataFileWriter {

  def path: String

  def schema: LanceSchema

  protected final def fail(problem: String): Nothing = throw LanceFormatException(path, problem)

  /** The field each column stores, in column order. */
  protected def columnFields: Vector[LanceField]

  /** Writes rows [rows, rows + n) of a batch checked against the schema. */
  protected def append(vectors: Seq[FieldVector], n: Int): Unit

  /** Refuses what this version cannot store of a vector (checked to match its field). */
  protected def checkStorable(field: LanceField, vector: FieldVector, path: String): Unit = ()

  /** A column's own column encoding (a `lance.encodings.ColumnEncoding`
    * message); None: plain values. */
  protected def columnEncoding(column: Int): Option[ByteString] = None

  /** Writes what is still buffered, before the tail. */
  protected def finishPages(): Unit

  /** The global buffers after the descriptor. */
  protected def extraGlobals(): ExtraGlobals

  private val pos = new PositionedOutput(out, ContainerWriter.Alignment)
  private lazy val pages: Vector[ArrayBuffer[ColumnMetadata.Page]] =
    Vector.fill(columnFields.size)(ArrayBuffer.empty[ColumnMetadata.Page])
  private var rowsWritten = 0L
  private val userGlobals = ArrayBuffer.empty[Array[Byte]]

  /** Adds a global buffer written after the descriptor (an index file's
    * model); its buffer number in the file (1 for the first). Not combined
    * with a version's own extra buffers (page statistics). */
  final def addGlobalBuffer(bytes: Array[Byte]): Int = {
    if (state != "open") fail(s"a global buffer added to a writer that is $state")
    userGlobals += bytes
    userGlobals.size
  }
  private var state: String = "open" // open | failed | finished | closed

  /** Rows written so far (the first row of the batch `append` writes). */
  protected final def rows: Long = rowsWritten

  /** Writes a page's buffers ((bytes, length) pairs, each aligned) and
    * records the page, with its encoding message, in its column; returns the
    * page's index in the column. */
  protected final def writePage(column: Int, buffers: Seq[(Array[Byte], Int)], length: Long, priority: Long,
                                encodingType: String, encoding: ByteString): Int = {
    val p = ColumnMetadata.Page.newBuilder().setLength(length).setPriority(priority)
      .setEncoding(FileTail.direct(encodingType, encoding))
    buffers.foreach { case (bytes, len) =>
      p.addBufferOffsets(pos.writeAligned(bytes, len))
      p.addBufferSizes(len.toLong)
    }
    pages(column) += p.build()
    pages(column).size - 1
  }

  /** Writes `len` bytes of `src` from `index` out of line (no page: a blob
    * value, described by its column's pages), 64-byte aligned; returns where
    * they start in the file. */
  protected final def writeOutOfLine(src: org.apache.arrow.memory.ArrowBuf, index: Long, len: Long): Long =
    pos.writeAligned(src, index, len)

  /** Whether a column has pages. */
  protected final def hasPages(column: Int): Boolean = pages(column).nonEmpty

  /** Appends a batch: one vector per top-level field, all of the same length. */
  final override def write(vectors: Seq[FieldVector]): Unit = {
    if (state != "open") fail(s"write on a writer that is $state")
    if (vectors.size != schema.fields.size)
      fail(s"${vectors.size} vectors for a schema of ${schema.fields.size} top-level fields")
    val n = vectors.headOption.fold(0)(_.getValueCount)
    schema.fields.zip(vectors).foreach { case (f, v) =>
      if (v.getValueCount != n)
        fail(s"column '${f.name}' has ${v.getValueCount} values but column '${schema.fields.head.name}' has $n")
      check(f, v, f.name)
    }
    if (n == 0) return
    try {
      append(vectors, n)
      rowsWritten += n
    } catch { case e: Throwable => state = "failed"; throw e }
  }

  /** Checks the vector matches the field, and that this version can store it. */
  private def check(f: LanceField, v: FieldVector, path: String): Unit = {
    val expected = f.arrowType
    val actual = v.getField.getType
    val ok = (expected, actual) match {
      case (_: ArrowType.FixedSizeList, a: ArrowType.FixedSizeList) => expected == a
      case (_: ArrowType.Map, _: ArrowType.Map | _: ArrowType.List) => true
      case (e, a) => e == a
    }
    if (!ok) fail(s"column '$path' is $expected in the schema but the vector is $actual")
    checkStorable(f, v, path)
    v match {
      case s: StructVector =>
        val kids = s.getChildrenFromFields.asScala
        if (kids.size != f.children.size)
          fail(s"struct column '$path' has ${f.children.size} fields in the schema but its vector has ${kids.size}")
        f.children.zip(kids).foreach { case (c, k) => check(c, k, s"$path.${c.name}") }
      case l: ListVector => check(f.children.head, l.getDataVector, s"$path.${f.children.head.name}")
      case l: LargeListVector => check(f.children.head, l.getDataVector, s"$path.${f.children.head.name}")
      case _ => ()
    }
  }

  /** Writes the remaining pages, the extra global buffers, schema, column
    * metadata and footer; closes the stream. */
  final override def finish(): WrittenFile = {
    if (state != "open") fail(s"finish on a writer that is $state")
    try {
      finishPages()
      val own = extraGlobals()
      if (own.buffers.nonEmpty && userGlobals.nonEmpty)
        fail("global buffers added to a file that also writes page statistics")
      val extra = own.copy(buffers = own.buffers ++ userGlobals.toList)
      val metadata = (Map.newBuilder[String, ByteString] ++= schema.metadataProto ++= extra.metadata).result()
      val size = FileTail.write(pos, schema, metadata, rowsWritten, pages.map(_.toSeq), extra.buffers, major, minor,
        columnEncoding)
      out.close()
      state = "finished"
      WrittenFile(rowsWritten, columnFields.map(_.id), columnFields.indices.toVector, size)
    } catch { case e: Throwable => state = "failed"; throw e }
  }

  /** Closes the stream; without `finish` the file is incomplete. */
  override def close(): Unit = if (state != "finished" && state != "closed") {
    state = "closed"
    out.close()
  }
}

object ContainerWriter {
  /** Every buffer of a 2.x file starts at a multiple of this. */
  val Alignment: Int = 64
}
