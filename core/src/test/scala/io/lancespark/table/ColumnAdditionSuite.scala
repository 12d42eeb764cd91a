package io.lancespark.table

import java.nio.file.Files

import scala.jdk.CollectionConverters._

import org.apache.arrow.vector.types.FloatingPointPrecision
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}
import org.apache.hadoop.conf.Configuration
import org.roaringbitmap.RoaringBitmap
import org.scalatest.funsuite.AnyFunSuite

import io.lancespark.proto.file.{Field => PbField}
import io.lancespark.schema.LanceSchema
import io.lancespark.table.commit.{AddColumnFiles, AppendFragments, AppendWithSchema, CommitConflictException, CommitSettings, Committer, FragmentColumns, OverwriteDataset, ReplaceSchema, RowLevelChange}
import io.lancespark.table.evolution.ColumnAddition
import io.lancespark.table.model.{DataFileVersion, FieldList}
import io.lancespark.table.storage.{Dataset, DatasetStorage, RowDeletions, TransactionFile}
import io.lancespark.table.model.WrittenFragment
import io.lancespark.table.storage.Snapshot

/** The commit side of adding columns (Merge) and of appends that add fields:
  * manifests, transactions, field ids and the conflict rules. Metadata only
  * (the data files are names); the files themselves are checked against
  * pylance in integration-tests/test_add_columns.py. */
class ColumnAdditionSuite extends AnyFunSuite {

