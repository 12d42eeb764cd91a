"""Putting the connector's bundle jar on a Spark session.

The wheel ships one bundle per Spark line and Scala version, in ``lance_spark/jars/``::

    lance-spark-bundle-3.5_2.12-<version>.jar     Spark 3.5, Scala 2.12 (EMR 7, Glue 5, Dataproc 2.2, Databricks 14/15 LTS)
    lance-spark-bundle-3.5_2.13-<version>.jar     Spark 3.5, Scala 2.13
    lance-spark-bundle-4.0_2.13-<version>.jar     Spark 4.0
    lance-spark-bundle-4.1_2.13-<version>.jar     Spark 4.1
    lance-spark-bundle-4.2_2.13-<version>.jar     Spark 4.2 and 4.3

(``lance-spark-bundle_2.13-<version>.jar``, the name of the single bundle of earlier builds,
counts as the 4.2 / Scala 2.13 one.)  ``jar_path()`` picks the one for the installed pyspark
without starting a JVM; ``configure()`` puts it on a classic session (``spark.jars``), on a
local Spark Connect server started by ``SparkSession.builder.remote("local")``, or checks
that a remote Spark Connect server has it.
"""
from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

CONNECTOR_CLASS = "io.lancespark.spark.LanceDataSource"
CATALOG_CLASS = "io.lancespark.spark.catalog.LanceCatalog"

#: Spark lines with a bundle of their own -> the Scala versions it is built for (the first one is
#: the Scala version assumed when it cannot be found out: Spark 3.5's own default is 2.12).
SPARK_LINES: Dict[str, Tuple[str, ...]] = {
    "3.5": ("2.12", "2.13"),
    "4.0": ("2.13",),
    "4.1": ("2.13",),
    "4.2": ("2.13",),
}
#: Spark lines without Maven artifacts of their own that run another line's bundle.
LINE_ALIASES: Dict[str, str] = {"4.3": "4.2"}

#: Spark settings the connector needs, applied by configure() with ``.config(k, v)`` or
#: ``spark.conf.set(k, v)``; those in SETTINGS_SINCE only on the Spark lines that have them.
#: Settings read only when a session starts (a running session cannot change them): set on
#: builders, never with spark.conf.set.
STATIC_SETTINGS = frozenset({"spark.sql.extensions"})

CONNECTOR_SETTINGS: Dict[str, str] = {
    # Lance time32/time64 columns read as Spark's TIME type, which Spark 4.1+ gates behind this flag.
    "spark.sql.timeType.enabled": "true",
    # The Lance catalog: lance.<namespace>.<table> under spark.sql.catalog.lance.warehouse
    # (default: <spark.sql.warehouse.dir>/lance), and path tables lance.`/abs/path`.
    "spark.sql.catalog.lance": CATALOG_CLASS,
}
#: setting -> the first Spark line that knows it (Spark's TIME type arrived in 4.1).
SETTINGS_SINCE: Dict[str, str] = {"spark.sql.timeType.enabled": "4.1"}

EXTENSIONS_KEY = "spark.sql.extensions"
#: Session extensions the connector installs (``spark.sql.extensions``, a static setting: only
#: on a builder, before the session exists), in order: class -> (first line, last line) that
#: need it (None: no bound).  Append an entry for a new extension.
SESSION_EXTENSIONS: Dict[str, Tuple[Optional[str], Optional[str]]] = {
    # CALL lance.system.<procedure>(...): Spark 3.5 has no CALL for DSv2 catalogs (4.0 does).
    "io.lancespark.spark.extensions.LanceCallExtension": (None, "3.5"),
    # The SQL table function lance_vector_search (docs/vector-search.md): every line.
    "io.lancespark.spark.extensions.LanceTableFunctionsExtension": (None, None),
}


def session_extensions(line: Optional[str]) -> List[str]:
    """The SESSION_EXTENSIONS a bundle line needs (None: all of them)."""
    out = []
    for cls, (first, last) in SESSION_EXTENSIONS.items():
        if line is not None and first is not None and _line_key(line) < _line_key(first):
            continue
        if line is not None and last is not None and _line_key(line) > _line_key(last):
            continue
        out.append(cls)
    return out


