"""One bundle per Spark line in the wheel (issue 36): which bundle jar_path() and configure()
choose for which pyspark, from a jars directory laid out as the wheel and pyspark lay theirs out
(empty files with the real names).  No JVM is started here."""
from __future__ import annotations

from pathlib import Path

import pytest

import lance_spark
from lance_spark import _spark

ALL_BUNDLES = ["lance-spark-bundle-3.5_2.12-0.1.0.jar", "lance-spark-bundle-3.5_2.13-0.1.0.jar",
               "lance-spark-bundle-4.0_2.13-0.1.0.jar", "lance-spark-bundle-4.1_2.13-0.1.0.jar",
               "lance-spark-bundle-4.2_2.13-0.1.0.jar"]
OLD_NAME = "lance-spark-bundle_2.13-0.1.0.jar"     # the single bundle of earlier builds: Spark 4.2


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for k in ("LANCE_SPARK_JAR", "SPARK_HOME", "SPARK_REMOTE", "SPARK_API_MODE", "SPARK_CONNECT_MODE",
              "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "MASTER"):
        monkeypatch.delenv(k, raising=False)


def make_jars(tmp_path: Path, monkeypatch, names) -> Path:
    """The wheel's lance_spark/jars with these (empty) files."""
    d = tmp_path / "wheel_jars"
    d.mkdir()
    for n in names:
        (d / n).write_bytes(b"")
    monkeypatch.setattr(_spark, "jars_dir", lambda: d)
    return d


def pyspark_jars(tmp_path: Path, spark_version: str, scala: str, *, scala_library=True,
                 spark_core=True, name="pyspark_jars") -> Path:
    """A pyspark-like jars/ directory: scala-library-<scala>.x.jar and spark-core_<scala>-<version>.jar."""
    d = tmp_path / name
    d.mkdir()
    patch = {"2.12": "18", "2.13": "16"}[scala]
    for n in ["py4j-0.10.9.9.jar", "spark-sql_%s-%s.jar" % (scala, spark_version),
              "scala-reflect-%s.%s.jar" % (scala, patch)]:
        (d / n).write_bytes(b"")
    if scala_library:
        (d / f"scala-library-{scala}.{patch}.jar").write_bytes(b"")
    if spark_core:
        (d / f"spark-core_{scala}-{spark_version}.jar").write_bytes(b"")
    return d


def installed(monkeypatch, tmp_path, spark_version: str, scala: str) -> Path:
    """Makes the 'installed pyspark' one of this version and Scala version."""
    d = pyspark_jars(tmp_path, spark_version, scala)
    monkeypatch.setattr(_spark, "_spark_jars_dirs", lambda: [d])
    return d


# ----------------------------------------------------------------------------------------------
# names, lines, Scala detection
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,expected", [
    ("lance-spark-bundle-3.5_2.12-0.1.0.jar", ("3.5", "2.12")),
    ("/opt/jars/lance-spark-bundle-4.1_2.13-0.2.0-SNAPSHOT.jar", ("4.1", "2.13")),
    ("file:///work/x/lance-spark-bundle-4.0_2.13-0.1.0.jar", ("4.0", "2.13")),
    (OLD_NAME, ("4.2", "2.13")),
    ("lance-spark_2.13-0.1.0.jar", None),
    ("delta-spark_2.13-4.0.0.jar", None),
])
def test_bundle_of(name, expected):
    assert lance_spark.bundle_of(name) == expected


@pytest.mark.parametrize("version,line", [
    ("3.5.8", "3.5"), ("3.5.2-amzn-1", "3.5"), ("4.0.2", "4.0"), ("4.1.1", "4.1"), ("4.2.0", "4.2"),
    ("4.3.0", "4.2"), ("4.3.0.dev0", "4.2"), ("3.4.1", None), ("5.0.0", None), ("nonsense", None),
])
def test_spark_line(version, line):
    assert _spark.spark_line(version) == line


@pytest.mark.parametrize("scala", ["2.12", "2.13"])
def test_scala_version_from_pyspark_jars(tmp_path, scala):
    assert _spark.scala_version_of(pyspark_jars(tmp_path, "3.5.8", scala)) == scala


