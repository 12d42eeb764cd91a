"""Long histories (issue 35): the cost of opening the latest version, committing one append
and TIMESTAMP AS OF a middle time, at 10 and at 10,000 versions, on a local disk and on S3
through S3A (moto's S3 on localhost, as in integration-tests/, with 20 ms added to every
request). Target: each at most 1.5x its 10-version figure. Writes docs/benchmarks-history.md.

    python -m bench.history [--quick] [--versions 10,10000] [--out docs/benchmarks-history.md]

The tables are made as the tests make them (integration-tests/long_history.py): pylance writes
version 1 (eight fragments of 100 rows), the other versions' manifests are written directly
(every version holds the same eight fragments, so only the history's length differs). Each
operation is run `warm-up` times, then `reps` times alternating the two sizes; medians are
reported, with the requests the S3 server served for one run of each (LIST = a listing GET).
Like the rest of bench/, nothing here asserts on timings."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Dict, List

from . import env

WHERE = env.use_in_tree_package()   # before the tests' generator imports lance_spark
sys.path.insert(0, str(env.REPO / "integration-tests"))
import long_history  # noqa: E402 - the tests' generator, shared
import s3_server  # noqa: E402

LATENCY_MS = 20.0
TARGET = 1.5


def _utc(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def _requests(server, prefix: str, action: Callable[[], object]) -> Dict[str, int]:
    def counted() -> Dict[str, int]:
        return {k: v for k, v in server.request_counts().items() if " " in k}
    before = counted()
    action()
    after = counted()
    kinds: Dict[str, int] = {}
    for key, n in after.items():
        n -= before.get(key, 0)
        method, _, rest = key.partition(" ")
        path, _, query = rest.partition("?")
        if n > 0 and (prefix in path or prefix.replace("/", "%2F") in query):
            kind = "LIST" if method == "GET" and "list-type" in query else method
            kinds[kind] = kinds.get(kind, 0) + n
    return kinds


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 warm-up and 3 repetitions (default 2 and 7)")
    ap.add_argument("--versions", default="10,10000", help="the two history lengths (default 10,10000)")
    ap.add_argument("--out", default=str(env.REPO / "docs" / "benchmarks-history.md"))
    ap.add_argument("--no-s3", action="store_true", help="only the local disk")
    args = ap.parse_args(argv)
    small, large = (int(x) for x in args.versions.split(","))
    warmup, reps = (1, 3) if args.quick else (2, 7)

    where = WHERE
    jar = env.ensure_jar()
    from lance_spark.testing import local_session

    # the latency is added outside the server's lock: the uploads (32 threads) overlap it
    os.environ["LANCE_S3_COUNT_PATHS"] = "1"   # the server counts requests by path, too
    server = None if args.no_s3 else s3_server.start(latency_ms=LATENCY_MS)
    conf = {"spark.sql.session.timeZone": "UTC"}
    if server is not None:
        # S3 returns at most 1,000 keys a listing request; moto returns up to what S3A asks (5,000)
        conf.update({**s3_server.s3a_jars_conf(), **server.spark_conf(), "spark.hadoop.fs.s3a.paging.maximum": "1000"})
    spark = local_session(conf, app="lance-spark-bench-history")
    spark.sparkContext.setLogLevel("WARN")
    results: Dict[str, Dict] = {}
    try:
        t0 = int((time.time() - large - 7200) * 1e6)
        stores = [("local disk", None)] + ([] if server is None else [(f"S3A, moto + {LATENCY_MS:.0f} ms", server)])
        tmp = Path(tempfile.mkdtemp(prefix="lance-history-bench-"))
        for store, srv in stores:
            urls, hist = {}, {}
            for n in (small, large):
                started = time.monotonic()
                if srv is None:
                    urls[n] = str(tmp / f"h{n}.lance")
                    hist[n] = long_history.build(urls[n], n, t0, vary=False)
                else:
                    key, client = f"h{n}.lance", srv.client()
                    hist[n] = long_history.build(
                        f"s3://{srv.bucket}/{key}", n, t0, vary=False, threads=32,
                        storage_options=srv.storage_options(),
                        read=lambda k, key=key: client.get_object(Bucket=srv.bucket, Key=f"{key}/{k}")["Body"].read(),
                        put=lambda k, data, key=key: client.put_object(Bucket=srv.bucket, Key=f"{key}/{k}", Body=data))
                    urls[n] = srv.url(key)
                print(f"{store}: {n} versions made in {time.monotonic() - started:.1f} s", flush=True)

            def ops(n: int) -> Dict[str, Callable[[], object]]:
                url, h = urls[n], hist[n]
                middle = h.micros(n // 2) + 1
                return {
                    "open the latest version (load + schema)": lambda: spark.read.format("lance").load(url).schema,
                    "commit one append (1 row)": lambda: spark.range(1).write.format("lance").mode("append").save(url),
                    "TIMESTAMP AS OF a middle time (resolve + schema)":
                        lambda: spark.sql(f"SELECT * FROM lance.`{url}` TIMESTAMP AS OF '{_utc(middle)}'").schema,
                }

            for op in ops(small):
                times: Dict[int, List[float]] = {small: [], large: []}
                reqs: Dict[int, Dict[str, int]] = {}
                for n in (small, large):
                    for _ in range(warmup):
                        ops(n)[op]()
                    if srv is not None:
                        reqs[n] = _requests(srv, f"h{n}.lance", ops(n)[op])
                for i in range(reps):
                    for n in ((small, large) if i % 2 == 0 else (large, small)):
                        start = time.perf_counter()
                        ops(n)[op]()
                        times[n].append(time.perf_counter() - start)
                med = {n: statistics.median(ts) for n, ts in times.items()}
                results[f"{store}|{op}"] = {"store": store, "op": op, "small": med[small], "large": med[large],
                                            "ratio": med[large] / med[small], "requests": reqs, "runs": times}
                print(f"{store}: {op}: {med[small] * 1000:.0f} ms at {small}, {med[large] * 1000:.0f} ms at {large} "
                      f"({med[large] / med[small]:.2f}x) {reqs or ''}", flush=True)
    finally:
        spark.stop()
        if server is not None:
            server.stop()

    _report(Path(args.out), results, small, large, args.quick, warmup, reps, where, jar)
    env.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    (env.RESULTS_DIR / f"{stamp}-history.json").write_text(json.dumps(
        {"machine": env.machine(), "quick": args.quick, "results": results}, indent=1, default=str))
    return 0


def _report(out: Path, results: Dict[str, Dict], small: int, large: int, quick: bool, warmup: int, reps: int,
            where: str, jar: str) -> None:
    m = env.machine()
    lines = [
        "# Long histories: latest version, commits and TIMESTAMP AS OF",
        "",
        f"Generated by `python -m bench.history{' --quick' if quick else ''}` "
        f"({datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}); see the module's docstring.",
        f"Machine: {m.get('cpu_model')}, {m.get('nproc')} cores (shared with other work). Package: `{where}`; jar: `{jar}`.",
        f"Medians of {reps} runs after {warmup} warm-up run(s) per size, sizes alternating.",
        "",
        f"Target: each operation at {large:,} versions at most {TARGET}x its figure at {small:,} versions.",
        "",
        f"| store | operation | {small:,} versions | {large:,} versions | ratio | target | "
        f"requests at {small:,} | requests at {large:,} |",
        "| --- | --- | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for r in results.values():
        req = r["requests"]
        fmt = lambda d: ", ".join(f"{k} {v}" for k, v in sorted(d.items())) if d else "-"  # noqa: E731
        ok = "met" if r["ratio"] <= TARGET else "**missed**"
        lines.append(f"| {r['store']} | {r['op']} | {r['small'] * 1000:.0f} ms | {r['large'] * 1000:.0f} ms | "
                     f"{r['ratio']:.2f}x | {ok} | {fmt(req.get(small, {}))} | {fmt(req.get(large, {}))} |")
    lines += [
        "",
        "How (docs/architecture.md, \"Finding versions\"): the latest version is the first name of a lazy "
        "listing on S3 (V2 manifest names sort newest first), or the version "
        "`_versions/latest_version_hint.json` names and its successors probed; a commit reads the versions "
        "after the one it read by name; TIMESTAMP AS OF searches the versions by manifest time, "
        "interpolating between the bracketing versions' times (bisecting when a guess does not halve the "
        f"bracket: at most about 2 log2({large:,}) = {2 * large.bit_length()} manifest reads, a few when "
        "commit times grow evenly).",
        "",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
