"""Vector search from Spark (issue 38), measured in one Spark session against Spark SQL brute
force over Parquet and against pylance.

The table: ``--rows`` rows of ``id`` and ``emb`` (``--dim`` float32), written by pylance; a copy
of it for the index Spark builds; the same rows as Parquet, written by Spark. Two shapes of
vectors (``--shape``):

* ``latent`` (the default): like real embeddings, the vectors span few directions. Each row is a
  point of a 32-dimensional latent space (1,000 seeded cluster centres, spread 0.5 around each)
  mapped into ``--dim`` dimensions by one seeded random linear map, plus Gaussian noise of 0.02
  per dimension. Near neighbours in the latent space stay near in the embedding, so the exact
  top 10 is well separated and recall measures the index.
* ``clusters``: 1,000 seeded centres in ``--dim`` dimensions plus Gaussian noise of 0.35 per
  dimension. In 768 dimensions every row of a cluster is almost equally far from a query of that
  cluster, so the exact top 10 is decided by noise that PQ codes cannot resolve: recall is near
  chance for every index (kept to compare with the runs made on it).

* **Build**: an IVF_PQ index (``--partitions`` partitions, ``--sub-vectors`` sub-vectors, l2)
  built by pylance's ``create_index`` and by ``CALL lance.system.create_index(... 'ivf_pq' ...)``
  from Spark on a copy of the same table; ``--builds`` builds each (they take minutes; times are
  medians, recalls means, each build listed). Recall@10 of
  pylance's searches through each index, against the exact top 10 from numpy, over
  ``--recall-queries`` seeded queries, at ``nprobes`` = ``--nprobes`` without refinement (the
  issue's comparison), with ``refine_factor`` 5, and at twice the ``nprobes``.
* **One top-10 query** with the IVF_PQ index through Spark (``lance_spark.vector_search``, the
  ``lance_vector_search`` SQL function) on pylance's index, against the same query by Spark SQL
  brute force over the Parquet copy (``ORDER BY`` the squared distance computed with
  ``zip_with``/``aggregate``, ``LIMIT 10``), against pylance's own query with the same ``nprobes``
  plus one empty Spark job (``spark.range(0, 1, 1, 1).count()``), and the connector's exact search
  (``use_index => false``). One warm-up of each, then ``--reps`` alternating rounds; medians.
  The ids found through the index are checked equal to pylance's.
* **Batch KNN** of ``--queries`` query vectors (``lance_spark.knn_join``, through the index, on
  executors) against the brute-force cross join in Spark SQL over Parquet (a window keeps each
  query's top 10), run for ``--brute-queries`` queries and extrapolated linearly to
  ``--queries`` (it cannot finish at full size on this machine). Each timed once after a smaller
  warm-up.

    python -m bench.vectors [--rows 1000000] [--dim 768] [--partitions 256] [--sub-vectors 48]
                            [--nprobes 20] [--queries 10000] [--shape latent|clusters] [--builds 1]
                            [--parts build,one,batch] [--data bench-data/vectors]
                            [--out docs/benchmarks-vectors.md]

``--parts`` runs some of the three measures (the page then shows those only).

Targets (issue 38): one query at most 0.01x the brute force and at most 5x pylance's query plus
one empty Spark job; batch KNN at most 0.05x the brute force; the Spark build at most 2x
pylance's, with recall@10 within 0.02 of pylance's index. Nothing here asserts on timings."""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Tuple

from . import env, report

os.environ.setdefault("LANCE_LOG", "error")   # pylance's deprecation notes on every search
WHERE = env.use_in_tree_package()
BATCH = 100_000
CENTRES = 1000


def log(msg: str) -> None:
    print(f"[bench.vectors {time.strftime('%H:%M:%S')}] {msg}", flush=True)


LATENT = 32


def _centres(dim: int, shape: str):
    import numpy as np

    return np.random.default_rng(3).standard_normal((CENTRES, LATENT if shape == "latent" else dim)).astype(np.float32)


