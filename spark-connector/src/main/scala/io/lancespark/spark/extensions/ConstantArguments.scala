package io.lancespark.spark.extensions

import org.apache.spark.unsafe.types.UTF8String

/** The typed values of SQL functions' constant arguments (already evaluated),
  * shared by the connector's functions; `fail` reports a wrong type in the
  * function's own words. */
private[extensions] object ConstantArguments {

  def string(name: String, v: Any, fail: String => Nothing): String = v match {
    case s: UTF8String => s.toString
    case other => fail(s"argument '$name' must be a string, got $other")
  }

  def int(name: String, v: Any, fail: String => Nothing): Int = v match {
    case i: Int => i
    case l: Long if l.isValidInt => l.toInt
    case other => fail(s"argument '$name' must be an integer, got $other")
  }

  def boolean(name: String, v: Any, fail: String => Nothing): Boolean = v match {
    case b: Boolean => b
    case other => fail(s"argument '$name' must be true or false, got $other")
  }
}
