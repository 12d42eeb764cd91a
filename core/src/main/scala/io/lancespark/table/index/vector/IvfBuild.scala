package io.lancespark.table.index.vector

import java.util.{Locale, UUID}

import scala.collection.mutable.ArrayBuffer
import scala.util.Using

import com.google.protobuf.{ByteString, CodedOutputStream}
import org.apache.arrow.memory.{BufferAllocator, RootAllocator}
import org.apache.arrow.vector.{Float4Vector, Float8Vector}
import org.apache.arrow.vector.complex.FixedSizeListVector
import org.roaringbitmap.RoaringBitmap

import io.lancespark.proto.table.{IndexDetails, IndexMetadata}
import io.lancespark.schema.{LanceField, LanceFormatException, LogicalType}
import io.lancespark.table.commit.{CommitSettings, Committer, CreateIndices}
import io.lancespark.table.index.{IndexBuild, IndexCatalog, IndexEntry, IndexFileWriter}
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.scan.FragmentScanner
import io.lancespark.table.storage.{DataFiles, Snapshot}

/** The vector index types this connector builds. */
object VectorIndexTypes {
  val IvfFlat: String = "IVF_FLAT"
  val IvfPq: String = "IVF_PQ"
  val Built: Seq[String] = Seq(IvfFlat, IvfPq)

  /** Whether `name` (any case) names a vector index type (built here or not):
    * the builds route these to [[IvfBuild]]. */
  def isVector(name: String): Boolean = name.trim.toUpperCase(Locale.ROOT).startsWith("IVF_")
}

/** The options of a vector index build (`CREATE INDEX ... OPTIONS (...)`,
  * the procedure's `options` map): `num_partitions` (default the square root
  * of the rows), `metric` (or `distance_type`: l2, cosine, dot; default l2),
  * `sample_rate` (training vectors per partition, default 256 as pylance),
  * `max_iters` (k-means rounds, default 50 as pylance), `seed` (default 42);
  * IVF_PQ: `num_sub_vectors` (default dimension / 16, or / 8, or 1: what
  * divides it), `num_bits` (8 only). */
final case class IvfBuildOptions(numPartitions: Option[Int], metric: DistanceMetric, sampleRate: Int, maxIters: Int,
                                 seed: Long, numSubVectors: Option[Int] = None)

object IvfBuildOptions {
  val Known: Seq[String] = Seq("num_partitions", "metric", "distance_type", "sample_rate", "max_iters", "seed",
    "num_sub_vectors", "num_bits")

  def parse(options: Map[String, String]): IvfBuildOptions = {
    val o = options.map { case (k, v) => k.trim.toLowerCase(Locale.ROOT) -> v.trim }
    o.keys.find(k => !Known.contains(k)).foreach(k => throw new IllegalArgumentException(
      s"unknown vector index option '$k' (options: ${Known.mkString(", ")})"))
    def int(k: String): Option[Int] = o.get(k).map(v => try v.toInt catch {
      case _: NumberFormatException => throw new IllegalArgumentException(s"vector index option $k is '$v', not an integer")
    })
    val metricName = o.get("metric").orElse(o.get("distance_type")).getOrElse("l2")
    val metric = DistanceMetric.parse(metricName).getOrElse(throw new IllegalArgumentException(
      s"vector index option metric is '$metricName'; known: ${DistanceMetric.All.map(_.name).mkString(", ")}"))
    val parts = int("num_partitions")
    parts.filter(_ < 1).foreach(p => throw new IllegalArgumentException(s"vector index option num_partitions is $p; at least 1"))
    val rate = int("sample_rate").getOrElse(256)
    if (rate < 1) throw new IllegalArgumentException(s"vector index option sample_rate is $rate; at least 1")
    val iters = int("max_iters").getOrElse(KMeans.DefaultMaxIters)
    if (iters < 1) throw new IllegalArgumentException(s"vector index option max_iters is $iters; at least 1")
    val seed = o.get("seed").map(v => try v.toLong catch {
      case _: NumberFormatException => throw new IllegalArgumentException(s"vector index option seed is '$v', not an integer")
    }).getOrElse(42L)
    int("num_bits").filter(_ != 8).foreach(b => throw new IllegalArgumentException(
      s"vector index option num_bits is $b; PQ codes of 8 bits are built"))
    val subs = int("num_sub_vectors")
    subs.filter(_ < 1).foreach(m => throw new IllegalArgumentException(s"vector index option num_sub_vectors is $m; at least 1"))
    IvfBuildOptions(parts, metric, rate, iters, seed, subs)
  }
}