def _vectors(rng, centres, n: int, dim: int, shape: str):
    import numpy as np

    pick = rng.integers(0, len(centres), n)
    if shape == "clusters":
        return (centres[pick] + 0.35 * rng.standard_normal((n, dim), dtype=np.float32)).astype(np.float32)
    z = centres[pick] + 0.5 * rng.standard_normal((n, LATENT), dtype=np.float32)
    lift = (np.random.default_rng(4).standard_normal((LATENT, dim)) / np.sqrt(LATENT)).astype(np.float32)
    return (z @ lift + 0.02 * rng.standard_normal((n, dim), dtype=np.float32)).astype(np.float32)


def _batches(rows: int, dim: int, shape: str):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(7)
    centres = _centres(dim, shape)
    for start in range(0, rows, BATCH):
        n = min(BATCH, rows - start)
        v = _vectors(rng, centres, n, dim, shape)
        yield pa.RecordBatch.from_pydict({
            "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), dim)})


def _queries(n: int, dim: int, seed: int, shape: str):
    import numpy as np

    return _vectors(np.random.default_rng(seed), _centres(dim, shape), n, dim, shape)


def _generate(root: Path, rows: int, dim: int, shape: str, spark) -> Dict[str, Path]:
    import lance
    import pyarrow as pa

    paths = {"pylance": root / "pylance.lance", "spark": root / "spark-index.lance", "parquet": root / "parquet"}
    stamp = root / (f"done-{rows}-{dim}" + ("" if shape == "clusters" else f"-{shape}"))
    if not stamp.exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        first = next(_batches(1, dim, shape))
        log(f"pylance writes {rows:,} rows of {dim} floats")
        lance.write_dataset(pa.RecordBatchReader.from_batches(first.schema, _batches(rows, dim, shape)), str(paths["pylance"]))
        log("Spark writes the Parquet copy")
        spark.read.format("lance").load(str(paths["pylance"])).write.parquet(str(paths["parquet"]))
        stamp.touch()
    return paths


def _exact_top(path: Path, queries, k: int):
    """The exact top k ids of each query (squared l2), computed with numpy in chunks."""
    import lance
    import numpy as np

    ds = lance.dataset(str(path))
    best_d = np.full((len(queries), k), np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), k), dtype=np.int64)
    qn = (queries.astype(np.float32) ** 2).sum(1)
    for batch in ds.to_batches(columns=["id", "emb"], batch_size=100_000):
        ids = batch.column("id").to_numpy()
        v = batch.column("emb").values.to_numpy().reshape(len(ids), -1)
        d = qn[:, None] - 2 * queries @ v.T + (v.astype(np.float32) ** 2).sum(1)[None, :]
        d_all = np.concatenate([best_d, d], 1)
        i_all = np.concatenate([best_i, np.broadcast_to(ids, d.shape)], 1)
        top = np.argpartition(d_all, k - 1, axis=1)[:, :k]
        best_d = np.take_along_axis(d_all, top, 1)
        best_i = np.take_along_axis(i_all, top, 1)
    return [set(r.tolist()) for r in best_i]


def _recall(path: Path, queries, truth, nprobes: int, refine: int = 0) -> float:
    import lance

    ds = lance.dataset(str(path))
    hits = 0
    for q, t in zip(queries, truth):
        nearest = {"column": "emb", "q": q, "k": 10, "nprobes": nprobes}
        if refine:
            nearest["refine_factor"] = refine
        got = ds.to_table(columns=["id"], nearest=nearest)
        hits += len(t & set(got.column("id").to_pylist()))
    return hits / (10 * len(queries))


