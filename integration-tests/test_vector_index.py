"""Searches through pylance-built vector indices from Spark (docs/vector-search.md): IVF_FLAT,
IVF_PQ and IVF_SQ indices with l2, cosine and dot metrics on seeded clustered vectors (several
fragments, rows deleted before and after the build, a fragment appended after it). The reader
options and the SQL function lance_vector_search must return pylance's own indexed search for the
same nprobes / refine_factor / prefilter: the same ids in the same order (up to ties), distances
close. An IVF_PQ search without refine returns PQ's approximate distances, which differ from the
exact ones: equal to pylance's, they show that the index was used."""
from __future__ import annotations

import os

import lance
import numpy as np
import pyarrow as pa
import pytest

SEEDS = [3] + ([5, 8] if os.environ.get("LANCE_LONG_TESTS") == "1" else [])
TOL = 1e-4


class Data:
    def __init__(self, root: str, seed: int, index_type: str, metric: str):
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.dim = 32
        self.metric = metric
        centers = rng.standard_normal((10, self.dim)) * 3

        def vecs(n: int) -> np.ndarray:
            return (centers[rng.integers(0, 10, n)] + rng.standard_normal((n, self.dim))).astype(np.float32)

        self.vecs = vecs

        def table(ids: np.ndarray, v: np.ndarray) -> pa.Table:
            return pa.table({"id": pa.array(ids, pa.int64()), "grp": pa.array(ids % 4, pa.int32()),
                             "emb": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel(), pa.float32()), self.dim)})

        n = 2500
        self.path = os.path.join(root, f"{index_type}_{metric}_{seed}.lance")
        lance.write_dataset(table(np.arange(n), vecs(n)), self.path, max_rows_per_file=700)
        ds = lance.dataset(self.path)
        ds.delete("id % 9 = 2")
        kw = {"num_sub_vectors": 8} if index_type == "IVF_PQ" else {}
        ds.create_index("emb", index_type=index_type, num_partitions=6, metric=metric, **kw)
        lance.write_dataset(table(np.arange(n, n + 300), vecs(300)), self.path, mode="append")
        lance.dataset(self.path).delete("id % 13 = 5")
        self.ds = lance.dataset(self.path)

    def pylance(self, q, k, nprobes, refine=None, filter=None):
        nearest = {"column": "emb", "q": q, "k": k, "nprobes": nprobes, "metric": self.metric}
        if refine:
            nearest["refine_factor"] = refine
        t = self.ds.to_table(nearest=nearest, filter=filter, prefilter=filter is not None)
        return t["id"].to_pylist(), t["_distance"].to_numpy()


def vec_str(q) -> str:
    return "[" + ", ".join(repr(float(x)) for x in q) + "]"


def same(ours, expected, what):
    ids, dist = ours
    eids, edist = expected
    assert len(ids) == len(eids), f"{what}: {len(ids)} rows, pylance {len(eids)}"
    np.testing.assert_allclose(dist, edist, rtol=TOL, atol=TOL, err_msg=what)
    for i, (a, b) in enumerate(zip(ids, eids)):
        if a != b:  # only a tie may swap rows
            assert abs(dist[i] - edist[i]) <= TOL * max(1.0, abs(edist[i])), f"{what}: ids {ids} != {eids}"
            assert b in ids or abs(edist[i] - edist[-1]) <= TOL, f"{what}: ids {ids} != {eids}"


CASES = [(t, m) for t in ["IVF_FLAT", "IVF_PQ", "IVF_SQ"] for m in ["l2", "cosine", "dot"]]


