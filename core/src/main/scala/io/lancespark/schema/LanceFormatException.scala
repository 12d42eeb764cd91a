package io.lancespark.schema

/** A Lance file or dataset that cannot be read: the message names the file (or
  * version, column) and the problem. Never thrown for programming errors. */
final class LanceFormatException(message: String, cause: Throwable = null)
    extends RuntimeException(message, cause)

object LanceFormatException {
  def apply(path: String, problem: String): LanceFormatException =
    new LanceFormatException(s"$path: $problem")

  def apply(path: String, problem: String, cause: Throwable): LanceFormatException =
    new LanceFormatException(s"$path: $problem", cause)
}
