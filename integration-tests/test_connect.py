"""Spark Connect (issue 36): a real Spark Connect server process with the connector's bundle on
--jars (connect_server.py), reached from this process through lance_spark.configure on a
SparkSession.builder.remote(url); path reads and writes and the Lance catalog's SQL, checked
against pylance reading the same datasets; a server without the bundle gives a clear error;
remote("local") in a process of its own."""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
lance = pytest.importorskip("lance")


def _connect_client_missing() -> list[str]:
    missing = []
    for module, package in (("grpc", "grpcio"), ("grpc_status", "grpcio-status"),
                            ("google.rpc", "googleapis-common-protos"), ("zstandard", "zstandard"),
                            ("pandas", "pandas"), ("pyarrow", "pyarrow")):
        try:
            __import__(module)
        except ImportError:
            missing.append(package)
    return missing


_MISSING = _connect_client_missing()
if _MISSING:
    pytest.skip(f"the Spark Connect client needs {', '.join(_MISSING)} (pip install 'pyspark[connect]')",
                allow_module_level=True)

import lance_spark  # noqa: E402
from connect_server import ConnectServer  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")
WRONG_LINE = "3.5"     # the servers run pyspark's own Spark (4.x): a 3.5 bundle is another line's


@pytest.fixture(scope="module")
def bundle() -> str:
    try:
        return lance_spark.jar_path()
    except (FileNotFoundError, ValueError) as e:
        pytest.skip(f"no connector bundle for this pyspark: {e}")


@pytest.fixture(scope="module")
def servers(bundle, tmp_path_factory):
    """Servers started side by side: "lance" with the bundle on --jars (and only the catalog's
    warehouse and the connector's session extensions as settings: the catalog itself comes from
    configure), "bare" without it, and
    "wrong" with the bundle under the name of another Spark line's (a hand-given wrong jar)."""
    root = tmp_path_factory.mktemp("connect")
    warehouse = root / "lance-warehouse"
    (root / "jars").mkdir()
    wrong_jar = root / "jars" / f"lance-spark-bundle-{WRONG_LINE}_2.12-0.1.0.jar"
    shutil.copyfile(bundle, wrong_jar)
    started = {}
    try:
        started["lance"] = ConnectServer(
            jars=[bundle], conf={"spark.sql.catalog.lance.warehouse": str(warehouse),
                                 # as the README starts it: the session extensions of its line
                                 "spark.sql.extensions": lance_spark.connector_settings(
                                     lance_spark.bundle_of(bundle)[0])["spark.sql.extensions"]},
            workdir=root / "lance-server", name="lance-connect")
        started["bare"] = ConnectServer(workdir=root / "bare-server", name="bare-connect",
                                        driver_memory="512m")
        started["wrong"] = ConnectServer(jars=[str(wrong_jar)], workdir=root / "wrong-server",
                                         name="wrong-connect", driver_memory="512m")
        for s in started.values():
            s.wait_ready()
        yield {**started, "warehouse": warehouse, "root": root}
    finally:
        for s in started.values():
            s.stop()


@pytest.fixture(scope="module")
def connect_env():
    """pyspark marks the process as a Spark Connect one (environment variables); undone after the
    module so that later modules' classic sessions are classic again."""
    before = {k: os.environ.get(k) for k in _CONNECT_ENV}
    yield
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def spark(servers, connect_env):
    session = lance_spark.configure(SparkSession.builder.remote(servers["lance"].url)).getOrCreate()
    yield session
    session.stop()


def _pylance_rows(path, sort_by="id"):
    return sorted(lance.dataset(str(path)).to_table().to_pylist(), key=lambda r: r[sort_by])


def test_configure_a_remote_builder(spark):
    import pyspark
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    assert isinstance(spark, ConnectSession)
    assert spark.version == pyspark.__version__
    assert spark.conf.get("spark.sql.catalog.lance") == lance_spark.CATALOG_CLASS
    line = lance_spark._spark.spark_line(spark.version)
    assert spark.conf.get("spark.sql.timeType.enabled", "false") == (
        "true" if "spark.sql.timeType.enabled" in lance_spark.connector_settings(line) else "false")
    # configure on the session it made again: idempotent, SQL only, and quiet
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lance_spark.configure(spark) is spark


