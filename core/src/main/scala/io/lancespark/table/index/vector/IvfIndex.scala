package io.lancespark.table.index.vector

import java.nio.ByteOrder
import java.util.concurrent.ConcurrentHashMap

import scala.util.Using

import org.apache.arrow.memory.BufferAllocator
import org.apache.arrow.vector.{FieldVector, Float4Vector, Float8Vector, UInt1Vector, UInt8Vector}
import org.apache.arrow.vector.complex.FixedSizeListVector

import io.lancespark.proto.index.{DenseTensor, IvfModel}
import io.lancespark.schema.LanceFormatException
import io.lancespark.table.index.{IndexEntry, IndexFile}
import io.lancespark.table.storage.DatasetStorage

/** How the vectors of an IVF index's partitions are stored (its
  * `auxiliary.idx`): the original vectors, product-quantization codes, or
  * scalar-quantization codes. */
sealed trait IvfStorage {
  /** The column of `auxiliary.idx` holding the vectors or codes. */
  def column: String
  def name: String
}

object IvfStorage {
  case object Flat extends IvfStorage {
    val column: String = "flat"
    val name: String = "FLAT"
  }

  /** `codebook` is laid out [subVector][centroid][subDim] (2^nbits centroids). */
  final case class Pq(subVectors: Int, nbits: Int, dim: Int, codebook: Array[Float], transposed: Boolean)
      extends IvfStorage {
    val column: String = "__pq_code"
    val name: String = "PQ"
    def centroids: Int = 1 << nbits
    def subDim: Int = dim / subVectors
    /** Bytes of one vector's code (two 4-bit codes per byte). */
    def codeBytes: Int = if (nbits == 4) subVectors / 2 else subVectors
  }

  /** Every value scaled from [lo, hi] to 0..255. */
  final case class Sq(numBits: Int, dim: Int, lo: Double, hi: Double) extends IvfStorage {
    val column: String = "__sq_code"
    val name: String = "SQ"
  }
}

/** One partition of an IVF index: its row ids (row addresses when the
  * dataset has no stable row ids) and their vectors (FLAT, row-major) or codes
  * (PQ and SQ, row-major, `codeWidth` bytes a row). */
final case class IvfPartition(rowIds: Array[Long], vectors: Array[Float], codes: Array[Byte], codeWidth: Int) {
  def size: Int = rowIds.length
}

/** A pylance-built IVF vector index (format v3: `index.idx` with the IVF
  * model and `auxiliary.idx` with the partitions' vectors or codes), loaded
  * lazily partition by partition. */
