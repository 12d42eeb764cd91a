package io.lancespark.format.input

import java.nio.{ByteBuffer, ByteOrder}
import java.util.concurrent.{CompletableFuture, ExecutionException, Executor}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicLong}

import scala.util.control.NonFatal

/** The storage reads of one batch, issued on the read pool as soon as they are
  * planned: ranges close to each other in the file are merged into one read,
  * the merged reads run in a few parallel groups, and each range becomes usable
  * the moment its own read completes, so the decode of one column overlaps the
  * reads of the others (and, planned a batch early, the decode of the batch
  * before). Reads follow in a second round for planned reads with an
  * `andThen`, once their bytes are in.
  *
  * A thread that needs bytes whose group of reads no pool thread has started
  * yet runs that group itself: when every core is busy (reads from the page
  * cache are CPU work) nothing waits for a pool thread to be scheduled, and
  * when reads wait on storage they overlap with the decode.
  *
  * As a [[ByteReader]] it serves any range lying inside one merged read (waiting
  * for that read only) and reads anything else directly. Buffers come from
  * `arena`, which must not be reset before [[awaitAll]]. */
final class CoalescedReads private (
    source: RandomAccessSource,
    arena: ReadArena,
    first: Vector[CoalescedReads.Extent],
    second: CompletableFuture[Vector[CoalescedReads.Extent]],
    carried: Vector[ByteRange])
    extends ByteReader {
  import CoalescedReads._

  override def path: String = source.path

  /** The bytes of the `carried` ranges (sorted), once [[carry]] has copied
    * them from the batch before; a range without them is read directly. */
  private val carriedBytes = new Array[ByteBuffer](carried.size)

  /** Copies the bytes of the carried ranges from `from` (the reads of the
    * batch before, complete), which this batch then does not read again. */
  def carry(from: ByteReader): Unit = {
    var i = 0
    while (i < carried.size) {
      val r = carried(i)
      carriedBytes(i) = try copy(from.read(r.position, r.length)) catch { case NonFatal(_) => null }
      i += 1
    }
  }

  /** Like `carry`, with bytes already copied (in the order of `carriedRanges`). */
  private[input] def carryCopies(bytes: Vector[ByteBuffer]): Unit =
    bytes.indices.foreach(i => if (i < carriedBytes.length) carriedBytes(i) = bytes(i))

  /** Ranges of this batch's planned reads the batch before also read. */
  def carriedRanges: Vector[ByteRange] = carried

  /** The first round's merged reads. */
  def extents: Vector[ByteRange] = first.map(_.range)

  /** Whether [position, position + length) lies inside one of the first round's merged reads. */
  def covers(position: Long, length: Long): Boolean = find(first, position, length).isDefined

  private def fromCarried(position: Long, length: Long): Option[ByteBuffer] = {
    var lo = 0
    var hi = carried.size - 1
    var best = -1
    while (lo <= hi) {
      val mid = (lo + hi) >>> 1
      if (carried(mid).position <= position) { best = mid; lo = mid + 1 } else hi = mid - 1
    }
    // ranges may overlap: look back over those starting at or before position
    var i = best
    var out: Option[ByteBuffer] = None
    while (out.isEmpty && i >= 0) {
      val r = carried(i)
      val b = carriedBytes(i)
      if (b != null && position + length <= r.end) {
        val d = b.duplicate()
        val off = (position - r.position).toInt
        d.position(off).limit(off + length.toInt)
        out = Some(d.slice().order(ByteOrder.LITTLE_ENDIAN))
      }
      i -= 1
    }
    out
  }

  private val waited = new AtomicLong

  /** Nanoseconds the calling thread spent on storage: waiting for reads not
    * complete when their bytes were needed, and making reads itself. */
  def waitNanos: Long = waited.get

  override def read(position: Long, length: Long): ByteBuffer =
    find(first, position, length) match {
      case Some(e) => e.slice(position, length, waited)
      case None =>
        (if (carried.isEmpty) None else fromCarried(position, length)).getOrElse(
          find(secondRound, position, length) match {
            case Some(e) => e.slice(position, length, waited)
            case None => timed(waited)(source.read(position, length, arena))
          })
    }

  /** The second round's reads, once planned; none if the first round failed
    * (the direct read then reports the storage error itself). */
  private def secondRound: Vector[Extent] =
    if (second.isDone && !second.isCompletedExceptionally) second.join()
    else timed(waited) {
      first.foreach(_.complete())
      try second.get()
      catch { case _: ExecutionException => Vector.empty }
    }

  /** Waits until no read of this batch is in flight (failures are ignored:
    * they surface when their bytes are asked for). */
  def awaitAll(): Unit = timed(waited) {
    first.foreach(_.complete())
    try second.get().foreach(_.complete())
    catch { case _: ExecutionException => () }
  }
}