/** A checked vector index build over one column of one dataset version. */
final case class IvfBuildPlan(snapshot: Snapshot, field: LanceField, dim: Int, doubles: Boolean, indexType: String,
                              metric: DistanceMetric, numPartitions: Int, sampleRate: Int, maxIters: Int, seed: Long,
                              name: String, uuid: String, fragments: RoaringBitmap, fileVersion: DataFileVersion,
                              numSubVectors: Int = 0, replacing: Seq[IndexEntry] = Nil) {
  def where: String = s"${snapshot.storage.uri} (version ${snapshot.version})"
  def isPq: Boolean = indexType == VectorIndexTypes.IvfPq
  /** Options that plan this build's model again (a refresh's tasks re-plan with them). */
  def modelOptions: Map[String, String] =
    Map("num_partitions" -> numPartitions.toString, "metric" -> metric.name) ++
      (if (isPq) Map("num_sub_vectors" -> numSubVectors.toString) else Map.empty)
  /** Training vectors of the IVF centroids: `sampleRate` per partition. */
  def ivfSampleSize: Long = numPartitions.toLong * sampleRate
  /** Training vectors sampled: the IVF's, or for PQ `sampleRate` per PQ centroid (256) if more. */
  def sampleSize: Long = if (isPq) math.max(ivfSampleSize, PqModel.Centroids.toLong * sampleRate) else ivfSampleSize
  /** The metric k-means trains and assigns with (cosine: l2 over unit vectors). */
  def trainMetric: DistanceMetric = if (metric == DistanceMetric.Dot) DistanceMetric.Dot else DistanceMetric.L2
}

/** How an IVF_PQ index codes a vector of partition `p`, as the reference
  * does: the residual to the partition's centroid (l2, cosine: over unit
  * vectors) or the vector itself (dot), coded by `pq`. Serializable: the
  * Spark build broadcasts it to the tasks that assign and encode. */
final case class IvfPqEncoder(model: KMeansModel, pq: PqModel, metric: DistanceMetric) {
  require(pq.dim == model.dim, s"PQ of dimension ${pq.dim} for centroids of dimension ${model.dim}")

  /** The codes of `v` (from `offset`) in partition `p`; `residual` is scratch space of the dimension. */
  def encode(p: Int, v: Array[Float], offset: Int, residual: Array[Float]): Array[Byte] = {
    val dim = model.dim
    val centred = metric != DistanceMetric.Dot
    var d = 0
    while (d < dim) {
      residual(d) = v(offset + d) - (if (centred) model.centroids(p * dim + d) else 0f)
      d += 1
    }
    val code = new Array[Byte](pq.m)
    pq.encode(residual, 0, code, 0)
    code
  }
}

/** The build side of IVF vector indices: the plan (every check before any
  * work), the scans of a fragment's vectors (a sample for training, all for
  * assignment), k-means training, the writer and the CreateIndex commit
  * whose metadata pylance reads as its own. Cosine indices store and train
  * on unit vectors, as the reference does. */
object IvfBuild {

  /** The manifest's details type of vector indices (the last part of its type URL). */
  val DetailsKind: String = "VectorIndexDetails"