def _merge_extensions(existing: Optional[str], ours: List[str]) -> str:
    """``spark.sql.extensions``: the existing classes (e.g. Delta's, Iceberg's) kept, ours appended."""
    have = [e.strip() for e in (existing or "").split(",") if e.strip()]
    return ",".join(have + [c for c in ours if c not in have])

_BUILD_HINT = (
    "build the bundles with `make jar` and reinstall the package "
    "(or point the LANCE_SPARK_JAR environment variable at the bundle jar)"
)

# lance-spark-bundle-<line>_<scala>-<version>.jar, and the earlier single bundle's
# lance-spark-bundle_<scala>-<version>.jar (a Spark 4.2 bundle).
_BUNDLE_RE = re.compile(r"^lance-spark-bundle-(?P<line>\d+\.\d+)_(?P<scala>\d+\.\d+)-(?P<version>[^/]+)\.jar$")
_LEGACY_BUNDLE_RE = re.compile(r"^lance-spark-bundle_(?P<scala>\d+\.\d+)-(?P<version>[^/]+)\.jar$")
_LEGACY_LINE = "4.2"


# ---------------------------------------------------------------------------------------------
# Bundles in the wheel
# ---------------------------------------------------------------------------------------------

def jars_dir() -> Path:
    """The directory of the bundles shipped in this package (``lance_spark/jars``)."""
    return Path(__file__).resolve().parent / "jars"


def bundle_of(jar: str) -> Optional[Tuple[str, str]]:
    """(Spark line, Scala version) of a lance-spark bundle, from its file name (a path or a
    ``file:`` URL will do); None when the name is not a lance-spark bundle's."""
    name = jar.rstrip("/").rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    m = _BUNDLE_RE.match(name)
    if m:
        return m.group("line"), m.group("scala")
    m = _LEGACY_BUNDLE_RE.match(name)
    if m:
        return _LEGACY_LINE, m.group("scala")
    return None


def bundles() -> Dict[Tuple[str, str], str]:
    """The bundles this package has: {(Spark line, Scala version): absolute path}.

    When two files claim the same line (the old single name and the new one), the new name wins."""
    found: Dict[Tuple[str, str], Tuple[int, str]] = {}
    d = jars_dir()
    if not d.is_dir():
        return {}
    for f in sorted(d.iterdir()):
        if not f.is_file():
            continue
        key = bundle_of(f.name)
        if key is None:
            continue
        rank = 1 if _BUNDLE_RE.match(f.name) else 0
        if key not in found or rank >= found[key][0]:
            found[key] = (rank, str(f.resolve()))
    return {k: v for k, (_, v) in sorted(found.items(), key=lambda kv: (_line_key(kv[0][0]), kv[0][1]))}


def _line_key(line: str) -> Tuple[int, ...]:
    return tuple(int(p) for p in line.split("."))


def _describe_bundles(have: Dict[Tuple[str, str], str]) -> str:
    if not have:
        return f"this package has no bundle ({jars_dir()} holds none)"
    return "this package has: " + ", ".join(Path(p).name for p in have.values())


def _supported_lines() -> str:
    parts = []
    for line, scalas in SPARK_LINES.items():
        runs = [a for a, target in LINE_ALIASES.items() if target == line]
        part = f"{line} (Scala {', '.join(scalas)})"
        if runs:
            part += f", also run on Spark {', '.join(runs)}"
        parts.append(part)
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# Spark versions
# ---------------------------------------------------------------------------------------------

def _major_minor(spark_version: str) -> Optional[str]:
    m = re.match(r"^\s*v?(\d+)\.(\d+)", str(spark_version))
    return f"{m.group(1)}.{m.group(2)}" if m else None


def spark_line(spark_version: str) -> Optional[str]:
    """The bundle line that runs on a Spark version ("4.3.0" -> "4.2", "3.5.8" -> "3.5"), or
    None for a Spark version without one (3.4, 5.0)."""
    mm = _major_minor(spark_version)
    if mm is None:
        return None
    mm = LINE_ALIASES.get(mm, mm)
    return mm if mm in SPARK_LINES else None


