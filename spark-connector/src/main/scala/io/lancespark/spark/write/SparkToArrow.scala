package io.lancespark.spark.write

import scala.jdk.CollectionConverters._

import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision, TimeUnit}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field, FieldType, Schema}
import org.apache.spark.sql.types._

import io.lancespark.schema.LanceFormatException
import io.lancespark.spark.options.WriteOptions
import io.lancespark.spark.shim.TimeTypes
import io.lancespark.table.model.DataFileVersion
import io.lancespark.table.scan.BlobColumns

/** The Lance (Arrow) type each Spark type is written as, for new datasets
  * (and added columns) of file version `version`: maps are Lance maps from
  * 2.2, lists of key/value structs before. Documented in
  * docs/type-mapping.md ("Writing"). */
object SparkToArrow {

  def schema(st: StructType, vectors: Map[String, Int], version: DataFileVersion,
      blobs: Set[String] = Set.empty): Schema = {
    val maps = version.minor >= 2
    vectors.keys.foreach { name =>
      if (!st.fieldNames.contains(name))
        throw new IllegalArgumentException(s"vectorColumns names '$name', which is not a column of the DataFrame")
      st(name).dataType match {
        case ArrayType(FloatType | DoubleType, _) => ()
        case other => throw new IllegalArgumentException(s"column '$name' is ${other.simpleString}; only " +
          "ARRAY<FLOAT> and ARRAY<DOUBLE> can be vectors (vectorColumns)")
      }
    }
    checkBlobColumns(st, blobs, version)
    new Schema(st.fields.toSeq.map { f =>
      if (blobs.contains(f.name)) (if (version.minor >= 2) blobV2Field(f.name) else blobField(f.name, f.nullable))
      else withCharMetadata(field(f.name, f.dataType, f.nullable, f.name, maps, dimension(f, vectors)), f)
    }.asJava)
  }

  /** A BINARY column stored as a blob: `large_binary` with `lance-encoding:blob`
    * (blob v1, file versions 2.0 and 2.1). */
  private def blobField(name: String, nullable: Boolean): Field =
    new Field(name, new FieldType(nullable, ArrowType.LargeBinary.INSTANCE, null,
      java.util.Map.of(BlobColumns.MetadataKey, "true")), null)

  /** The extension name of a 2.2 blob column (blob v2). */
  val BlobV2Extension: String = "lance.blob.v2"

  /** Whether an Arrow field is a 2.2 blob column. */
  def isBlobV2(f: Field): Boolean =
    Option(f.getMetadata).exists(m => BlobV2Extension == m.get("ARROW:extension:name"))

  /** A BINARY column stored as a blob at file version 2.2 (blob v2), as
    * pylance stores a `large_binary` field with `lance-encoding:blob` there:
    * a struct of `data` (the bytes) and `uri` (an external value's URI) with
    * the extension name `lance.blob.v2`; Spark sees STRUCT<data: BINARY, uri:
    * STRING> (docs/blobs.md). Nullable, as pylance makes it. */
  private def blobV2Field(name: String): Field =
    new Field(name, new FieldType(true, ArrowType.Struct.INSTANCE, null,
      java.util.Map.of("ARROW:extension:name", BlobV2Extension)), java.util.List.of(
      new Field("data", new FieldType(true, ArrowType.LargeBinary.INSTANCE, null), null),
      new Field("uri", new FieldType(true, ArrowType.Utf8.INSTANCE, null), null)))

  /** The option `blobColumns` names top-level BINARY columns; refused (before
    * any file is written) otherwise, naming the column and the option. */
  def checkBlobColumns(st: StructType, blobs: Set[String], version: DataFileVersion): Unit = {
    blobs.toSeq.sorted.foreach { name =>
      st.fields.find(_.name == name) match {
        case None => throw new IllegalArgumentException(
          s"option blobColumns names '$name', which is not a column of the DataFrame " +
            s"(columns: ${st.fieldNames.mkString(", ")})")
        case Some(f) if f.dataType != BinaryType => throw new IllegalArgumentException(
          s"option blobColumns names column '$name', which is ${f.dataType.simpleString}; only BINARY columns " +
            "can be blob columns")
        case _ => ()
      }
    }
  }

  /** Spark keeps CHAR(n)/VARCHAR(n) as STRING plus this metadata key; Lance
    * keeps it in the field's metadata so reads give Spark its padding and
    * length checks back. */
  val CharVarcharKey: String = "__CHAR_VARCHAR_TYPE_STRING"