def test_scala_version_from_spark_core_alone(tmp_path):
    d = pyspark_jars(tmp_path, "3.5.8", "2.12", scala_library=False)
    assert _spark.scala_version_of(d) == "2.12"
    assert _spark.scala_version_of(tmp_path / "missing") is None


def test_installed_spark_from_jars(tmp_path, monkeypatch):
    installed(monkeypatch, tmp_path, "3.5.8", "2.12")
    assert _spark.installed_spark() == ("3.5.8", "2.12")


def test_installed_spark_version_from_pyspark_when_jars_do_not_say(tmp_path, monkeypatch):
    pyspark = pytest.importorskip("pyspark")
    d = pyspark_jars(tmp_path, "4.2.0", "2.13", spark_core=False)
    monkeypatch.setattr(_spark, "_spark_jars_dirs", lambda: [d])
    assert _spark.installed_spark() == (pyspark.__version__, "2.13")


def test_installed_spark_prefers_spark_home(tmp_path, monkeypatch):
    """pyspark launches $SPARK_HOME/bin/spark-submit when SPARK_HOME is set: that Spark counts."""
    home = tmp_path / "spark-3.5.8-bin-hadoop3"
    home.mkdir()
    (home / "jars").mkdir()
    for n in ("scala-library-2.12.18.jar", "spark-core_2.12-3.5.8.jar"):
        (home / "jars" / n).write_bytes(b"")
    monkeypatch.setenv("SPARK_HOME", str(home))
    assert _spark.installed_spark() == ("3.5.8", "2.12")


def test_the_real_pyspark():
    pyspark = pytest.importorskip("pyspark")
    version, scala = _spark.installed_spark()
    assert version == pyspark.__version__
    assert scala in ("2.12", "2.13")


# ----------------------------------------------------------------------------------------------
# bundles() and jar_path()
# ----------------------------------------------------------------------------------------------

def test_bundles_lists_the_wheel(tmp_path, monkeypatch):
    d = make_jars(tmp_path, monkeypatch, ALL_BUNDLES + ["README.txt", "other_2.13-1.0.jar"])
    assert lance_spark.bundles() == {
        ("3.5", "2.12"): str(d / ALL_BUNDLES[0]), ("3.5", "2.13"): str(d / ALL_BUNDLES[1]),
        ("4.0", "2.13"): str(d / ALL_BUNDLES[2]), ("4.1", "2.13"): str(d / ALL_BUNDLES[3]),
        ("4.2", "2.13"): str(d / ALL_BUNDLES[4]),
    }


def test_bundles_of_a_missing_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(_spark, "jars_dir", lambda: tmp_path / "nope")
    assert lance_spark.bundles() == {}


@pytest.mark.parametrize("spark_version,scala,bundle", [
    ("3.5.8", "2.12", "lance-spark-bundle-3.5_2.12-0.1.0.jar"),
    ("3.5.8", "2.13", "lance-spark-bundle-3.5_2.13-0.1.0.jar"),
    ("4.0.2", "2.13", "lance-spark-bundle-4.0_2.13-0.1.0.jar"),
    ("4.1.1", "2.13", "lance-spark-bundle-4.1_2.13-0.1.0.jar"),
    ("4.2.0", "2.13", "lance-spark-bundle-4.2_2.13-0.1.0.jar"),
    ("4.3.0", "2.13", "lance-spark-bundle-4.2_2.13-0.1.0.jar"),   # 4.3 runs the 4.2 bundle
])
def test_jar_path_for_the_installed_pyspark(tmp_path, monkeypatch, spark_version, scala, bundle):
    d = make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    installed(monkeypatch, tmp_path, spark_version, scala)
    assert lance_spark.jar_path() == str(d / bundle)
    # the same, asked for by version
    assert lance_spark.jar_path(spark_version, scala) == str(d / bundle)