  private def leaf(name: String, id: Int, logical: String) = PbField.newBuilder().setName(name).setId(id)
    .setParentId(-1).setLogicalType(logical).setType(PbField.Type.LEAF).setNullable(true).build()
  private val schema = LanceSchema.fromProto(Seq(leaf("id", 0, "int64"), leaf("v", 1, "string")), Map.empty, "test")
  private def frag(name: String, rows: Long, ids: Vector[Int] = Vector(0, 1)) =
    WrittenFragment(name, ids, ids.indices.toVector, rows, 100L, DataFileVersion.V2_1)
  private def fresh(): DatasetStorage =
    DatasetStorage(Files.createTempDirectory("lance-addcol").resolve("t.lance").toString, new Configuration())
  private def create(s: DatasetStorage): Snapshot =
    Committer.commit(s, None, OverwriteDataset(Seq(frag("a.lance", 10), frag("b.lance", 20)), schema,
      DataFileVersion.V2_1), CommitSettings())
  private val score = new Schema(java.util.Arrays.asList(
    new Field("score", FieldType.nullable(new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)), null),
    new Field("tag", FieldType.nullable(ArrowType.Utf8.INSTANCE), null)))
  private def files(plan: ColumnAddition, prefix: String): Seq[FragmentColumns] =
    plan.fragments.toSeq.sortBy(_._1).map { case (id, st) =>
      FragmentColumns(id, frag(s"$prefix-$id.lance", st.physicalRows, plan.columns.allFields.map(_.id)))
    }

  test("each fragment gains a file of the new columns; the schema gains fields above the max id; a Merge") {
    val s = fresh()
    val v1 = create(s)
    val plan = ColumnAddition.plan(v1, score)
    assert(plan.columns.fields.map(f => f.name -> f.id) == Vector("score" -> 2, "tag" -> 3))
    assert(plan.fileVersion == DataFileVersion.V2_1)
    val v2 = ColumnAddition.commit(s, plan, files(plan, "c"))
    assert(v2.version == 2)
    assert(v2.schema.fields.map(_.name) == Vector("id", "v", "score", "tag"))
    assert(v2.fragments.map(_.files.map(_.path)) == Vector(Vector("a.lance", "c-0.lance"), Vector("b.lance", "c-1.lance")))
    assert(v2.fragments.map(_.files(1).fieldIds) == Vector(Vector(2, 3), Vector(2, 3)))
    val txn = TransactionFile.read(s, v2.manifest.getTransactionFile).get
    assert(txn.hasMerge && txn.getMerge.getFragmentsCount == 2 && txn.getMerge.getSchemaCount == 4)
    assert(txn.getReadVersion == 1)
    // the version before keeps its schema
    assert(Dataset.open(s, Some(1L)).schema.fields.map(_.name) == Vector("id", "v"))
  }

  test("ids of dropped columns still in data files are not reused") {
    val s = fresh()
    val v1 = create(s)
    val dropped = FieldList(v1.schema, "t").drop(Seq("v"), ifExists = false)
    val v2 = Committer.commit(s, Some(1L), ReplaceSchema(dropped.schema), CommitSettings())
    assert(v2.schema.maxFieldId == 0)
    assert(ColumnAddition.plan(v2, score).columns.fields.map(_.id) == Vector(2, 3))
  }

  test("refused: existing names, non-nullable columns, a fragment without its file, a wrong row count") {
    val s = fresh()
    val v1 = create(s)
    val e1 = intercept[IllegalArgumentException](ColumnAddition.plan(v1, new Schema(java.util.Collections.singletonList(
      new Field("v", FieldType.nullable(ArrowType.Utf8.INSTANCE), null)))))
    assert(e1.getMessage.contains("already in the dataset") && e1.getMessage.contains("v"))
    val e2 = intercept[IllegalArgumentException](ColumnAddition.plan(v1, new Schema(java.util.Collections.singletonList(
      new Field("x", FieldType.notNullable(ArrowType.Utf8.INSTANCE), null)))))
    assert(e2.getMessage.contains("nullable"))
    val plan = ColumnAddition.plan(v1, score)
    val e3 = intercept[IllegalStateException](ColumnAddition.commit(s, plan, files(plan, "c").take(1)))
    assert(e3.getMessage.contains("fragment 1"))
    val bad = files(plan, "d").map(f => f.copy(file = f.file.copy(physicalRows = 3)))
    assert(intercept[IllegalStateException](ColumnAddition.commit(s, plan, bad)).getMessage.contains("physical rows"))
    assert(Dataset.open(s, None).version == 1)
  }

  test("conflicts: an append, an update, a compaction or another addition since the read version") {
    val s = fresh()
    val v1 = create(s)
    val plan = ColumnAddition.plan(v1, score)
    Committer.commit(s, Some(1L), AppendFragments(Seq(frag("n.lance", 5))), CommitSettings())
    val e = intercept[CommitConflictException](ColumnAddition.commit(s, plan, files(plan, "c")))
    assert(e.getMessage.contains("version 2") && e.getMessage.contains("appended fragments") &&
      e.getMessage.contains("add_columns again"), e.getMessage)
    val v2 = Dataset.open(s, None)
    val next = ColumnAddition.plan(v2, score)
    ColumnAddition.commit(s, next, files(next, "x"))
    val again = intercept[CommitConflictException](ColumnAddition.commit(s, next, files(next, "y")))
    assert(again.getMessage.contains("merge"), again.getMessage)
    // an append read before an addition conflicts too (its fragments would miss the columns)
    val late = intercept[CommitConflictException](
      Committer.commit(s, Some(2L), AppendFragments(Seq(frag("z.lance", 5))), CommitSettings()))
    assert(late.getMessage.contains("merge"), late.getMessage)
  }

  test("a concurrent delete is rebased onto: its deletion files stay, removed fragments are left out") {
    val s = fresh()
    val v1 = create(s)
    val plan = ColumnAddition.plan(v1, score)
    val rows = new RoaringBitmap()
    rows.add(1, 4)
    val d0 = RowDeletions.prepare(s, 0L, 10L, None, rows, 1L)
    val drop1 = RowDeletions.prepare(s, 1L, 20L, None, RowDeletions.all(20L), 1L)
    Committer.commit(s, Some(1L), RowLevelChange(Seq(d0, drop1), Nil, "x"), CommitSettings())
    val v3 = ColumnAddition.commit(s, plan, files(plan, "c"))
    assert(v3.version == 3)
    assert(v3.fragments.map(_.id) == Vector(0L))
    assert(v3.fragments.head.files.map(_.path) == Vector("a.lance", "c-0.lance"))
    assert(v3.fragments.head.deletedRows == 3)
  }

  test("replacing a column: old files keep their paths with the field id -2, the new file lists it (an Update); again: a DataReplacement") {
    val s = fresh()
    val v1 = create(s)
    def upd(prefix: String) = Seq(FragmentColumns(0L, frag(s"$prefix-0.lance", 10, Vector(1))),
      FragmentColumns(1L, frag(s"$prefix-1.lance", 20, Vector(1))))
    val v2 = Committer.commit(s, Some(1L), AddColumnFiles(upd("u"), v1.schema, replaces = Set(1)), CommitSettings())
    assert(v2.schema == v1.schema)
    assert(v2.fragments.map(_.files.map(f => f.path -> f.fieldIds)) == Vector(
      Vector("a.lance" -> Vector(0, -2), "u-0.lance" -> Vector(1)),
      Vector("b.lance" -> Vector(0, -2), "u-1.lance" -> Vector(1))))
    // column indices stay as they were (the tombstoned column is still in the old file)
    assert(v2.fragments.head.files.head.columnIndices == Vector(0, 1))
    val txn = TransactionFile.read(s, v2.manifest.getTransactionFile).get
    assert(txn.hasUpdate && txn.getUpdate.getUpdatedFragmentsCount == 2 && txn.getReadVersion == 1)
    assert(txn.getUpdate.getFieldsModifiedList.asScala.toSeq == Seq(1) &&
      txn.getUpdate.getUpdateMode == io.lancespark.proto.table.Transaction.UpdateMode.REWRITE_COLUMNS)
    // again: the first new file holds exactly the column, so the new one takes its place
    val v3 = Committer.commit(s, Some(2L), AddColumnFiles(upd("w"), v2.schema, replaces = Set(1)), CommitSettings())
    assert(v3.fragments.map(_.files.map(f => f.path -> f.fieldIds)) == Vector(
      Vector("a.lance" -> Vector(0, -2), "w-0.lance" -> Vector(1)),
      Vector("b.lance" -> Vector(0, -2), "w-1.lance" -> Vector(1))))
    val txn3 = TransactionFile.read(s, v3.manifest.getTransactionFile).get
    assert(txn3.hasDataReplacement && txn3.getDataReplacement.getReplacementsList.asScala.map(r =>
      r.getFragmentId -> r.getNewFile.getPath) == Seq(0L -> "w-0.lance", 1L -> "w-1.lance"))
    assert(Dataset.open(s, Some(2L)).fragments.head.files.map(_.fieldIds) == Vector(Vector(0, -2), Vector(1)))
    // a new file holding other ids than those replaced is refused, nothing committed
    val bad = Seq(FragmentColumns(0L, frag("x-0.lance", 10, Vector(0, 1))), FragmentColumns(1L, frag("x-1.lance", 20, Vector(1))))
    val e = intercept[IllegalStateException](
      Committer.commit(s, Some(3L), AddColumnFiles(bad, v3.schema, replaces = Set(1)), CommitSettings()))
    assert(e.getMessage.contains("x-0.lance") && e.getMessage.contains("replaces 1"), e.getMessage)
    // a concurrent update of the same column since the read version: a conflict
    val c = intercept[CommitConflictException](
      Committer.commit(s, Some(2L), AddColumnFiles(upd("y"), v2.schema, replaces = Set(1)), CommitSettings()))
    assert(c.getMessage.contains("data replacement") && c.getMessage.contains("update_columns again"), c.getMessage)
    assert(Dataset.open(s, None).version == 3)
  }

  test("replacing columns vs concurrent commits: appends and deletes rebased onto, updates and compactions conflict") {
    def upd(prefix: String, ids: Seq[Long] = Seq(0L, 1L)) =
      ids.map(id => FragmentColumns(id, frag(s"$prefix-$id.lance", if (id == 0L) 10 else 20, Vector(1))))
    // an append since: committed; the appended fragment keeps its files as they are
    val s = fresh()
    val v1 = create(s)
    Committer.commit(s, Some(1L), AppendFragments(Seq(frag("n.lance", 5))), CommitSettings())
    val v3 = Committer.commit(s, Some(1L), AddColumnFiles(upd("u"), v1.schema, replaces = Set(1)), CommitSettings())
    assert(v3.fragments.map(_.files.map(f => f.path -> f.fieldIds)) == Vector(
      Vector("a.lance" -> Vector(0, -2), "u-0.lance" -> Vector(1)),
      Vector("b.lance" -> Vector(0, -2), "u-1.lance" -> Vector(1)),
      Vector("n.lance" -> Vector(0, 1))))
    // an append read before the replacement landed: committed too
    val v4 = Committer.commit(s, Some(2L), AppendFragments(Seq(frag("m.lance", 5))), CommitSettings())
    assert(v4.fragments.map(_.files.last.path) == Vector("u-0.lance", "u-1.lance", "n.lance", "m.lance"))
    // a delete read before the replacement: rebased, the fragments keep their new files
    val rows = new RoaringBitmap()
    rows.add(0, 2)
    val d0 = RowDeletions.prepare(s, 0L, 10L, None, rows, 3L)
    val v5 = Committer.commit(s, Some(2L), RowLevelChange(Seq(d0), Nil, "x"), CommitSettings())
    assert(v5.fragments.head.files.map(_.path) == Vector("a.lance", "u-0.lance") && v5.fragments.head.deletedRows == 2)
    // a row-level update since: a conflict (its rewritten rows carry the old values), nothing committed
    val s2 = fresh()
    create(s2)
    val d1 = RowDeletions.prepare(s2, 1L, 20L, None, rows, 1L)
    Committer.commit(s2, Some(1L), RowLevelChange(Seq(d1), Seq(frag("r.lance", 2)), "x"), CommitSettings())
    val e = intercept[CommitConflictException](
      Committer.commit(s2, Some(1L), AddColumnFiles(upd("u"), create2Schema(s2), replaces = Set(1)), CommitSettings()))
    assert(e.getMessage.contains("updated rows") && e.getMessage.contains("update_columns again"), e.getMessage)
    // and a row-level update read before the replacement landed conflicts too
    val s3 = fresh()
    val w1 = create(s3)
    Committer.commit(s3, Some(1L), AddColumnFiles(upd("u"), w1.schema, replaces = Set(1)), CommitSettings())
    val d2 = RowDeletions.prepare(s3, 1L, 20L, None, rows, 1L)
    val late = intercept[CommitConflictException](
      Committer.commit(s3, Some(1L), RowLevelChange(Seq(d2), Seq(frag("r.lance", 2)), "x"), CommitSettings()))
    assert(late.getMessage.contains("replaced column values"), late.getMessage)
    assert(Dataset.open(s3, None).version == 2)
  }

  private def create2Schema(s: DatasetStorage): LanceSchema = Dataset.open(s, Some(1L)).schema

  test("an append that adds fields: one Merge version with the new fragments and the wider schema") {
    val s = fresh()
    val v1 = create(s)
    val added = LanceSchema.fromArrow(score, ColumnAddition.maxFieldId(v1) + 1)
    val wide = LanceSchema(v1.schema.fields ++ added.fields, v1.schema.metadata)
    val v2 = Committer.commit(s, Some(1L), AppendWithSchema(Seq(frag("w.lance", 4, Vector(0, 1, 2, 3))), wide),
      CommitSettings())
    assert(v2.schema.fields.map(_.name) == Vector("id", "v", "score", "tag"))
    assert(v2.fragments.map(_.id) == Vector(0L, 1L, 2L) && v2.manifest.getMaxFragmentId == 2)
    val txn = TransactionFile.read(s, v2.manifest.getTransactionFile).get
    assert(txn.hasMerge && txn.getMerge.getFragmentsList.asScala.map(_.getId) == Seq(0L, 1L, 2L))
  }
}
