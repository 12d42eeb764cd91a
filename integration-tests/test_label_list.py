"""LABEL_LIST indices in our scans, differential and seeded: random pylance-written tables with a
list<string> and a list<int> column (NULL lists, empty lists, NULL elements) over several fragments,
LABEL_LIST indices built by pylance or by Spark (CREATE INDEX ... USING label_list and
CALL lance.system.create_index), then an append (a fragment no index covers) and deletes. Random
array_contains / arrays_overlap filters, alone, ANDed with each other and with other predicates, and
ORs of them: Spark with the indices == Spark with useIndex=false == pylance (array_has_any), and the
scan selects rows by the index (scan metrics); pylance plans with the Spark-built indices
(ScalarIndexQuery) and returns the rows it returns without them."""
from __future__ import annotations

import random

import lance
import pyarrow as pa
import pytest

from conftest import LONG
from scan_metrics import scan_metrics

#: (seed, who builds the indices)
#: "spark-job": built by Spark as a job of sorted runs (forced; small tables build on the driver)
CASES = ([(s, b) for s in range(8) for b in ("pylance", "spark")] if LONG else [(0, "pylance"), (1, "spark")]) + \
    [(2, "spark-job")]
FILTERS_PER_SEED = 40 if LONG else 12
WORDS = [f"w{i}" for i in range(12)]


@pytest.fixture(scope="module")
def wh(spark, tmp_path_factory):
    wh = tmp_path_factory.mktemp("labels-warehouse")
    spark.conf.set("spark.sql.catalog.lance.warehouse", str(wh))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lance.db")
    return wh


def _list(rng: random.Random, values: list, null_element: bool):
    r = rng.random()
    if r < 0.08:
        return None
    if r < 0.16:
        return []
    out = rng.sample(values, rng.randint(1, 4))
    if null_element and rng.random() < 0.1:
        out.append(None)
    return out


def _table(rng: random.Random, start: int, n: int) -> pa.Table:
    return pa.table({
        "id": pa.array(range(start, start + n), pa.int64()),
        "x": pa.array([rng.randint(0, 99) for _ in range(n)], pa.int32()),
        "tags": pa.array([_list(rng, WORDS, True) for _ in range(n)], pa.list_(pa.string())),
        "nums": pa.array([_list(rng, list(range(20)), False) for _ in range(n)], pa.list_(pa.int32())),
    })


def _term(rng: random.Random) -> tuple[str, str]:
    """(Spark SQL, pylance SQL) of one label predicate."""
    if rng.random() < 0.5:
        vs = rng.sample(WORDS + ["nope"], rng.randint(1, 3))
        if len(vs) == 1 and rng.random() < 0.5:
            return f"array_contains(tags, '{vs[0]}')", f"array_has_any(tags, ['{vs[0]}'])"
        q = ", ".join(f"'{v}'" for v in vs)
        return f"arrays_overlap(tags, array({q}))", f"array_has_any(tags, [{q}])"
    vs = rng.sample(range(25), rng.randint(1, 3))
    if len(vs) == 1 and rng.random() < 0.5:
        return f"array_contains(nums, {vs[0]})", f"array_has_any(nums, [arrow_cast({vs[0]}, 'Int32')])"
    return (f"arrays_overlap(nums, array({', '.join(map(str, vs))}))",
            f"array_has_any(nums, [{', '.join(f'arrow_cast({v}, {chr(39)}Int32{chr(39)})' for v in vs)}])")


def _filter(rng: random.Random) -> tuple[str, str, bool]:
    """(Spark SQL, pylance SQL, whether the index must decide fragments)."""
    a, pa_ = _term(rng)
    k = rng.random()
    if k < 0.3:
        return a, pa_, True
    if k < 0.5:
        b, pb = _term(rng)
        return f"({a}) AND ({b})", f"({pa_}) AND ({pb})", True
    if k < 0.7:
        x = rng.randint(0, 99)
        return f"({a}) AND x > {x}", f"({pa_}) AND x > {x}", True
    if k < 0.85:
        b, pb = _term(rng)
        return f"({a}) OR ({b})", f"({pa_}) OR ({pb})", True
    x = rng.randint(0, 99)
    return f"({a}) OR x < {x}", f"({pa_}) OR x < {x}", False   # the OR's other side: no index


def _ids(rows) -> list[int]:
    return sorted(r[0] for r in rows)