def test_jar_path_without_scala_takes_the_lines_default(tmp_path, monkeypatch):
    d = make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    assert lance_spark.jar_path("3.5.1") == str(d / "lance-spark-bundle-3.5_2.12-0.1.0.jar")
    assert lance_spark.jar_path("4.1.0") == str(d / "lance-spark-bundle-4.1_2.13-0.1.0.jar")
    assert lance_spark.jar_path("3.5.1", "2.13.16") == str(d / "lance-spark-bundle-3.5_2.13-0.1.0.jar")


def test_jar_path_without_scala_takes_the_only_bundle_of_the_line(tmp_path, monkeypatch):
    d = make_jars(tmp_path, monkeypatch, ["lance-spark-bundle-3.5_2.13-0.1.0.jar"])
    assert lance_spark.jar_path("3.5.8") == str(d / "lance-spark-bundle-3.5_2.13-0.1.0.jar")


def test_the_old_single_name_is_the_4_2_bundle(tmp_path, monkeypatch):
    d = make_jars(tmp_path, monkeypatch, [OLD_NAME])
    installed(monkeypatch, tmp_path, "4.2.0", "2.13")
    assert lance_spark.bundles() == {("4.2", "2.13"): str(d / OLD_NAME)}
    assert lance_spark.jar_path() == str(d / OLD_NAME)
    assert lance_spark.jar_path("4.3.0") == str(d / OLD_NAME)


def test_the_new_name_wins_over_the_old_one(tmp_path, monkeypatch):
    d = make_jars(tmp_path, monkeypatch, [OLD_NAME, "lance-spark-bundle-4.2_2.13-0.1.0.jar"])
    assert lance_spark.jar_path("4.2.0") == str(d / "lance-spark-bundle-4.2_2.13-0.1.0.jar")


@pytest.mark.parametrize("spark_version,scala", [("3.4.1", "2.12"), ("5.0.0", "2.13")])
def test_spark_lines_without_a_bundle(tmp_path, monkeypatch, spark_version, scala):
    make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    installed(monkeypatch, tmp_path, spark_version, scala)
    with pytest.raises(ValueError) as e:
        lance_spark.jar_path()
    msg = str(e.value)
    assert f"Spark {spark_version}" in msg and f"Scala {scala}" in msg
    assert "lance-spark-bundle-3.5_2.12-0.1.0.jar" in msg    # what the package has
    assert "4.3" in msg                                      # and which Spark runs which bundle


def test_a_scala_version_the_line_is_not_built_for(tmp_path, monkeypatch):
    make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    with pytest.raises(ValueError, match=r"Spark 4\.1\.1 with Scala 2\.12.*built for Scala 2\.13"):
        lance_spark.jar_path("4.1.1", "2.12")


@pytest.mark.parametrize("spark_version,scala,missing", [
    ("3.5.8", "2.12", "lance-spark-bundle-3.5_2.12-<version>.jar"),
    ("4.0.2", "2.13", "lance-spark-bundle-4.0_2.13-<version>.jar"),
])
def test_a_line_whose_bundle_is_not_packaged(tmp_path, monkeypatch, spark_version, scala, missing):
    make_jars(tmp_path, monkeypatch, [OLD_NAME])
    installed(monkeypatch, tmp_path, spark_version, scala)
    with pytest.raises(FileNotFoundError) as e:
        lance_spark.jar_path()
    msg = str(e.value)
    assert f"Spark {spark_version} (Scala {scala})" in msg
    assert missing in msg and OLD_NAME in msg and "make jar" in msg


def test_lance_spark_jar_overrides(tmp_path, monkeypatch):
    make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    installed(monkeypatch, tmp_path, "3.5.8", "2.12")
    own = tmp_path / "my-build.jar"
    own.write_bytes(b"")
    monkeypatch.setenv("LANCE_SPARK_JAR", str(own))
    assert lance_spark.jar_path() == str(own.resolve())
    assert lance_spark.jar_path("4.1.1") == str(own.resolve())


# ----------------------------------------------------------------------------------------------
# settings per line
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line,has_time", [("3.5", False), ("4.0", False), ("4.1", True), ("4.2", True),
                                           (None, True)])