final class IvfIndex private (
    val entry: IndexEntry,
    val indexType: String,
    val metric: DistanceMetric,
    val dim: Int,
    centroids: Array[Float],
    offsets: Array[Long],
    lengths: Array[Int],
    val storage: IvfStorage,
    datasetStorage: DatasetStorage) {

  def numPartitions: Int = lengths.length

  /** The IVF centroids as a model that assigns vectors (a refresh keeps them). */
  def model: KMeansModel = KMeansModel(numPartitions, dim, centroids.clone(), 0.0)

  private val loaded = new ConcurrentHashMap[Integer, IvfPartition]()

  /** The partitions nearest `query` first (the query normalized for cosine).
    * Centroids are ranked by l2 for l2 and cosine, by dot for dot. */
  def rankPartitions(query: Array[Float]): Vector[Int] = {
    val rank: DistanceMetric = if (metric == DistanceMetric.Dot) DistanceMetric.Dot else DistanceMetric.L2
    (0 until numPartitions).map(p => p -> rank.distance(query, 1.0, centroids, p * dim, dim)).toVector
      .sortWith { case ((pa, da), (pb, db)) =>
        val c = java.lang.Float.compare(da, db)
        if (c != 0) c < 0 else pa < pb
      }.map(_._1)
  }

  def centroid(p: Int): Array[Float] = java.util.Arrays.copyOfRange(centroids, p * dim, (p + 1) * dim)

  def partitionSize(p: Int): Int = lengths(p)

  /** Partition `p` (kept for later searches while the index's cache budget allows). */
  def partition(p: Int, allocator: BufferAllocator): IvfPartition = partitions(Seq(p), allocator)(p)

  /** Partitions `ps`, those not cached read through one open of `auxiliary.idx`. */
  def partitions(ps: Seq[Int], allocator: BufferAllocator): Map[Int, IvfPartition] = {
    val have = ps.flatMap(p => Option(loaded.get(Integer.valueOf(p))).map(p -> _)).toMap
    val missing = ps.filterNot(have.contains).distinct
    if (missing.isEmpty) have
    else Using.resource(IndexFile.open(datasetStorage, entry, IvfIndex.AuxFile)) { f =>
      have ++ missing.map { p =>
        val part = readPartition(f, p, allocator)
        val bytes = part.rowIds.length * 8L + part.vectors.length * 4L + part.codes.length
        if (cachedBytes.addAndGet(bytes) <= IvfIndex.CacheBytes) loaded.putIfAbsent(Integer.valueOf(p), part)
        else cachedBytes.addAndGet(-bytes)
        p -> part
      }
    }
  }

  private val cachedBytes = new java.util.concurrent.atomic.AtomicLong(0L)
  private val reads = new java.util.concurrent.atomic.AtomicLong(0L)

  /** Partitions read from `auxiliary.idx` so far (cached ones are read once). */
  def partitionsRead: Long = reads.get()

  private def readPartition(f: IndexFile, p: Int, allocator: BufferAllocator): IvfPartition = {
    reads.incrementAndGet()
    val n = lengths(p)
    if (n == 0) IvfPartition(Array.emptyLongArray, Array.emptyFloatArray, Array.emptyByteArray, 0)
    else {
      val from = offsets(p)
      val vs = f.read(Seq("_rowid", storage.column), from, from + n, allocator)
      try {
        val ids = vs.head match {
          case u: UInt8Vector => Array.tabulate(n)(i => u.get(i))
          case other => IvfIndex.fail(f.path, s"_rowid is ${other.getClass.getSimpleName}, expected uint64")
        }
        val list = vs(1) match {
          case l: FixedSizeListVector => l
          case other => IvfIndex.fail(f.path, s"${storage.column} is ${other.getClass.getSimpleName}, expected a fixed-size list")
        }
        val width = list.getListSize
        storage match {
          case IvfStorage.Flat =>
            if (width != dim) IvfIndex.fail(f.path, s"flat vectors of $width values, the index has dimension $dim")
            IvfPartition(ids, floats(f.path, list.getDataVector, n * width), Array.emptyByteArray, 0)
          case pq: IvfStorage.Pq =>
            if (width != pq.codeBytes) IvfIndex.fail(f.path, s"PQ codes of $width bytes, expected ${pq.codeBytes}")
            val raw = bytes(f.path, list.getDataVector, n * width)
            // transposed: the partition's codes byte-column by byte-column
            val codes = if (!pq.transposed) raw else {
              val out = new Array[Byte](raw.length)
              var j = 0
              while (j < width) {
                var i = 0
                while (i < n) { out(i * width + j) = raw(j * n + i); i += 1 }
                j += 1
              }
              out
            }
            IvfPartition(ids, Array.emptyFloatArray, codes, width)
          case sq: IvfStorage.Sq =>
            if (width != dim) IvfIndex.fail(f.path, s"SQ codes of $width bytes, the index has dimension $dim")
            IvfPartition(ids, Array.emptyFloatArray, bytes(f.path, list.getDataVector, n * width), width)
        }
      } finally vs.foreach(_.close())
    }
  }

  private def floats(path: String, v: FieldVector, n: Int): Array[Float] = v match {
    case f: Float4Vector => val b = f.getDataBuffer; Array.tabulate(n)(i => b.getFloat(i.toLong * 4))
    case f: Float8Vector => val b = f.getDataBuffer; Array.tabulate(n)(i => b.getDouble(i.toLong * 8).toFloat)
    case other => IvfIndex.fail(path, s"flat vectors of ${other.getClass.getSimpleName}; float or double expected")
  }

  private def bytes(path: String, v: FieldVector, n: Int): Array[Byte] = v match {
    case u: UInt1Vector => val b = u.getDataBuffer; Array.tabulate(n)(i => b.getByte(i.toLong))
    case other => IvfIndex.fail(path, s"codes of ${other.getClass.getSimpleName}; uint8 expected")
  }

  def describe: String = s"${entry.describe}: $indexType, ${metric.name}, $numPartitions partitions, dimension $dim"
}

object IvfIndex {
  val IndexFileName: String = "index.idx"
  val AuxFile: String = "auxiliary.idx"

  /** Bytes of partitions one loaded index keeps for later searches
    * (`-Dlance.vector.partitionCacheBytes`, default 256 MiB); beyond, partitions are read per search. */
  val CacheBytes: Long = sys.props.get("lance.vector.partitionCacheBytes").map(_.toLong).getOrElse(256L << 20)