def scala_version_of(spark_jars: Path) -> Optional[str]:
    """Scala version ("2.12", "2.13") of a Spark distribution's ``jars/`` directory (pyspark's,
    or $SPARK_HOME's), from its scala-library-2.1x.y.jar or spark-core_2.1x-*.jar; None if neither."""
    try:
        names = sorted(p.name for p in Path(spark_jars).iterdir())
    except OSError:
        return None
    for pattern in (r"^scala-library-(\d+\.\d+)\.\d+.*\.jar$", r"^spark-core_(\d+\.\d+)-.+\.jar$"):
        for n in names:
            m = re.match(pattern, n)
            if m:
                return m.group(1)
    return None


def _spark_version_of(spark_jars: Path) -> Optional[str]:
    try:
        names = sorted(p.name for p in Path(spark_jars).iterdir())
    except OSError:
        return None
    for n in names:
        m = re.match(r"^spark-core_\d+\.\d+-(\d+\.\d+\.\d+[^/]*)\.jar$", n)
        if m:
            return m.group(1)
    return None


def _spark_jars_dirs() -> List[Path]:
    """The jars/ directories of the Spark that pyspark launches: $SPARK_HOME's when it is set
    (pyspark runs $SPARK_HOME/bin/spark-submit then), else pyspark's own."""
    dirs = []
    home = os.environ.get("SPARK_HOME")
    if home:
        dirs.append(Path(home) / "jars")
    try:
        import pyspark

        dirs.append(Path(pyspark.__file__).resolve().parent / "jars")
    except ImportError:
        pass
    return [d for d in dirs if d.is_dir()]


def installed_spark() -> Tuple[str, Optional[str]]:
    """(Spark version, Scala version) that the installed pyspark runs, found without a JVM:
    the spark-core / scala-library jars of $SPARK_HOME/jars or pyspark/jars, else
    ``pyspark.__version__`` (Scala None: e.g. pyspark-client, which has no jars)."""
    version = None
    scala = None
    for d in _spark_jars_dirs():
        version = _spark_version_of(d)
        scala = scala_version_of(d)
        if version or scala:
            break
    if version is None:
        try:
            import pyspark
        except ImportError as e:
            raise ImportError(
                "lance_spark.jar_path() needs pyspark to know which bundle to use; install "
                "pyspark or pass the Spark version: lance_spark.jar_path('3.5.8')") from e
        version = pyspark.__version__
    return version, scala


def connector_settings(line: Optional[str]) -> Dict[str, str]:
    """CONNECTOR_SETTINGS for a bundle line (None: all of them): settings a line does not know
    (spark.sql.timeType.enabled before 4.1) are left out; ``spark.sql.extensions`` lists the
    line's session extensions (session_extensions) when it has any."""
    out = {}
    for k, v in CONNECTOR_SETTINGS.items():
        since = SETTINGS_SINCE.get(k)
        if line is not None and since is not None and _line_key(line) < _line_key(since):
            continue
        out[k] = v
    exts = session_extensions(line)
    if exts:
        out[EXTENSIONS_KEY] = ",".join(exts)
    return out


# ---------------------------------------------------------------------------------------------
# jar_path
# ---------------------------------------------------------------------------------------------

def _pick(spark_version: str, scala_version: Optional[str]) -> Tuple[str, str]:
    """(line, scala) of the bundle for a Spark version; ValueError for a Spark line or Scala
    version that has no bundle at all (whatever the package holds)."""
    scala_txt = f"Scala {scala_version}" if scala_version else "Scala version unknown"
    line = spark_line(spark_version)
    if line is None:
        raise ValueError(
            f"lance-spark has no bundle for Spark {spark_version} ({scala_txt}): bundles are built "
            f"for Spark {_supported_lines()}; {_describe_bundles(bundles())}")
    scalas = SPARK_LINES[line]
    if scala_version is None:
        have = [s for (ln, s) in bundles() if ln == line]
        scala = have[0] if len(have) == 1 else scalas[0]
    else:
        scala = _major_minor(scala_version) or scala_version
    if scala not in scalas:
        raise ValueError(
            f"lance-spark has no bundle for Spark {spark_version} with Scala {scala}: the Spark "
            f"{line} bundles are built for Scala {', '.join(scalas)}; {_describe_bundles(bundles())}")
    return line, scala


