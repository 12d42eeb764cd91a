"""Long histories (issue 35): a table of 400 versions (10,000 with
LANCE_LONG_TESTS=1), its manifests written directly (long_history.py). pylance
and the connector agree on the latest version, on VERSION AS OF and TIMESTAMP
AS OF at times before the first version, between versions and after the last,
also after a vacuum removed old versions; an append commits version N+1, which
pylance reads. On S3 (moto, through S3A), opening the latest version and
committing an append make as many listing requests at 2,000 versions (make test: 500)
as at 20, and a bounded number of GETs and HEADs.

pylance's `asof` takes the newest version committed strictly before the time;
TIMESTAMP AS OF (as in Delta) at or before it: they are compared at times
between commits, and TIMESTAMP AS OF exactly at a commit time against the
definition."""
from __future__ import annotations

import os
import time
from datetime import datetime, timezone

import lance
import pyarrow as pa
import pytest

import long_history
import s3_server
from conftest import new_session
from long_history import rows_of

LONG = os.environ.get("LANCE_LONG_TESTS") == "1"
N = 10_000 if LONG else 400
# the S3 test's long history and S3A's listing page (S3's is 1,000 keys; make test: 500 versions
# listed 200 keys a page, more than one page all the same)
S3_VERSIONS, S3_PAGE = (2000, 1000) if LONG else (500, 200)


@pytest.fixture(scope="module")
def s3():
    server = s3_server.start(count_paths=True)   # the server counts requests by path, too
    yield server
    server.stop()


@pytest.fixture(scope="module")
def spark(s3):
    """One session for the local tables and the bucket."""
    # S3 returns at most 1,000 keys a listing request; moto returns up to what S3A asks (5,000)
    session = new_session({**s3_server.s3a_jars_conf(), **s3.spark_conf(), "spark.hadoop.fs.s3a.paging.maximum": str(S3_PAGE)},
                          app="lance-spark-history")
    yield session
    session.stop()


def _count(spark, path: str, clause: str = "") -> int:
    return spark.sql(f"SELECT count(*) FROM lance.`{path}` {clause}").first()[0]


def _utc(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def _at(micros: int) -> str:
    """The session time zone is UTC (lance_spark.testing)."""
    return f"TIMESTAMP AS OF '{_utc(micros)}'"


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("history") / "h.lance")
    t0 = int((time.time() - N - 3600) * 1e6)
    return path, long_history.build(path, N, t0)


