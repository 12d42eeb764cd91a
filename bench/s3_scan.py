"""Scans over an S3-compatible server on localhost (moto, as in integration-tests/), Lance vs
Parquet through the same S3A settings, without and with a fixed latency added to every
request (a stand-in for a real object store, where each request costs tens of milliseconds).
Facts: the requests the server served for each side's query (by HTTP method), and Lance's own
read-request metric."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

from . import data, env
from .harness import Context, Prepared, Timed, workload
from .workloads import _check_rows, _spark_lance

sys.path.insert(0, str(env.REPO / "integration-tests"))
import s3_server  # noqa: E402 - the tests' S3 server, shared

#: rows of the S3 table in full mode (moto keeps objects in memory and serves them from Python)
S3_ROWS = 2_000_000


def _upload(server, local: Path, prefix: str, suffixes: tuple) -> int:
    client = server.client()
    n = 0
    for f in sorted(local.rglob("*")):
        if f.is_file() and f.name.endswith(suffixes) and not f.name.startswith("."):
            client.upload_file(str(f), server.bucket, f"{prefix}/{f.relative_to(local).as_posix()}")
            n += f.stat().st_size
    return n


class _Child:
    """The S3A Spark process; `query(fmt, url)` runs one scan there."""

    def __init__(self, conf: Dict[str, str]):
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.s3_child", json.dumps(conf)], cwd=env.REPO,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._expect("READY")

    def _expect(self, prefix: str) -> str:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the S3 bench process exited ({self.proc.wait()})")
            if line.startswith(prefix):
                return line[len(prefix):].strip()

    def query(self, fmt: str, url: str) -> Dict[str, Any]:
        self.proc.stdin.write(f"{fmt} {url}\n")
        self.proc.stdin.flush()
        out = json.loads(self._expect("RESULT "))
        if not out["ok"]:
            raise RuntimeError(out["error"])
        return out

    def stop(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _s3_scan(latency_ms: float) -> None:
    name = "s3_full_scan" + (f"_latency{int(latency_ms)}" if latency_ms else "")

    @workload(name, kind="spark", this="Spark on Lance 2.2 over S3A", comparator="Spark on Parquet over S3A",
              target=None, target_text="informational: ratio and request counts",
              description=f"Every column of the mixed table ({S3_ROWS:,} rows in full mode) aggregated "
                          "through S3A from moto's S3 on localhost"
                          + (f" with {int(latency_ms)} ms added to every request" if latency_ms else "")
                          + "; Lance 2.2 written by Spark vs Parquet written by Spark, uploaded as files. "
                          "Both in one separate Spark process, alternately. Facts: the server's request "
                          "counts for one query of each side.")
    def prepare(ctx: Context) -> Prepared:
        import dataclasses

        rows = min(ctx.mode.spark_rows, S3_ROWS)
        small = dataclasses.replace(ctx.mode, spark_rows=rows)
        lance_local = _spark_lance(_with_mode(ctx, small), "mixed")
        pq_local = data.parquet_dataset(ctx.spark, "mixed", rows, ctx.log)
        server = s3_server.start(latency_ms=latency_ms)
        child = None
        try:
            facts = {"lance_bytes": _upload(server, lance_local, "mixed.lance", (".lance", ".manifest", ".txn")),
                     "parquet_bytes": _upload(server, pq_local, "mixed.parquet", (".parquet",)),
                     "latency_ms": latency_ms}
            child = _Child({**s3_server.s3a_jars_conf(), **server.spark_conf()})
        except Exception:
            if child is not None:
                child.stop()
            server.stop()
            raise
        urls = {"lance": server.url("mixed.lance"), "parquet": server.url("mixed.parquet")}

        def side(fmt: str):
            def run() -> Timed:
                out = child.query(fmt, urls[fmt])
                return Timed(out["seconds"], out["result"])
            return run

        def derive(this_s: float, other_s: float) -> Dict[str, Any]:
            more: Dict[str, Any] = {}
            try:
                for fmt in ("lance", "parquet"):
                    before = server.request_counts()
                    out = child.query(fmt, urls[fmt])
                    after = server.request_counts()
                    more[f"{fmt}_requests"] = {m: after.get(m, 0) - before.get(m, 0) for m in after
                                               if after.get(m, 0) != before.get(m, 0)}
                    if fmt == "lance":
                        more["lance_read_requests_metric"] = out.get("read_requests")
            finally:
                child.stop()
                server.stop()
            return more

        return Prepared(this=side("lance"), other=side("parquet"), rows=rows, self_timed=True,
                        check=_check_rows,
                        derive=derive, facts=facts)


def _with_mode(ctx: Context, mode) -> Context:
    """ctx seen with another mode (its Spark session shared)."""
    view = Context(mode, ctx.driver_memory, ctx.log)
    view._spark, view._jvm_mem, view._stage_input = ctx.spark, ctx.jvm_memory, ctx.stage_input
    return view


_s3_scan(0)
_s3_scan(20)
