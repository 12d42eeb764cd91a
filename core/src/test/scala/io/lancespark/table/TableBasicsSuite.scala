package io.lancespark.table

import java.nio.{ByteBuffer, ByteOrder}

import com.google.protobuf.ByteString
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceFormatException
import io.lancespark.proto.table.{EncodedU64Array, U64Segment, RowIdSequence => PbSeq}
import io.lancespark.table.model.{FeatureFlags, RowIdSequence}
import io.lancespark.table.storage.{Dataset, DatasetStorage}

class TableBasicsSuite extends AnyFunSuite {

  private def u16(base: Long, offsets: Int*): EncodedU64Array = {
    val b = ByteBuffer.allocate(offsets.size * 2).order(ByteOrder.LITTLE_ENDIAN)
    offsets.foreach(o => b.putShort(o.toShort))
    EncodedU64Array.newBuilder().setU16Array(
      EncodedU64Array.U16Array.newBuilder().setBase(base).setOffsets(ByteString.copyFrom(b.array()))).build()
  }

  test("row id sequences decode every segment kind") {
    val u64 = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(7L).putLong(3L)
    val seq = PbSeq.newBuilder()
      .addSegments(U64Segment.newBuilder().setRange(U64Segment.Range.newBuilder().setStart(10).setEnd(13)))
      .addSegments(U64Segment.newBuilder().setRangeWithHoles(
        U64Segment.RangeWithHoles.newBuilder().setStart(100).setEnd(106).setHoles(u16(100, 1, 4))))
      .addSegments(U64Segment.newBuilder().setRangeWithBitmap(
        // bits 0, 2 and 9 set (LSB first): 200, 202, 209
        U64Segment.RangeWithBitmap.newBuilder().setStart(200).setEnd(210)
          .setBitmap(ByteString.copyFrom(Array[Byte](0x05, 0x02)))))
      .addSegments(U64Segment.newBuilder().setArray(EncodedU64Array.newBuilder().setU64Array(
        EncodedU64Array.U64Array.newBuilder().setValues(ByteString.copyFrom(u64.array())))))
      .build()
    val ids = RowIdSequence.parse(seq.toByteArray, "test")
    val all = Seq[Long](10, 11, 12, 100, 102, 103, 105, 200, 202, 209, 7, 3)
    assert(ids.length == all.size)
    assert(ids.slice(0, all.size).toSeq == all)
    assert(ids.slice(2, 9).toSeq == all.slice(2, 9))
    assert(ids.slice(11, 12).toSeq == Seq(3L))
  }

  test("unknown reader feature flags are refused with the dataset and version named") {
    FeatureFlags.checkReadable(1 | 2 | 8, "d", 3)
    val e = intercept[LanceFormatException](FeatureFlags.checkReadable(1L | (1L << 9), "file:/x.lance", 3))
    assert(e.getMessage.contains("file:/x.lance") && e.getMessage.contains("version 3") &&
      e.getMessage.contains("0x200"))
  }

  test("paths escaping the dataset directory are refused") {
    val dir = java.nio.file.Files.createTempDirectory("lance-storage")
    val storage = DatasetStorage(dir.toString, new Configuration())
    assert(storage.resolve("data/a.lance", "data file").toString.endsWith("/data/a.lance"))
    for (bad <- Seq("data/../../etc/passwd", "/etc/passwd", "data/./x", "file:/etc/passwd")) {
      val e = intercept[LanceFormatException](storage.resolve(bad, "data file"))
      assert(e.getMessage.contains("escapes the dataset directory") && e.getMessage.contains(bad))
    }
  }

  test("a directory without manifests is not a dataset, and says so") {
    val dir = java.nio.file.Files.createTempDirectory("lance-empty")
    val e = intercept[LanceFormatException](Dataset.open(dir.toString, None, new Configuration()))
    assert(e.getMessage.contains("not a Lance dataset"))
  }
}
