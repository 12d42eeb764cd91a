package io.lancespark.spark.read

import java.nio.charset.StandardCharsets.UTF_8

import scala.util.Using

import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.VarCharVector
import org.apache.spark.sql.types.StringType
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/** String columns hand Spark character counts only when they are true: batches
  * of ASCII values get them set, any other batch leaves Spark to count. */
class AsciiStringsSuite extends AnyFunSuite {

  // what Spark has cached for a string (-1: not counted yet), read before anything asks;
  // Spark 3.5's UTF8String has no such field (the fast path is off there)
  private lazy val cached = {
    val f = classOf[UTF8String].getDeclaredField("numChars")
    f.setAccessible(true)
    f
  }

  private def column[T](values: Seq[Option[String]])(f: LanceColumnVector => T): T =
    Using.resource(new RootAllocator()) { alloc =>
      Using.resource(new VarCharVector("s", alloc)) { v =>
        v.allocateNew()
        values.zipWithIndex.foreach {
          case (Some(s), i) => v.setSafe(i, s.getBytes(UTF_8))
          case (None, i)    => v.setNull(i)
        }
        v.setValueCount(values.size)
        f(new LanceColumnVector(StringType, v))
      }
    }

  private def chars(s: String): Int = s.codePointCount(0, s.length)

  private val sparkMajor: Int = org.apache.spark.SPARK_VERSION.takeWhile(_ != '.').toInt

  test("Spark 4 has the field the counts go to; Spark 3.5 does not, and strings are made as before") {
    assert(AsciiStrings.available == (sparkMajor >= 4), org.apache.spark.SPARK_VERSION)
  }

  test("ASCII detection: a byte at or above 0x80 anywhere in a range, at every alignment") {
    for (length <- Seq(0, 1, 7, 8, 9, 31, 32, 33, 64, 100); at <- 0 until length) {
      val bytes = Array.fill[Byte](length + 16)('a'.toByte)
      bytes(8 + at) = 0x80.toByte
      Using.resource(new RootAllocator()) { alloc =>
        Using.resource(alloc.buffer(bytes.length.toLong)) { buf =>
          buf.setBytes(0, bytes)
          val address = buf.memoryAddress()
          assert(!AsciiStrings.isAscii(address + 8, length), s"byte $at of $length")
          // the bytes around the range are not looked at
          if (at > 0) assert(AsciiStrings.isAscii(address + 8, at), s"first $at of $length")
          assert(AsciiStrings.isAscii(address + 9 + at, length - at - 1), s"after byte $at of $length")
        }
      }
    }
  }

  test("a batch of ASCII strings: counts set (where the field exists), equal to the strings' lengths") {
    val values = Seq(Some("https://example.com/a"), None, Some(""), Some("x" * 70), Some("tail"))
    column(values) { c =>
      values.zipWithIndex.foreach {
        case (Some(s), i) =>
          val u = c.getUTF8String(i)
          if (AsciiStrings.available) assert(cached.getInt(u) == s.length, s"row $i")
          assert(u.numChars() == s.length && u.toString == s, s"row $i")
        case (None, i) => assert(c.getUTF8String(i) == null)
      }
    }
  }

  test("a batch with one multi-byte character, wherever it is: Spark counts, and counts right") {
    val base = (0 until 40).map(i => s"value-$i")
    for (row <- Seq(0, 17, 39); text <- Seq("é", "naïve", "日本", "x\u00ff", "🙂!")) {
      val values = base.updated(row, text).map(Some(_))
      column(values) { c =>
        values.flatten.zipWithIndex.foreach { case (s, i) =>
          val u = c.getUTF8String(i)
          if (AsciiStrings.available) assert(cached.getInt(u) == -1, s"row $i of a batch with '$text' at $row")
          assert(u.numChars() == chars(s) && u.toString == s, s"row $i")
        }
      }
    }
  }
}
