"""Writers in separate OS processes (each its own Spark driver) against one
dataset, for the commit tests: appenders, a deleter, and a writer killed at a
named point of the commit protocol (LANCE_TEST_HALT_AT)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import lance

HERE = str(Path(__file__).resolve().parent)

_WORKER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from conftest import new_session
conf, url, role, k, rounds = json.loads(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
spark = new_session(conf, app=f"lance-writer-{role}-{k}")
for r in range(rounds):
    if role == "append":
        start = 100_000 * (k + 1) + r * 100
        spark.range(start, start + 50, numPartitions=1).write.format("lance").mode("append").save(url)
    else:
        spark.sql(f"DELETE FROM lance.`{url}` WHERE id < 1000 AND id % 5 = {r}")
    print("ok", r, flush=True)
spark.stop()
"""


def _spawn(tmp_path: Path, conf: dict[str, str], url: str, role: str, k: int, rounds: int,
           env: dict[str, str] | None = None) -> subprocess.Popen:
    script = tmp_path / "lance_writer.py"
    if not script.exists():
        script.write_text(_WORKER)
    return subprocess.Popen([sys.executable, str(script), HERE, json.dumps(conf), url, role, str(k), str(rounds)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def _errors(stderr: str) -> str:
    """The lines of a driver's stderr that say what failed (not the stack frames)."""
    lines = [ln for ln in stderr.splitlines() if ("Exception" in ln or "Error" in ln) and not ln.lstrip().startswith("at ")]
    return "\n".join(lines[:12]) or stderr[-3000:]


def appended_ids(k: int, rounds: int) -> list[int]:
    """The ids appender k adds in `rounds` rounds."""
    return [100_000 * (k + 1) + r * 100 + j for r in range(rounds) for j in range(50)]


def appends_and_deletes(tmp_path: Path, conf: dict[str, str], url: str,
                        open_dataset: Callable[[int | None], lance.LanceDataset]) -> None:
    """3 processes x 5 appends and a process running 5 deletes, at once, on a
    dataset holding ids 0..999 at version 1; then checks, through pylance,
    that no version was written twice or lost, every appended row is there
    once, every delete applied, and every version is readable."""
    procs = [_spawn(tmp_path, conf, url, role, k, 5)
             for role, k in [("append", 0), ("append", 1), ("append", 2), ("delete", 0)]]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, f"exit {p.returncode}; stdout {out[-1000:]!r}; errors: {_errors(err)}"
        assert out.count("ok") == 5
    ds = open_dataset(None)
    assert ds.version == 1 + 15 + 5
    want = [i for k in range(3) for i in appended_ids(k, 5)]
    assert sorted(ds.to_table(columns=["id"])["id"].to_pylist()) == sorted(want)
    ops = [type(ds.read_transaction(v).operation).__name__ for v in range(2, ds.version + 1)]
    assert sorted(ops) == ["Append"] * 15 + ["Delete"] * 5
    for v in range(1, ds.version + 1):
        open_dataset(v).to_table()


def append_killed_at(tmp_path: Path, conf: dict[str, str], url: str, point: str) -> str:
    """One append of appender 0's first round, in a driver halted at commit
    point `point`; returns its stderr. Fails if the driver was not halted there."""
    p = _spawn(tmp_path, conf, url, "append", 0, 1, env={"LANCE_TEST_HALT_AT": point})
    out, err = p.communicate(timeout=600)
    assert p.returncode != 0 and "ok" not in out, f"the writer was not halted at {point}: {err[-3000:]}"
    assert f"halting at commit point '{point}'" in err, err[-3000:]
    return err
