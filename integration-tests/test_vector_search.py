"""Nearest-neighbour search from Spark (docs/vector-search.md), differential against numpy brute
force and pylance on seeded clustered vectors: several fragments, deleted rows, a pylance IVF_PQ
index (used when asked, compared with pylance's indexed search), and rows appended after the index
was built. All three APIs: reader options, the SQL
table function lance_vector_search, lance_spark.vector_search."""
from __future__ import annotations

import os

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_spark

SEEDS = [7] + ([11, 23, 41] if os.environ.get("LANCE_LONG_TESTS") == "1" else [])
K = 10
DIST_TOL = 1e-3


def _vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    centers = rng.standard_normal((12, dim)).astype(np.float32) * 4
    return (centers[rng.integers(0, len(centers), n)] + rng.standard_normal((n, dim))).astype(np.float32)


def _table(ids: np.ndarray, v: np.ndarray) -> pa.Table:
    dim = v.shape[1]
    return pa.table({"id": pa.array(ids, pa.int64()), "grp": pa.array(ids % 5, pa.int32()),
                     "emb": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel(), pa.float32()), dim)})


class Data:
    def __init__(self, root: str, seed: int):
        rng = np.random.default_rng(seed)
        self.dim = 16
        n = 3000
        v = _vectors(rng, n, self.dim)
        self.path = os.path.join(root, f"vec_{seed}.lance")
        lance.write_dataset(_table(np.arange(n), v), self.path, max_rows_per_file=800)
        ds = lance.dataset(self.path)
        ds.delete("id % 7 = 3")
        ds.create_index("emb", index_type="IVF_PQ", num_partitions=8, num_sub_vectors=4)
        extra = _vectors(rng, 400, self.dim)
        lance.write_dataset(_table(np.arange(n, n + 400), extra), self.path, mode="append")
        self.ds = lance.dataset(self.path)
        ids = np.arange(n + 400)
        allv = np.concatenate([v, extra])
        live = ids % 7 != 3
        live[n:] = True
        self.ids, self.vectors = ids[live], allv[live]
        self.queries = _vectors(rng, 4, self.dim)


@pytest.fixture(scope="module", params=SEEDS)
def data(request, tmp_path_factory) -> Data:
    return Data(str(tmp_path_factory.mktemp("vec")), request.param)


def brute(d: Data, q: np.ndarray, metric: str, k: int = K, keep=None):
    v, ids = d.vectors, d.ids
    if keep is not None:
        m = keep(ids)
        v, ids = v[m], ids[m]
    if metric == "l2":
        dist = ((v - q) ** 2).sum(1)
    elif metric == "cosine":
        dist = 1 - (v @ q) / (np.linalg.norm(v, axis=1) * np.linalg.norm(q))
    else:
        dist = 1 - v @ q
    order = np.lexsort((ids, dist))[:k]
    return ids[order], dist[order]


def pylance(d: Data, q: np.ndarray, metric: str = "l2", use_index: bool = False, **kw):
    nearest = {"column": "emb", "q": q, "k": K, "metric": metric, "use_index": use_index}
    nearest.update({k: v for k, v in kw.items() if k in ("nprobes", "refine_factor")})
    t = d.ds.to_table(nearest=nearest, filter=kw.get("filter"), prefilter=kw.get("prefilter", False))
    return t["id"].to_numpy(), t["_distance"].to_numpy()


def vec_str(q: np.ndarray) -> str:
    return "[" + ", ".join(repr(float(x)) for x in q) + "]"


def by_options(spark, d: Data, q, metric="l2", k=K, use_index=False, where=None, **extra):
    r = (spark.read.format("lance").option("nearest.column", "emb").option("nearest.vector", vec_str(q))
         .option("nearest.k", k).option("nearest.metric", metric).option("nearest.use_index", str(use_index).lower()))
    for key, value in extra.items():
        r = r.option(f"nearest.{key}", value)
    df = r.load(d.path)
    if where is not None:
        df = df.where(where)
    rows = df.select("id", "_distance").collect()
    return np.array([r.id for r in rows], dtype=np.int64), np.array([r._distance for r in rows], dtype=np.float32)


def same(ours, expected, what: str):
    ids, dist = ours
    eids, edist = expected
    assert len(ids) == len(eids), f"{what}: {len(ids)} rows, expected {len(eids)}"
    np.testing.assert_allclose(dist, edist, rtol=DIST_TOL, atol=DIST_TOL, err_msg=what)
    assert list(dist) == sorted(dist), f"{what}: not nearest first: {dist}"
    # the same ids, except rows tied (within the tolerance) at the k-th distance
    diff = set(ids.tolist()) ^ set(eids.tolist())
    if diff:
        last = float(max(dist[-1], edist[-1]))
        d_of = dict(zip(ids.tolist(), dist.tolist()))
        d_of.update(zip(eids.tolist(), edist.tolist()))
        assert all(abs(d_of[i] - last) <= DIST_TOL for i in diff), f"{what}: ids {list(ids)} != {list(eids)}"


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_exact_equals_numpy_and_pylance(spark, data, metric):
    for i, q in enumerate(data.queries):
        ours = by_options(spark, data, q, metric)
        same(ours, brute(data, q, metric), f"query {i} {metric} vs numpy")
        same(ours, pylance(data, q, metric), f"query {i} {metric} vs pylance")


