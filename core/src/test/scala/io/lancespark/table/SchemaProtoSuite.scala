package io.lancespark.table

import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._
import scala.util.Try

import com.google.protobuf.{ByteString, UnknownFieldSet}
import org.apache.hadoop.conf.Configuration
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.proto.file.{Field => PbField}
import io.lancespark.schema.{FieldEncoding, LanceSchema, SchemaProto}
import io.lancespark.table.storage.{Dataset, DatasetStorage}

/** The native schema model and the manifest's protobuf field list: a manifest's
  * fields (every fixture pylance and old releases wrote) decode into
  * [[LanceSchema]] and encode back unchanged, attributes the model does not
  * hold included, so a commit that rewrites the schema loses nothing. */
class SchemaProtoSuite extends AnyFunSuite {

  private val repoRoot: Path = {
    var p = Path.of("").toAbsolutePath
    while (p != null && !Files.exists(p.resolve("build.sbt"))) p = p.getParent
    if (p == null) Path.of("").toAbsolutePath else p
  }
  private val fixtures: Path = Path.of(sys.env.getOrElse("LANCE_FIXTURES",
    repoRoot.resolve("spark-connector/target/fixtures").toString))

  private def datasets: Seq[Path] =
    if (!Files.isDirectory(fixtures)) Nil
    else Files.walk(fixtures, 4).iterator().asScala.filter(p => Files.isDirectory(p.resolve("_versions"))).toVector

  /** Top-level fields as the model writes them: parent -1 (old writers left 0 or an unknown id). */
  private def normalized(pb: Seq[PbField]): Seq[PbField] = {
    val ids = pb.map(_.getId).toSet
    pb.map(f => if (f.getParentId >= 0 && ids.contains(f.getParentId)) f else f.toBuilder.setParentId(-1).build())
  }

  test("every fixture's manifest fields decode and encode back unchanged") {
    val manifests = datasets.flatMap(d => Try(Dataset.open(DatasetStorage(d.toString, new Configuration()), None)).toOption)
    assume(manifests.size >= 10, s"fixtures under $fixtures (make fixtures)")
    manifests.foreach { snap =>
      val original = snap.manifest.getFieldsList.asScala.toVector
      val schema = snap.schema
      assert(SchemaProto.encode(schema, original) == normalized(original), snap.storage.uri)
      // from the model alone: every attribute it holds
      val fresh = SchemaProto.encode(schema, Nil)
      def held(f: PbField) = (f.getId, f.getName, f.getLogicalType, f.getNullable, f.getEncodingValue,
        f.getExtensionName, f.getUnenforcedPrimaryKey, f.getMetadataMap.asScala.toMap)
      assert(fresh.map(held) == normalized(original).map(held), snap.storage.uri)
    }
  }

  test("what the model does not hold survives an edit of the schema") {
    val unknown = UnknownFieldSet.newBuilder()
      .addField(13, UnknownFieldSet.Field.newBuilder().addVarint(2L).build()).build()
    val notUtf8 = ByteString.copyFrom(Array[Byte](-1, 0, -2))
    val a = PbField.newBuilder().setId(0).setParentId(-1).setName("a").setLogicalType("int64").setNullable(true)
      .putMetadata("raw", notUtf8).setUnknownFields(unknown).build()
    val b = PbField.newBuilder().setId(1).setParentId(-1).setName("b").setLogicalType("string").setNullable(true)
      .setEncoding(io.lancespark.proto.file.Encoding.VAR_BINARY).setUnenforcedPrimaryKey(true).build()
    val schema = LanceSchema.fromProto(Seq(a, b), Map.empty, "test")
    assert(schema.fields(1).encoding == FieldEncoding.VarBinary && schema.fields(1).primaryKey)
    val renamed = schema.copy(fields = schema.fields.map(f => if (f.name == "b") f.copy(name = "c") else f))
    val out = SchemaProto.encode(renamed, Seq(a, b))
    assert(out.head == a)  // unknown field 13 and the non-UTF-8 metadata bytes kept
    assert(out(1) == b.toBuilder.setName("c").build())
    // the edit itself is applied: metadata changed in the model replaces the stored one
    val edited = schema.copy(fields = schema.fields.map(f => if (f.name == "a") f.copy(metadata = Map("k" -> "v")) else f))
    assert(SchemaProto.encode(edited, Seq(a, b)).head.getMetadataMap.asScala.toMap == Map("k" -> ByteString.copyFromUtf8("v")))
  }
}
