package io.lancespark.table

import java.io.{BufferedReader, InputStreamReader, OutputStreamWriter, Writer}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}
import java.util.Base64
import java.util.concurrent.ConcurrentLinkedQueue

/** pylance (the oracle) for the table suites: the python of LANCE_PYTHON, or
  * the repository's .venv (`make venv`), running a script given inline.
  *
  * The scripts run in long-lived interpreters (tests/fixtures/pylance_server.py), one per
  * test thread at a time, that import pyarrow and lance once: hundreds of checks would
  * otherwise pay a second of imports each. A script still runs as `__main__` with its own
  * namespace, arguments, output and exit code. */
object PylanceProcess {

  /** The repository's root: the nearest directory above the working one with a build.sbt. */
  val repoRoot: Path = {
    var p = Path.of("").toAbsolutePath
    while (p != null && !Files.exists(p.resolve("build.sbt"))) p = p.getParent
    if (p == null) Path.of("").toAbsolutePath else p
  }

  val python: String = sys.env.getOrElse("LANCE_PYTHON", repoRoot.resolve(".venv/bin/python").toString)

  /** A table written by `script` in a new temporary directory named from
    * `prefix`: its path, and the lines the script wrote to `out` (pylance's
    * rows, one a line). The script runs after `sys`, `lance`, `pyarrow as pa`
    * and `numpy as np` are imported and `path`, `version`, `out` are set. */
  def tableWithRows(prefix: String, version: String, script: String): (Path, Vector[String]) = {
    val d = Files.createTempDirectory(s"$prefix-$version").resolve("t")
    val out = d.getParent.resolve("rows.txt")
    run("import sys, lance, pyarrow as pa, numpy as np\n" +
      "path, version, out = sys.argv[1], sys.argv[2], sys.argv[3]\n" + script, d.toString, version, out.toString)
    (d, new String(Files.readAllBytes(out), UTF_8).split("\n", -1).toVector)
  }

  /** Runs `python -c script args...`; its output (stdout and stderr), failing
    * the test with that output when it exits with an error. */
  def run(script: String, args: String*): String = {
    val (rc, out) = exec("-c", script, args)
    assert(rc == 0, out)
    out
  }

  /** Runs the script file `file` with `args`: its exit code and output. */
  def runFile(file: Path, args: String*): (Int, String) =
    exec(file.toString, new String(Files.readAllBytes(file), UTF_8), args)

  private final class Server {
    private val log: Path = Files.createTempFile("pylance-server", ".log")
    private val proc: Process = new ProcessBuilder(python, repoRoot.resolve("tests/fixtures/pylance_server.py").toString)
      .redirectError(ProcessBuilder.Redirect.appendTo(log.toFile)).start()
    private val in: Writer = new OutputStreamWriter(proc.getOutputStream, UTF_8)
    private val out: BufferedReader = new BufferedReader(new InputStreamReader(proc.getInputStream, UTF_8))

    def alive: Boolean = proc.isAlive

    def call(name: String, script: String, args: Seq[String]): (Int, String) = {
      val enc = Base64.getEncoder
      in.write((name +: script +: args).map(s => enc.encodeToString(s.getBytes(UTF_8))).mkString(" "))
      in.write("\n")
      in.flush()
      val line = out.readLine()
      if (line == null) {
        proc.waitFor()
        throw new AssertionError(s"the pylance interpreter exited (${proc.exitValue()}) running $name:\n" +
          new String(Files.readAllBytes(log), UTF_8).takeRight(4000))
      }
      val sp = line.indexOf(' ')
      (line.substring(0, sp).toInt, new String(Base64.getDecoder.decode(line.substring(sp + 1)), UTF_8))
    }

    def close(): Unit = {
      try in.close() catch { case _: java.io.IOException => () }
      if (!proc.waitFor(10, java.util.concurrent.TimeUnit.SECONDS)) proc.destroyForcibly()
      Files.deleteIfExists(log)
    }
  }

  private val idle = new ConcurrentLinkedQueue[Server]()
  private val all = new ConcurrentLinkedQueue[Server]()
  sys.addShutdownHook(all.forEach(_.close()))

  private def exec(name: String, script: String, args: Seq[String]): (Int, String) = {
    val server = Option(idle.poll()).filter(_.alive).getOrElse { val s = new Server; all.add(s); s }
    val result = server.call(name, script, args)
    idle.add(server)
    result
  }
}