def jar_path(spark_version: Optional[str] = None, scala_version: Optional[str] = None) -> str:
    """Path of the connector bundle jar for a Spark version.

    ``LANCE_SPARK_JAR`` (a path) overrides everything.  Without arguments: the bundle for the
    installed pyspark (its Spark version and Scala version, read from the jars it ships, or from
    $SPARK_HOME/jars when SPARK_HOME is set; no JVM is started).  ``spark_version`` ("3.5.8",
    "4.3.0", ...) and ``scala_version`` ("2.12", "2.13") choose for another Spark, e.g. a
    cluster's or a Spark Connect server's.  Spark 4.3 runs the 4.2 bundle.

    Raises ValueError for a Spark line or Scala version without a bundle (3.4, 5.0, 4.2 with
    Scala 2.12), FileNotFoundError when the bundle is not in this package; both messages name
    the Spark and Scala versions and the bundles present.
    """
    env = os.environ.get("LANCE_SPARK_JAR")
    if env:
        if not Path(env).is_file():
            raise FileNotFoundError(f"LANCE_SPARK_JAR={env} does not exist; {_BUILD_HINT}")
        return str(Path(env).resolve())
    if spark_version is None:
        spark_version, found_scala = installed_spark()
        scala_version = scala_version or found_scala
    line, scala = _pick(spark_version, scala_version)
    have = bundles()
    path = have.get((line, scala))
    if path is None:
        raise FileNotFoundError(
            f"the lance-spark bundle for Spark {spark_version} (Scala {scala}), "
            f"lance-spark-bundle-{line}_{scala}-<version>.jar, is not packaged: "
            f"{_describe_bundles(have)}; {_BUILD_HINT}")
    return path


# ---------------------------------------------------------------------------------------------
# What configure() is given
# ---------------------------------------------------------------------------------------------

def _connect_module():
    # Imported by whoever made a Connect session or builder; importing it ourselves would fail
    # without grpcio & co., and a Connect object cannot exist without it.
    return sys.modules.get("pyspark.sql.connect.session")


def _is_connect_session(x: Any) -> bool:
    mod = _connect_module()
    return mod is not None and isinstance(x, mod.SparkSession)


def _is_connect_builder(x: Any) -> bool:
    mod = _connect_module()
    return mod is not None and isinstance(x, mod.SparkSession.Builder)


def _is_builder(x: Any) -> bool:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return False
    return isinstance(x, SparkSession.Builder)


def _is_session(x: Any) -> bool:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return False
    return isinstance(x, SparkSession)


def _builder_option(builder: Any, key: str):
    opts = getattr(builder, "_options", None)
    if isinstance(opts, dict):
        return opts.get(key)
    return None


def _builder_mode(builder: Any) -> str:
    """How pyspark's SparkSession.Builder.getOrCreate will make its session: "classic" (a py4j
    JVM), "local-connect" (remote("local") / spark.api.mode=connect: a Spark Connect server
    started in this process from the builder's settings) or "remote" (an sc:// server)."""
    try:
        from pyspark.util import is_remote_only
        remote_only = is_remote_only()
    except ImportError:
        remote_only = False
    url = _builder_option(builder, "spark.remote") or os.environ.get("SPARK_REMOTE")
    if remote_only:
        return "remote"
    if url:
        return "local-connect" if str(url).startswith("local") else "remote"
    api_mode = str(_builder_option(builder, "spark.api.mode") or os.environ.get("SPARK_API_MODE", "")).lower()
    if api_mode not in ("classic", "connect"):
        try:
            from pyspark.util import default_api_mode
            api_mode = default_api_mode()
        except ImportError:
            api_mode = "classic"
    if api_mode == "connect":
        master = str(_builder_option(builder, "spark.master") or os.environ.get("MASTER", "local"))
        return "remote" if master.startswith("sc://") else "local-connect"
    if "SPARK_LOCAL_REMOTE" in os.environ:   # a local Connect server already runs in this process
        return "local-connect"
    return "classic"


# ---------------------------------------------------------------------------------------------
# Lines: what the running Spark is and which bundles its spark.jars holds
# ---------------------------------------------------------------------------------------------

def _jar_entries(jars: Optional[str]) -> List[str]:
    return [e.strip() for e in (jars or "").split(",") if e.strip()]


def _bundles_in(jars: Optional[str]) -> List[Tuple[str, Tuple[str, str]]]:
    out = []
    for e in _jar_entries(jars):
        key = bundle_of(e)
        if key is not None:
            out.append((e, key))
    return out


