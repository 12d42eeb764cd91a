// lance_spark: a JVM-native Spark DataSourceV2 for the Lance format.
// Versions are pinned here; sparkVersion must equal the pyspark pin in python/pyproject.toml.
ThisBuild / organization := "io.lancespark"
ThisBuild / version      := "0.1.0"
ThisBuild / scalaVersion := "2.13.18"

val sparkVersion    = "4.2.0"
val protobufVersion = "4.33.5"
val arrowVersion    = "19.0.0"  // what Spark 4.2.0 ships
val roaringVersion  = "1.6.10"  // what Spark 4.2.0 ships
val awsSdkVersion   = "2.35.4"  // the AWS SDK v2 of Spark 4.2.0's Hadoop 3.5.0 (hadoop-aws); only compiled against
val aircompressorVersion = "2.0.3" // what Spark 4.2.0 ships: pure-Java zstd and lz4 (file versions 2.1/2.2)

lazy val root = (project in file("."))
  .aggregate(connector)
  .settings(publish / skip := true)

lazy val connector = (project in file("spark-connector"))
  .settings(
    name := "lance-spark",
    javacOptions ++= Seq("--release", "17"),
    scalacOptions ++= Seq("-release", "17", "-deprecation", "-feature", "-unchecked", "-Wunused:imports"),
    libraryDependencies ++= Seq(
      "org.apache.spark"  %% "spark-sql"        % sparkVersion   % Provided,
      "org.apache.arrow"   % "arrow-vector"     % arrowVersion   % Provided,
      "org.apache.arrow"   % "arrow-memory-netty" % arrowVersion % Provided,
      "org.apache.arrow"   % "arrow-compression" % arrowVersion % Provided,  // zstd/lz4 IPC (pylance compresses .arrow deletion files)
      "org.roaringbitmap"  % "RoaringBitmap"    % roaringVersion % Provided,
      "io.airlift"         % "aircompressor"    % aircompressorVersion % Provided,
      "software.amazon.awssdk" % "dynamodb"     % awsSdkVersion  % Provided,  // the DynamoDB external manifest store
      "com.google.protobuf" % "protobuf-java"   % protobufVersion,
      "com.google.protobuf" % "protobuf-java"   % protobufVersion % "protobuf", // well-known types for protoc
      "org.scalatest"     %% "scalatest"        % "3.2.19"       % Test
    ),
    // Generate Java classes from our own protos/ at build time; never committed.
    Compile / PB.protoSources := Seq((ThisBuild / baseDirectory).value / "protos"),
    Compile / PB.targets := Seq(PB.gens.java(protobufVersion) -> (Compile / sourceManaged).value),
    PB.protocVersion := protobufVersion,
    Test / fork := true,
    Test / javaOptions ++= Seq(
      "-Xmx3g",
      "--add-opens=java.base/java.nio=ALL-UNNAMED",
      "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
      "--add-opens=java.base/java.lang=ALL-UNNAMED",
      "--add-opens=java.base/java.util=ALL-UNNAMED",
      "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED"
    ),
    // The bundle jar for spark-submit --jars: our classes + relocated protobuf only.
    assembly / assemblyJarName := s"lance-spark-bundle_2.13-${version.value}.jar",
    assembly / assemblyOption ~= (_.withIncludeScala(false)),
    assembly / assemblyShadeRules := Seq(
      ShadeRule.rename("com.google.protobuf.**" -> "io.lancespark.shaded.protobuf.@1").inAll
    ),
    assembly / assemblyMergeStrategy := {
      case PathList("META-INF", "services", _*) => MergeStrategy.concat
      case PathList("META-INF", _*)             => MergeStrategy.discard
      case x if x.endsWith(".proto")            => MergeStrategy.discard
      case _                                    => MergeStrategy.first
    }
  )
