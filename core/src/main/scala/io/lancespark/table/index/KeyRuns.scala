package io.lancespark.table.index

import java.io.{BufferedInputStream, BufferedOutputStream, DataInputStream, EOFException}
import java.nio.{ByteBuffer, ByteOrder}

import scala.util.Using

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.ValueVector
import org.apache.arrow.vector.complex.BaseListVector

import io.lancespark.table.storage.{DatasetStorage, Snapshot}

/** Physical rows [from, until) of fragment `fragmentId`: a unit of an index build's scan. */
final case class RowChunk(fragmentId: Long, from: Long, until: Long) {
  def rows: Long = until - from
}

/** A sorted run of an index build over a keyed column ([[KeyCodec]]): the row
  * addresses of the null values (ascending), then `n` (key, row address)
  * pairs ordered by key, equal keys by address. */
final class KeyRun(val nullAddrs: Array[Long], val nulls: Int, val keys: Array[Long], val addrs: Array[Long],
                   val n: Int) {
  def rows: Long = nulls.toLong + n
}

/** The sorted runs of an index build over a keyed column: reading chunks of
  * fragments into primitive (key, address) arrays and sorting them
  * ([[KeySort]]), spilling a run to a file of the index's build directory,
  * and the streaming merge of runs into an index writer. A build's runs are
  * made from chunks in ascending row address order and numbered in that
  * order, so that the merge orders equal keys by run and gets them in
  * address order. */
object KeyRuns {

  /** Where a build's run files go (removed before the index is committed). */
  def buildDir(uuid: String): String = s"${IndexFileWriter.dir(uuid)}/_build"
  def runPath(uuid: String, run: Int): String = f"${buildDir(uuid)}/run-$run%05d.bin"

  /** Splits the live fragments of `snapshot` into chunks of at most
    * `maxRows` physical rows, in row address order. */
  def chunks(snapshot: Snapshot, maxRows: Long): Vector[RowChunk] =
    snapshot.fragments.sortBy(_.id).toVector.flatMap { f =>
      (0L until f.physicalRows by math.max(1L, maxRows)).map(s => RowChunk(f.id, s, math.min(f.physicalRows, s + maxRows)))
    }

  /** The runs of a build over `snapshot` with `cores` workers and at most
    * `maxRunRows` physical rows per run: a multiple of `cores` runs of
    * about equal rows, each a group of chunks, in row address order. */
  def plan(snapshot: Snapshot, cores: Int, maxRunRows: Long): Vector[Vector[RowChunk]] = {
    val total = snapshot.fragments.map(_.physicalRows).sum
    val c = math.max(1, cores)
    val m = math.max(1L, maxRunRows)
    val need = math.max(1L, total / m + (if (total % m == 0) 0L else 1L))
    val runs = math.min(Int.MaxValue.toLong, ((need + c - 1) / c) * c).toInt
    group(chunks(snapshot, math.max(1L, (total + runs - 1) / runs)), runs)
  }

  /** Reads and sorts `chunks` as run `run` of the build of index `uuid` and
    * writes it to its file; the run's rows and the file's size. */
  def sortToFile(snapshot: Snapshot, fieldId: Int, codec: KeyCodec, uuid: String, run: Int, chunks: Seq[RowChunk],
                 allocator: BufferAllocator): (Long, Long) = {
    val sorted = read(snapshot, fieldId, codec, chunks, allocator)
    (sorted.rows, write(snapshot.storage, runPath(uuid, run), sorted))
  }

  /** The results of `work`, each computed in a thread of its own (the first
    * here); the first error is thrown once all have ended. */
  def parallel[T](work: Vector[() => T]): Vector[T] = if (work.size <= 1) work.map(_()) else {
    val results = new Array[Any](work.size)
    val errors = new java.util.concurrent.ConcurrentLinkedQueue[Throwable]()
    val threads = work.indices.drop(1).map { i =>
      val t = new Thread(new Runnable {
        def run(): Unit = try results(i) = work(i)() catch { case e: Throwable => errors.add(e); () }
      }, s"lance-index-read-$i")
      t.setDaemon(true); t.start(); t
    }
    try results(0) = work(0)() catch { case e: Throwable => errors.add(e) }
    threads.foreach(_.join())
    if (!errors.isEmpty) throw errors.peek()
    results.toVector.map(_.asInstanceOf[T])
  }

  /** Groups `chunks` (in order) into `runs` consecutive groups of about equal rows. */
  def group(chunks: Vector[RowChunk], runs: Int): Vector[Vector[RowChunk]] = {
    val total = chunks.map(_.rows).sum
    val per = math.max(1L, (total + runs - 1) / math.max(1, runs))
    val out = Vector.newBuilder[Vector[RowChunk]]
    var cur = Vector.newBuilder[RowChunk]
    var rows = 0L
    var any = false
    chunks.foreach { c =>
      if (any && rows + c.rows > per) { out += cur.result(); cur = Vector.newBuilder[RowChunk]; rows = 0L; any = false }
      cur += c; rows += c.rows; any = true
    }
    if (any) out += cur.result()
    out.result()
  }