  /** `replace`: the build replaces the index of that name (a refresh), which must exist. */
  def plan(snapshot: Snapshot, column: String, indexType: String, name: Option[String],
           options: Map[String, String], replace: Boolean = false): IvfBuildPlan = {
    val where = s"${snapshot.storage.uri} (version ${snapshot.version})"
    val tpe = indexType.trim.toUpperCase(Locale.ROOT)
    if (!VectorIndexTypes.Built.contains(tpe))
      throw new IllegalArgumentException(s"$where: vector index type '$indexType' is not built by this connector " +
        s"(it builds: ${VectorIndexTypes.Built.map(_.toLowerCase(Locale.ROOT)).mkString(", ")})")
    val opts = IvfBuildOptions.parse(options)
    val field = snapshot.schema.field(column).getOrElse(throw new IllegalArgumentException(
      s"$where: no column '$column' to index (columns: ${snapshot.schema.fields.map(_.name).mkString(", ")})"))
    if (!field.isFixedSizeList)
      throw new IllegalArgumentException(s"$where: a $tpe index is built over a vector column (a fixed-size list of " +
        s"floats); column '$column' is ${field.logicalType}")
    val item = LogicalType.fixedSizeListItem(field.logicalType)
    if (item != "float" && item != "double")
      throw new IllegalArgumentException(s"$where: a $tpe index is built over float or double vectors; column " +
        s"'$column' holds $item values")
    val dim = field.logicalType.substring(field.logicalType.lastIndexOf(':') + 1).toInt
    val rows = snapshot.countRows
    val parts = opts.numPartitions.getOrElse(math.max(1, math.sqrt(rows.toDouble).toInt))
    if (parts > rows)
      throw new IllegalArgumentException(s"$where: num_partitions is $parts but the table has $rows rows " +
        "(at most one partition per row)")
    val indexName = name.map(_.trim).filter(_.nonEmpty).getOrElse(s"${column}_idx")
    val replacing = IndexCatalog.load(snapshot).filter(_.name == indexName)
    if (replacing.nonEmpty && !replace)
      throw new IllegalArgumentException(s"$where: an index named '$indexName' already exists")
    if (replacing.isEmpty && replace)
      throw new IllegalArgumentException(s"$where: no index named '$indexName' to refresh")
    if (snapshot.hasStableRowIds)
      throw new IllegalArgumentException(s"$where: building indices on a dataset with stable row ids is not supported")
    val version = DataFileVersion.parse(snapshot.fileVersion).filter(DataFileVersion.Written.contains).getOrElse(
      throw new IllegalArgumentException(s"$where: indices are built on datasets of file version 2.0, 2.1 or 2.2, " +
        s"not ${snapshot.fileVersion}"))
    val subs = if (tpe != VectorIndexTypes.IvfPq) {
      opts.numSubVectors.foreach(_ => throw new IllegalArgumentException(
        s"$where: num_sub_vectors is an option of ivf_pq, not of ${tpe.toLowerCase(Locale.ROOT)}"))
      0
    } else {
      val m = opts.numSubVectors.getOrElse(Seq(16, 8, 1).find(s => dim % s == 0 && dim / s >= 1).map(dim / _).getOrElse(1))
      if (m > dim || dim % m != 0)
        throw new IllegalArgumentException(s"$where: num_sub_vectors is $m; it must divide the dimension $dim of '$column'")
      if (rows < PqModel.Centroids)
        throw new IllegalArgumentException(s"$where: an IVF_PQ index trains 256 codes a sub-vector and needs at least " +
          s"256 rows; the table has $rows")
      m
    }
    val frags = new RoaringBitmap()
    snapshot.fragments.foreach(f => frags.add(f.id.toInt))
    IvfBuildPlan(snapshot, field, dim, item == "double", tpe, opts.metric, parts, opts.sampleRate, opts.maxIters,
      opts.seed, indexName, UUID.randomUUID().toString, frags, version, subs, if (replace) replacing else Nil)
  }