def _bundle_txt(key: Tuple[str, str]) -> str:
    return f"Spark {key[0]} (Scala {key[1]})"


def _local_target() -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """(Spark version, its bundle line, Scala version) of the installed pyspark; Nones when unknown."""
    try:
        version, scala = installed_spark()
    except ImportError:
        return None, None, None
    return version, spark_line(version), scala


def _wrong_bundles(jars: Optional[str], spark_version: Optional[str], line: Optional[str],
                   scala: Optional[str]) -> List[Tuple[str, Tuple[str, str]]]:
    """The lance-spark bundles on a spark.jars value that are not for this Spark (line, Scala)."""
    if spark_version is None:
        return []
    wrong = []
    for entry, key in _bundles_in(jars):
        if line is None or key[0] != line or (scala is not None and key[1] != scala):
            wrong.append((entry, key))
    return wrong


def _running_txt(spark_version: str, scala: Optional[str]) -> str:
    return f"Spark {spark_version}" + (f" (Scala {scala})" if scala else "")


def _wanted_bundle_txt(spark_version: str, scala: Optional[str]) -> str:
    """What a Spark version needs: the bundle's name and how to get its path."""
    line = spark_line(spark_version)
    if line is None:
        return f"lance-spark has no bundle for Spark {spark_version} (bundles: Spark {_supported_lines()})"
    scalas = SPARK_LINES[line]
    s = scala or scalas[0]
    args = repr(spark_version) + (f", {s!r}" if scala or len(scalas) > 1 else "")
    txt = f"lance-spark-bundle-{line}_{s}-<version>.jar, whose path `lance_spark.jar_path({args})` gives"
    if scala is None and len(scalas) > 1:
        txt += f" (for a Scala {', '.join(x for x in scalas if x != s)} build of Spark {line}, name that Scala version)"
    return txt


# ---------------------------------------------------------------------------------------------
# configure
# ---------------------------------------------------------------------------------------------

def _configure_jvm_builder(builder: Any, mode: str):
    """classic and local-connect builders: the bundle goes on spark.jars, settings as config."""
    jar = jar_path()
    version, line, scala = _local_target()
    if version is None or line is None:
        # Spark unknown (or without a line of its own) but LANCE_SPARK_JAR given: trust its name.
        key = bundle_of(jar)
        line, scala = (key if key else (line, scala))
        version = version if version is not None else (line or None)
    existing = _builder_option(builder, "spark.jars")
    wrong = _wrong_bundles(existing, version, line, scala)
    if wrong:
        entry, key = wrong[0]
        raise ValueError(
            f"spark.jars already holds the lance-spark bundle for {_bundle_txt(key)} ({entry}), "
            f"but this pyspark runs {_running_txt(version, scala)}: remove it from spark.jars and "
            f"let lance_spark.configure add the right one, {_wanted_bundle_txt(version, scala)}")
    entries = _jar_entries(existing)
    same_line = [e for e, _ in _bundles_in(existing)]
    if jar not in entries and not same_line:
        entries.append(jar)
    builder = builder.config("spark.jars", ",".join(entries))
    for k, v in connector_settings(line).items():
        if k == EXTENSIONS_KEY:
            v = _merge_extensions(_builder_option(builder, k), v.split(","))
        builder = builder.config(k, v)
    if mode == "local-connect":
        builder = _check_after_create(builder)
    return builder


def _configure_remote_builder(builder: Any):
    """sc:// builders: the jar must be on the server already; the settings every line has go in
    as config, the rest (and the check) once the session exists and tells its Spark version."""
    for k, v in CONNECTOR_SETTINGS.items():
        if k not in SETTINGS_SINCE and k not in STATIC_SETTINGS:
            builder = builder.config(k, v)
    return _check_after_create(builder)


def _set_runtime_settings(spark: Any, line: Optional[str]) -> None:
    """The line's settings on a running session; spark.sql.extensions is static (it cannot be set
    now): a session without the line's extensions gets a warning saying what is missing."""
    for k, v in connector_settings(line).items():
        if k != EXTENSIONS_KEY:
            spark.conf.set(k, v)
            continue
        try:
            current = spark.conf.get(k, "") or ""
        except Exception:  # noqa: BLE001
            current = ""
        missing = [c for c in v.split(",") if c not in [e.strip() for e in current.split(",")]]
        if missing:
            warnings.warn(
                f"lance_spark.configure: this session was started without {', '.join(missing)} in "
                f"{EXTENSIONS_KEY} (a setting only a new session takes): lance_vector_search (and CALL "
                f"lance.system.* on Spark 3.5) needs it on Spark {line}; start the session with `lance_spark.configure(SparkSession.builder)` "
                f"or `--conf {EXTENSIONS_KEY}={_merge_extensions(current, missing)}`",
                RuntimeWarning, stacklevel=3)