@pytest.mark.parametrize("index_type,metric", CASES)
@pytest.mark.parametrize("seed", SEEDS)
def test_indexed_search_equals_pylance(spark, tmp_path, seed, index_type, metric):
    d = Data(str(tmp_path), seed, index_type, metric)
    for i in range(3):
        q = d.vecs(1)[0]
        k = int(d.rng.choice([5, 10]))
        nprobes = int(d.rng.integers(1, 7))
        refine = [None, 3][i % 2]
        flt = "grp = 1" if i == 2 else None
        what = f"{index_type} {metric} query {i} k={k} nprobes={nprobes} refine={refine} filter={flt}"
        # reader options (a where clause is the prefilter)
        r = (spark.read.format("lance").option("nearest.column", "emb").option("nearest.vector", vec_str(q))
             .option("nearest.k", k).option("nearest.metric", metric).option("nearest.nprobes", nprobes))
        if refine:
            r = r.option("nearest.refine_factor", refine)
        df = r.load(d.path)
        if flt:
            df = df.where(flt)
        rows = df.select("id", "_distance").collect()
        expected = d.pylance(q, k, nprobes, refine, flt)
        same(([x.id for x in rows], np.array([x._distance for x in rows], np.float32)), expected, "options " + what)
        # the SQL table function
        arr = "array(" + ", ".join(f"CAST({float(x)!r} AS FLOAT)" for x in q) + ")"
        extra = f", refine_factor => {refine}" if refine else ""
        extra += f", filter => '{flt}', prefilter => true" if flt else ""
        rows = spark.sql(f"SELECT id, _distance FROM lance_vector_search('{d.path}', 'emb', {arr}, {k}, "
                         f"nprobes => {nprobes}, metric => '{metric}'{extra})").collect()
        same(([x.id for x in rows], np.array([x._distance for x in rows], np.float32)), expected, "SQL " + what)


def test_pq_distances_are_the_index_s_and_use_index_false_is_exact(spark, tmp_path):
    d = Data(str(tmp_path), 4, "IVF_PQ", "l2")
    q = d.vecs(1)[0]
    base = (spark.read.format("lance").option("nearest.column", "emb").option("nearest.vector", vec_str(q))
            .option("nearest.k", 10).option("nearest.nprobes", 2))
    rows = base.load(d.path).select("id", "_distance").collect()
    ids, dist = [x.id for x in rows], np.array([x._distance for x in rows], np.float32)
    # no fragment is uncovered here? one is (appended): the index's k are re-scored exactly then.
    same((ids, dist), d.pylance(q, 10, 2), "IVF_PQ l2 nprobes=2")
    exact = d.ds.to_table(nearest={"column": "emb", "q": q, "k": 10, "use_index": False})
    rows = base.option("nearest.use_index", "false").load(d.path).select("id", "_distance").collect()
    same(([x.id for x in rows], np.array([x._distance for x in rows], np.float32)),
         (exact["id"].to_pylist(), exact["_distance"].to_numpy()), "use_index=false")
    # an index on a metric other than the query's is not used (pylance: brute force too)
    rows = base.option("nearest.metric", "cosine").load(d.path).select("id", "_distance").collect()
    exact = d.ds.to_table(nearest={"column": "emb", "q": q, "k": 10, "metric": "cosine", "use_index": False})
    same(([x.id for x in rows], np.array([x._distance for x in rows], np.float32)),
         (exact["id"].to_pylist(), exact["_distance"].to_numpy()), "metric mismatch: exact")