def _build(spark, paths: Dict[str, Path], args, seed: int = 0) -> Dict[str, Any]:
    """One build of each index. pylance trains from random starts; the connector is seeded
    (default seed 42), so builds after the first pass seeds 1, 2, ... to sample its spread too."""
    import lance

    ds = lance.dataset(str(paths["pylance"]))
    for idx in ds.list_indices():
        ds.drop_index(idx["name"])
    shutil.rmtree(paths["spark"], ignore_errors=True)
    shutil.copytree(paths["pylance"], paths["spark"])   # the same rows, no index
    ds = lance.dataset(str(paths["pylance"]))
    log("pylance builds IVF_PQ")
    t = time.perf_counter()
    ds.create_index("emb", index_type="IVF_PQ", num_partitions=args.partitions,
                    num_sub_vectors=args.sub_vectors, metric="l2", name="emb_idx")
    py = time.perf_counter() - t
    log(f"pylance: {py:.1f} s; Spark builds IVF_PQ")
    t = time.perf_counter()
    spark.sql(f"CALL lance.system.create_index(table => '`{paths['spark']}`', column => 'emb', "
              f"index_type => 'ivf_pq', name => 'emb_idx', options => map('num_partitions', "
              f"'{args.partitions}', 'num_sub_vectors', '{args.sub_vectors}', 'metric', 'l2'"
              + (f", 'seed', '{seed}'" if seed else "") + "))").collect()
    sp = time.perf_counter() - t
    log(f"Spark: {sp:.1f} s; recall")
    queries = _queries(args.recall_queries, args.dim, 99, args.shape)
    truth = _exact_top(paths["pylance"], queries, 10)
    rec = {"pylance index": _recall(paths["pylance"], queries, truth, args.nprobes),
           "Spark index": _recall(paths["spark"], queries, truth, args.nprobes)}
    log(f"recall@10: {rec}")
    more = {}
    for label, nprobes, refine in _RECALL_SETTINGS(args.nprobes)[1:]:
        more[label] = {side: _recall(paths[key], queries, truth, nprobes, refine)
                       for side, key in (("pylance index", "pylance"), ("Spark index", "spark"))}
        log(f"recall@10, {label}: {more[label]}")
    return {"pylance": py, "spark": sp, "recall": rec, "recall_more": more}