object CoalescedReads {

  /** Ranges at most this far apart are read as one, the gap with them: the
    * padding between buffers (64-byte aligned) and small holes, up to one
    * storage block. Larger gaps would read bytes that later batches read again. */
  val MaxGap: Long = 4L * 1024

  /** No merged read grows beyond this. */
  val MaxRead: Long = 16L * 1024 * 1024

  /** A batch's merged reads run in about this many parallel groups. */
  val GroupsPerRound: Int = 4

  private def timed[T](into: AtomicLong)(body: => T): T = {
    val t0 = System.nanoTime()
    try body finally into.addAndGet(System.nanoTime() - t0)
  }

  /** Merged reads made one after the other by whichever thread claims them
    * first: a pool thread, or a thread that needs their bytes. Their buffers
    * are taken from `arena` by the thread that creates the group. */
  private[input] final class ReadGroup(source: RandomAccessSource, ranges: Vector[ByteRange], arena: ReadArena)
      extends Runnable {
    private val claimed = new AtomicBoolean
    val extents: Vector[Extent] = ranges.map(r => new Extent(r, arena.take(r.length.toInt), this))

    override def run(): Unit =
      if (claimed.compareAndSet(false, true))
        extents.foreach { e =>
          try {
            source.readInto(e.range.position, e.buf.duplicate())
            e.done.complete(())
          } catch { case t: Throwable => e.done.completeExceptionally(t) }
        }
  }

  /** One merged read: its bytes land in `buf`; `done` completes when they have. */
  private[input] final class Extent(val range: ByteRange, val buf: ByteBuffer, group: ReadGroup) {
    val done: CompletableFuture[Unit] = new CompletableFuture[Unit]

    /** Runs this read's group here if no thread has started it, then waits for it. */
    def complete(): Unit = if (!done.isDone) {
      group.run()
      try done.get() catch { case _: ExecutionException => () }
    }

    def slice(position: Long, length: Long, waited: AtomicLong): ByteBuffer = {
      if (!done.isDone) timed(waited)(complete())
      try done.join()
      catch { case e: java.util.concurrent.CompletionException if e.getCause != null => throw e.getCause }
      val off = (position - range.position).toInt
      val b = buf.duplicate()
      b.position(off).limit(off + length.toInt)
      b.slice().order(ByteOrder.LITTLE_ENDIAN)
    }
  }

  /** Sorts the ranges and merges those that overlap or lie at most `maxGap`
    * apart, up to `maxRead` bytes per merged range. Empty ranges are dropped. */
  def coalesce(ranges: Seq[ByteRange], maxGap: Long = MaxGap, maxRead: Long = MaxRead): Vector[ByteRange] = {
    val sorted = ranges.filter(_.length > 0).sortBy(_.position)
    val out = Vector.newBuilder[ByteRange]
    var cur: Option[ByteRange] = None
    sorted.foreach { r =>
      cur match {
        case Some(c) if r.position <= c.end + maxGap && math.max(c.end, r.end) - c.position <= maxRead =>
          cur = Some(ByteRange(c.position, math.max(c.end, r.end) - c.position))
        case Some(c) =>
          out += c
          cur = Some(r)
        case None => cur = Some(r)
      }
    }
    cur.foreach(out += _)
    out.result()
  }

  /** Plans and issues the reads of one batch on `pool` ([[ReadPool.caller]]:
    * the calling thread reads them all before this returns). */
  def start(source: RandomAccessSource, planned: Seq[PlannedRead], arena: ReadArena,
            pool: Executor = ReadPool.executor): CoalescedReads = start0(source, planned, arena, pool, Vector.empty)