  /** The index types read here. An IVF_HNSW_* index keeps, beside its
    * partitions' HNSW graphs (index.idx), the same quantized storage as the
    * IVF index of its suffix (auxiliary.idx): it is searched as that IVF index,
    * every vector of the probed partitions compared (a superset of what the
    * graph walk of pylance visits). */
  val Supported: Set[String] = Set("IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ")

  /** The storage of an index type: IVF_HNSW_SQ's is IVF_SQ's, and so on. */
  def storageType(indexType: String): String = indexType.replace("IVF_HNSW_", "IVF_")

  def fail(path: String, problem: String): Nothing = throw LanceFormatException(path, problem)

  /** The IVF index of `entry`, or Left(why it is not read here): another
    * index type (HNSW, RQ), an older index layout (no `auxiliary.idx`), or a
    * distance metric this reader does not know. */
  def open(storage: DatasetStorage, entry: IndexEntry): Either[String, IvfIndex] = {
    val main = Using.resource(IndexFile.open(storage, entry, IndexFileName)) { f =>
      val md = f.metadata
      md.get("lance:index") match {
        case None => Left(s"${f.path} has no 'lance:index' metadata (an older vector index layout)")
        case Some(json) =>
          val tpe = jsonString(json, "type").getOrElse("")
          val dist = jsonString(json, "distance_type").getOrElse("")
          if (!Supported.contains(tpe)) Left(s"index type '$tpe' is not read by this connector")
          else DistanceMetric.parse(dist) match {
            case None => Left(s"distance type '$dist' is not read by this connector")
            case Some(m) =>
              val ivf = ivfModel(f, md, "index")
              Right((tpe, m, ivf))
          }
      }
    }
    main.flatMap { case (tpe, metric, ivf) =>
      val t = ivf.getCentroidTensor
      val shape = (0 until t.getShapeCount).map(i => t.getShape(i).toLong)
      val centroids =
        if (ivf.hasCentroidTensor) tensorFloats(storage.uri, t)
        else (0 until ivf.getLegacyCentroidsCount).map(i => ivf.getLegacyCentroids(i)).toArray
      val parts = shape.headOption.map(_.toInt).getOrElse(0)
      if (parts <= 0 || centroids.length % parts != 0)
        Left(s"index '${entry.name}': centroids of shape ${shape.mkString("[", ", ", "]")} are not read here")
      else {
        val dim = centroids.length / parts
        Using.resource(IndexFile.open(storage, entry, AuxFile)) { aux =>
          val md = aux.metadata
          val auxIvf = ivfModel(aux, md, "auxiliary")
          val offsets = (0 until auxIvf.getPartitionOffsetsCount).map(i => auxIvf.getPartitionOffsets(i)).toArray
          val lengths = (0 until auxIvf.getPartitionLengthsCount).map(i => auxIvf.getPartitionLengths(i)).toArray
          if (offsets.length != parts || lengths.length != parts)
            fail(aux.path, s"${offsets.length} partition offsets and ${lengths.length} lengths for $parts centroids")
          if (offsets.zip(lengths).exists { case (o, l) => o < 0 || o + l > aux.numRows })
            fail(aux.path, s"a partition lies beyond the file's ${aux.numRows} rows")
          val sm = md.getOrElse("storage_metadata", "")
          val st: Either[String, IvfStorage] = storageType(tpe) match {
            case "IVF_FLAT" => Right(IvfStorage.Flat)
            case "IVF_PQ" =>
              val m = jsonInt(sm, "num_sub_vectors").getOrElse(fail(aux.path, s"no num_sub_vectors in $sm"))
              val nbits = jsonInt(sm, "nbits").getOrElse(8)
              val d = jsonInt(sm, "dimension").getOrElse(dim)
              val transposed = jsonBool(sm, "transposed").getOrElse(false)
              val pos = jsonInt(sm, "codebook_position").getOrElse(0)
              if (nbits != 8 && nbits != 4) Left(s"PQ with $nbits bits is not read here")
              else if (pos <= 0) Left("a PQ codebook kept inline in the metadata is not read here")
              else if (d != dim || m <= 0 || d % m != 0) fail(aux.path, s"PQ of $m sub-vectors over dimension $d, centroids of $dim")
              else {
                val cb = tensorFloats(aux.path,
                  DenseTensor.parseFrom(aux.reader.file.globalBuffer(pos, "the PQ codebook")))
                if (cb.length != (1 << nbits) * d) fail(aux.path, s"a PQ codebook of ${cb.length} values, expected ${(1 << nbits) * d}")
                Right(IvfStorage.Pq(m, nbits, d, cb, transposed))
              }
            case "IVF_SQ" =>
              val bits = jsonInt(sm, "num_bits").getOrElse(8)
              val lo = jsonDouble(sm, "start")
              val hi = jsonDouble(sm, "end")
              if (bits != 8) Left(s"SQ with $bits bits is not read here")
              else (lo, hi) match {
                case (Some(a), Some(b)) => Right(IvfStorage.Sq(bits, dim, a, b))
                case _ => fail(aux.path, s"no SQ bounds in $sm")
              }
          }
          st.map(s => new IvfIndex(entry, tpe, metric, dim, centroids, offsets, lengths, s, storage))
        }
      }
    }
  }