  /** A refresh of the IVF_FLAT or IVF_PQ index `entry` (built here or by pylance) over the current
    * fragments, as pylance's `optimize_indices` adds new rows to a vector index without training:
    * its centroids (and PQ codebook) are kept, every live vector of the version is assigned (and
    * encoded) with them, and the new index replaces every entry of that name in one CreateIndex.
    * None when the index already covers every fragment. Refused (naming the index) for other types,
    * older layouts and 4-bit PQ codes. */
  def refreshPlan(snapshot: Snapshot, entry: IndexEntry): Option[(IvfBuildPlan, KMeansModel, Option[PqModel])] = {
    val where = s"${snapshot.storage.uri} (version ${snapshot.version})"
    val all = new RoaringBitmap()
    snapshot.fragments.foreach(f => all.add(f.id.toInt))
    val entries = IndexCatalog.load(snapshot).filter(_.name == entry.name)
    if (entries.exists(_.covered.equals(all)) || snapshot.fragments.isEmpty) None
    else {
      val first = entries.minBy(_.datasetVersion)
      val ix = IvfIndex.open(snapshot.storage, first).fold(
        why => throw new IllegalArgumentException(s"$where: ${first.describe} is not refreshed here: $why"), identity)
      if (!VectorIndexTypes.Built.contains(ix.indexType))
        throw new IllegalArgumentException(s"$where: ${first.describe} is a ${ix.indexType} index; refreshed here: " +
          VectorIndexTypes.Built.mkString(", "))
      val column = first.fields.headOption.map(_.mkString(".")).getOrElse(
        throw new IllegalArgumentException(s"$where: ${first.describe}: its column is not in the schema"))
      val pq = ix.storage match {
        case q: IvfStorage.Pq if q.nbits == 8 => Some(PqModel(q.subVectors, q.subDim, q.codebook))
        case q: IvfStorage.Pq => throw new IllegalArgumentException(
          s"$where: ${first.describe} has ${q.nbits}-bit PQ codes; refreshed here: 8-bit codes")
        case _ => None
      }
      val options = Map("num_partitions" -> ix.numPartitions.toString, "metric" -> ix.metric.name) ++
        pq.map(q => "num_sub_vectors" -> q.m.toString)
      val p = plan(snapshot, column, ix.indexType, Some(entry.name), options, replace = true)
      if (p.dim != ix.dim) throw new IllegalArgumentException(
        s"$where: ${first.describe} holds vectors of ${ix.dim} values; column '$column' has ${p.dim}")
      Some((p, ix.model, pq))
    }
  }

  /** The live, non-null vectors of fragment `fragmentId` of `snapshot`'s
    * column `field` (of `dim` values), each given to `emit` with its row
    * address as (address, values, offset of the row in values), in row order;
    * for `unit` scaled to unit length. */
  def scanVectors(snapshot: Snapshot, field: LanceField, dim: Int, fragmentId: Long, unit: Boolean,
                  allocator: BufferAllocator)(emit: (Long, Array[Float], Int) => Unit): Unit = {
    val f = snapshot.fragments.find(_.id == fragmentId).getOrElse(
      throw new IllegalStateException(s"${snapshot.storage.uri} (version ${snapshot.version}) has no fragment $fragmentId"))
    Using.resource(new FragmentScanner(snapshot.storage, snapshot.version, f, Seq(field), allocator,
        ref => DataFiles.open(snapshot.storage, snapshot.schema, ref))) { scanner =>
      var values = new Array[Float](0)
      var from = 0L
      while (from < f.physicalRows) {
        val until = math.min(f.physicalRows, from + 16384)
        Using.resource(scanner.read(from, until)) { batch =>
          val list = batch.vectors.head.asInstanceOf[FixedSizeListVector]
          val n = batch.rowCount
          if (values.length < n * dim) values = new Array[Float](n * dim)
          list.getDataVector match {
            case v: Float4Vector => val b = v.getDataBuffer; var i = 0; while (i < n * dim) { values(i) = b.getFloat(i.toLong * 4); i += 1 }
            case v: Float8Vector => val b = v.getDataBuffer; var i = 0; while (i < n * dim) { values(i) = b.getDouble(i.toLong * 8).toFloat; i += 1 }
            case other => throw LanceFormatException(snapshot.storage.uri,
              s"column '${field.name}': expected float vectors, read ${other.getClass.getSimpleName}")
          }
          val offsets = batch.offsets
          var i = 0
          while (i < n) {
            if (!list.isNull(i)) {
              if (unit) KMeans.normalize(values, i * dim, dim)
              emit((f.id << 32) | offsets(i).toLong, values, i * dim)
            }
            i += 1
          }
        }
        from = until
      }
    }
  }