def _summary(builds: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Several builds in one: median times, mean recalls (each build trains from other random
    starts, so one build's recall spreads; the issue's bound is on what a build gives)."""
    def mean_recall(recs: List[Dict[str, float]]) -> Dict[str, float]:
        return {side: statistics.mean(r[side] for r in recs) for side in recs[0]}
    return {"pylance": statistics.median(b["pylance"] for b in builds),
            "spark": statistics.median(b["spark"] for b in builds),
            "recall": mean_recall([b["recall"] for b in builds]),
            "recall_more": {label: mean_recall([b["recall_more"][label] for b in builds])
                            for label in builds[0]["recall_more"]}}


def _RECALL_SETTINGS(nprobes: int) -> List[Tuple[str, int, int]]:
    """(label, nprobes, refine_factor) of each recall measured; the first is the issue's."""
    return [(f"nprobes {nprobes}", nprobes, 0), (f"nprobes {nprobes}, refine_factor 5", nprobes, 5),
            (f"nprobes {2 * nprobes}", 2 * nprobes, 0)]


def _ensure_index(paths: Dict[str, Path], args) -> None:
    """pylance's IVF_PQ index on the table, built when a run without the build measure needs it."""
    import lance

    ds = lance.dataset(str(paths["pylance"]))
    if not any(idx["name"] == "emb_idx" for idx in ds.list_indices()):
        log("pylance builds IVF_PQ (untimed: the build measure is not run)")
        ds.create_index("emb", index_type="IVF_PQ", num_partitions=args.partitions,
                        num_sub_vectors=args.sub_vectors, metric="l2", name="emb_idx")


def _brute_sql(table: str, q) -> str:
    arr = "array(" + ", ".join(f"CAST({float(x)!r} AS FLOAT)" for x in q) + ")"
    return (f"SELECT id, aggregate(zip_with(emb, {arr}, (a, b) -> (a - b) * (a - b)), 0D, (s, x) -> s + x) AS d "
            f"FROM {table} ORDER BY d LIMIT 10")


def _one_query(spark, paths: Dict[str, Path], args) -> Dict[str, Any]:
    import lance
    import lance_spark

    q = _queries(1, args.dim, 5, args.shape)[0]
    spark.read.parquet(str(paths["parquet"])).createOrReplaceTempView("vec_parquet")
    ds = lance.dataset(str(paths["pylance"]))

    def spark_index():
        return [r["id"] for r in lance_spark.vector_search(spark, str(paths["pylance"]), "emb", q.tolist(), k=10,
                                                           nprobes=args.nprobes).select("id").collect()]

    def spark_exact():
        return [r["id"] for r in lance_spark.vector_search(spark, str(paths["pylance"]), "emb", q.tolist(), k=10,
                                                           use_index=False).select("id").collect()]

    def brute():
        return [r["id"] for r in spark.sql(_brute_sql("vec_parquet", q)).collect()]

    def pylance_query():
        return ds.to_table(columns=["id"], nearest={"column": "emb", "q": q, "k": 10,
                                                    "nprobes": args.nprobes}).column("id").to_pylist()

    def empty_job():
        spark.range(0, 1, 1, 1).count()
        return []

    sides = {"Spark, IVF_PQ index": spark_index, "pylance, IVF_PQ index": pylance_query,
             "empty Spark job": empty_job, "Spark, exact search": spark_exact,
             "Spark SQL brute force (Parquet)": brute}
    first = {s: f() for s, f in sides.items()}
    same = first["Spark, IVF_PQ index"] == first["pylance, IVF_PQ index"]
    exact_same = set(first["Spark, exact search"]) == set(first["Spark SQL brute force (Parquet)"])
    log(f"ids equal to pylance's: {same}; exact equal to brute force: {exact_same}")
    times: Dict[str, List[float]] = {s: [] for s in sides}
    order = list(sides)
    for r in range(args.reps):
        for s in (order if r % 2 == 0 else order[::-1]):
            if s == "Spark SQL brute force (Parquet)" and r >= args.brute_reps:
                continue
            t = time.perf_counter()
            sides[s]()
            times[s].append(time.perf_counter() - t)
        log(f"round {r}: " + ", ".join(f"{s} {v[-1]:.3f}" for s, v in times.items() if v))
    return {"times": times, "ids_equal_pylance": same, "exact_equal_brute": exact_same}


def _batch_knn(spark, paths: Dict[str, Path], args) -> Dict[str, Any]:
    import lance_spark

    def qdf(n: int, seed: int):
        qs = _queries(n, args.dim, seed, args.shape)
        return spark.createDataFrame([(i, v.tolist()) for i, v in enumerate(qs)], "qid INT, qv ARRAY<FLOAT>")

    def knn(df):
        return lance_spark.knn_join(df, str(paths["pylance"]), "qv", "emb", k=10, nprobes=args.nprobes) \
            .select("qid", "id", "_distance").count()

    def brute(df) -> int:
        df.createOrReplaceTempView("vec_queries")
        return spark.sql(
            "SELECT qid, id, d FROM (SELECT qid, id, d, row_number() OVER (PARTITION BY qid ORDER BY d) AS rn "
            "FROM (SELECT q.qid, t.id, aggregate(zip_with(t.emb, q.qv, (a, b) -> (a - b) * (a - b)), 0D, "
            "(s, x) -> s + x) AS d FROM vec_queries q CROSS JOIN vec_parquet t)) WHERE rn <= 10").count()

    log("batch KNN warm-up (100 queries)")
    knn(qdf(100, 21))
    big = qdf(args.queries, 22)
    big.cache().count()
    t = time.perf_counter()
    n = knn(big)
    knn_s = time.perf_counter() - t
    log(f"knn_join of {args.queries:,} queries: {knn_s:.1f} s ({n:,} rows)")
    small = qdf(args.brute_queries, 23)
    small.cache().count()
    t = time.perf_counter()
    brute(small)
    brute_s = time.perf_counter() - t
    log(f"brute-force cross join of {args.brute_queries} queries: {brute_s:.1f} s")
    return {"knn": knn_s, "rows": n, "brute_small": brute_s,
            "brute_extrapolated": brute_s * args.queries / args.brute_queries}


def _plot(res: Dict[str, Any], path: Path) -> None:
    bars = _ratios(res)
    report.target_bars(bars, path, 'Vector search from Spark', digits=4)


def _ratios(res: Dict[str, Any]) -> List[Tuple[str, float, float]]:
    out: List[Tuple[str, float, float]] = []
    if "one" in res:
        med = {s: statistics.median(v) for s, v in res["one"]["times"].items()}
        ours = med["Spark, IVF_PQ index"]
        out += [
            ("top-10 query, IVF_PQ\nvs Spark SQL brute force", ours / med["Spark SQL brute force (Parquet)"], 0.01),
            ("top-10 query, IVF_PQ\nvs pylance + empty Spark job",
             ours / (med["pylance, IVF_PQ index"] + med["empty Spark job"]), 5.0),
        ]
    if "batch" in res:
        out.append(("batch KNN\nvs brute-force cross join (extrapolated)",
                    res["batch"]["knn"] / res["batch"]["brute_extrapolated"], 0.05))
    if "build" in res:
        out.append(("IVF_PQ build\nSpark vs pylance", res["build"]["spark"] / res["build"]["pylance"], 2.0))
    return out


def _report(out: Path, args, res: Dict[str, Any], jar: str) -> None:
    m = env.machine()
    png = out.with_suffix(".png")
    if _ratios(res):
        _plot(res, png)
    shape = ("latent: 32-d latent clusters mapped into the embedding" if args.shape == "latent"
             else "clusters: centres plus noise in every dimension")
    lines = [
        "# Vector search: queries against brute force and pylance, builds against pylance",
        "",
        f"Generated by `python -m bench.vectors --rows {args.rows} --dim {args.dim} --partitions {args.partitions} "
        f"--sub-vectors {args.sub_vectors} --nprobes {args.nprobes} --queries {args.queries} "
        f"--brute-queries {args.brute_queries} --recall-queries {args.recall_queries} --builds {args.builds} --reps {args.reps} "
        f"--shape {args.shape} --parts {args.parts}` "
        f"({datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}); see the module's docstring.",
        f"Machine: {m.get('cpu_model')}, {m.get('nproc')} cores. Package: `{WHERE}`; jar: `{jar}`; "
        f"local[{args.cores}].",
        f"Table: {args.rows:,} rows of `id` and `emb` ({args.dim} float32, {shape}), written by pylance.",
        "",
    ]
    if _ratios(res):
        lines += [f"![ratios]({png.name})", "", "| measure | ratio | target |", "|---|---:|---:|"]
        for name, ratio, target in _ratios(res):
            lines.append(f"| {name.replace(chr(10), ' ')} | {ratio:.4f}x | {target:g}x |")
    if "one" in res:
        one = res["one"]
        lines += _section(
            "One top-10 query",
            f"`nprobes` {args.nprobes}, no refinement. Ids through the index equal pylance's: "
            f"**{one['ids_equal_pylance']}**; the exact search's ids equal the brute force's: "
            f"**{one['exact_equal_brute']}**.",
            ["side", "median (s)", "runs (s)"],
            [[s, f"{statistics.median(ts):.4f}", ", ".join(f"{t:.4f}" for t in ts)] for s, ts in one["times"].items()])
    if "batch" in res:
        batch = res["batch"]
        lines += _section("Batch KNN", None, ["side", "queries", "time (s)"], [
            [f"`lance_spark.knn_join` (IVF_PQ, nprobes {args.nprobes})", f"{args.queries:,}", f"{batch['knn']:.1f}"],
            ["Spark SQL cross join over Parquet", f"{args.brute_queries:,}", f"{batch['brute_small']:.1f}"],
            ["the same, extrapolated", f"{args.queries:,}", f"{batch['brute_extrapolated']:.0f}"]])
    if "build" in res:
        build = res["build"]
        settings = [label for label, _, _ in _RECALL_SETTINGS(args.nprobes)]
        recall = {settings[0]: build["recall"], **build.get("recall_more", {})}
        sides = (("pylance index", "pylance `create_index`", build["pylance"]),
                 ("Spark index", "Spark `CALL lance.system.create_index(... 'ivf_pq' ...)`", build["spark"]))
        lines += _section(
            "Build (IVF_PQ)",
            f"Recall@10 of pylance's search through each index against numpy's exact top 10, "
            f"{args.recall_queries} queries; the issue compares the first column.",
            ["side", "time (s)"] + [f"recall@10, {label}" for label in settings],
            [[name, f"{t:.1f}"] + [f"{recall[label][side]:.3f}" for label in settings if label in recall]
             for side, name, t in sides])
        builds = res.get("builds", [])
        if len(builds) > 1:
            first = settings[0]
            lines += [
                "",
                f"The rows above are the median times and mean recalls of {len(builds)} builds of each; "
                f"each build, recall@10 at {first}:",
                "",
                "| build | pylance (s) | Spark (s) | pylance's index | Spark's index | difference |",
                "|---:|---:|---:|---:|---:|---:|"]
            for i, b in enumerate(builds, 1):
                r = b["recall"]
                lines.append(f"| {i} | {b['pylance']:.1f} | {b['spark']:.1f} | {r['pylance index']:.3f} | "
                             f"{r['Spark index']:.3f} | {r['Spark index'] - r['pylance index']:+.3f} |")
    lines.append("")
    out.write_text("\n".join(lines))
    print(f"wrote {out}")


def _section(title: str, intro: str | None, head: List[str], rows: List[List[str]]) -> List[str]:
    """A page section: its title, an optional paragraph and a table (first column left-aligned)."""
    out = ["", f"## {title}", ""] + ([intro, ""] if intro else [])
    out += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--partitions", type=int, default=256)
    ap.add_argument("--sub-vectors", type=int, default=48)
    ap.add_argument("--nprobes", type=int, default=20)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--brute-queries", type=int, default=4)
    ap.add_argument("--recall-queries", type=int, default=100)
    ap.add_argument("--builds", type=int, default=1, help="builds of each index (recall: their mean)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--brute-reps", type=int, default=2, help="timed rounds of the (slow) single-query brute force")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--shape", choices=["latent", "clusters"], default="latent",
                    help="how the vectors are made (see the module's docstring)")
    ap.add_argument("--parts", default="build,one,batch", help="which measures to run: build, one, batch")
    ap.add_argument("--data", default=str(env.REPO / "bench-data" / "vectors"))
    ap.add_argument("--out", default=str(env.REPO / "docs" / "benchmarks-vectors.md"))
    args = ap.parse_args(argv)

    jar = env.ensure_jar()
    from lance_spark.testing import local_session

    spark = local_session({}, app="lance-spark-bench-vectors", cores=str(args.cores), driver_memory="8g")
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(args.data).resolve()   # SQL names the tables by absolute path
    res: Dict[str, Any] = {}
    try:
        parts = {p.strip() for p in args.parts.split(",") if p.strip()}
        unknown = parts - {"build", "one", "batch"}
        if unknown:
            raise SystemExit(f"--parts: unknown measure(s) {sorted(unknown)}; known: build, one, batch")
        paths = _generate(root, args.rows, args.dim, args.shape, spark)
        if "build" in parts:
            res["builds"] = [_build(spark, paths, args, seed=i) for i in range(args.builds)]
            res["build"] = _summary(res["builds"])
        elif "one" in parts or "batch" in parts:
            _ensure_index(paths, args)
        if "one" in parts:
            res["one"] = _one_query(spark, paths, args)
        if "batch" in parts:
            res["batch"] = _batch_knn(spark, paths, args)
    finally:
        spark.stop()
    _report(Path(args.out), args, res, jar)
    report.save_run("vectors", {"args": vars(args), "results": res})
    return 0


if __name__ == "__main__":
    sys.exit(main())
