package io.lancespark.spark

import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision, TimeUnit}
import org.apache.arrow.vector.types.pojo.ArrowType
import org.apache.spark.sql.types._

import io.lancespark.schema.{LanceField, LanceFormatException, LanceSchema, LogicalType}
import io.lancespark.spark.shim.TimeTypes

/** Lance (Arrow) types as Spark types. Documented in docs/type-mapping.md.
  * Unsigned integers widen (uint64 to DECIMAL(20,0)); half floats read as FLOAT;
  * every timestamp unit reads as microseconds (nanoseconds are truncated,
  * the only lossy case, as Spark has no finer timestamp); a type Spark cannot
  * hold is an error naming the column. Lance TIME columns need Spark's TIME type,
  * which Spark 4.2 only allows with spark.sql.timeType.enabled=true (set by
  * lance_spark.configure); otherwise they are an error saying so. */
final case class TypeMapping(timeTypeEnabled: Boolean) {

  def toSpark(schema: LanceSchema): StructType =
    StructType(schema.fields.map(f => toSparkField(f, f.name)))

  /** A fixed-size list of floats or doubles (a vector) carries its dimension
    * in the field's metadata (`lance.vector.dimension`, as writes accept it),
    * so that a DataFrame read from a Lance table writes its vectors back as
    * vectors. */
  def toSparkField(f: LanceField, path: String): StructField = {
    val dt = toSpark(f, path)
    val vectorDim: Option[Int] = (f.arrowType, dt) match {
      case (l: ArrowType.FixedSizeList, ArrayType(FloatType | DoubleType, _)) => Some(l.getListSize)
      case _ => None
    }
    vectorDim match {
      case Some(d) => StructField(f.name, dt, nullable = f.nullable,
        new MetadataBuilder().putLong(TypeMapping.VectorDimensionKey, d.toLong).build())
      case None => StructField(f.name, dt, nullable = f.nullable)
    }
  }

  def toSpark(f: LanceField, path: String): DataType = {
    def unsupported(why: String): Nothing =
      throw new LanceFormatException(s"column '$path' has Lance type '${f.logicalType}', which Spark cannot hold: $why")
    f.arrowType match {
      case _: ArrowType.Null => NullType
      case _: ArrowType.Bool => BooleanType
      case i: ArrowType.Int =>
        (i.getBitWidth, i.getIsSigned) match {
          case (8, true)   => ByteType
          case (16, true)  => ShortType
          case (32, true)  => IntegerType
          case (64, true)  => LongType
          case (8, false)  => ShortType
          case (16, false) => IntegerType
          case (32, false) => LongType
          case (64, false) => DecimalType(20, 0)
          case (w, s)      => unsupported(s"$w-bit ${if (s) "signed" else "unsigned"} integer")
        }
      case fp: ArrowType.FloatingPoint =>
        fp.getPrecision match {
          case FloatingPointPrecision.HALF | FloatingPointPrecision.SINGLE => FloatType
          case FloatingPointPrecision.DOUBLE => DoubleType
        }
      case _: ArrowType.Utf8 | _: ArrowType.LargeUtf8 =>
        // CHAR(n) / VARCHAR(n) written by Spark keep their declared type (Spark pads and checks lengths)
        f.metadata.get(TypeMapping.CharVarcharKey).map(DataType.fromDDL).getOrElse(StringType)
      case _: ArrowType.Binary | _: ArrowType.LargeBinary | _: ArrowType.FixedSizeBinary => BinaryType
      case d: ArrowType.Date if d.getUnit == DateUnit.DAY || d.getUnit == DateUnit.MILLISECOND => DateType
      case t: ArrowType.Time =>
        if (!TimeTypes.supported)
          unsupported(s"Spark ${org.apache.spark.SPARK_VERSION} has no TIME type (Spark <4.1 has no TIME type; " +
            "Spark 4.1 and later read it)")
        if (!timeTypeEnabled)
          unsupported(s"Spark's TIME type is disabled; set ${TypeMapping.TimeTypeConf}=true " +
            "(lance_spark.configure does) to read it")
        t.getUnit match {
          case TimeUnit.SECOND      => TimeTypes.timeType(0)
          case TimeUnit.MILLISECOND => TimeTypes.timeType(3)
          case _                    => TimeTypes.timeType(6)
        }
      case ts: ArrowType.Timestamp =>
        if (ts.getTimezone == null) TimestampNTZType else TimestampType
      case _: ArrowType.Duration => DayTimeIntervalType(DayTimeIntervalType.DAY, DayTimeIntervalType.SECOND)
      case d: ArrowType.Decimal =>
        if (d.getPrecision > DecimalType.MAX_PRECISION)
          unsupported(s"precision ${d.getPrecision} exceeds Spark's maximum of ${DecimalType.MAX_PRECISION}")
        DecimalType(d.getPrecision, d.getScale)
      case _: ArrowType.FixedSizeList =>
        val item = LanceField(-1, "item", LogicalType.fixedSizeListItem(f.logicalType), nullable = true,
          Vector.empty, Map.empty)
        ArrayType(toSpark(item, s"$path.item"), containsNull = true)
      case _: ArrowType.List | _: ArrowType.LargeList =>
        val item = f.children.headOption.getOrElse(unsupported("list without an item field"))
        ArrayType(toSpark(item, s"$path.${item.name}"), containsNull = item.nullable)
      case _: ArrowType.Struct =>
        StructType(f.children.map(c => toSparkField(c, s"$path.${c.name}")))
      case _: ArrowType.Map =>
        val entries = f.children.headOption.filter(e => e.isStruct && e.children.size == 2)
          .getOrElse(unsupported("a map without an entries struct of key and value"))
        val (k, v) = (entries.children(0), entries.children(1))
        MapType(toSpark(k, s"$path.key"), toSpark(v, s"$path.value"), valueContainsNull = v.nullable)
      case other => unsupported(s"no Spark type for Arrow $other")
    }
  }

}

object TypeMapping {
  val TimeTypeConf: String = "spark.sql.timeType.enabled"
  /** Spark's metadata key for CHAR(n)/VARCHAR(n) columns kept as STRING. */
  val CharVarcharKey: String = "__CHAR_VARCHAR_TYPE_STRING"
  /** Metadata key of a vector column's dimension (the same as writes' `WriteOptions.VectorDimensionMetadata`). */
  val VectorDimensionKey: String = "lance.vector.dimension"

  /** The mapping the active session allows. */
  def forActiveSession(): TypeMapping = {
    val enabled = org.apache.spark.sql.SparkSession.getActiveSession
      .exists(_.conf.get(TimeTypeConf, "false").equalsIgnoreCase("true"))
    TypeMapping(enabled)
  }
}