def test_latest_and_version_as_of_agree_with_pylance(spark, table):
    path, h = table
    ds = lance.dataset(path)
    assert ds.version == N
    assert _count(spark, path) == ds.count_rows() == rows_of(N)
    for v in [1, 2, 3, N // 3, N // 2 + 1, N - 1, N]:
        assert _count(spark, path, f"VERSION AS OF {v}") == lance.dataset(path, version=v).count_rows() == rows_of(v), v


def test_timestamp_as_of_agrees_with_pylance_and_the_definition(spark, table):
    path, h = table
    # between commits: both sides take the version committed before
    for v in [1, 2, 7, N // 4, N // 2, N // 2 + 1, N - 2, N - 1]:
        between = h.micros(v) + h.step_micros // 2
        want = lance.dataset(path, asof=h.when(between))
        assert want.version == v
        assert _count(spark, path, _at(between)) == want.count_rows() == rows_of(v), v
    # exactly at a commit: that version (at or before); a microsecond earlier: the one before
    for v in [2, N // 3, N]:
        assert _count(spark, path, _at(h.micros(v))) == rows_of(v), v
        assert _count(spark, path, _at(h.micros(v) - 1)) == rows_of(v - 1), v
    # after the last, and before the first
    after = h.micros(N) + 10_000_000
    assert _count(spark, path, _at(after)) == lance.dataset(path, asof=h.when(after)).count_rows() == rows_of(N)
    before = h.micros(1) - 1
    with pytest.raises(ValueError, match="earlier than the first version"):
        lance.dataset(path, asof=h.when(before))
    with pytest.raises(Exception, match="no version was committed at or before"):
        _count(spark, path, _at(before))


def test_after_vacuum_and_an_append(spark, table):
    """Runs last in this module: it changes the table."""
    path, h = table
    keep = N - N // 4   # versions before it were committed long ago: removed
    removed = spark.sql(f"CALL lance.system.vacuum(table => '`{path}`', older_than => TIMESTAMP '{_utc(h.micros(keep))}')") \
        .first()["old_versions_removed"]
    assert removed == keep - 1
    ds = lance.dataset(path)
    assert [v["version"] for v in ds.versions()][:2] == [keep, keep + 1]
    for v in [keep, keep + 1, (keep + N) // 2]:
        between = h.micros(v) + h.step_micros // 2
        assert _count(spark, path, _at(between)) == lance.dataset(path, asof=h.when(between)).count_rows() == rows_of(v)
    for gone in [1, keep - 1]:   # the versions at those times were removed
        with pytest.raises(Exception, match="no version was committed at or before"):
            _count(spark, path, _at(h.micros(gone) + 1))
        with pytest.raises(Exception, match=f"version {gone} does not exist"):
            _count(spark, path, f"VERSION AS OF {gone}")

    spark.range(0, 5).write.format("lance").mode("append").save(path)
    ds = lance.dataset(path)
    assert ds.version == N + 1
    assert ds.count_rows() == rows_of(N) + 5 == _count(spark, path)
    assert sorted(ds.to_table(columns=["id"])["id"].to_pylist())[:5] == [0, 0, 1, 1, 2]
    assert open(os.path.join(path, "_versions", "latest_version_hint.json")).read() == f'{{"version":{N + 1}}}'
    # pylance appends after it, and the connector sees that version
    lance.write_dataset(pa.table({"id": pa.array([7], pa.int64())}), path, mode="append")
    assert _count(spark, path) == rows_of(N) + 6
    assert _count(spark, path, f"VERSION AS OF {N + 1}") == rows_of(N) + 5


def _requests(s3, prefix: str, action) -> dict[str, int]:
    return s3.requests_under(prefix, action)


def test_s3_opening_and_committing_do_not_grow_with_the_history(spark, s3):
    """On S3 a listing returns 1,000 keys a request: at 2,000 versions (make test: 500 versions,
    200 keys a listing), opening the latest version and committing an append make as many
    listing requests as at 20 versions, and about as many GETs and HEADs."""
    client = s3.client()
    t0 = int((time.time() - 3 * 3600) * 1e6)
    seen = {}
    spark.range(3).write.format("lance").save(s3.url("warm.lance"))   # S3A's first requests, not counted
    spark.read.format("lance").load(s3.url("warm.lance")).schema
    for n in [20, S3_VERSIONS]:
        key = f"hist-{n}.lance"
        started = time.monotonic()
        long_history.build(
            f"s3://{s3.bucket}/{key}", n, t0, storage_options=s3.storage_options(),
            read=lambda k, key=key: client.get_object(Bucket=s3.bucket, Key=f"{key}/{k}")["Body"].read(),
            put=lambda k, data, key=key: client.put_object(Bucket=s3.bucket, Key=f"{key}/{k}", Body=data))
        url = s3.url(key)
        print(f"built {n} versions in {time.monotonic() - started:.1f} s")
        opened = _requests(s3, key, lambda: spark.read.format("lance").load(url).schema)
        committed = _requests(s3, key, lambda: spark.range(3).write.format("lance").mode("append").save(url))
        seen[n] = (opened, committed)
        print(f"{n} versions: opening {opened}, committing {committed}")
        assert lance.dataset(f"s3://{s3.bucket}/{key}", storage_options=s3.storage_options()).version == n + 1
        assert spark.read.format("lance").load(url).count() == rows_of(n) + 3
    # measured at both sizes: opening {'HEAD': 11, 'GET': 3} and committing {'PUT': 5, 'HEAD': 16, 'GET': 3,
    # 'LIST': 4} (the commit's LISTs are S3A's checks around the files it creates). Before (a listing of
    # _versions/ per lookup): opening 2 LISTs at 20 versions and 6 at 2,000, committing 7 and 13.
    # without the hint: the first page of the listing (V2 names sort newest first on S3)
    client.delete_object(Bucket=s3.bucket, Key=f"hist-{S3_VERSIONS}.lance/_versions/latest_version_hint.json")
    url = s3.url(f"hist-{S3_VERSIONS}.lance")
    unhinted = _requests(s3, f"hist-{S3_VERSIONS}.lance", lambda: spark.read.format("lance").load(url).schema)
    print(f"{S3_VERSIONS} versions, no hint: opening {unhinted}")
    # measured 6 (two lookups, each S3A's first page and the next it prefetches; with pages of 200
    # keys the same 6 at 2,000 versions, where a full listing would take 11 pages a lookup)
    assert unhinted.get("LIST", 0) <= 6, unhinted
    assert spark.read.format("lance").load(url).count() == rows_of(S3_VERSIONS) + 3
    for i, what in enumerate(["opening", "committing"]):
        small, large = seen[20][i], seen[S3_VERSIONS][i]
        assert large.get("LIST", 0) <= small.get("LIST", 0) <= 4, (what, seen)
        for kind in ["GET", "HEAD"]:
            assert large.get(kind, 0) <= small.get(kind, 0) + 1 <= 20, (what, kind, seen)