  /** Reads `chunks` (in order) of field `fieldId` (a list column: its
    * elements) into one sorted run. */
  def read(snapshot: Snapshot, fieldId: Int, codec: KeyCodec, chunks: Seq[RowChunk],
           allocator: BufferAllocator): KeyRun = {
    val cap = math.min(Int.MaxValue - 16L, math.max(16L, chunks.map(_.rows).sum)).toInt
    val b = new Builder(cap)
    chunks.foreach { c =>
      IndexBuild.scanBatches(snapshot, fieldId, c.fragmentId, c.from, c.until, allocator) { (v, selection, offsets, n) =>
        val base = c.fragmentId << 32
        v match {
          case l: BaseListVector =>
            val items = l.getChildrenFromFields.get(0)
            var i = 0
            while (i < n) {
              val row = if (selection == null) i else selection(i)
              if (!l.isNull(row)) {
                val addr = base | offsets(i).toLong
                var j = l.getElementStartIndex(row)
                val end = l.getElementEndIndex(row)
                while (j < end) { b.add(items, j, codec, addr); j += 1 }
              }
              i += 1
            }
          case _ =>
            var i = 0
            while (i < n) {
              b.add(v, if (selection == null) i else selection(i), codec, base | offsets(i).toLong)
              i += 1
            }
        }
      }
    }
    b.result()
  }

  private final class Builder(capacity: Int) {
    var keys = new Array[Long](capacity)
    var addrs = new Array[Long](capacity)
    var n = 0
    var nullAddrs = new Array[Long](16)
    var nulls = 0

    def add(v: ValueVector, i: Int, codec: KeyCodec, addr: Long): Unit =
      if (v.isNull(i)) {
        if (nulls == nullAddrs.length) nullAddrs = java.util.Arrays.copyOf(nullAddrs, grow(nulls))
        nullAddrs(nulls) = addr; nulls += 1
      } else {
        if (n == keys.length) { keys = java.util.Arrays.copyOf(keys, grow(n)); addrs = java.util.Arrays.copyOf(addrs, grow(n)) }
        keys(n) = codec.key(v, i); addrs(n) = addr; n += 1
      }

    private def grow(size: Int): Int = {
      if (size >= Int.MaxValue - 16) throw new IllegalStateException(s"an index build's run holds at most ${Int.MaxValue - 16} values")
      math.min(Int.MaxValue - 16L, size * 2L + 16).toInt
    }

    def result(): KeyRun = {
      KeySort.sort(keys, addrs, n)
      new KeyRun(nullAddrs, nulls, keys, addrs, n)
    }
  }

  private val Magic = 0x4c4b5231 // "LKR1"
  private val Block = 65536

  /** Writes `run` to `relative` (a run file: magic, null count, pair count,
    * the null addresses, then blocks of at most 65,536 keys followed by their
    * addresses; little endian). Returns the file's size. */
  def write(storage: DatasetStorage, relative: String, run: KeyRun): Long = {
    val path = storage.resolve(relative, "index build run")
    val buf = ByteBuffer.allocate(16 * Block).order(ByteOrder.LITTLE_ENDIAN)
    Using.resource(new BufferedOutputStream(storage.fs.create(path, true), 1 << 20)) { out =>
      buf.putInt(Magic).putLong(run.nulls.toLong).putLong(run.n.toLong)
      out.write(buf.array(), 0, buf.position())
      def longs(a: Array[Long], from: Int, count: Int): Unit = {
        buf.clear(); buf.asLongBuffer().put(a, from, count)
        out.write(buf.array(), 0, count * 8)
      }
      var i = 0
      while (i < run.nulls) { val c = math.min(Block, run.nulls - i); longs(run.nullAddrs, i, c); i += c }
      i = 0
      while (i < run.n) {
        val c = math.min(Block, run.n - i)
        longs(run.keys, i, c); longs(run.addrs, i, c)
        i += c
      }
    }
    storage.fs.getFileStatus(path).getLen
  }

  /** A sorted run read block by block: its null addresses, then its pairs. */
  trait Source extends AutoCloseable {
    def nulls: Long
    def pairs: Long
    /** The next null addresses into `into` (up to its length); 0 when none are left. */
    def readNulls(into: Array[Long]): Int
    /** The next pairs into `keys`/`addrs` (up to their length); 0 when none are left (after the nulls). */
    def readPairs(keys: Array[Long], addrs: Array[Long]): Int
  }