  /** The IVF model in the global buffer the `lance:ivf` metadata names (the
    * buffer after the file descriptor is number 1). */
  private def ivfModel(f: IndexFile, md: Map[String, String], what: String): IvfModel = {
    val pos = md.get("lance:ivf").map(_.trim).filter(_.nonEmpty).map { s =>
      try s.toInt catch { case _: NumberFormatException => fail(f.path, s"'lance:ivf' is '$s', not a buffer number") }
    }.getOrElse(fail(f.path, s"the $what file has no 'lance:ivf' metadata"))
    IvfModel.parseFrom(f.reader.file.globalBuffer(pos, "the IVF model"))
  }

  private def tensorFloats(where: String, t: DenseTensor): Array[Float] = {
    val b = t.getData.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN)
    t.getElementType match {
      case DenseTensor.ElementType.FLOAT32 => val n = b.remaining / 4; Array.tabulate(n)(i => b.getFloat(i * 4))
      case DenseTensor.ElementType.FLOAT64 => val n = b.remaining / 8; Array.tabulate(n)(i => b.getDouble(i * 8).toFloat)
      case DenseTensor.ElementType.FLOAT16 => val n = b.remaining / 2; Array.tabulate(n)(i => halfToFloat(b.getShort(i * 2)))
      case other => fail(where, s"a tensor of $other is not read here")
    }
  }

  private def halfToFloat(h: Short): Float = {
    val bits = h & 0xffff
    val sign = if ((bits & 0x8000) != 0) -1f else 1f
    val exp = (bits >> 10) & 0x1f
    val mant = bits & 0x3ff
    if (exp == 0) sign * mant * math.pow(2, -24).toFloat
    else if (exp == 31) (if (mant == 0) sign * Float.PositiveInfinity else Float.NaN)
    else sign * (1 + mant / 1024f) * math.pow(2, exp - 15).toFloat
  }

  // The metadata values are small flat JSON objects; a key's value is found by pattern.
  private def jsonRaw(json: String, key: String): Option[String] = {
    val p = java.util.regex.Pattern.compile("\"" + java.util.regex.Pattern.quote(key) + "\"\\s*:\\s*(\"(?:[^\"\\\\]|\\\\.)*\"|[^,}\\]\\s]+)")
    val m = p.matcher(json.replace("\\\"", "\""))
    if (m.find()) Some(m.group(1)) else None
  }
  private def jsonString(json: String, key: String): Option[String] =
    jsonRaw(json, key).filter(_.startsWith("\"")).map(s => s.substring(1, s.length - 1))
  private def jsonInt(json: String, key: String): Option[Int] =
    jsonRaw(json, key).flatMap(s => try Some(s.toInt) catch { case _: NumberFormatException => None })
  private def jsonDouble(json: String, key: String): Option[Double] =
    jsonRaw(json, key).flatMap(s => try Some(s.toDouble) catch { case _: NumberFormatException => None })
  private def jsonBool(json: String, key: String): Option[Boolean] = jsonRaw(json, key).map(_ == "true")

  private val cache = new java.util.LinkedHashMap[String, IvfIndex](16, 0.75f, true) {
    override def removeEldestEntry(e: java.util.Map.Entry[String, IvfIndex]): Boolean = size() > 8
  }

  /** [[open]], kept for the next searches of the same index (a few indices per JVM). */
  def cached(storage: DatasetStorage, entry: IndexEntry): Either[String, IvfIndex] = {
    val key = s"${storage.uri}#${entry.uuid}"
    val hit = cache.synchronized(Option(cache.get(key)))
    hit.map(Right(_)).getOrElse {
      val r = open(storage, entry)
      r.foreach(ix => cache.synchronized(cache.put(key, ix)))
      r
    }
  }
}
