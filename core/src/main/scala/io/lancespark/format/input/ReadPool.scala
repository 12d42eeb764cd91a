package io.lancespark.format.input

import java.util.concurrent.{Executor, ExecutorService, Executors, ThreadFactory}
import java.util.concurrent.atomic.AtomicInteger

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
