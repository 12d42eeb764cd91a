package io.lancespark.spark.read

import org.apache.spark.sql.connector.expressions.{Expression, Literal, NamedReference}
import org.apache.spark.sql.connector.expressions.filter.Predicate
import org.apache.spark.sql.types.{IntegerType, LongType}

import io.lancespark.spark.MetadataColumns
import io.lancespark.table.plan.RowRestriction
import io.lancespark.table.storage.Snapshot

/** Point reads: top-level conjuncts `_rowaddr = a`, `_rowaddr IN (a, ...)`,
  * `_fragid = f` / `IN (...)` and `_rowid = i` / `IN (...)` (an address on a
  * dataset without stable row ids; else found through the fragments' row id
  * sequences), as the rows a scan may read ([[RowRestriction]]). Spark still
  * evaluates the predicates on the rows returned, so the restriction only
  * saves reading. */
object RowAddressPredicates {

  def restriction(predicates: Seq[Predicate], snapshot: Snapshot): Option[RowRestriction] = {
    val stable = snapshot.hasStableRowIds
    val parts: Seq[RowRestriction] = predicates.flatMap { p =>
      values(p).flatMap { case (column, vs) =>
        if (column == MetadataColumns.RowAddr || (column == MetadataColumns.RowId && !stable))
          Some(RowRestriction.ofAddresses(vs))
        else if (column == MetadataColumns.RowId) Some(RowRestriction.ofRowIds(snapshot, vs))
        else if (column == MetadataColumns.FragId) Some(RowRestriction.ofFragments(vs))
        else None
      }
    }
    parts.reduceOption(_ and _)
  }

  /** `column = v` or `column IN (v, ...)` with integer literals, on a metadata column. */
  private def values(p: Predicate): Option[(String, Seq[Long])] = {
    val kids = p.children().toSeq
    p.name() match {
      case "=" if kids.size == 2 =>
        (name(kids(0)), long(kids(1)), name(kids(1)), long(kids(0))) match {
          case (Some(c), Some(v), _, _) => Some(c -> Seq(v))
          case (_, _, Some(c), Some(v)) => Some(c -> Seq(v))
          case _ => None
        }
      case "IN" if kids.nonEmpty =>
        val vs = kids.tail.map(long)
        name(kids.head).filter(_ => vs.forall(_.isDefined)).map(_ -> vs.flatten)
      case _ => None
    }
  }

  private def name(e: Expression): Option[String] = e match {
    case r: NamedReference if r.fieldNames().length == 1 && MetadataColumns.names.contains(r.fieldNames().head) =>
      Some(r.fieldNames().head)
    case _ => None
  }

  private def long(e: Expression): Option[Long] = e match {
    case l: Literal[_] if l.value() != null && (l.dataType() == LongType || l.dataType() == IntegerType) =>
      Some(l.value().asInstanceOf[Number].longValue())
    case _ => None
  }
}
