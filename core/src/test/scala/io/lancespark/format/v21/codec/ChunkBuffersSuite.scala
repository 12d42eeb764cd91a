package io.lancespark.format.v21.codec

import org.scalatest.funsuite.AnyFunSuite

/** A batch's chunk arrays: lent at their exact size, distinct while lent,
  * reused by the thread's next batch once released, and kept only up to the
  * pool's limit. */
class ChunkBuffersSuite extends AnyFunSuite {

  test("arrays lent in one batch are distinct; released, the next batch on the thread gets the same ones") {
    val first = ChunkBuffers.forThisThread()
    val a = first.take(16384)
    val b = first.take(16384)
    val c = first.take(4000)
    assert(a.length == 16384 && b.length == 16384 && c.length == 4000)
    assert(!(a eq b))
    first.release()
    val next = ChunkBuffers.forThisThread()
    val again = Seq(next.take(16384), next.take(16384), next.take(4000))
    assert(again.take(2).forall(x => (x eq a) || (x eq b)) && !(again(0) eq again(1)))
    assert(again(2) eq c)
    assert(!(next.take(16384) eq a) || !(next.take(16384) eq b), "a third array of a size is a new one")
    next.release()
  }

  test("another thread's batches do not get this thread's arrays") {
    val mine = ChunkBuffers.forThisThread()
    val a = mine.take(12345)
    mine.release()
    var theirs: Array[Byte] = null
    val t = new Thread(() => { val o = ChunkBuffers.forThisThread(); theirs = o.take(12345); o.release() })
    t.start(); t.join()
    assert(theirs != null && !(theirs eq a))
  }

  test("the pool keeps at most its limit of bytes between batches") {
    val size = 1 << 20
    val count = (ChunkBuffers.MaxPooledBytes / size).toInt + 8
    val batch = ChunkBuffers.forThisThread()
    val lent = Seq.fill(count)(batch.take(size))
    batch.release()
    val next = ChunkBuffers.forThisThread()
    val again = Seq.fill(count)(next.take(size))
    val reused = again.count(x => lent.exists(_ eq x))
    // (the thread's pool may already hold a few small arrays of the tests above)
    val most = ChunkBuffers.MaxPooledBytes / size
    assert(reused <= most && reused >= most - 1, s"$reused of $count arrays reused, the limit holds $most")
    next.release()
  }
}
