// lance_spark: a JVM-native Spark DataSourceV2 for the Lance format.
//
// Projects:
//  - core: the Spark-free codec and table layer (format/, table/, schema/ and
//    the generated protobuf classes), one source tree built for Scala 2.12 and
//    2.13 (`++2.12 core/test` runs its suites under 2.12).
//  - spark41, spark42: the Spark layer (spark-connector/) and its bundle jar
//    for each Spark line (target/bundles/lance-spark-bundle-<line>_<scala>-<version>.jar).
// The 4.2 line's Spark version must equal the pyspark pin in requirements-dev.txt.
ThisBuild / organization := "io.lancespark"
ThisBuild / version      := "0.1.0"

val scala212 = "2.12.20"
val scala213 = "2.13.18"
ThisBuild / scalaVersion := scala213

val protobufVersion = "4.33.5"
val arrowVersion    = "19.0.0"  // what Spark 4.2.0 ships
val roaringVersion  = "1.6.10"  // what Spark 4.2.0 ships
val awsSdkVersion   = "2.35.4"  // the AWS SDK v2 of Spark 4.2.0's Hadoop 3.5.0 (hadoop-aws); only compiled against
val aircompressorVersion = "2.0.3" // what Spark 4.2.0 ships: pure-Java zstd and lz4 (file versions 2.1/2.2)
val hadoopVersion   = "3.5.0"   // what Spark 4.2.0 ships; only compiled against (the core's FileSystem API); Spark brings its own
val compatVersion   = "2.12.0"  // scala-collection-compat: 2.13 collection API on 2.12

def scalacFor(scala: String, release: String = "11"): Seq[String] =
  Seq("-release", release, "-deprecation", "-feature", "-unchecked") ++
    (if (scala.startsWith("2.12")) Seq("-Ywarn-unused:imports", "-Xsource:2.13") else Seq("-Wunused:imports"))

/** Main classes target `release` (the line's Java floor); tests compile for 17 (the JDK they run on). */
def releaseSettings(release: String): Seq[Setting[_]] = {
  def withRelease(o: Seq[String], r: String): Seq[String] = {
    val i = o.indexOf("-release")
    if (i < 0) o else o.updated(i + 1, r)
  }
  Seq(
    javacOptions ++= Seq("--release", release),
    scalacOptions ++= scalacFor(scalaVersion.value, release),
    // Test delegates to Compile: set it explicitly
    Test / scalacOptions := withRelease((Compile / scalacOptions).value, "17")
  )
}

val testJavaOptions = Seq(
  "-Xmx3g",
  "--add-opens=java.base/java.nio=ALL-UNNAMED",
  "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
  "--add-opens=java.base/java.lang=ALL-UNNAMED",
  "--add-opens=java.base/java.util=ALL-UNNAMED",
  "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED"
)

/** A forked test run's temporary files (java.io.tmpdir, and TMPDIR for the pylance and
  * Spark processes it starts) go under the build's own directory, emptied before and after
  * the run: suites that make datasets in temporary directories never fill the machine's /tmp. */
def testTmpSettings: Seq[Setting[_]] = Seq(
  Test / javaOptions += s"-Djava.io.tmpdir=${(crossTarget.value / "test-tmp").getAbsolutePath}",
  Test / envVars += "TMPDIR" -> (crossTarget.value / "test-tmp").getAbsolutePath,
  Test / testOptions ++= {
    val dir = crossTarget.value / "test-tmp"
    Seq(Tests.Setup { () => IO.delete(dir); IO.createDirectory(dir) }, Tests.Cleanup(() => IO.delete(dir)))
  }
)

lazy val root = (project in file("."))
  .aggregate(core, spark35, spark40, spark41, spark42)
  .settings(publish / skip := true, crossScalaVersions := Nil)