  /** A run held in memory as a source. */
  def source(run: KeyRun): Source = new Source {
    private var nullAt = 0
    private var at = 0
    def nulls: Long = run.nulls.toLong
    def pairs: Long = run.n.toLong
    def readNulls(into: Array[Long]): Int = {
      val c = math.min(into.length, run.nulls - nullAt)
      System.arraycopy(run.nullAddrs, nullAt, into, 0, c); nullAt += c; c
    }
    def readPairs(keys: Array[Long], addrs: Array[Long]): Int = {
      val c = math.min(keys.length, run.n - at)
      System.arraycopy(run.keys, at, keys, 0, c); System.arraycopy(run.addrs, at, addrs, 0, c); at += c; c
    }
    def close(): Unit = ()
  }

  /** A run file as a source (reads it sequentially, one block at a time). */
  def open(storage: DatasetStorage, relative: String): Source = {
    val path = storage.resolve(relative, "index build run")
    val in = new DataInputStream(new BufferedInputStream(storage.fs.open(path), 1 << 20))
    try {
      val head = new Array[Byte](20)
      in.readFully(head)
      val h = ByteBuffer.wrap(head).order(ByteOrder.LITTLE_ENDIAN)
      if (h.getInt != Magic) throw new IllegalStateException(s"${storage.uri}: $relative is not an index build run")
      val (nullCount, pairCount) = (h.getLong, h.getLong)
      new FileSource(in, nullCount, pairCount, s"${storage.uri}/$relative")
    } catch { case e: Throwable => in.close(); throw e }
  }

  private final class FileSource(in: DataInputStream, val nulls: Long, val pairs: Long, where: String) extends Source {
    private val bytes = new Array[Byte](8 * Block)
    private val buf = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN)
    private var nullsLeft = nulls
    private var pairsLeft = pairs
    private var blockLeft = 0 // keys of the current block not yet handed out
    private var blockKeys = new Array[Long](0)
    private var blockAddrs = new Array[Long](0)
    private var blockAt = 0

    private def longs(into: Array[Long], at: Int, count: Int): Unit =
      try {
        in.readFully(bytes, 0, count * 8)
        buf.clear(); buf.asLongBuffer().get(into, at, count)
      } catch { case e: EOFException => throw new IllegalStateException(s"$where: index build run ends early", e) }

    def readNulls(into: Array[Long]): Int = {
      val c = math.min(math.min(into.length, Block).toLong, nullsLeft).toInt
      if (c > 0) { longs(into, 0, c); nullsLeft -= c }
      c
    }

    def readPairs(keys: Array[Long], addrs: Array[Long]): Int = {
      while (nullsLeft > 0) { val skip = math.min(Block.toLong, nullsLeft).toInt; in.readFully(bytes, 0, skip * 8); nullsLeft -= skip }
      if (blockLeft == 0 && pairsLeft > 0) {
        val c = math.min(Block.toLong, pairsLeft).toInt
        if (blockKeys.length < c) { blockKeys = new Array[Long](c); blockAddrs = new Array[Long](c) }
        longs(blockKeys, 0, c); longs(blockAddrs, 0, c)
        blockLeft = c; blockAt = 0; pairsLeft -= c
      }
      val c = math.min(keys.length, blockLeft)
      System.arraycopy(blockKeys, blockAt, keys, 0, c); System.arraycopy(blockAddrs, blockAt, addrs, 0, c)
      blockAt += c; blockLeft -= c
      c
    }

