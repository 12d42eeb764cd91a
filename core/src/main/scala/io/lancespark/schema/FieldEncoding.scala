package io.lancespark.schema

/** The encoding a field declares for 0.1 files (the schema's `encoding`);
  * 2.x files describe their encodings per page and ignore it. */
sealed abstract class FieldEncoding(val name: String) extends Serializable {
  override def toString: String = name
}

object FieldEncoding {
  case object None extends FieldEncoding("none")
  case object Plain extends FieldEncoding("plain")
  case object VarBinary extends FieldEncoding("var_binary")
  case object Dictionary extends FieldEncoding("dictionary")
  case object Rle extends FieldEncoding("rle")
  /** A value this reader does not know (a newer writer's). */
  final case class Unknown(value: Int) extends FieldEncoding(s"unknown($value)")
}