lazy val core = (project in file("core"))
  .settings(
    name := "lance-spark-core",
    crossScalaVersions := Seq(scala213, scala212),
    releaseSettings("11"),  // the API floor of every line (Spark 3.5 runs on Java 11)
    libraryDependencies ++= Seq(
      "org.apache.arrow"   % "arrow-vector"     % arrowVersion   % Provided,
      "org.apache.arrow"   % "arrow-memory-netty" % arrowVersion % Provided,
      "org.apache.arrow"   % "arrow-compression" % arrowVersion % Provided,  // zstd/lz4 IPC (pylance compresses .arrow deletion files)
      "org.roaringbitmap"  % "RoaringBitmap"    % roaringVersion % Provided,
      "io.airlift"         % "aircompressor"    % aircompressorVersion % Provided,
      "org.apache.hadoop"  % "hadoop-client-api" % hadoopVersion % Provided,
      "software.amazon.awssdk" % "dynamodb"     % awsSdkVersion  % Provided,  // the DynamoDB external manifest store
      "org.scala-lang.modules" %% "scala-collection-compat" % compatVersion,
      "com.google.protobuf" % "protobuf-java"   % protobufVersion,
      "com.google.protobuf" % "protobuf-java"   % protobufVersion % "protobuf", // well-known types for protoc
      "org.apache.hadoop"  % "hadoop-client-runtime" % hadoopVersion % Test,
      "org.scalatest"     %% "scalatest"        % "3.2.19"       % Test
    ),
    // Generate Java classes from our own protos/ at build time; never committed.
    Compile / PB.protoSources := Seq((ThisBuild / baseDirectory).value / "protos"),
    Compile / PB.targets := Seq(PB.gens.java(protobufVersion) -> (Compile / sourceManaged).value),
    PB.protocVersion := protobufVersion,
    Test / fork := true,
    // suites run two at a time in the forked JVM: many wait on pylance processes (a core idles)
    Test / testForkedParallel := true,
    Test / javaOptions ++= testJavaOptions,
    testTmpSettings
  )

// One bundle per Spark line: the shared Spark layer (spark-connector/src/main/scala)
// plus the line's shim directories (spark-connector/src/main/<shim>/scala),
// compiled against that line's own Spark. docs/dev/spark-lines.md has the plan
// for the lines still to come (3.5 on Scala 2.12/2.13, 4.0).
val sparkLines = Seq(
  SparkLine("3.5", "3.5.9", Seq(scala212, scala213), Seq("spark-3.5", "spark-3.5-4.0", "spark-3.5-4.1"), release = "11", bundleArrow = true),
  SparkLine("4.0", "4.0.4", Seq(scala213), Seq("spark-4.x", "spark-3.5-4.0", "spark-3.5-4.1"), release = "17", bundleArrow = true),
  SparkLine("4.1", "4.1.3", Seq(scala213), Seq("spark-4.x", "spark-4.1+", "spark-3.5-4.1"), release = "17", bundleArrow = false),
  SparkLine("4.2", "4.2.0", Seq(scala213), Seq("spark-4.x", "spark-4.1+", "spark-4.2+"), release = "17", bundleArrow = false)
)

/** Arrow 19 inside a bundle (relocated to io.lancespark.shaded.arrow): for the
  * lines whose Spark ships an older Arrow (3.5: 12.0.1) or no arrow-compression
  * (3.5, 4.0). No Arrow object crosses into Spark (we implement ColumnVector),
  * so the relocated copy never meets Spark's. The unsafe allocator, not netty. */
def arrowDeps(bundled: Boolean): Seq[ModuleID] =
  if (!bundled) Seq(
    "org.apache.arrow" % "arrow-vector"       % arrowVersion % Provided,
    "org.apache.arrow" % "arrow-memory-netty" % arrowVersion % Provided,
    "org.apache.arrow" % "arrow-compression"  % arrowVersion % Provided)
  else Seq("arrow-vector", "arrow-memory-core", "arrow-memory-unsafe", "arrow-format", "arrow-compression").map(a =>
    ("org.apache.arrow" % a % arrowVersion)
      .exclude("com.fasterxml.jackson.core", "jackson-core")
      .exclude("com.fasterxml.jackson.core", "jackson-databind")
      .exclude("com.fasterxml.jackson.core", "jackson-annotations")
      .exclude("com.fasterxml.jackson.datatype", "jackson-datatype-jsr310")
      .exclude("commons-codec", "commons-codec")
      .exclude("org.slf4j", "slf4j-api")
      .exclude("io.netty", "netty-common")
      .exclude("io.netty", "netty-buffer")
      .exclude("com.github.luben", "zstd-jni")
      .exclude("org.apache.commons", "commons-compress")
      .exclude("org.checkerframework", "checker-qual")
      .exclude("com.google.errorprone", "error_prone_annotations")
      .exclude("org.immutables", "value-annotations"))