def test_where_is_a_prefilter_and_select_composes(spark, data):
    q = data.queries[0]
    ours = by_options(spark, data, q, where="grp = 2 AND id > 100")
    same(ours, brute(data, q, "l2", keep=lambda ids: (ids % 5 == 2) & (ids > 100)), "prefilter vs numpy")
    same(ours, pylance(data, q, filter="grp = 2 AND id > 100", prefilter=True), "prefilter vs pylance")
    df = (spark.read.format("lance").option("nearest.column", "emb").option("nearest.vector", vec_str(q))
          .option("nearest.k", 5).load(data.path).select("_distance", "grp"))
    assert df.columns == ["_distance", "grp"]
    assert df.schema["_distance"].dataType.simpleString() == "float"
    assert len(df.collect()) == 5


def test_postfilter_as_pylance(spark, data):
    q = data.queries[1]
    ours = by_options(spark, data, q, where="grp = 1", prefilter="false")
    exact_ids, exact_d = brute(data, q, "l2")
    keep = exact_ids % 5 == 1
    same(ours, (exact_ids[keep], exact_d[keep]), "postfilter vs numpy")
    same(ours, pylance(data, q, filter="grp = 1", prefilter=False), "postfilter vs pylance")


def test_sql_function_and_python(spark, data):
    q = data.queries[2]
    arr = "array(" + ", ".join(f"CAST({float(x)!r} AS FLOAT)" for x in q) + ")"
    rows = spark.sql(f"SELECT id, _distance FROM lance_vector_search('{data.path}', 'emb', {arr}, 7, "
                     "use_index => false, metric => 'cosine')").collect()
    same((np.array([r.id for r in rows]), np.array([r._distance for r in rows], np.float32)),
         brute(data, q, "cosine", k=7), "SQL named arguments")
    rows = spark.sql(f"SELECT * FROM lance_vector_search('{data.path}', 'emb', {arr}, 6, NULL, NULL, "
                     "'grp = 3', true, NULL, false)").collect()
    assert [f for f in rows[0].asDict()] == ["id", "grp", "emb", "_distance"]
    same((np.array([r.id for r in rows]), np.array([r._distance for r in rows], np.float32)),
         brute(data, q, "l2", k=6, keep=lambda ids: ids % 5 == 3), "SQL positional, prefilter")
    # a catalog table name (here the Lance catalog's path table) instead of a path
    rows = spark.sql(f"SELECT id, _distance FROM lance_vector_search('lance.`{data.path}`', 'emb', {arr}, 5, "
                     "use_index => false)").collect()
    same((np.array([r.id for r in rows]), np.array([r._distance for r in rows], np.float32)),
         brute(data, q, "l2", k=5), "SQL, catalog table name")
    df = lance_spark.vector_search(spark, data.path, "emb", q.tolist(), k=8, filter="grp = 3", prefilter=False,
                                   use_index=False)
    rows = df.collect()
    eids, ed = brute(data, q, "l2", k=8)
    same((np.array([r.id for r in rows]), np.array([r._distance for r in rows], np.float32)),
         (eids[eids % 5 == 3], ed[eids % 5 == 3]), "python, postfilter")


def test_neighbours_joined_to_a_table_are_the_broadcast_side(spark, data, tmp_path):
    """A search returns at most k rows and says so (its statistics): joined with a table too large
    to broadcast (the threshold set below that table's size), the neighbours are broadcast, as
    Spark plans k rows; without statistics a scan weighs no end of bytes and both sides were
    shuffled and sorted. The join's rows are those of the neighbours."""
    q = data.queries[0]
    other = str(tmp_path / "other")
    spark.range(0, 200_000).selectExpr("id", "id * 2 AS twice").write.parquet(other)
    key = "spark.sql.autoBroadcastJoinThreshold"
    old = spark.conf.get(key)
    spark.conf.set(key, str(64 * 1024))
    try:
        knn = (spark.read.format("lance").option("nearest.column", "emb").option("nearest.vector", vec_str(q))
               .option("nearest.k", 5).option("nearest.use_index", "false").load(data.path))
        joined = knn.join(spark.read.parquet(other), "id").select("id", "twice", "_distance")
        plan = joined._jdf.queryExecution().executedPlan().toString()
        assert "BroadcastHashJoin" in plan and "SortMergeJoin" not in plan, plan
        rows = joined.collect()
    finally:
        spark.conf.set(key, old)
    eids, _ = brute(data, q, "l2", k=5)
    assert sorted(r.id for r in rows) == sorted(int(i) for i in eids if i < 200_000)
    assert all(r.twice == 2 * r.id for r in rows)