@pytest.mark.parametrize("seed,builder", CASES)
def test_label_list_differential(spark, wh, seed, builder):
    rng = random.Random(seed * 7 + (builder == "spark"))
    name = f"ll_{builder.replace('-', '_')}_{seed}"
    path = str(wh / "db" / f"{name}.lance")
    rows_per_file = rng.choice([150, 300])
    lance.write_dataset(_table(rng, 0, 600), path, max_rows_per_file=rows_per_file,
                        data_storage_version=rng.choice(["2.0", "2.1"]), mode="overwrite")
    if builder == "pylance":
        ds = lance.dataset(path)
        ds.create_scalar_index("tags", "LABEL_LIST")
        ds.create_scalar_index("nums", "LABEL_LIST")
    else:
        if builder == "spark-job":
            spark.conf.set("spark.lance.index.build.localRows", "0")
            spark.conf.set("spark.lance.index.build.runRows", "100")
        try:
            spark.sql(f"CREATE INDEX tags_idx ON lance.db.{name} USING label_list (tags)")
            spark.sql(f"CALL lance.system.create_index(table => '{path}', column => 'nums', index_type => 'label_list')")
        finally:
            spark.conf.unset("spark.lance.index.build.localRows")
            spark.conf.unset("spark.lance.index.build.runRows")
    covered = len(lance.dataset(path).get_fragments())
    # after the build: an appended fragment no index covers, deleted rows in covered fragments
    lance.write_dataset(_table(rng, 600, 120), path, mode="append")
    lance.dataset(path).delete(f"id % {rng.choice([5, 7])} = 3")
    ds = lance.dataset(path)
    assert {i["type"] for i in ds.list_indices()} == {"LabelList"}

    on = spark.read.format("lance").load(path)
    off = spark.read.format("lance").option("useIndex", "false").load(path)
    decided = 0
    for _ in range(FILTERS_PER_SEED):
        sf, pf, must = _filter(rng)
        want = sorted(ds.to_table(filter=pf, columns=["id"])["id"].to_pylist())
        plain = sorted(ds.to_table(filter=pf, columns=["id"], use_scalar_index=False)["id"].to_pylist())
        assert want == plain, (seed, pf)
        m = scan_metrics(on.where(sf).select("id"))
        got = _ids(m["rows"])
        base = _ids(off.where(sf).select("id").collect())
        assert got == base == want, (seed, builder, sf)
        if must:
            assert m["fragmentsDecidedByIndex"] == covered, (sf, m)
            decided += 1
        if builder != "pylance" and pf.count("array_has_any") == 1 and " OR " not in pf:
            plan = ds.scanner(filter=pf, columns=["id"]).explain_plan(True)
            assert "ScalarIndexQuery" in plan, (pf, plan)
    assert decided > 0


def test_label_list_scan_reads_fewer_rows(spark, wh):
    """A rare label: the index selects only its rows, and the plan says which index answered."""
    path = str(wh / "db" / "ll_rare.lance")
    n = 4000
    tags = [["common"] if i % 1000 != 17 else ["common", "rare"] for i in range(n)]
    lance.write_dataset(pa.table({"id": pa.array(range(n), pa.int64()), "tags": pa.array(tags)}), path,
                        max_rows_per_file=1000, mode="overwrite")
    lance.dataset(path).create_scalar_index("tags", "LABEL_LIST")
    df = spark.read.format("lance").load(path).where("array_contains(tags, 'rare')").select("id")
    m = scan_metrics(df)
    assert _ids(m["rows"]) == [17, 1017, 2017, 3017]
    assert m["rowsSelectedByIndex"] == 4 and m["fragmentsDecidedByIndex"] == 4, m
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "labels=[tags HAS ANY ('rare')]" in plan and "indices=[tags_idx]" in plan, plan
    # under an exchange (adaptive execution plans the scan again): the same rows
    agg = (spark.read.format("lance").load(path).where("arrays_overlap(tags, array('rare', 'absent'))")
           .selectExpr("id % 2 AS p").groupBy("p").count().collect())
    assert sorted(tuple(r) for r in agg) == [(1, 4)]
    none = spark.read.format("lance").load(path).where("array_contains(tags, 'absent')").select("id")
    m = scan_metrics(none)
    assert m["rows"] == [] and m["fragmentsPrunedByIndex"] == 4, m
