package io.lancespark.format.input

import java.nio.{ByteBuffer, ByteOrder}
import java.util.concurrent.{CompletableFuture, ExecutionException, Executor, ExecutorService, Executors, ThreadFactory}
import java.util.concurrent.atomic.{AtomicInteger, AtomicLong}

import scala.util.control.NonFatal

/** `length` bytes of a file at `position`. */
final case class ByteRange(position: Long, length: Long) {
  def end: Long = position + length
}

/** A read a batch needs, known before any of its bytes are read, and the reads
  * its bytes lead to (the value bytes a string page's offsets point at). */
final case class PlannedRead(range: ByteRange, andThen: ByteBuffer => Seq[ByteRange] = PlannedRead.Nothing)

object PlannedRead {
  val Nothing: ByteBuffer => Seq[ByteRange] = _ => Seq.empty
}

/** The storage reads of one batch, issued on the read pool as soon as they are
  * planned: ranges close to each other in the file are merged into one read,
  * the merged reads run in a few parallel tasks, and each range becomes usable
  * the moment its own read completes, so the decode of one column overlaps the
  * reads of the others (and, planned a batch early, the decode of the batch
  * before). Reads follow in a second round for planned reads with an
  * `andThen`, once their bytes are in.
  *
  * As a [[ByteReader]] it serves any range lying inside one merged read (waiting
  * for that read only) and reads anything else directly. Buffers come from
  * `arena`, which must not be reset before [[awaitAll]]. */
final class CoalescedReads private (
    source: RandomAccessSource,
    arena: ReadArena,
    first: Vector[CoalescedReads.Extent],
    second: CompletableFuture[Vector[CoalescedReads.Extent]])
    extends ByteReader {
  import CoalescedReads._

  override def path: String = source.path

  private val waited = new AtomicLong

  /** Nanoseconds the reading thread spent waiting for storage: for reads not
    * yet complete when their bytes were needed, and for direct reads. */
  def waitNanos: Long = waited.get

  /** Merged reads issued (both rounds; the second only once it is planned). */
  def requests: Int = first.size + (if (second.isDone && !second.isCompletedExceptionally) second.join().size else 0)

  override def read(position: Long, length: Long): ByteBuffer =
    find(first, position, length).orElse(find(secondRound, position, length)) match {
      case Some(e) => e.slice(position, length, waited)
      case None =>
        val t0 = System.nanoTime()
        try source.read(position, length, arena)
        finally waited.addAndGet(System.nanoTime() - t0)
    }

  /** The second round's reads, once planned; none if the first round failed
    * (the direct read then reports the storage error itself). */
  private def secondRound: Vector[Extent] =
    if (second.isDone && !second.isCompletedExceptionally) second.join()
    else {
      val t0 = System.nanoTime()
      try second.get()
      catch { case _: ExecutionException => Vector.empty }
      finally waited.addAndGet(System.nanoTime() - t0)
    }

  /** Waits until no read of this batch is in flight (failures are ignored:
    * they surface when their bytes are asked for). */
  def awaitAll(): Unit = {
    def quietly(f: CompletableFuture[_]): Unit =
      try f.get() catch { case _: ExecutionException => () }
    first.foreach(e => quietly(e.done))
    quietly(second)
    if (!second.isCompletedExceptionally) second.join().foreach(e => quietly(e.done))
  }
}

object CoalescedReads {

  /** Ranges at most this far apart are read as one, the gap with them: the
    * padding between buffers (64-byte aligned) and small holes, up to one
    * storage block. Larger gaps would read bytes that later batches read again. */
  val MaxGap: Long = 4L * 1024

  /** No merged read grows beyond this. */
  val MaxRead: Long = 16L * 1024 * 1024

  /** A batch's merged reads run in at most this many parallel tasks. */
  val TasksPerRound: Int = 4

  /** One merged read: its bytes land in `buf`; `done` completes when they have. */
  private[input] final class Extent(val range: ByteRange, val buf: ByteBuffer) {
    val done: CompletableFuture[Unit] = new CompletableFuture[Unit]

    def slice(position: Long, length: Long, waited: AtomicLong): ByteBuffer = {
      if (!done.isDone) {
        val t0 = System.nanoTime()
        try done.get()
        catch { case _: ExecutionException => () }
        finally waited.addAndGet(System.nanoTime() - t0)
      }
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
            pool: Executor = ReadPool.executor): CoalescedReads = {
    val first = extents(coalesce(planned.map(_.range)), arena)
    submit(source, first, pool)
    val followUps = planned.filter(_.andThen ne PlannedRead.Nothing)
    val second: CompletableFuture[Vector[Extent]] =
      if (followUps.isEmpty) CompletableFuture.completedFuture(Vector.empty)
      else CompletableFuture.allOf(first.map(_.done): _*).thenApplyAsync[Vector[Extent]](_ => {
        val more = followUps.flatMap { p =>
          find(first, p.range.position, p.range.length).toSeq.flatMap { e =>
            try p.andThen(e.slice(p.range.position, p.range.length, new AtomicLong))
            catch { case NonFatal(_) => Nil } // the decode reports what is wrong
          }
        }
        val needed = more.filter(r => r.position >= 0 && r.end <= source.size && find(first, r.position, r.length).isEmpty)
        val ext = extents(coalesce(needed), arena)
        submit(source, ext, pool)
        ext
      }, pool)
    new CoalescedReads(source, arena, first, second)
  }

  private def extents(ranges: Vector[ByteRange], arena: ReadArena): Vector[Extent] =
    ranges.map(r => new Extent(r, arena.take(r.length.toInt)))

  /** Runs the reads in up to [[TasksPerRound]] tasks of consecutive extents
    * with about the same number of bytes each. */
  private def submit(source: RandomAccessSource, extents: Vector[Extent], pool: Executor): Unit = {
    if (extents.isEmpty) return
    val total = extents.map(_.range.length).sum
    val target = math.max(1L, total / TasksPerRound)
    val groups = Vector.newBuilder[Vector[Extent]]
    var group = Vector.empty[Extent]
    var bytes = 0L
    extents.foreach { e =>
      group :+= e
      bytes += e.range.length
      if (bytes >= target) { groups += group; group = Vector.empty; bytes = 0L }
    }
    if (group.nonEmpty) groups += group
    groups.result().foreach { g =>
      pool.execute { () =>
        g.foreach { e =>
          try {
            source.readInto(e.range.position, e.buf.duplicate())
            e.done.complete(())
          } catch { case t: Throwable => e.done.completeExceptionally(t) }
        }
      }
    }
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

/** Daemon threads that run storage reads ahead of the decode, shared by every
  * reader in the JVM. */
object ReadPool {
  val Threads: Int = math.max(4, 2 * Runtime.getRuntime.availableProcessors)

  lazy val executor: ExecutorService = Executors.newFixedThreadPool(Threads, new ThreadFactory {
    private val n = new AtomicInteger
    override def newThread(r: Runnable): Thread = {
      val t = new Thread(r, s"lance-read-${n.incrementAndGet()}")
      t.setDaemon(true)
      t
    }
  })

  /** Runs each read on the calling thread, at once. */
  val caller: Executor = (r: Runnable) => r.run()
}
