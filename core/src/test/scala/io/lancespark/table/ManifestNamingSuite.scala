package io.lancespark.table

import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.schema.LanceFormatException
import io.lancespark.table.storage.ManifestNaming

class ManifestNamingSuite extends AnyFunSuite {

  test("V2 names are u64::MAX minus the version, 20 digits") {
    // 2^64 - 1 = 18446744073709551615
    assert(ManifestNaming.V2.fileName(1) == "18446744073709551614.manifest")
    assert(ManifestNaming.V2.fileName(0) == "18446744073709551615.manifest")
    assert(ManifestNaming.V2.fileName(123456789L) == "18446744073586094826.manifest")
  }

  test("V1 names are the plain version") {
    assert(ManifestNaming.V1.fileName(42) == "42.manifest")
  }

  test("parse inverts both schemes and ignores other files") {
    for (v <- Seq(0L, 1L, 7L, 1L << 40)) {
      assert(ManifestNaming.parse(ManifestNaming.V1.fileName(v)).contains(ManifestNaming.V1 -> v))
      assert(ManifestNaming.parse(ManifestNaming.V2.fileName(v)).contains(ManifestNaming.V2 -> v))
    }
    assert(ManifestNaming.parse("latest_version_hint.json").isEmpty)
    assert(ManifestNaming.parse("1.manifest-3f2a").isEmpty)
  }

  test("a mixture of schemes is an error naming the dataset") {
    val e = intercept[LanceFormatException] {
      ManifestNaming.scan("file:/data/x.lance", Seq("1.manifest", "18446744073709551613.manifest"))
    }
    assert(e.getMessage.contains("file:/data/x.lance") && e.getMessage.contains("mixes"))
  }

  test("scan sorts versions") {
    val names = Seq(3L, 1L, 2L).map(ManifestNaming.V2.fileName)
    assert(ManifestNaming.scan("d", names) == (ManifestNaming.V2 -> Seq(1L, 2L, 3L)))
  }
}