def test_write_and_read_a_path(spark, tmp_path):
    path = str(tmp_path / "people.lance")
    rows = [(1, "ada", 3.5, True, dt.date(2024, 1, 2)), (2, "bob", None, False, None),
            (3, None, -1.25, None, dt.date(1999, 12, 31))]
    schema = "id long, name string, score double, ok boolean, born date"
    spark.createDataFrame(rows, schema).write.format("lance").save(path)
    got = [tuple(r) for r in spark.read.format("lance").load(path).orderBy("id").collect()]
    assert got == rows
    assert [tuple(r.values()) for r in _pylance_rows(path)] == rows

    spark.createDataFrame([(4, "eve", 0.0, True, dt.date(2000, 2, 29))], schema) \
        .write.format("lance").mode("append").save(path)
    assert spark.read.format("lance").load(path).count() == 4
    ds = lance.dataset(path)
    assert ds.count_rows() == 4 and ds.version == 2


def test_sql_through_the_lance_catalog(spark, servers):
    spark.sql("CREATE NAMESPACE lance.conn")
    spark.sql("CREATE TABLE lance.conn.items (id BIGINT, name STRING, qty INT) USING lance")
    spark.sql("INSERT INTO lance.conn.items VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30), (4, 'd', NULL)")
    assert [r.namespace for r in spark.sql("SHOW NAMESPACES IN lance").collect()].count("conn") == 1
    assert [r.tableName for r in spark.sql("SHOW TABLES IN lance.conn").collect()] == ["items"]

    spark.sql("DELETE FROM lance.conn.items WHERE id % 2 = 0")
    got = [tuple(r) for r in spark.sql("SELECT id, name, qty FROM lance.conn.items ORDER BY id").collect()]
    assert got == [(1, "a", 10), (3, "c", 30)]
    path = servers["warehouse"] / "conn" / "items.lance"
    assert [tuple(r.values()) for r in _pylance_rows(path)] == got
    assert spark.sql("SELECT sum(qty) s FROM lance.conn.items").collect()[0].s == 40
    # the same dataset as a path table of the catalog
    assert spark.sql(f"SELECT count(*) c FROM lance.`{path}`").collect()[0].c == 2


def test_a_server_without_the_bundle(servers, spark, connect_env):
    import pyspark

    bare = SparkSession.builder.remote(servers["bare"].url).create()
    try:
        with pytest.raises(RuntimeError) as e:
            lance_spark.configure(bare)
        msg = str(e.value)
        assert f"Spark {pyspark.__version__}" in msg
        assert "start-connect-server.sh --jars" in msg
        assert f"lance-spark-bundle-{lance_spark._spark.spark_line(pyspark.__version__)}_" in msg
        assert lance_spark.CATALOG_CLASS in msg
    finally:
        bare.stop()


def test_a_server_with_another_lines_bundle(servers, spark, connect_env):
    import pyspark

    wrong = SparkSession.builder.remote(servers["wrong"].url).create()
    try:
        with pytest.raises(RuntimeError) as e:
            lance_spark.configure(wrong)
        msg = str(e.value)
        assert f"Spark {pyspark.__version__}" in msg and f"Spark {WRONG_LINE} (Scala 2.12)" in msg
        assert f"lance-spark-bundle-{WRONG_LINE}_2.12-0.1.0.jar" in msg
        assert "start-connect-server.sh --jars" in msg
    finally:
        wrong.stop()


