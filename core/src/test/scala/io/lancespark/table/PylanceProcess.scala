package io.lancespark.table

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}

/** pylance (the oracle) for the table suites: the python of LANCE_PYTHON, or
  * the repository's .venv (`make venv`), running a script given inline. */
object PylanceProcess {

  /** The repository's root: the nearest directory above the working one with a build.sbt. */
  val repoRoot: Path = {
    var p = Path.of("").toAbsolutePath
    while (p != null && !Files.exists(p.resolve("build.sbt"))) p = p.getParent
    if (p == null) Path.of("").toAbsolutePath else p
  }

  val python: String = sys.env.getOrElse("LANCE_PYTHON", repoRoot.resolve(".venv/bin/python").toString)

  /** Runs `python -c script args...`; its output (stdout and stderr), failing
    * the test with that output when it exits with an error. */
  def run(script: String, args: String*): String = {
    val proc = new ProcessBuilder((Seq(python, "-c", script) ++ args): _*).redirectErrorStream(true).start()
    val out = new String(proc.getInputStream.readAllBytes(), UTF_8)
    assert(proc.waitFor() == 0, out)
    out
  }
}
