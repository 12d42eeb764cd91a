"""Streaming drivers killed with SIGKILL (issue 41): a Python driver and its JVM in their own
process group, streaming JSON files into a Lance table, killed at seeded random moments while
batches commit and restarted from the checkpoint; shared by the local-disk and S3A tests."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable, Mapping

SCHEMA = "id BIGINT, grp STRING, v DOUBLE"

CRASH_DRIVER = textwrap.dedent("""
    import json, os, sys
    from lance_spark.testing import local_session
    src, out, ckpt, trigger = sys.argv[1:5]
    spark = local_session(json.loads(os.environ.get("LANCE_TEST_SPARK_CONF", "{}")))
    stream = spark.readStream.schema("{schema}").option("maxFilesPerTrigger", 1).json(src)
    w = stream.writeStream.format("lance").option("checkpointLocation", ckpt).option("maxRowsPerFile", 17)
    w = w.trigger(availableNow=True) if trigger == "now" else w.trigger(processingTime="100 milliseconds")
    q = w.start(out)
    print("started", flush=True)
    q.awaitTermination()
""").replace("{schema}", SCHEMA)


def write_json(directory: Path, name: str, ids: range) -> None:
    """One input file of the file source: rows id, grp (id mod 3), v."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{name}.tmp"
    with tmp.open("w") as f:
        for i in ids:
            f.write(json.dumps({"id": i, "grp": f"g{i % 3}", "v": i * 0.5}) + "\n")
    tmp.rename(directory / f"{name}.json")  # the file source must not see a half-written file


def driver(workdir: Path, src: str, out: str, ckpt: str, trigger: str,
           conf: Mapping[str, str] | None = None) -> subprocess.Popen:
    script = workdir / "driver.py"
    script.write_text(CRASH_DRIVER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1] / "python"),
                                         env.get("PYTHONPATH", "")])
    env["LANCE_TEST_SPARK_CONF"] = json.dumps(dict(conf or {}))
    # its own process group: the JVM it launches dies with it
    return subprocess.Popen([sys.executable, str(script), src, out, ckpt, trigger],
                            env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def kill_and_restart(workdir: Path, src: str, out: str, ckpt: str, versions: Callable[[], int],
                     rounds: int, seed: int, conf: Mapping[str, str] | None = None) -> None:
    """`rounds` times: start a driver, wait until it commits a version beyond those
    `versions()` counted, kill it at a random moment; then run one to the end
    (Trigger.AvailableNow) and fail unless it finishes cleanly."""
    rng = random.Random(seed)
    kills = 0
    for _ in range(rounds):
        p = driver(workdir, src, out, ckpt, "processing", conf)
        start_versions = versions()
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None and versions() <= start_versions:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.5))
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            kills += 1
        p.wait()
    assert kills >= rounds - 1, f"only {kills} of {rounds} drivers were killed (they finished first)"
    p = driver(workdir, src, out, ckpt, "now", conf)
    output = p.communicate(timeout=600)[0].decode(errors="replace")
    assert p.returncode == 0, output[-3000:]