def test_with_pylance_ivf_pq_index(spark, data):
    """The table has a pylance IVF_PQ index (rows appended after it): with use_index the search is
    the index's (integration-tests/test_vector_index.py has the full comparison), so it returns
    pylance's indexed result for the same nprobes and refine_factor."""
    for i, q in enumerate(data.queries):
        ours = by_options(spark, data, q, use_index=True, nprobes=4, refine_factor=2)
        same(ours, pylance(data, q, use_index=True, nprobes=4, refine_factor=2), f"query {i} IVF_PQ vs pylance")


def test_bad_input(spark, data):
    q = data.queries[0]
    def err(fn) -> str:
        with pytest.raises(Exception) as e:
            fn()
        return str(e.value)
    assert "nearest.k" in err(lambda: by_options(spark, data, q, k=0))
    assert "nearest.metric" in err(lambda: by_options(spark, data, q, metric="hamming"))
    assert "16" in err(lambda: by_options(spark, data, q[:5]))
    assert "not a vector column" in err(lambda: spark.read.format("lance").option("nearest.column", "id")
                                        .option("nearest.vector", "[1]").load(data.path).collect())
    assert "nearest.vector" in err(lambda: spark.read.format("lance").option("nearest.column", "emb")
                                   .option("nearest.vector", "[1, x]").load(data.path).collect())
    assert "metric" in err(lambda: spark.sql(f"SELECT * FROM lance_vector_search('{data.path}', 'emb', "
                                             f"array({', '.join('1.0' for _ in q)}), 3, metric => 'manhattan')").collect())
    assert "lance_vector_search" in err(lambda: spark.read.option("nearest.column", "emb")
                                        .option("nearest.vector", vec_str(q)).table(f"lance.`{data.path}`").collect())
    assert "k must be" in err(lambda: lance_spark.vector_search(spark, data.path, "emb", q.tolist(), k=0))


@pytest.mark.parametrize("dim", [5, 8, 12, 16, 24, 40])
def test_distances_are_pylances_to_the_bit(spark, tmp_path, dim):
    """Exact (flat) l2 and dot distances, and the approximate distances of a pylance IVF_PQ index
    (sub-vectors of 8 values: its distance tables), equal pylance's bit for bit: a one-ulp
    difference reorders near-tied rows, and the top k then differs from pylance's. Pylance's
    kernels differ for vectors of at most 16 values and longer ones (docs/vector-search.md)."""
    rng = np.random.default_rng(dim)
    n = 600
    v = (rng.standard_normal((n, dim)) * 3).astype(np.float32)
    path = str(tmp_path / f"bits{dim}.lance")
    lance.write_dataset(_table(np.arange(n), v), path)
    for metric in ["l2", "dot"]:
        q = rng.standard_normal(dim).astype(np.float32)
        d = Data.__new__(Data)
        d.path, d.ds = path, lance.dataset(path)
        ids, dist = by_options(spark, d, q, metric, k=n)
        t = d.ds.to_table(nearest={"column": "emb", "q": q, "k": n, "metric": metric, "use_index": False})
        ours = dict(zip(ids.tolist(), dist.view(np.uint32).tolist()))
        theirs = dict(zip(t["id"].to_pylist(), t["_distance"].to_numpy().view(np.uint32).tolist()))
        assert ours == theirs, f"flat {metric}, dim {dim}: {sum(ours[i] != theirs[i] for i in theirs)} of {n} distances differ"
    if dim % 8 == 0:
        for metric in ["l2", "dot"]:
            ipath = str(tmp_path / f"bits{dim}{metric}.lance")
            lance.write_dataset(_table(np.arange(n), v), ipath)
            lance.dataset(ipath).create_index("emb", index_type="IVF_PQ", num_partitions=2,
                                              num_sub_vectors=dim // 8, metric=metric)
            d = Data.__new__(Data)
            d.path, d.ds = ipath, lance.dataset(ipath)
            q = rng.standard_normal(dim).astype(np.float32)
            ids, dist = by_options(spark, d, q, metric, k=n, use_index=True, nprobes=2)
            t = d.ds.to_table(nearest={"column": "emb", "q": q, "k": n, "metric": metric, "nprobes": 2})
            ours = dict(zip(ids.tolist(), dist.view(np.uint32).tolist()))
            theirs = dict(zip(t["id"].to_pylist(), t["_distance"].to_numpy().view(np.uint32).tolist()))
            assert ours == theirs, f"IVF_PQ {metric}, dim {dim}: {sum(ours.get(i) != theirs[i] for i in theirs)} of {n} differ"