def _check_after_create(builder: Any):
    if getattr(builder, "_lance_spark_checked", False):
        return builder
    for name in ("getOrCreate", "create"):
        made = getattr(builder, name, None)
        if made is None:
            continue

        def checked(*args, _made=made, **kwargs):
            return configure(_made(*args, **kwargs))

        checked.__doc__ = getattr(made, "__doc__", None)
        setattr(builder, name, checked)
    builder._lance_spark_checked = True
    return builder


def _connector_loadable(spark: Any) -> bool:
    jvm = spark._jvm
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass(CONNECTOR_CLASS)
        return True
    except Exception:
        pass
    try:
        jvm.java.lang.Class.forName(CONNECTOR_CLASS)
        return True
    except Exception:
        return False


def _session_jars(spark: Any) -> str:
    try:
        return spark.conf.get("spark.jars", "") or ""
    except Exception:  # noqa: BLE001 - fall back to SQL
        try:
            rows = spark.sql("SET spark.jars").collect()
            value = rows[0][1] if rows else ""
            return "" if value == "<undefined>" else value
        except Exception:  # noqa: BLE001
            return ""


def _configure_classic_session(spark: Any):
    if not _connector_loadable(spark):
        raise RuntimeError(
            f"the lance_spark connector ({CONNECTOR_CLASS}) is not on this Spark session's "
            "classpath; jars cannot be added to a running session. Create the session with "
            "`lance_spark.configure(SparkSession.builder)...getOrCreate()` (or "
            "`lance_spark.session()`) before any other session exists, or launch with "
            "`spark-submit --jars $(python -c 'import lance_spark; print(lance_spark.jar_path())')`")
    version = spark.version
    scala = None
    try:
        full = spark._jvm.scala.util.Properties.versionNumberString()
        scala = _major_minor(str(full))
    except Exception:  # noqa: BLE001
        pass
    line = spark_line(version)
    wrong = _wrong_bundles(_session_jars(spark), version, line, scala)
    if wrong:
        entry, key = wrong[0]
        raise RuntimeError(
            f"this Spark session runs {_running_txt(version, scala)} but loaded the lance-spark "
            f"bundle for {_bundle_txt(key)} ({entry}); it needs {_wanted_bundle_txt(version, scala)}: "
            "start the session again with `lance_spark.configure(SparkSession.builder)`, or "
            "`spark-submit --jars $(python -c 'import lance_spark; print(lance_spark.jar_path())')`")
    _set_runtime_settings(spark, line)
    return spark


_CLASS_MISSING = ("Cannot find catalog plugin class", "CATALOG_PLUGIN_CLASS_NOT_FOUND",
                  "ClassNotFoundException", "NoClassDefFoundError", "_LEGACY_ERROR_TEMP_2215")
_NAMESPACE_MISSING = ("SCHEMA_NOT_FOUND", "NAMESPACE_NOT_FOUND", "NoSuchNamespaceException",
                      "NoSuchDatabaseException")
_PROBE_NAMESPACE = "__lance_spark_probe__"


def _error_text(e: BaseException) -> str:
    parts = [type(e).__name__, str(e)]
    # getCondition (4.0+) before the deprecated getErrorClass (3.4, 3.5)
    for attr in ("getCondition", "getErrorClass"):
        if hasattr(e, attr):
            try:
                parts.append(str(getattr(e, attr)()))
            except Exception:  # noqa: BLE001
                pass
            break
    return " ".join(parts)


