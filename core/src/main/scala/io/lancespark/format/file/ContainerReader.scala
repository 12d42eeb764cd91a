package io.lancespark.format.file

import java.util.concurrent.Executor

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.FieldVector
import org.apache.arrow.vector.complex.{LargeListVector, ListVector, StructVector}

import io.lancespark.format.DataFileReader
import io.lancespark.format.input.{CoalescedReads, PlannedRead, RandomAccessSource, ReadArena, ReadPool}
import io.lancespark.schema.{LanceField, LanceFormatException, LanceSchema}

/** What the readers of every 2.x file version share: the container (footer,
  * schema, row count), the field -> column mapping, the read-ahead of the
  * next batch while this one decodes, the checks of a request and of the
  * vectors filled, and what a failing batch does (its vectors closed, a
  * decoder's exception on bad bytes reported as corrupt data).
  *
  * A version says which fields have columns (`storedFields`, depth first:
  * the default mapping of a standalone file), what reading rows of a field
  * takes (`plan`), and how a batch is decoded (`decode`). */
abstract class ContainerReader(
    val file: FileContainer,
    schemaOverride: Option[LanceSchema],
    fieldColumnsOverride: Option[Map[Int, Int]])
    extends DataFileReader {

  protected final val source: RandomAccessSource = file.source

  override def path: String = source.path

  def footer: Footer = file.footer

  protected final def fail(problem: String): Nothing = throw LanceFormatException(path, problem)

  /** The schema the file itself stores. */
  def fileSchema: LanceSchema = file.fileSchema

  lazy val schema: LanceSchema = schemaOverride.getOrElse(fileSchema)

  /** Field id -> column index: a standalone file's stored fields in depth-first order. */
  lazy val fieldColumns: Map[Int, Int] = fieldColumnsOverride.getOrElse(
    fileSchema.fields.flatMap(storedFields).zipWithIndex.map { case (f, i) => f.id -> i }.toMap)

  override def numRows: Long = file.numRows

  /** The fields below (and including) a top-level field that have columns of their own. */
  protected def storedFields(field: LanceField): Seq[LanceField]

  /** The column of a field, checked to exist in the file. */
  protected final def columnIndex(field: LanceField): Int = {
    val idx = fieldColumns.getOrElse(field.id,
      fail(s"field '${field.name}' (id ${field.id}) is not stored in this file"))
    if (idx < 0 || idx >= footer.numColumns)
      fail(s"field '${field.name}' (id ${field.id}) maps to column $idx but the file has ${footer.numColumns} columns")
    idx
  }

  /** The reads that decoding rows [from, until) of a field will make, as far
    * as the page metadata tells; fields it cannot plan for plan nothing. */
  protected def plan(field: LanceField, from: Long, until: Long): Seq[PlannedRead]

  /** The reads of the rows of several ranges (sorted, disjoint) of a field:
    * those of each range, unless the file version plans them together. */
  protected def planRanges(field: LanceField, ranges: IndexedSeq[(Long, Long)]): Seq[PlannedRead] =
    ranges.flatMap { case (from, until) => plan(field, from, until) }

  /** Decodes the rows of `ranges` (sorted, disjoint, none empty) of the
    * fields from `reads` (the batch's planned reads, those of every range),
    * one vector per field holding the ranges' rows one after the other,
    * handing each vector to `batch` as soon as it is made. A page or chunk
    * that holds rows of several ranges is decoded once for them. */
  protected def decode(fields: Seq[LanceField], ranges: IndexedSeq[(Long, Long)], allocator: BufferAllocator,
                       reads: CoalescedReads, batch: BatchOutput, itemsOnly: Set[Int]): Unit

  /** Whether an exception a decoder throws means the bytes are corrupt. */
  protected def isCorruption(e: Throwable): Boolean = e match {
    case _: IndexOutOfBoundsException | _: IllegalArgumentException | _: IllegalStateException |
         _: ArithmeticException | _: NegativeArraySizeException | _: java.nio.BufferUnderflowException |
         _: MatchError | _: ClassCastException => true
    case _ => false
  }

  /** The vectors a batch has made so far (closed if it fails), and what it is
    * decoding (named in a corrupt-data error). */
  protected final class BatchOutput {
    private[ContainerReader] val vectors: ArrayBuffer[FieldVector] = ArrayBuffer.empty[FieldVector]
    private[ContainerReader] var decoding: String = ""

    def add(vector: FieldVector): Unit = vectors += vector

    /** Names what is decoded next (e.g. "field 'x' (id 3): "). */
    def at(what: String): Unit = decoding = what
  }

  // ---------------------------------------------------------- checks

  /** A struct field's vector, checked to be a struct. */
  protected final def structVector(field: LanceField, vec: FieldVector): StructVector = vec match {
    case s: StructVector => s
    case other => fail(s"field '${field.name}' is a struct but its Arrow vector is ${other.getClass.getSimpleName}")
  }

  /** A struct vector's children, checked to match the field's. */
  protected final def structChildren(field: LanceField, sv: StructVector): Seq[FieldVector] = {
    val kids = sv.getChildrenFromFields.asScala
    if (kids.size != field.children.size)
      fail(s"struct field '${field.name}' has ${field.children.size} children but its vector has ${kids.size}")
    kids.toSeq
  }

  /** The items vector of a list field's vector. */
  protected final def listItems(field: LanceField, vec: FieldVector): FieldVector = vec match {
    case l: ListVector => l.getDataVector
    case l: LargeListVector => l.getDataVector
    case other => fail(s"field '${field.name}' is a list but its Arrow vector is ${other.getClass.getSimpleName}")
  }

  // ---------------------------------------------------------- counters

  private var decodedPages: Long = 0L

  /** Counts a decoded page. */
  protected final def pageDecoded(): Unit = decodedPages += 1

  /** Pages decoded so far. */
  override def pagesDecoded: Long = decodedPages

  /** Page bytes of the batch being decoded and of the next one, being read
    * meanwhile; an arena is reset when its batch is done (the vectors `read`
    * returns hold copies). */
  private val arenas = Array(new ReadArena, new ReadArena)

  /** The reads of a batch, issued before its decode. */
  private final class BatchReads(val fields: Seq[LanceField], val ranges: IndexedSeq[(Long, Long)],
                                 val reads: CoalescedReads, val arena: Int)

  /** The next batch's reads, issued while the current one decodes. */
  private var ahead: Option[BatchReads] = None

  private var waitedNanos: Long = 0L

  override def scratchBytes: Long = arenas.map(_.capacity).sum

  /** Nanoseconds `read` spent waiting for storage so far. */
  override def storageWaitNanos: Long = waitedNanos

  /** Read requests made to storage so far (metadata included). */
  override def readRequests: Long = source.readRequests

  /** Bytes read from the file so far. */
  override def bytesRead: Long = source.bytesRead

  // ---------------------------------------------------------- reading

  /** The batch's reads: those of every range, merged where they overlap or
    * lie close (a chunk several ranges need is read once). */
  private def issue(fields: Seq[LanceField], ranges: IndexedSeq[(Long, Long)], arena: Int, pool: Executor,
                    before: Option[BatchReads], beforeDone: Boolean): BatchReads = {
    val planned = fields.flatMap(planRanges(_, ranges))
    // a chunk the batch before read too (a batch of scattered rows ends inside it) is carried over
    // (copied now if its reads are done, before this arena is reset; else once they are)
    val donor = before.filter(b => b.fields == fields && (beforeDone || b.arena != arena))
    new BatchReads(fields, ranges,
      CoalescedReads.startAfter(source, planned, arenas(arena), pool, donor.map(_.reads), beforeDone), arena)
  }

  /** The last batch decoded, whose reads are complete (and still in its arena until the next `issue` into it). */
  private var previous: Option[BatchReads] = None

  override def read(fields: Seq[LanceField], from: Long, until: Long, allocator: BufferAllocator): Seq[FieldVector] =
    read(fields, from, until, allocator, None)

  /** Rows [from, until) of the fields. The batch's reads are planned together
    * (merged where close) before its decode starts, unless they already were
    * as the previous call's `next`. With a `next` (the rows the caller will ask
    * for next), reads run on the read pool: this batch's while its first
    * columns decode, the next batch's while this one decodes. Without one, the
    * calling thread makes this batch's reads, then decodes. */
  override def read(fields: Seq[LanceField], from: Long, until: Long, allocator: BufferAllocator,
                    next: Option[(Long, Long)]): Seq[FieldVector] = {
    if (from < 0 || until < from || until > numRows)
      fail(s"rows [$from, $until) are outside the file's $numRows rows")
    readChecked(fields, Vector((from, until)), allocator, next.map(Vector(_)), Set.empty)
  }

  /** Rows of several ranges at once: their reads planned and issued
    * together, so that a page or chunk holding rows of several ranges is
    * fetched (and decoded) once; otherwise as `read`. */
  override def readRanges(fields: Seq[LanceField], ranges: IndexedSeq[(Long, Long)], allocator: BufferAllocator,
                          next: Option[IndexedSeq[(Long, Long)]]): Seq[FieldVector] =
    readRanges(fields, ranges, allocator, next, Set.empty[Int])

  override def readRanges(fields: Seq[LanceField], ranges: IndexedSeq[(Long, Long)], allocator: BufferAllocator,
                          next: Option[IndexedSeq[(Long, Long)]], itemsOnly: Set[Int]): Seq[FieldVector] = {
    var last = 0L
    ranges.foreach { case (from, until) =>
      if (from < last || until < from || until > numRows)
        fail(s"rows [$from, $until) are outside the file's $numRows rows or not after the ranges before them")
      last = until
    }
    readChecked(fields, ranges.filter(r => r._2 > r._1), allocator, next, itemsOnly)
  }

  private def readChecked(fields: Seq[LanceField], ranges: IndexedSeq[(Long, Long)], allocator: BufferAllocator,
                          next: Option[IndexedSeq[(Long, Long)]], itemsOnly: Set[Int]): Seq[FieldVector] = {
    val current = ahead match {
      case Some(a) if a.ranges == ranges && a.fields == fields => a
      case other =>
        val t0 = System.nanoTime()
        other.foreach(_.reads.awaitAll())
        val issued = issue(fields, ranges, 0, if (next.isDefined) ReadPool.executor else ReadPool.caller,
          previous.filter(_.fields == fields), beforeDone = true)
        waitedNanos += System.nanoTime() - t0 // reads made here, or waited for
        issued
    }
    ahead = next.map(_.filter(r => r._2 > r._1))
      .filter(rs => rs.nonEmpty && rs.forall { case (f, u) => f >= 0 && u <= numRows })
      .map(rs => issue(fields, rs, 1 - current.arena, ReadPool.executor, Some(current), beforeDone = false))
    val batch = new BatchOutput
    try {
      decode(fields, ranges, allocator, current.reads, batch, itemsOnly)
      batch.vectors.toSeq
    } catch {
      case e: Throwable =>
        batch.vectors.foreach(v => try v.close() catch { case _: Throwable => () })
        e match {
          case l: LanceFormatException => throw l
          case _ if isCorruption(e) => throw LanceFormatException(path, s"${batch.decoding}corrupt data: $e", e)
          case _ => throw e
        }
    } finally {
      current.reads.awaitAll()
      waitedNanos += current.reads.waitNanos
      // the next batch, issued ahead, carries over the bytes it shares with this one
      ahead.foreach(a => if (a.reads.carriedRanges.nonEmpty) a.reads.carry(current.reads))
      previous = Some(current)
      source.attributeReads()
    }
  }

  override def close(): Unit = {
    try ahead.foreach(_.reads.awaitAll())
    finally { ahead = None; source.close() }
  }
}
