package io.lancespark.table.index.vector

import java.nio.{ByteBuffer, ByteOrder}

import com.google.protobuf.ByteString
import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{Float4Vector, Float8Vector, UInt8Vector}
import org.apache.arrow.vector.complex.FixedSizeListVector
import org.apache.arrow.vector.types.FloatingPointPrecision
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType}

import io.lancespark.proto.index.{DenseTensor, IvfModel}
import io.lancespark.table.index.IndexFileWriter
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.storage.DatasetStorage

/** Writes an IVF_FLAT index in the reference's v3 layout, as pylance 14
  * writes it (and [[IvfIndex]] reads it):
  *  - `auxiliary.idx`: columns `_rowid` (uint64) and `flat` (the vectors, a
  *    fixed-size list of the column's float type, not null), the rows of
  *    partition 0 first, then 1, ...; global buffer 1 an [[IvfModel]] with
  *    each partition's first row and length; schema metadata `lance:ivf` =
  *    "1", `storage_metadata` = `["{"dim":D}"]`, `distance_type`;
  *  - `index.idx`: no rows (one column `__flat_marker`, uint64 not null);
  *    global buffer 1 an [[IvfModel]] with the centroids as a [k, D] tensor,
  *    zero offsets and lengths and the k-means loss; schema metadata
  *    `lance:index` = `{"type":"IVF_FLAT","distance_type":...}`, `lance:ivf`
  *    = "1" and `lance:flat` (one empty string per partition).
  * With a [[PqModel]] (IVF_PQ), `auxiliary.idx` holds `_rowid` and
  * `__pq_code` (each partition's codes transposed) and the codebook as
  * global buffer 2.
  * Rows come in non-decreasing partition order: IVF_FLAT's through `add`
  * (for cosine the caller gives unit vectors), IVF_PQ's already encoded
  * through `addCode` (the Spark build encodes on the executors). */