  /** The fraction of rows each fragment samples for training (a little over
    * the plan's sample size; the driver trims to it). */
  def sampleFraction(plan: IvfBuildPlan): Double = {
    val rows = math.max(1L, plan.snapshot.countRows)
    if (plan.sampleSize >= rows) 1.0 else math.min(1.0, plan.sampleSize.toDouble * 1.2 / rows + 1e-9)
  }

  /** A seeded sample (Bernoulli with `fraction`) of fragment `fragmentId`'s
    * finite vectors (unit vectors for cosine), concatenated. */
  def sampleFragment(plan: IvfBuildPlan, fragmentId: Long, fraction: Double, allocator: BufferAllocator): Array[Float] = {
    val rng = new scala.util.Random(plan.seed * 31 + fragmentId)
    val out = ArrayBuffer.empty[Float]
    scanVectors(plan.snapshot, plan.field, plan.dim, fragmentId, plan.metric == DistanceMetric.Cosine, allocator) {
      (_, v, o) =>
        if ((fraction >= 1.0 || rng.nextDouble() < fraction) && finite(v, o, plan.dim)) {
          var d = 0
          while (d < plan.dim) { out += v(o + d); d += 1 }
        }
    }
    out.toArray
  }

  private def finite(v: Array[Float], o: Int, dim: Int): Boolean = {
    var d = 0
    while (d < dim) { if (v(o + d).isNaN || v(o + d).isInfinite) return false; d += 1 }
    true
  }

  /** Trains the plan's centroids on the fragments' samples (trimmed to the
    * plan's sample size by a seeded shuffle). */
  def train(plan: IvfBuildPlan, samples: Seq[Array[Float]]): KMeansModel = {
    val dim = plan.dim
    val all = trim(plan, samples, plan.ivfSampleSize)
    val n = all.length / dim
    if (n < plan.numPartitions)
      throw new IllegalArgumentException(s"${plan.where}: num_partitions is ${plan.numPartitions} but column " +
        s"'${plan.field.name}' has only $n non-null finite vectors to train on")
    KMeans.train(all, dim, plan.numPartitions, plan.trainMetric, plan.maxIters, KMeans.DefaultTolerance, plan.seed)
  }

  /** The samples concatenated, trimmed to `size` vectors by a seeded shuffle. */
  private def trim(plan: IvfBuildPlan, samples: Seq[Array[Float]], size: Long): Array[Float] = {
    val dim = plan.dim
    val all = samples.foldLeft(ArrayBuffer.empty[Float])((b, a) => b ++= a).toArray
    val n = all.length / dim
    if (n <= size) all else {
      val rng = new scala.util.Random(plan.seed)
      val order = rng.shuffle((0 until n).toVector).take(size.toInt).sorted
      val out = new Array[Float](order.size * dim)
      order.zipWithIndex.foreach { case (r, i) => System.arraycopy(all, r * dim, out, i * dim, dim) }
      out
    }
  }

  /** IVF_PQ: the product quantizer, trained as the reference does on the
    * sample's residuals to their nearest centroid (l2, cosine over unit
    * vectors) or the vectors themselves (dot), one l2 k-means of 256 codes
    * per sub-vector. None for IVF_FLAT. */
  def trainPq(plan: IvfBuildPlan, model: KMeansModel, samples: Seq[Array[Float]]): Option[PqModel] =
    if (!plan.isPq) None
    else {
      val dim = plan.dim
      val data = trim(plan, samples, plan.sampleSize)
      val n = data.length / dim
      if (n < PqModel.Centroids)
        throw new IllegalArgumentException(s"${plan.where}: IVF_PQ needs at least 256 non-null vectors to train " +
          s"its codes; column '${plan.field.name}' has $n")
      if (plan.metric != DistanceMetric.Dot) {
        val nearest = KMeans.assignments(model, data, plan.trainMetric)
        var r = 0
        while (r < n) {
          val c = nearest(r)
          var d = 0
          while (d < dim) { data(r * dim + d) -= model.centroids(c * dim + d); d += 1 }
          r += 1
        }
      }
      Some(PqModel.train(data, dim, plan.numSubVectors, plan.maxIters, plan.seed))
    }