def _configure_connect_session(spark: Any):
    """A Spark Connect session: everything through SQL and spark.conf (no py4j here)."""
    version = spark.version   # the server's Spark
    line = spark_line(version)
    jars = _session_jars(spark)
    wrong = _wrong_bundles(jars, version, line, None)
    if wrong:
        entry, key = wrong[0]
        raise RuntimeError(
            f"the Spark Connect server runs Spark {version} but its spark.jars has the lance-spark "
            f"bundle for {_bundle_txt(key)} ({entry}); it needs {_wanted_bundle_txt(version, None)}: "
            "start the server again with that one, `start-connect-server.sh --jars <bundle>`")
    _set_runtime_settings(spark, line)
    # Loading the catalog loads the bundle's classes; listing a namespace that is not there only
    # asks whether one path exists (no write).  A class the server cannot load is the missing jar.
    catalog = "lance"
    try:
        spark.sql(f"SHOW NAMESPACES IN `{catalog}`.`{_PROBE_NAMESPACE}`").collect()
    except Exception as e:  # noqa: BLE001 - pyspark's Connect errors have no common base before 3.5
        text = _error_text(e)
        if any(s in text for s in _CLASS_MISSING):
            on_server = ", ".join(Path(j).name for j in _jar_entries(jars)) or "none"
            raise RuntimeError(
                f"the lance_spark connector is not on the Spark Connect server (Spark {version}): "
                f"the server cannot load {CONNECTOR_SETTINGS.get('spark.sql.catalog.' + catalog, CATALOG_CLASS)} "
                f"(its spark.jars: {on_server}). A client cannot put it there (spark.addArtifacts "
                "does not reach the connector's Spark jobs): start the server with the bundle for its "
                f"Spark line, {_wanted_bundle_txt(version, None)}: "
                f"`start-connect-server.sh --jars <bundle> --conf spark.sql.catalog.lance={CATALOG_CLASS}`; "
                "for a local server, `lance_spark.configure(SparkSession.builder.remote(\"local\"))` "
                "puts the bundle on its spark.jars") from e
        if not any(s in text for s in _NAMESPACE_MISSING):
            warnings.warn(
                f"lance_spark.configure: the Lance catalog loaded on the Spark Connect server but "
                f"could not list its warehouse: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                RuntimeWarning, stacklevel=3)
    return spark


def configure(x: Any):
    """Put the connector on a Spark session, or check that it is there.

    * ``SparkSession.Builder`` (classic, before getOrCreate): appends the bundle for the
      installed pyspark (``jar_path()``) to ``spark.jars`` (existing entries kept) and applies
      the settings of that Spark line (``connector_settings``); returns the builder.  A bundle
      for another Spark line already on ``spark.jars`` is a ValueError naming both.
    * ``SparkSession.builder.remote("local")`` (or ``spark.api.mode=connect``): the same, for
      the Spark Connect server pyspark starts in this process; the session is checked once made.
    * ``SparkSession.builder.remote("sc://host:port")``: the server must have the bundle already
      (``start-connect-server.sh --jars <bundle>``); the catalog setting goes in as config, and
      getOrCreate()/create() then set the line's settings and check the server (as below).
    * classic ``SparkSession``: RuntimeError if the connector is not on its classpath or if the
      bundle on ``spark.jars`` is for another Spark line than ``spark.version``; else applies the
      settings at runtime.  Returns the session.
    * Spark Connect ``SparkSession``: through SQL and ``spark.conf`` only: checks the server's
      ``spark.jars`` against its ``spark.version``, sets the settings for this session and loads
      the Lance catalog; a server without the bundle is a RuntimeError explaining ``--jars``.
    """
    if _is_connect_session(x):
        return _configure_connect_session(x)
    if _is_connect_builder(x):
        return _configure_remote_builder(x)
    if _is_builder(x):
        mode = _builder_mode(x)
        if mode == "remote":
            return _configure_remote_builder(x)
        return _configure_jvm_builder(x, mode)
    if _is_session(x):
        return _configure_classic_session(x)
    raise TypeError(
        f"lance_spark.configure expects a pyspark SparkSession.Builder or SparkSession (classic "
        f"or Spark Connect), got {type(x).__name__}")


def session(app_name: str = "lance-spark", master: str = "local[*]", **conf: Any):
    """A SparkSession with the connector: ``configure(builder.appName(..).master(..).config(**conf)).getOrCreate()``.

    Keyword settings use their Spark key, e.g. ``session(**{"spark.driver.memory": "2g"})``.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(master)
    for k, v in conf.items():
        builder = builder.config(k, v)
    return configure(builder).getOrCreate()