    def close(): Unit = in.close()
  }

  /** Merges `sources` (runs in address order) into `writer`: every null
    * address (source by source), then the pairs by key, equal keys by
    * source, handed over in batches. Streaming: holds a block of each source. */
  def merge(sources: IndexedSeq[Source], codec: KeyCodec, writer: SortedIndexWriter): Unit = {
    val buf = new Array[Long](Block)
    sources.foreach { s =>
      var c = s.readNulls(buf)
      while (c > 0) { var i = 0; while (i < c) { writer.add(null, buf(i)); i += 1 }; c = s.readNulls(buf) }
    }
    val k = sources.size
    val outK = new Array[Long](Block)
    val outA = new Array[Long](Block)
    if (k == 1) {
      var c = sources(0).readPairs(outK, outA)
      while (c > 0) { writer.addKeys(codec, outK, outA, c); c = sources(0).readPairs(outK, outA) }
    } else if (k > 1) {
      val bufK = Array.fill(k)(new Array[Long](4096))
      val bufA = Array.fill(k)(new Array[Long](4096))
      val len = new Array[Int](k)
      val pos = new Array[Int](k)
      val head = new Array[Long](k) // each source's current key
      // a binary heap of sources by (current key, source)
      val heap = new Array[Int](k)
      var size = 0
      def down(at0: Int): Unit = {
        var at = at0
        val x = heap(at)
        val hx = head(x)
        var done = false
        while (!done) {
          val l = 2 * at + 1
          if (l >= size) done = true
          else {
            val r = l + 1
            val c = if (r < size && (head(heap(r)) < head(heap(l)) ||
              (head(heap(r)) == head(heap(l)) && heap(r) < heap(l)))) r else l
            val hc = head(heap(c))
            if (hc < hx || (hc == hx && heap(c) < x)) { heap(at) = heap(c); at = c } else done = true
          }
        }
        heap(at) = x
      }
      var s = 0
      while (s < k) {
        len(s) = sources(s).readPairs(bufK(s), bufA(s))
        if (len(s) > 0) { heap(size) = s; size += 1; head(s) = bufK(s)(0) }
        s += 1
      }
      var i = size / 2 - 1
      while (i >= 0) { down(i); i -= 1 }
      var o = 0
      while (size > 0) {
        val top = heap(0)
        val ks = bufK(top); val as = bufA(top)
        var p = pos(top)
        // the top source's keys up to the next source's head go out in a row
        val limit = if (size == 1) Long.MaxValue else {
          val a = heap(1); val b = if (size > 2) heap(2) else a
          if (head(b) < head(a) || (head(b) == head(a) && b < a)) head(b) else head(a)
        }
        val second = if (size == 1) -1 else {
          val a = heap(1); val b = if (size > 2) heap(2) else a
          if (head(b) < head(a) || (head(b) == head(a) && b < a)) b else a
        }
        var go = true
        while (go) {
          outK(o) = ks(p); outA(o) = as(p); o += 1; p += 1
          if (o == Block) { writer.addKeys(codec, outK, outA, o); o = 0 }
          go = p < len(top) && (ks(p) < limit || (ks(p) == limit && top < second))
        }
        pos(top) = p
        if (p == len(top)) {
          len(top) = sources(top).readPairs(bufK(top), bufA(top)); pos(top) = 0
          if (len(top) == 0) { size -= 1; heap(0) = heap(size) } else head(top) = bufK(top)(0)
        } else head(top) = ks(p)
        if (size > 0) down(0)
      }
      if (o > 0) writer.addKeys(codec, outK, outA, o)
    }
  }

  /** Feeds `writer` from `produce` (e.g. a merge) running in a thread of its
    * own, through a short queue of blocks: the production of the sorted pairs
    * and the writer's page encoding overlap. Errors of either side end both
    * and are thrown here. */
  def piped(writer: SortedIndexWriter, codec: KeyCodec)(produce: SortedIndexWriter => Unit): Unit = {
    val queue = new java.util.concurrent.ArrayBlockingQueue[Piece](4)
    val proxy = new SortedIndexWriter {
      private var nulls = new Array[Long](Block)
      private var nullCount = 0
      private var count = 0L
      private def flushNulls(): Unit = if (nullCount > 0) {
        queue.put(Nulls(nulls, nullCount)); nulls = new Array[Long](Block); nullCount = 0
      }
      def add(value: Any, addr: Long): Unit = {
        if (value == null) {
          nulls(nullCount) = addr; nullCount += 1
          if (nullCount == Block) flushNulls()
        } else { flushNulls(); queue.put(One(value, addr)) }
        count += 1
      }
      override def addKeys(c: KeyCodec, keys: Array[Long], addrs: Array[Long], n: Int): Unit = {
        flushNulls()
        queue.put(Keys(c, java.util.Arrays.copyOf(keys, n), java.util.Arrays.copyOf(addrs, n)))
        count += n
      }
      def finish(): Seq[(String, Long)] = { flushNulls(); queue.put(End); Nil }
      def rowsAdded: Long = count
      def abort(): Unit = ()
    }
    val producer = new Thread(new Runnable {
      def run(): Unit =
        try { produce(proxy); proxy.finish(); () }
        catch {
          case _: InterruptedException => ()
          case e: Throwable => try queue.put(Failed(e)) catch { case _: InterruptedException => () }
        }
    }, "lance-index-merge")
    producer.setDaemon(true)
    producer.start()
    try {
      var done = false
      while (!done) queue.take() match {
        case Keys(c, k, a) => writer.addKeys(c, k, a, k.length)
        case Nulls(a, n) => var i = 0; while (i < n) { writer.add(null, a(i)); i += 1 }
        case One(v, a) => writer.add(v, a)
        case Failed(e) => throw e
        case End => done = true
      }
      producer.join()
    } catch { case e: Throwable => producer.interrupt(); throw e }
  }

  private sealed trait Piece
  private final case class Keys(codec: KeyCodec, keys: Array[Long], addrs: Array[Long]) extends Piece
  private final case class Nulls(addrs: Array[Long], n: Int) extends Piece
  private final case class One(value: Any, addr: Long) extends Piece
  private final case class Failed(e: Throwable) extends Piece
  private case object End extends Piece
}