  /** Every live non-null vector of fragment `fragmentId` with its partition:
    * (partition, row address, vector as stored: unit vectors for cosine). */
  def assignFragment(plan: IvfBuildPlan, model: KMeansModel, fragmentId: Long,
                     allocator: BufferAllocator): Vector[(Int, Long, Array[Float])] = {
    val out = Vector.newBuilder[(Int, Long, Array[Float])]
    scanVectors(plan.snapshot, plan.field, plan.dim, fragmentId, plan.metric == DistanceMetric.Cosine, allocator) {
      (addr, v, o) => out += ((model.nearest(v, o, plan.trainMetric), addr, java.util.Arrays.copyOfRange(v, o, o + plan.dim)))
    }
    out.result()
  }

  /** IVF_PQ: every live non-null vector of fragment `fragmentId` assigned
    * and encoded (what each task of the Spark build computes): (partition,
    * row address, PQ codes, one byte a sub-vector). */
  def encodeFragment(plan: IvfBuildPlan, encoder: IvfPqEncoder, fragmentId: Long,
                     allocator: BufferAllocator): Vector[(Int, Long, Array[Byte])] = {
    val out = Vector.newBuilder[(Int, Long, Array[Byte])]
    val residual = new Array[Float](plan.dim)
    scanVectors(plan.snapshot, plan.field, plan.dim, fragmentId, plan.metric == DistanceMetric.Cosine, allocator) {
      (addr, v, o) =>
        val p = encoder.model.nearest(v, o, plan.trainMetric)
        out += ((p, addr, encoder.encode(p, v, o, residual)))
    }
    out.result()
  }

  /** Writes an IVF_FLAT index's files from rows in (partition, row address)
    * order; on a failure removes what it wrote. Each file's name and size. */
  def write(plan: IvfBuildPlan, model: KMeansModel, sorted: Iterator[(Int, Long, Array[Float])],
            allocator: BufferAllocator): Seq[(String, Long)] = {
    val w = new IvfIndexWriter(plan.snapshot.storage, plan.uuid, model, plan.metric, plan.doubles, plan.fileVersion,
      allocator)
    try {
      sorted.foreach { case (p, addr, v) => w.add(p, addr, v) }
      w.finish()
    } catch { case e: Throwable => w.abort(); throw e }
  }

  /** Writes an IVF_PQ index's files from encoded rows in (partition, row
    * address) order; on a failure removes what it wrote. Each file's name and size. */
  def writePq(plan: IvfBuildPlan, model: KMeansModel, pq: PqModel, sorted: Iterator[(Int, Long, Array[Byte])],
              allocator: BufferAllocator): Seq[(String, Long)] = {
    val w = new IvfIndexWriter(plan.snapshot.storage, plan.uuid, model, plan.metric, plan.doubles, plan.fileVersion,
      allocator, pq = Some(pq))
    try {
      sorted.foreach { case (p, addr, code) => w.addCode(p, addr, code) }
      w.finish()
    } catch { case e: Throwable => w.abort(); throw e }
  }

  /** The manifest's record of the index, as pylance 14 writes it: details
    * `/lance.index.pb.VectorIndexDetails` (metric, the flat storage marker and
    * the build parameters), index version 1, the dataset version it was built
    * at and the fragments it covers. */
  def metadata(plan: IvfBuildPlan): IndexMetadata =
    IndexBuild.record(plan.uuid, plan.field.id, plan.name, plan.snapshot.version, plan.fragments,
      IndexDetails.newBuilder().setTypeUrl("/lance.index.pb.VectorIndexDetails")
        .setValue(ByteString.copyFrom(details(plan))).build(), indexVersion = 1)