/** Where every line's bundle jar is put: setup.py packs them all into the wheel. */
val bundleDir = settingKey[File]("directory of the bundle jars")
ThisBuild / bundleDir := (ThisBuild / baseDirectory).value / "target" / "bundles"

def sparkProject(line: SparkLine): Project = {
  val shared = file("spark-connector").getAbsoluteFile
  Project(s"spark${line.id.replace(".", "")}", file(s"spark-connector/v${line.id}"))
    .dependsOn(core % "compile->compile;test->test")
    .settings(
      name := s"lance-spark-${line.id}",
      crossScalaVersions := line.scalas,
      scalaVersion := line.scalas.last,
      releaseSettings(line.release),
      Compile / unmanagedSourceDirectories := (shared / "src/main/scala") +:
        line.shims.map(s => shared / s"src/main/$s/scala"),
      Compile / unmanagedResourceDirectories := Seq(shared / "src/main/resources"),
      Test / unmanagedSourceDirectories := (shared / "src/test/scala") +:
        line.shims.map(s => shared / s"src/test/$s/scala").filter(_.exists),
      libraryDependencies ++= Seq(
        "org.apache.spark"  %% "spark-sql"        % line.spark     % Provided,
        "org.roaringbitmap"  % "RoaringBitmap"    % roaringVersion % Provided,
        "io.airlift"         % "aircompressor"    % aircompressorVersion % Provided,
        "software.amazon.awssdk" % "dynamodb"     % awsSdkVersion  % Provided,
        "org.scalatest"     %% "scalatest"        % "3.2.19"       % Test
      ) ++ arrowDeps(line.bundleArrow),
      Test / fork := true,
      Test / javaOptions ++= testJavaOptions,
      testTmpSettings,
      // unshaded in tests, our Arrow 19 meets the line's arrow-memory-netty: use the unsafe
      // allocator, as the relocated Arrow of the bundle does
      Test / javaOptions ++= (if (line.bundleArrow) Seq("-Darrow.allocation.manager.type=Unsafe") else Nil),
      // The bundle jar for spark-submit --jars: our classes + relocated protobuf and collection-compat.
      assembly / assemblyJarName := s"lance-spark-bundle-${line.id}_${scalaBinaryVersion.value}-${version.value}.jar",
      assembly / assemblyOutputPath := (ThisBuild / bundleDir).value / (assembly / assemblyJarName).value,
      assembly / assemblyOption ~= (_.withIncludeScala(false)),
      assembly / assemblyShadeRules := Seq(
        ShadeRule.rename("com.google.protobuf.**" -> "io.lancespark.shaded.protobuf.@1").inAll,
        ShadeRule.rename("scala.collection.compat.**" -> "io.lancespark.shaded.compat.@1").inAll
      ) ++ (if (!line.bundleArrow) Nil else Seq(
        ShadeRule.rename("org.apache.arrow.**" -> "io.lancespark.shaded.arrow.@1").inAll,
        ShadeRule.rename("com.google.flatbuffers.**" -> "io.lancespark.shaded.flatbuffers.@1").inAll
      )),
      assembly / assemblyMergeStrategy := {
        case PathList("META-INF", "services", _*) => MergeStrategy.concat
        case PathList("META-INF", _*)             => MergeStrategy.discard
        case x if x.endsWith(".proto")            => MergeStrategy.discard
        case _                                    => MergeStrategy.first
      }
    )
}

lazy val spark35 = sparkProject(sparkLines(0))
lazy val spark40 = sparkProject(sparkLines(1))
lazy val spark41 = sparkProject(sparkLines(2))
lazy val spark42 = sparkProject(sparkLines(3))
