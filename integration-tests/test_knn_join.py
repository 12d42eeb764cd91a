"""Batch KNN (lance_spark.knn_join, docs/vector-search.md "Batch KNN"), differential: on seeded
random vectors (dims 8 and 32, several fragments, deleted rows, NULL query vectors) every query's
neighbours equal lance_spark.vector_search's (exact) and a numpy brute force, for l2, cosine, dot.
Bad input gives errors naming the argument."""
from __future__ import annotations

import os

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_spark

K = 7
DIST_TOL = 1e-3


class Data:
    def __init__(self, root: str, dim: int, seed: int):
        rng = np.random.default_rng(seed)
        self.dim = dim
        n = 1200
        centers = rng.standard_normal((6, dim)).astype(np.float32) * 3
        v = (centers[rng.integers(0, 6, n)] + rng.standard_normal((n, dim))).astype(np.float32)
        ids = np.arange(n, dtype=np.int64)
        self.path = os.path.join(root, f"knn_{dim}_{seed}.lance")
        lance.write_dataset(pa.table({
            "id": pa.array(ids), "name": pa.array([f"r{i}" for i in ids]),
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel(), pa.float32()), dim)}),
            self.path, max_rows_per_file=300)
        lance.dataset(self.path).delete("id % 9 = 4")
        live = ids % 9 != 4
        self.ids, self.vectors = ids[live], v[live]
        nq = 9
        self.queries = rng.standard_normal((nq, dim)).astype(np.float32) * 3
        # query rows: qid, name (clashes with the table's), the vector (NULL for two rows)
        self.null_rows = {2, 6}
        self.qrows = [(int(i), f"q{i}", None if i in self.null_rows else [float(x) for x in self.queries[i]])
                      for i in range(nq)]


@pytest.fixture(scope="module", params=[8, 32])
def data(request, tmp_path_factory) -> Data:
    return Data(str(tmp_path_factory.mktemp("knn")), request.param, 100 + request.param)


def queries_df(spark, d: Data):
    return spark.createDataFrame(d.qrows, "qid INT, name STRING, qv ARRAY<DOUBLE>")


def brute(d: Data, q: np.ndarray, metric: str, k: int = K):
    v, ids = d.vectors, d.ids
    if metric == "l2":
        dist = ((v - q) ** 2).sum(1)
    elif metric == "cosine":
        dist = 1 - (v @ q) / (np.linalg.norm(v, axis=1) * np.linalg.norm(q))
    else:
        dist = 1 - v @ q
    order = np.lexsort((ids, dist))[:k]
    return ids[order], dist[order]


def same(ours, expected, what: str):
    ids, dist = ours
    eids, edist = expected
    assert len(ids) == len(eids), f"{what}: {len(ids)} rows, expected {len(eids)}"
    np.testing.assert_allclose(dist, edist, rtol=DIST_TOL, atol=DIST_TOL, err_msg=what)
    assert list(dist) == sorted(dist), f"{what}: not nearest first: {dist}"
    diff = set(ids.tolist()) ^ set(eids.tolist())
    if diff:
        last = float(max(dist[-1], edist[-1]))
        d_of = dict(zip(ids.tolist(), dist.tolist()))
        d_of.update(zip(eids.tolist(), edist.tolist()))
        assert all(abs(d_of[i] - last) <= DIST_TOL for i in diff), f"{what}: ids {list(ids)} != {list(eids)}"
    else:
        # same set: same order except among (near) ties
        for a, b, da in zip(ids.tolist(), eids.tolist(), dist.tolist()):
            if a != b:
                assert abs(da - dict(zip(eids.tolist(), edist.tolist()))[a]) <= DIST_TOL, f"{what}: order"


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_knn_join_equals_vector_search_and_numpy(spark, data, metric):
    out = lance_spark.knn_join(queries_df(spark, data), data.path, "qv", "emb", k=K, metric=metric)
    assert out.columns == ["qid", "name", "qv", "id", "table_name", "emb", "_distance"]
    assert out.schema["_distance"].dataType.simpleString() == "float"
    rows = out.collect()
    by_q: dict[int, list] = {}
    for r in rows:
        by_q.setdefault(r.qid, []).append(r)
    assert sorted(by_q) == [i for i in range(len(data.qrows)) if i not in data.null_rows]
    assert [r.qid for r in rows] == sorted(r.qid for r in rows), "grouped by query row, in order"
    for qid, rs in by_q.items():
        q = data.queries[qid]
        assert all(r.name == f"q{qid}" and r.table_name == f"r{r.id}" for r in rs)
        assert all(np.allclose(r.emb, data.vectors[data.ids == r.id][0]) for r in rs)
        ours = (np.array([r.id for r in rs], np.int64), np.array([r._distance for r in rs], np.float32))
        same(ours, brute(data, q, metric), f"query {qid} {metric} vs numpy")
        vs = lance_spark.vector_search(spark, data.path, "emb", [float(x) for x in q], K, metric=metric,
                                       use_index=False).select("id", "_distance").collect()
        same(ours, (np.array([r.id for r in vs], np.int64), np.array([r._distance for r in vs], np.float32)),
             f"query {qid} {metric} vs vector_search")


