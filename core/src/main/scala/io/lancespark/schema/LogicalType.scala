package io.lancespark.schema

import org.apache.arrow.vector.types.{DateUnit, FloatingPointPrecision, TimeUnit}
import org.apache.arrow.vector.types.pojo.{ArrowType, Field}

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
      case "map" :: Nil => new ArrowType.Map(false) // file version 2.2: entries struct<key, value>
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

  /** Lance's name of an Arrow field's type, as pylance writes it. For a
    * fixed-size list the item type is part of the name ("fixed_size_list:float:8");
    * lists whose item is a struct are "list.struct" / "large_list.struct".
    * Types Lance 2.0 files cannot hold throw a [[LanceFormatException]] naming `where`. */
  def fromArrow(field: Field, where: String): String = {
    if (field.getDictionary != null)
      throw new LanceFormatException(s"$where: dictionary-encoded Arrow input is not supported; decode it first")
    field.getType match {
      case fsl: ArrowType.FixedSizeList =>
        val kids = field.getChildren
        if (kids.size != 1) throw new LanceFormatException(s"$where: a fixed-size list needs exactly one child field")
        val item = kids.get(0)
        item.getType match {
          case _: ArrowType.Int | _: ArrowType.FloatingPoint | _: ArrowType.Bool =>
            s"fixed_size_list:${fromArrow(item.getType, where)}:${fsl.getListSize}"
          case other =>
            throw new LanceFormatException(
              s"$where: fixed-size lists of $other are not supported (only of numbers and booleans)")
        }
      case _: ArrowType.List | _: ArrowType.LargeList =>
        val base = if (field.getType.isInstanceOf[ArrowType.List]) "list" else "large_list"
        val kids = field.getChildren
        if (kids.size != 1) throw new LanceFormatException(s"$where: a list needs exactly one child field")
        if (kids.get(0).getType.isInstanceOf[ArrowType.Struct]) s"$base.struct" else base
      case t => fromArrow(t, where)
    }
  }

  /** Lance's name of a non-nested Arrow type (and "struct", "list", "large_list"). */
  def fromArrow(t: ArrowType, where: String): String = {
    def unsupported(what: String): Nothing =
      throw new LanceFormatException(s"$where: Arrow type $what cannot be written to a Lance file")
    t match {
      case _: ArrowType.Bool => "bool"
      case i: ArrowType.Int =>
        (if (i.getIsSigned) "" else "u") + (i.getBitWidth match {
          case 8 | 16 | 32 | 64 => s"int${i.getBitWidth}"
          case w => unsupported(s"int of $w bits")
        })
      case f: ArrowType.FloatingPoint => f.getPrecision match {
        case FloatingPointPrecision.HALF   => "halffloat"
        case FloatingPointPrecision.SINGLE => "float"
        case FloatingPointPrecision.DOUBLE => "double"
      }
      case _: ArrowType.Utf8        => "string"
      case _: ArrowType.LargeUtf8   => "large_string"
      case _: ArrowType.Binary      => "binary"
      case _: ArrowType.LargeBinary => "large_binary"
      case b: ArrowType.FixedSizeBinary => s"fixed_size_binary:${b.getByteWidth}"
      case d: ArrowType.Date => if (d.getUnit == DateUnit.DAY) "date32:day" else "date64:ms"
      case tm: ArrowType.Time => (tm.getBitWidth, tm.getUnit) match {
        case (32, TimeUnit.SECOND | TimeUnit.MILLISECOND)     => s"time32:${unitName(tm.getUnit)}"
        case (64, TimeUnit.MICROSECOND | TimeUnit.NANOSECOND) => s"time64:${unitName(tm.getUnit)}"
        case _ => unsupported(tm.toString)
      }
      case ts: ArrowType.Timestamp =>
        val tz = Option(ts.getTimezone).filter(_.nonEmpty).getOrElse("-")
        s"timestamp:${unitName(ts.getUnit)}:$tz"
      case d: ArrowType.Decimal if d.getBitWidth == 128 || d.getBitWidth == 256 =>
        s"decimal:${d.getBitWidth}:${d.getPrecision}:${d.getScale}"
      case _: ArrowType.Struct    => "struct"
      case _: ArrowType.List      => "list"
      case _: ArrowType.LargeList => "large_list"
      case m: ArrowType.Map if !m.getKeysSorted => "map" // file version 2.2 only: the writers check
      case other => unsupported(other.toString)
    }
  }
}