def test_pq_approximate_distances_without_uncovered_fragments(spark, tmp_path):
    """No fragment appended after the build: an IVF_PQ search without refine returns PQ's distances
    (not the exact ones), equal to pylance's: the index was read."""
    rng = np.random.default_rng(9)
    dim = 16
    v = (rng.standard_normal((2000, dim)) * 2).astype(np.float32)
    path = str(tmp_path / "pq.lance")
    lance.write_dataset(pa.table({"id": np.arange(2000), "emb": pa.FixedSizeListArray.from_arrays(
        pa.array(v.ravel()), dim)}), path, max_rows_per_file=600)
    ds = lance.dataset(path)
    ds.create_index("emb", index_type="IVF_PQ", num_partitions=4, num_sub_vectors=4)
    q = v[17] + 0.05
    t = lance.dataset(path).to_table(nearest={"column": "emb", "q": q, "k": 8, "nprobes": 2})
    rows = (spark.read.format("lance").option("nearest.column", "emb").option("nearest.vector", vec_str(q))
            .option("nearest.k", 8).option("nearest.nprobes", 2).load(path).select("id", "_distance").collect())
    ids, dist = [x.id for x in rows], np.array([x._distance for x in rows], np.float32)
    same((ids, dist), (t["id"].to_pylist(), t["_distance"].to_numpy()), "IVF_PQ without refine")
    exact = ((v[ids] - q) ** 2).sum(1)
    assert np.abs(exact - dist).max() > 1e-2, "PQ distances equal the exact ones: was the index read?"


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_pq_dot_many_queries_equal_pylance(spark, tmp_path, seed):
    """IVF_PQ with the dot metric: 100 seeded queries a dataset, 300 in all (rows deleted before
    and after the build, a fragment appended after it, random k / nprobes / refine_factor),
    searched by lance_knn in one SQL query; each must be pylance's search (same row addresses in
    the same order up to ties, the same distances).
    - Which of the rows tied at a partition's k-th place pylance keeps decides the result once
      they are re-scored exactly ([[PartitionTopK]]): one query in about 100 differed before.
    - The distance tables of sub-vectors of at most 16 values use pylance's fused multiply-add
      kernel: one query in about 1500 differed before (a one-ulp difference reordering near ties).
    - Rows with identical codes tie exactly; with 2 sub-vectors such ties at the candidate cut
      are common, and pylance breaks them by an unstable sort we do not reproduce. With 4 or 8
      sub-vectors none differed in 5,000 queries (30 seeds); at most one of the 100 may, holding
      80% of pylance's rows."""
    rng = np.random.default_rng(seed)
    dim = int(rng.choice([8, 16, 32]))
    subs = int(rng.choice([4, 8]))
    centers = rng.standard_normal((8, dim)) * 3
    n = 3000

    def vecs(m):
        return (centers[rng.integers(0, 8, m)] + rng.standard_normal((m, dim))).astype(np.float32)

    def table(ids, v):
        return pa.table({"id": pa.array(ids, pa.int64()),
                         "emb": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel(), pa.float32()), dim)})

    path = str(tmp_path / f"pqdot{seed}.lance")
    lance.write_dataset(table(np.arange(n), vecs(n)), path, max_rows_per_file=900)
    lance.dataset(path).delete(f"id % 11 = {seed % 11}")
    lance.dataset(path).create_index("emb", index_type="IVF_PQ", num_partitions=int(rng.integers(3, 8)),
                                     num_sub_vectors=subs, metric="dot")
    lance.write_dataset(table(np.arange(n, n + 300), vecs(300)), path, mode="append")
    lance.dataset(path).delete("id % 13 = 4")
    ds = lance.dataset(path)
    queries = []
    for i in range(100):
        q = vecs(1)[0]
        k = int(rng.choice([1, 5, 10]))
        nprobes = int(rng.integers(1, 5))
        refine = [None, 2][int(rng.integers(0, 2))]
        queries.append((i, [float(x) for x in q], k, nprobes, refine))
    qdf = spark.createDataFrame(queries, "qid INT, qv ARRAY<FLOAT>, k INT, nprobes INT, refine INT")
    qdf.createOrReplaceTempView(f"pq_dot_queries_{seed}")
    # lance_knn's k / nprobes / refine_factor are constants: one SELECT per combination, in one query
    combos = sorted({(k, nprobes, refine or 0) for _, _, k, nprobes, refine in queries})
    sql = " UNION ALL ".join(
        f"SELECT qid, lance_knn('{path}', 'emb', qv, {k}, {nprobes}, {refine or 'NULL'}, 'dot') AS nn "
        f"FROM pq_dot_queries_{seed} WHERE k = {k} AND nprobes = {nprobes} AND coalesce(refine, 0) = {refine}"
        for k, nprobes, refine in combos)
    rows = spark.sql(sql).collect()
    ours = {r.qid: r.nn for r in rows}
    assert len(ours) == 100
    differing = []
    for i, q, k, nprobes, refine in queries:
        nearest = {"column": "emb", "q": np.array(q, np.float32), "k": k, "nprobes": nprobes, "metric": "dot"}
        if refine:
            nearest["refine_factor"] = refine
        t = ds.to_table(nearest=nearest, columns=["id"], with_row_address=True)
        expected = (t["_rowaddr"].to_pylist(), t["_distance"].to_numpy())
        got = ([x["_rowaddr"] for x in ours[i]], np.array([x["_distance"] for x in ours[i]], np.float32))
        what = f"seed {seed} dim={dim} subs={subs} query {i} k={k} nprobes={nprobes} refine={refine}"
        try:
            same(got, expected, what)
        except AssertionError as e:
            # the residual rare disagreement (docs/vector-search.md): most rows still pylance's
            assert len(got[0]) == len(expected[0]) and len(set(got[0]) & set(expected[0])) >= 0.8 * len(expected[0]), e
            differing.append(f"{what}: ours {got}, pylance {expected}")
    for d in differing:
        print("differs from pylance:", d)
    assert len(differing) <= 1, differing