  /** VectorIndexDetails: 1 = metric (l2 0, cosine 1, dot 2), 8 = the flat
    * storage (an empty message), 9 = the build parameters (string map). */
  private def details(plan: IvfBuildPlan): Array[Byte] = {
    val bytes = new java.io.ByteArrayOutputStream()
    val out = CodedOutputStream.newInstance(bytes)
    val metric = plan.metric match {
      case DistanceMetric.L2 => 0
      case DistanceMetric.Cosine => 1
      case DistanceMetric.Dot => 2
    }
    if (metric != 0) out.writeEnum(1, metric)
    if (plan.isPq) {
      // 4 = PQ: 1 = bits, 2 = sub-vectors
      val pq = new java.io.ByteArrayOutputStream()
      val po = CodedOutputStream.newInstance(pq)
      po.writeUInt32(1, 8)
      po.writeUInt32(2, plan.numSubVectors)
      po.flush()
      out.writeByteArray(4, pq.toByteArray)
    } else {
      out.writeTag(8, com.google.protobuf.WireFormat.WIRETYPE_LENGTH_DELIMITED)
      out.writeUInt32NoTag(0)
    }
    Seq("lance.ivf.sample_rate" -> plan.sampleRate.toString, "lance.ivf.max_iters" -> plan.maxIters.toString)
      .foreach { case (k, v) =>
        val e = new java.io.ByteArrayOutputStream()
        val eo = CodedOutputStream.newInstance(e)
        eo.writeString(1, k)
        eo.writeString(2, v)
        eo.flush()
        out.writeByteArray(9, e.toByteArray)
      }
    out.flush()
    bytes.toByteArray
  }

  /** Commits the written index as a CreateIndex read at the plan's version;
    * on any failure removes the files. */
  def commit(plan: IvfBuildPlan, settings: CommitSettings): Snapshot =
    try Committer.commit(plan.snapshot.storage, Some(plan.snapshot.version),
      CreateIndices(Seq(metadata(plan)), plan.replacing.map(_.proto)), settings)
    catch { case e: Throwable => IndexFileWriter.removeDir(plan.snapshot.storage, plan.uuid); throw e }

  /** The build without Spark (tables whose vectors fit in memory): sample,
    * train, assign, write, commit. The model trained is returned with the
    * new snapshot. */
  def buildInMemory(plan: IvfBuildPlan, settings: CommitSettings = CommitSettings()): (Snapshot, KMeansModel) =
    buildInMemoryWithPq(plan, settings) match { case (s, m, _) => (s, m) }

  def buildInMemoryWithPq(plan: IvfBuildPlan, settings: CommitSettings = CommitSettings())
      : (Snapshot, KMeansModel, Option[PqModel]) =
    Using.resource(new RootAllocator()) { allocator =>
      val ids = plan.snapshot.fragments.map(_.id)
      val fraction = sampleFraction(plan)
      val samples = ids.map(id => sampleFragment(plan, id, fraction, allocator))
      val model = train(plan, samples)
      val pq = trainPq(plan, model, samples)
      writeInMemory(plan, model, pq, allocator)
      (commit(plan, settings), model, pq)
    }

  /** A refresh ([[refreshPlan]]) without Spark: assign (and encode) with the kept model, write, commit. */
  def refreshInMemory(plan: IvfBuildPlan, model: KMeansModel, pq: Option[PqModel],
                      settings: CommitSettings = CommitSettings()): Snapshot =
    Using.resource(new RootAllocator()) { allocator =>
      writeInMemory(plan, model, pq, allocator)
      commit(plan, settings)
    }

  private def writeInMemory(plan: IvfBuildPlan, model: KMeansModel, pq: Option[PqModel],
                            allocator: BufferAllocator): Seq[(String, Long)] = {
    val ids = plan.snapshot.fragments.map(_.id)
    def before(a: (Int, Long, _), b: (Int, Long, _)): Boolean = a._1 < b._1 || (a._1 == b._1 && a._2 < b._2)
    pq match {
      case Some(q) =>
        val enc = IvfPqEncoder(model, q, plan.metric)
        writePq(plan, model, q, ids.flatMap(id => encodeFragment(plan, enc, id, allocator)).sortWith(before).iterator,
          allocator)
      case None =>
        write(plan, model, ids.flatMap(id => assignFragment(plan, model, id, allocator)).sortWith(before).iterator,
          allocator)
    }
  }
}