  private def withCharMetadata(f: Field, sf: StructField): Field = sf.dataType match {
    case st: StructType =>
      val kids = f.getChildren.asScala.zip(st.fields).map { case (c, s) => withCharMetadata(c, s) }
      new Field(f.getName, f.getFieldType, kids.asJava)
    case dt =>
      val typeString = dt match {
        case c: CharType => Some(c.simpleString)
        case v: VarcharType => Some(v.simpleString)
        case _ if sf.metadata.contains(CharVarcharKey) => Some(sf.metadata.getString(CharVarcharKey))
        case _ => None
      }
      typeString.fold(f) { t =>
        val ft = f.getFieldType
        new Field(f.getName, new FieldType(ft.isNullable, ft.getType, ft.getDictionary,
          java.util.Map.of(CharVarcharKey, t)), f.getChildren)
      }
  }

  private def dimension(f: StructField, vectors: Map[String, Int]): Option[Int] =
    vectors.get(f.name).orElse(
      if (f.metadata.contains(WriteOptions.VectorDimensionMetadata))
        Some(f.metadata.getLong(WriteOptions.VectorDimensionMetadata).toInt)
      else None)

  private def field(name: String, dt: DataType, nullable: Boolean, path: String, maps: Boolean,
      vectorDim: Option[Int] = None): Field = {
    def leaf(t: ArrowType): Field = new Field(name, new FieldType(nullable, t, null), null)
    dt match {
      case BooleanType => leaf(ArrowType.Bool.INSTANCE)
      case ByteType => leaf(new ArrowType.Int(8, true))
      case ShortType => leaf(new ArrowType.Int(16, true))
      case IntegerType => leaf(new ArrowType.Int(32, true))
      case LongType => leaf(new ArrowType.Int(64, true))
      case FloatType => leaf(new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE))
      case DoubleType => leaf(new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE))
      case d: DecimalType => leaf(new ArrowType.Decimal(d.precision, d.scale, 128))
      case _: StringType => leaf(ArrowType.Utf8.INSTANCE)
      case BinaryType => leaf(ArrowType.Binary.INSTANCE)
      case DateType => leaf(new ArrowType.Date(DateUnit.DAY))
      case TimestampType => leaf(new ArrowType.Timestamp(TimeUnit.MICROSECOND, "UTC"))
      case TimestampNTZType => leaf(new ArrowType.Timestamp(TimeUnit.MICROSECOND, null))
      case t if TimeTypes.isTime(t) => leaf(new ArrowType.Time(TimeUnit.NANOSECOND, 64))
      case _: DayTimeIntervalType => leaf(new ArrowType.Duration(TimeUnit.MICROSECOND))
      case ArrayType(et @ (FloatType | DoubleType), _) if vectorDim.isDefined =>
        val item = field("item", et, nullable = true, s"$path.item", maps)
        new Field(name, new FieldType(nullable, new ArrowType.FixedSizeList(vectorDim.get), null), java.util.Collections.singletonList(item))
      case ArrayType(et, containsNull) =>
        if (vectorDim.isDefined)
          throw new IllegalArgumentException(s"column '$path' is ${dt.simpleString}; only ARRAY<FLOAT> and ARRAY<DOUBLE> can be vectors")
        new Field(name, new FieldType(nullable, ArrowType.List.INSTANCE, null),
          java.util.Collections.singletonList(field("item", et, containsNull, s"$path.element", maps)))
      case MapType(kt, vt, valueContainsNull) =>
        val entries = new Field("entries", new FieldType(false, ArrowType.Struct.INSTANCE, null),
          java.util.List.of(field("key", kt, nullable = false, s"$path.key", maps),
            field("value", vt, valueContainsNull, s"$path.value", maps)))
        val t = if (maps) new ArrowType.Map(false) else ArrowType.List.INSTANCE
        new Field(name, new FieldType(nullable, t, null), java.util.Collections.singletonList(entries))
      case st: StructType =>
        new Field(name, new FieldType(nullable, ArrowType.Struct.INSTANCE, null),
          st.fields.toSeq.map(f => withCharMetadata(field(f.name, f.dataType, f.nullable, s"$path.${f.name}", maps,
            dimension(f, Map.empty)), f))
            .asJava)
      case other =>
        throw new LanceFormatException(s"column '$path' has Spark type ${other.simpleString}, which Lance cannot store")
    }
  }
}