def test_settings_per_line(line, has_time):
    s = lance_spark.connector_settings(line)
    assert s["spark.sql.catalog.lance"] == "io.lancespark.spark.catalog.LanceCatalog"
    assert ("spark.sql.timeType.enabled" in s) == has_time


# ----------------------------------------------------------------------------------------------
# configure(builder): classic, remote("local"), remote("sc://...")
# ----------------------------------------------------------------------------------------------

pyspark_sql = pytest.importorskip("pyspark.sql")
SparkSession = pyspark_sql.SparkSession


@pytest.mark.parametrize("spark_version,scala,bundle,time_type", [
    ("3.5.8", "2.12", "lance-spark-bundle-3.5_2.12-0.1.0.jar", False),
    ("3.5.8", "2.13", "lance-spark-bundle-3.5_2.13-0.1.0.jar", False),
    ("4.0.2", "2.13", "lance-spark-bundle-4.0_2.13-0.1.0.jar", False),
    ("4.1.1", "2.13", "lance-spark-bundle-4.1_2.13-0.1.0.jar", True),
    ("4.3.0", "2.13", "lance-spark-bundle-4.2_2.13-0.1.0.jar", True),
])
def test_classic_builder_gets_its_lines_bundle(tmp_path, monkeypatch, spark_version, scala, bundle, time_type):
    d = make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    installed(monkeypatch, tmp_path, spark_version, scala)
    b = lance_spark.configure(SparkSession.Builder().config("spark.jars", "/opt/other.jar"))
    assert b._options["spark.jars"] == f"/opt/other.jar,{d / bundle}"
    assert b._options["spark.sql.catalog.lance"] == "io.lancespark.spark.catalog.LanceCatalog"
    assert ("spark.sql.timeType.enabled" in b._options) == time_type
    # Spark 3.5 has no CALL for DSv2 catalogs: the CALL extension goes on spark.sql.extensions there
    # only; the table functions' extension on every line
    exts = b._options["spark.sql.extensions"].split(",")
    assert (CALL_EXTENSION in exts) == spark_version.startswith("3.5")
    assert TABLE_FUNCTIONS in exts


CALL_EXTENSION = "io.lancespark.spark.extensions.LanceCallExtension"
TABLE_FUNCTIONS = "io.lancespark.spark.extensions.LanceTableFunctionsExtension"


@pytest.mark.parametrize("line,has_call", [("3.5", True), ("4.0", False), ("4.1", False), ("4.2", False)])
def test_extensions_per_line(line, has_call):
    exts = lance_spark.connector_settings(line)["spark.sql.extensions"].split(",")
    assert (CALL_EXTENSION in exts) == has_call
    assert TABLE_FUNCTIONS in exts


def test_extensions_kept_and_appended(tmp_path, monkeypatch):
    """Another library's extension (Delta's) stays first; ours is appended once."""
    make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    installed(monkeypatch, tmp_path, "3.5.9", "2.12")
    delta = "io.delta.sql.DeltaSparkSessionExtension"
    b = lance_spark.configure(SparkSession.Builder().config("spark.sql.extensions", delta))
    assert b._options["spark.sql.extensions"] == f"{delta},{CALL_EXTENSION},{TABLE_FUNCTIONS}"
    b = lance_spark.configure(b)
    assert b._options["spark.sql.extensions"] == f"{delta},{CALL_EXTENSION},{TABLE_FUNCTIONS}"


@pytest.mark.parametrize("spark_version,scala,given", [
    ("4.2.0", "2.13", "/opt/lance-spark-bundle-3.5_2.12-0.1.0.jar"),
    ("3.5.8", "2.12", "/opt/lance-spark-bundle-4.2_2.13-0.1.0.jar"),
    ("3.5.8", "2.12", f"/opt/{OLD_NAME}"),
    ("3.5.8", "2.12", "/opt/lance-spark-bundle-3.5_2.13-0.1.0.jar"),     # right line, wrong Scala
])
def test_builder_with_another_lines_bundle_is_refused(tmp_path, monkeypatch, spark_version, scala, given):
    make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    installed(monkeypatch, tmp_path, spark_version, scala)
    b = SparkSession.Builder().config("spark.jars", f"/opt/other.jar,{given}")
    with pytest.raises(ValueError) as e:
        lance_spark.configure(b)
    msg = str(e.value)
    g_line, g_scala = lance_spark.bundle_of(given)
    assert f"Spark {g_line} (Scala {g_scala})" in msg and given in msg
    assert f"Spark {spark_version} (Scala {scala})" in msg
    assert b._options["spark.jars"] == f"/opt/other.jar,{given}"    # left as it was


