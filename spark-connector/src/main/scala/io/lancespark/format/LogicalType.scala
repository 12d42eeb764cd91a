package io.lancespark.format

import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision, TimeUnit}
import org.apache.arrow.vector.types.pojo.ArrowType

/** Lance's string names for Arrow types (Field.logical_type), e.g. "int64",
  * "timestamp:us:UTC", "fixed_size_list:float:128", "decimal:128:10:2".
  * Nested types ("list", "struct", ...) get their children from the schema. */
object LogicalType {

  private def unit(s: String, where: String): TimeUnit = s match {
    case "s"  => TimeUnit.SECOND
    case "ms" => TimeUnit.MILLISECOND
    case "us" => TimeUnit.MICROSECOND
    case "ns" => TimeUnit.NANOSECOND
    case other => throw new LanceFormatException(s"$where: unknown time unit '$other'")
  }

  def unitName(u: TimeUnit): String = u match {
    case TimeUnit.SECOND      => "s"
    case TimeUnit.MILLISECOND => "ms"
    case TimeUnit.MICROSECOND => "us"
    case TimeUnit.NANOSECOND  => "ns"
  }

  /** Arrow type of a logical type name. `where` names the field for errors.
    * Dictionary types ("dict:VALUE:KEY:ordered") are read decoded, as their value type. */
  def toArrow(logical: String, where: String): ArrowType = {
    val parts = logical.split(":", -1).toList
    parts match {
      case "null" :: Nil       => ArrowType.Null.INSTANCE
      case "bool" :: Nil       => ArrowType.Bool.INSTANCE
      case "int8" :: Nil       => new ArrowType.Int(8, true)
      case "uint8" :: Nil      => new ArrowType.Int(8, false)
      case "int16" :: Nil      => new ArrowType.Int(16, true)
      case "uint16" :: Nil     => new ArrowType.Int(16, false)
      case "int32" :: Nil      => new ArrowType.Int(32, true)
      case "uint32" :: Nil     => new ArrowType.Int(32, false)
      case "int64" :: Nil      => new ArrowType.Int(64, true)
      case "uint64" :: Nil     => new ArrowType.Int(64, false)
      case "halffloat" :: Nil  => new ArrowType.FloatingPoint(FloatingPointPrecision.HALF)
      case "float" :: Nil      => new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)
      case "double" :: Nil     => new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)
      case "string" :: Nil     => ArrowType.Utf8.INSTANCE
      case "large_string" :: Nil => ArrowType.LargeUtf8.INSTANCE
      case "binary" :: Nil     => ArrowType.Binary.INSTANCE
      case "large_binary" :: Nil => ArrowType.LargeBinary.INSTANCE
      case "date32" :: _       => new ArrowType.Date(DateUnit.DAY)
      case "date64" :: _       => new ArrowType.Date(DateUnit.MILLISECOND)
      case "time32" :: u :: Nil => new ArrowType.Time(unit(u, where), 32)
      case "time64" :: u :: Nil => new ArrowType.Time(unit(u, where), 64)
      case "timestamp" :: u :: tz =>
        val zone = tz.mkString(":")
        new ArrowType.Timestamp(unit(u, where), if (zone == "-" || zone.isEmpty) null else zone)
      case "duration" :: u :: Nil => new ArrowType.Duration(unit(u, where))
      case "decimal" :: bits :: p :: s :: Nil =>
        new ArrowType.Decimal(p.toInt, s.toInt, bits.toInt)
      case "fixed_size_binary" :: w :: Nil => new ArrowType.FixedSizeBinary(w.toInt)
      case "fixed_size_list" :: rest if rest.nonEmpty =>
        new ArrowType.FixedSizeList(rest.last.toInt)
      case ("list" | "list.struct") :: Nil             => ArrowType.List.INSTANCE
      case ("large_list" | "large_list.struct") :: Nil => ArrowType.LargeList.INSTANCE
      case "struct" :: Nil => ArrowType.Struct.INSTANCE
      case "dict" :: _ =>
        // dict:VALUE:KEY:ordered -- the value type may itself contain ':'
        val inner = parts.drop(1).dropRight(2).mkString(":")
        toArrow(inner, where)
      case _ =>
        throw new LanceFormatException(s"$where: unsupported Lance logical type '$logical'")
    }
  }

  /** For "fixed_size_list:ITEM:N": the item's logical type. */
  def fixedSizeListItem(logical: String): String = {
    val body = logical.stripPrefix("fixed_size_list:")
    body.substring(0, body.lastIndexOf(':'))
  }

  def isDictionary(logical: String): Boolean = logical.startsWith("dict:")
}