def test_knn_join_k_larger_than_table_and_catalog_name(spark, data):
    # k above the live row count: every live row, once per query
    qs = spark.createDataFrame([(0, [float(x) for x in data.queries[0]])], "qid INT, qv ARRAY<FLOAT>")
    out = lance_spark.knn_join(qs, data.path, "qv", "emb", k=5000).collect()
    assert sorted(r.id for r in out) == sorted(data.ids.tolist())
    # a catalog name (lance.`<path>`) works as the table
    named = lance_spark.knn_join(qs, f"lance.`{data.path}`", "qv", "emb", k=3).collect()
    same((np.array([r.id for r in named]), np.array([r._distance for r in named], np.float32)),
         brute(data, data.queries[0], "l2", 3), "catalog name")


def test_knn_join_no_query_rows(spark, data):
    qs = spark.createDataFrame([(0, None)], "qid INT, qv ARRAY<FLOAT>")
    out = lance_spark.knn_join(qs, data.path, "qv", "emb", k=3)
    assert out.collect() == []
    assert out.columns == ["qid", "qv", "id", "name", "emb", "_distance"]


def test_knn_join_bad_input(spark, data):
    qs = queries_df(spark, data)
    for bad_k in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            lance_spark.knn_join(qs, data.path, "qv", "emb", k=bad_k)
    wrong = spark.createDataFrame([(0, [1.0, 2.0, 3.0])], "qid INT, qv ARRAY<DOUBLE>")
    with pytest.raises(ValueError, match=r"query_column 'qv' holds a vector of dimension 3.*column 'emb'"):
        lance_spark.knn_join(wrong, data.path, "qv", "emb", k=3)
    with pytest.raises(ValueError, match="query_column 'name' is not a vector column"):
        lance_spark.knn_join(qs, data.path, "name", "emb", k=3)
    with pytest.raises(ValueError, match="column 'name' of table .* is not a vector column"):
        lance_spark.knn_join(qs, data.path, "qv", "name", k=3)
    with pytest.raises(ValueError, match="query_column 'nope' is not a column"):
        lance_spark.knn_join(qs, data.path, "nope", "emb", k=3)
    with pytest.raises(ValueError, match="column 'nope' is not a column of table"):
        lance_spark.knn_join(qs, data.path, "qv", "nope", k=3)
    with pytest.raises(ValueError, match="metric must be one of"):
        lance_spark.knn_join(qs, data.path, "qv", "emb", k=3, metric="hamming")
    with pytest.raises(ValueError, match="unknown option"):
        lance_spark.knn_join(qs, data.path, "qv", "emb", k=3, nprobe=4)


def test_knn_join_through_an_index_equals_per_query_searches(spark, data, tmp_path):
    """With an IVF_PQ index (pylance's) on the column, every query row's neighbours are those
    lance_spark.vector_search gives for that query with the same nprobes and refine_factor."""
    import shutil
    path = str(tmp_path / "indexed.lance")
    shutil.copytree(data.path, path)
    lance.dataset(path).create_index("emb", "IVF_PQ", num_partitions=4, num_sub_vectors=data.dim // 4,
                                     sample_rate=64)
    rows = lance_spark.knn_join(queries_df(spark, data), path, "qv", "emb", k=K, nprobes=2, refine_factor=2).collect()
    by_q: dict[int, list] = {}
    for r in rows:
        by_q.setdefault(r.qid, []).append((r.id, r._distance))
    assert sorted(by_q) == [i for i in range(len(data.qrows)) if i not in data.null_rows]
    for qid, got in by_q.items():
        vs = lance_spark.vector_search(spark, path, "emb", [float(x) for x in data.queries[qid]], K,
                                       nprobes=2, refine_factor=2).select("id", "_distance").collect()
        assert [i for i, _ in got] == [r.id for r in vs], f"query {qid}"
        np.testing.assert_allclose([d for _, d in got], [r._distance for r in vs], rtol=1e-6)