def test_builder_keeps_a_hand_given_bundle_of_its_line(tmp_path, monkeypatch):
    make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    installed(monkeypatch, tmp_path, "4.1.1", "2.13")
    given = "/opt/build/lance-spark-bundle-4.1_2.13-0.2.0-SNAPSHOT.jar"
    b = lance_spark.configure(SparkSession.Builder().config("spark.jars", given))
    assert b._options["spark.jars"] == given


def test_local_connect_builder_gets_the_jar(tmp_path, monkeypatch):
    """remote("local") starts a Spark Connect server in this process from the builder's settings."""
    d = make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    installed(monkeypatch, tmp_path, "4.1.1", "2.13")
    b = lance_spark.configure(SparkSession.builder.remote("local[2]"))
    assert b._options["spark.jars"] == str(d / "lance-spark-bundle-4.1_2.13-0.1.0.jar")
    assert b._options["spark.sql.timeType.enabled"] == "true"
    assert b._options["spark.sql.catalog.lance"] == "io.lancespark.spark.catalog.LanceCatalog"
    assert b._lance_spark_checked      # getOrCreate() checks the session it makes


def test_api_mode_connect_builder_is_local_connect(tmp_path, monkeypatch):
    d = make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    installed(monkeypatch, tmp_path, "4.2.0", "2.13")
    b = lance_spark.configure(SparkSession.Builder().config("spark.api.mode", "connect").master("local[1]"))
    assert b._options["spark.jars"] == str(d / "lance-spark-bundle-4.2_2.13-0.1.0.jar")


@pytest.mark.parametrize("how", ["builder", "env"])
def test_remote_builder_gets_settings_not_jars(tmp_path, monkeypatch, how):
    """The server of an sc:// URL has its own classpath: the client only sets session settings;
    those of some lines only (TIME) wait for the session, which tells the server's version."""
    make_jars(tmp_path, monkeypatch, ALL_BUNDLES)
    installed(monkeypatch, tmp_path, "4.2.0", "2.13")
    if how == "env":
        monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:1")
        b = SparkSession.Builder()
    else:
        b = SparkSession.builder.remote("sc://127.0.0.1:1")
    out = lance_spark.configure(b)
    assert out is b
    assert "spark.jars" not in b._options
    assert b._options["spark.sql.catalog.lance"] == "io.lancespark.spark.catalog.LanceCatalog"
    assert "spark.sql.timeType.enabled" not in b._options
    assert b._lance_spark_checked
    lance_spark.configure(b)            # twice: the check is not wrapped twice
    assert b.getOrCreate.__name__ == "checked"


def test_builder_modes():
    assert _spark._builder_mode(SparkSession.Builder()) == "classic"
    assert _spark._builder_mode(SparkSession.Builder().master("local[1]")) == "classic"
    assert _spark._builder_mode(SparkSession.builder.remote("local")) == "local-connect"
    assert _spark._builder_mode(SparkSession.builder.remote("sc://h:15002")) == "remote"


def test_connect_missing_class_errors_are_recognised():
    text = _spark._error_text(RuntimeError(
        "[_LEGACY_ERROR_TEMP_2215] Cannot find catalog plugin class for catalog 'lance': "
        "io.lancespark.spark.catalog.LanceCatalog."))
    assert any(s in text for s in _spark._CLASS_MISSING)
    text = _spark._error_text(RuntimeError("[SCHEMA_NOT_FOUND] The schema `__lance_spark_probe__` cannot be found."))
    assert not any(s in text for s in _spark._CLASS_MISSING)
    assert any(s in text for s in _spark._NAMESPACE_MISSING)