def test_a_remote_builder_checks_the_server_it_reaches(servers, spark, connect_env):
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with pytest.raises(RuntimeError, match="start-connect-server.sh --jars"):
        lance_spark.configure(SparkSession.builder.remote(servers["bare"].url)).create()
    made = ConnectSession.getActiveSession()
    if made is not None and made is not spark:
        made.stop()


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_remote_local(bundle, tmp_path):
    """remote("local") starts a Spark Connect server inside the client's own process (on port
    15002): run in a process of its own, not to turn this one into a Connect-mode process."""
    if not _port_free(15002):
        pytest.skip("port 15002, which remote('local') serves on, is taken")
    path = tmp_path / "local.lance"
    script = textwrap.dedent(f"""
        import json, sys
        import lance_spark
        from pyspark.sql import SparkSession
        builder = (SparkSession.builder.remote("local[2]").appName("lance-spark-remote-local")
                   .config("spark.ui.enabled", "false")
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.connect.grpc.binding.address", "127.0.0.1")
                   .config("spark.sql.warehouse.dir", {str(tmp_path / 'warehouse')!r})
                   .config("spark.sql.shuffle.partitions", "2"))
        spark = lance_spark.configure(builder).getOrCreate()
        out = {{"type": type(spark).__module__,
                "jars": spark.conf.get("spark.jars", ""),
                "catalog": spark.conf.get("spark.sql.catalog.lance")}}
        spark.range(5).selectExpr("id", "id * 2 AS twice").write.format("lance").save({str(path)!r})
        out["rows"] = [list(r) for r in spark.read.format("lance").load({str(path)!r}).orderBy("id").collect()]
        spark.sql("CREATE NAMESPACE lance.loc")
        spark.sql("CREATE TABLE lance.loc.t USING lance AS SELECT * FROM range(3)")
        out["sql"] = spark.sql("SELECT count(*) FROM lance.loc.t").collect()[0][0]
        vpath = {str(tmp_path / 'vectors.lance')!r}
        spark.sql("SELECT id, array(CAST(id AS FLOAT), CAST(0 AS FLOAT)) AS v FROM range(6)") \
            .write.format("lance").option("vectorColumns", "v:2").save(vpath)
        out["nearest"] = [[r.id, r._distance] for r in
                          lance_spark.vector_search(spark, vpath, "v", [2.2, 0.0], k=2).collect()]
        spark.stop()
        print("RESULT " + json.dumps(out))
    """)
    env = dict(os.environ)
    for k in _CONNECT_ENV + ("SPARK_TESTING",):
        env.pop(k, None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(lance_spark.__file__).resolve().parents[1])] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=240)
    results = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and results, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(results[-1][len("RESULT "):])
    assert out["type"] == "pyspark.sql.connect.session"
    assert Path(bundle).name in out["jars"]
    assert out["catalog"] == lance_spark.CATALOG_CLASS
    assert out["rows"] == [[i, 2 * i] for i in range(5)]
    assert out["sql"] == 3
    # vector search through SQL (docs/vector-search.md): squared L2 to (2.2, 0)
    assert [r[0] for r in out["nearest"]] == [2, 3]
    assert [round(r[1], 4) for r in out["nearest"]] == [0.04, 0.64]
    assert [tuple(r.values()) for r in _pylance_rows(path)] == [(i, 2 * i) for i in range(5)]


def test_knn_join_over_connect(spark, tmp_path):
    """lance_spark.knn_join (plain DataFrame operations) on a Spark Connect session, against numpy."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(5)
    v = rng.standard_normal((200, 8)).astype(np.float32)
    path = str(tmp_path / "knn.lance")
    lance.write_dataset(pa.table({"id": pa.array(np.arange(200)),
                                  "emb": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), 8)}),
                        path, max_rows_per_file=50)
    q = rng.standard_normal((3, 8)).astype(np.float32)
    qs = spark.createDataFrame([(i, [float(x) for x in q[i]]) for i in range(3)], "qid INT, qv ARRAY<FLOAT>")
    rows = lance_spark.knn_join(qs, path, "qv", "emb", k=4).collect()
    for i in range(3):
        expected = np.argsort(((v - q[i]) ** 2).sum(1), kind="stable")[:4].tolist()
        assert [r.id for r in rows if r.qid == i] == expected