final class IvfIndexWriter(storage: DatasetStorage, uuid: String, model: KMeansModel, metric: DistanceMetric,
                           doubles: Boolean, version: DataFileVersion, allocator: BufferAllocator,
                           batchSize: Int = 8192, pq: Option[PqModel] = None) {
  private val dim = model.dim
  private val k = model.k
  private val itemType = new ArrowType.FloatingPoint(
    if (doubles) FloatingPointPrecision.DOUBLE else FloatingPointPrecision.SINGLE)
  private def itemField: Field = new Field("item", FieldType.nullable(itemType), null)
  private def flatField: Field = new Field("flat", FieldType.notNullable(new ArrowType.FixedSizeList(dim)),
    java.util.Arrays.asList(itemField))
  private def rowIdField: Field = new Field("_rowid", FieldType.nullable(new ArrowType.Int(64, false)), null)

  private def codeField(m: Int): Field = new Field("__pq_code", FieldType.nullable(new ArrowType.FixedSizeList(m)),
    java.util.Arrays.asList(new Field("item", FieldType.nullable(new ArrowType.Int(8, false)), null)))
  private val typeName: String = if (pq.isDefined) "IVF_PQ" else "IVF_FLAT"

  private val aux = pq match {
    case None => new IndexFileWriter(storage, uuid, IvfIndex.AuxFile, Seq(rowIdField, flatField),
      Map("lance:ivf" -> "1", "storage_metadata" -> s"""["{\\"dim\\":$dim}"]""", "distance_type" -> metric.name),
      version)
    case Some(q) =>
      val sm = s"""{\\"codebook_position\\":2,\\"nbits\\":8,\\"num_sub_vectors\\":${q.m},""" +
        s"""\\"dimension\\":$dim,\\"codebook_tensor\\":[],\\"transposed\\":true}"""
      new IndexFileWriter(storage, uuid, IvfIndex.AuxFile, Seq(rowIdField, codeField(q.m)),
        Map("lance:ivf" -> "1", "storage_metadata" -> s"""["$sm"]""", "distance_type" -> metric.name), version)
  }
  // PQ: the current partition's row ids and codes (written transposed when it ends)
  private val partIds = new scala.collection.mutable.ArrayBuffer[Long]()
  private val partCodes = new java.io.ByteArrayOutputStream()

  private val ids = new Array[Long](batchSize)
  private val values = new Array[Float](batchSize * dim)
  private var buffered = 0
  private val lengths = new Array[Long](k)
  private var current = 0
  private var rows = 0L

  /** IVF_FLAT: the next row: its partition (not below the previous one's), row id and vector (from `offset`). */
  def add(partition: Int, rowId: Long, vector: Array[Float], offset: Int = 0): Unit = {
    if (pq.isDefined) throw new IllegalStateException("an IVF_PQ index takes encoded rows (addCode)")
    checkOrder(partition)
    current = partition
    ids(buffered) = rowId
    System.arraycopy(vector, offset, values, buffered * dim, dim)
    buffered += 1
    lengths(partition) += 1
    rows += 1
    if (buffered == batchSize) flush()
  }

  /** IVF_PQ: the next row: its partition (not below the previous one's),
    * row id and PQ codes (one byte a sub-vector, from `offset`; see [[IvfPqEncoder]]). */
  def addCode(partition: Int, rowId: Long, code: Array[Byte], offset: Int = 0): Unit = {
    val q = pq.getOrElse(throw new IllegalStateException("an IVF_FLAT index takes vectors (add)"))
    checkOrder(partition)
    if (partition != current) flushPartition()
    current = partition
    partIds += rowId
    partCodes.write(code, offset, q.m)
    lengths(partition) += 1
    rows += 1
  }

  private def checkOrder(partition: Int): Unit =
    if (partition < current || partition >= k)
      throw new IllegalArgumentException(s"IVF index input out of order at row $rows: partition $partition after $current " +
        s"(of $k)")

  def rowsAdded: Long = rows

  private def flush(): Unit = if (buffered > 0) {
    val n = buffered
    val idv = new UInt8Vector(rowIdField, allocator)
    val list = flatField.createVector(allocator).asInstanceOf[FixedSizeListVector]
    try {
      idv.allocateNew(n)
      var i = 0
      while (i < n) { idv.set(i, ids(i)); i += 1 }
      idv.setValueCount(n)
      list.allocateNew()
      list.getDataVector match {
        case f: Float4Vector =>
          f.allocateNew(n * dim)
          i = 0
          while (i < n * dim) { f.set(i, values(i)); i += 1 }
          f.setValueCount(n * dim)
        case f: Float8Vector =>
          f.allocateNew(n * dim)
          i = 0
          while (i < n * dim) { f.set(i, values(i).toDouble); i += 1 }
          f.setValueCount(n * dim)
        case other => throw new IllegalStateException(s"flat vectors of ${other.getClass.getSimpleName}")
      }
      i = 0
      while (i < n) { list.setNotNull(i); i += 1 }
      list.setValueCount(n)
      aux.write(Seq(idv, list))
    } finally { idv.close(); list.close() }
    buffered = 0
  }

  /** PQ: writes the current partition's rows, codes transposed (byte j of every row, then j + 1). */
  private def flushPartition(): Unit = if (partIds.nonEmpty) {
    val q = pq.get
    val n = partIds.size
    val raw = partCodes.toByteArray
    val idv = new UInt8Vector(rowIdField, allocator)
    val list = codeField(q.m).createVector(allocator).asInstanceOf[FixedSizeListVector]
    try {
      idv.allocateNew(n)
      var i = 0
      while (i < n) { idv.set(i, partIds(i)); i += 1 }
      idv.setValueCount(n)
      list.allocateNew()
      val data = list.getDataVector.asInstanceOf[org.apache.arrow.vector.UInt1Vector]
      data.allocateNew(n * q.m)
      i = 0
      while (i < n) {
        var j = 0
        while (j < q.m) { data.set(j * n + i, raw(i * q.m + j)); j += 1 }
        list.setNotNull(i)
        i += 1
      }
      data.setValueCount(n * q.m)
      list.setValueCount(n)
      aux.write(Seq(idv, list))
    } finally { idv.close(); list.close() }
    partIds.clear()
    partCodes.reset()
  }

  /** Writes both files; each file's name and size. */
  def finish(): Seq[(String, Long)] = {
    flush()
    flushPartition()
    val offsets = lengths.scanLeft(0L)(_ + _).take(k)
    val auxModel = IvfModel.newBuilder()
    offsets.foreach(o => auxModel.addPartitionOffsets(o))
    lengths.foreach(l => auxModel.addPartitionLengths(l.toInt))
    aux.addGlobalBuffer(auxModel.build().toByteArray)
    pq.foreach(q => aux.addGlobalBuffer(IvfIndexWriter.tensor(q.codebook, PqModel.Centroids, dim, doubles).toByteArray))
    val auxSize = aux.finish()
    val main = new IndexFileWriter(storage, uuid, IvfIndex.IndexFileName,
      Seq(new Field("__flat_marker", FieldType.notNullable(new ArrowType.Int(64, false)), null)),
      Map("lance:index" -> s"""{"type":"$typeName","distance_type":"${metric.name}"}""",
        "lance:ivf" -> "1", "lance:flat" -> Seq.fill(k)("\"\"").mkString("[", ",", "]")), version)
    try {
      val m = IvfModel.newBuilder()
      (0 until k).foreach { _ => m.addPartitionOffsets(0L); m.addPartitionLengths(0) }
      m.setCentroidTensor(IvfIndexWriter.tensor(model.centroids, k, dim, doubles))
      m.setKmeansLoss(model.loss)
      main.addGlobalBuffer(m.build().toByteArray)
      val mainSize = main.finish()
      Seq(IvfIndex.AuxFile -> auxSize, IvfIndex.IndexFileName -> mainSize)
    } catch { case e: Throwable => main.close(); throw e }
  }

  /** Closes what is open and removes the index's directory. */
  def abort(): Unit = { aux.close(); IndexFileWriter.removeDir(storage, uuid) }
}

object IvfIndexWriter {
  /** A [rows, cols] tensor of float32 (or float64) values, little-endian. */
  def tensor(values: Array[Float], rows: Int, cols: Int, doubles: Boolean): DenseTensor = {
    val width = if (doubles) 8 else 4
    val b = ByteBuffer.allocate(values.length * width).order(ByteOrder.LITTLE_ENDIAN)
    values.foreach(v => if (doubles) b.putDouble(v.toDouble) else b.putFloat(v))
    DenseTensor.newBuilder()
      .setElementType(if (doubles) DenseTensor.ElementType.FLOAT64 else DenseTensor.ElementType.FLOAT32)
      .addShape(rows).addShape(cols)
      .setData(ByteString.copyFrom(b.array()))
      .build()
  }
}
