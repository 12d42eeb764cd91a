package io.lancespark.spark.read

import org.apache.arrow.memory.{BufferAllocator, RootAllocator}

/** One root allocator per JVM; each reader takes a child and closes it. */
object ArrowAllocators {
  lazy val root: BufferAllocator = new RootAllocator(Long.MaxValue)
}