  /** Like `start`, after resetting `arena`; planned reads (without follow-ups) that lie inside
    * `before`'s first-round reads (the batch before, sharing a page chunk
    * with this one) are not read again: their bytes are carried over, copied
    * from `before` by [[CoalescedReads.carry]] once its reads are complete
    * (now, if they are: `beforeDone`). */
  def startAfter(source: RandomAccessSource, planned: Seq[PlannedRead], arena: ReadArena, pool: Executor,
                 before: Option[CoalescedReads], beforeDone: Boolean): CoalescedReads = {
    val carried: Vector[ByteRange] = before.toVector.flatMap { b =>
      planned.iterator.filter(p => (p.andThen eq PlannedRead.Nothing) && p.range.length > 0 &&
        b.covers(p.range.position, p.range.length)).map(_.range).toVector
    }.distinct.sortBy(_.position)
    // copied before `arena` is reset: `before` may have read into it
    val copies: Vector[ByteBuffer] =
      if (beforeDone) before.toVector.flatMap(b => carried.map(r => copy(b.read(r.position, r.length)))) else Vector.empty
    arena.reset()
    val kept = if (carried.isEmpty) planned else {
      val set = carried.toSet
      planned.filterNot(p => (p.andThen eq PlannedRead.Nothing) && set.contains(p.range))
    }
    val out = start0(source, kept, arena, pool, carried)
    if (beforeDone) out.carryCopies(copies)
    out
  }

  private def copy(b: ByteBuffer): ByteBuffer = {
    val out = ByteBuffer.allocate(b.remaining()).order(ByteOrder.LITTLE_ENDIAN)
    out.put(b.duplicate())
    out.flip()
    out
  }

  private def start0(source: RandomAccessSource, planned: Seq[PlannedRead], arena: ReadArena,
            pool: Executor, carried: Vector[ByteRange]): CoalescedReads = {
    val first = issue(source, coalesce(planned.map(_.range), source.coalesceGap), arena, pool)
    val followUps = planned.filter(_.andThen ne PlannedRead.Nothing)
    // the second round is planned by the thread that completes the first
    val second: CompletableFuture[Vector[Extent]] =
      if (followUps.isEmpty) CompletableFuture.completedFuture(Vector.empty)
      else CompletableFuture.allOf(first.map(_.done): _*).thenApply[Vector[Extent]](_ => {
        val more = followUps.flatMap { p =>
          find(first, p.range.position, p.range.length).toSeq.flatMap { e =>
            try p.andThen(e.slice(p.range.position, p.range.length, new AtomicLong))
            catch { case NonFatal(_) => Nil } // the decode reports what is wrong
          }
        }
        val needed = more.filter(r => r.position >= 0 && r.end <= source.size && find(first, r.position, r.length).isEmpty)
        issue(source, coalesce(needed, source.coalesceGap), arena, pool)
      })
    new CoalescedReads(source, arena, first, second, carried)
  }

  /** Runs the reads of `ranges` (sorted) in about [[GroupsPerRound]] groups of
    * consecutive ranges with about the same number of bytes each; returns
    * their extents, in order. */
  private def issue(source: RandomAccessSource, ranges: Vector[ByteRange], arena: ReadArena,
                    pool: Executor): Vector[Extent] = {
    val target = math.max(1L, ranges.map(_.length).sum / GroupsPerRound)
    val runs = Vector.newBuilder[Vector[ByteRange]]
    var run = Vector.empty[ByteRange]
    var bytes = 0L
    ranges.foreach { r =>
      run :+= r
      bytes += r.length
      if (bytes >= target) { runs += run; run = Vector.empty; bytes = 0L }
    }
    if (run.nonEmpty) runs += run
    val groups = runs.result().map(new ReadGroup(source, _, arena))
    groups.foreach(pool.execute)
    groups.flatMap(_.extents)
  }

  /** The extent holding all of [position, position + length), by binary search. */
  private def find(extents: Vector[Extent], position: Long, length: Long): Option[Extent] = {
    var lo = 0
    var hi = extents.size - 1
    var best = -1
    while (lo <= hi) {
      val mid = (lo + hi) >>> 1
      if (extents(mid).range.position <= position) { best = mid; lo = mid + 1 } else hi = mid - 1
    }
    if (best >= 0 && position + length <= extents(best).range.end) Some(extents(best)) else None
  }
}
