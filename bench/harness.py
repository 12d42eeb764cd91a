"""Workload registry and the runner.

A workload is one function decorated with :func:`workload`.  It receives a :class:`Context`
and returns a :class:`Prepared`: two zero-argument callables (this project's side and the
comparator's) plus facts about them.  The runner times both alternately (A B, then B A, ...)
after warm-ups, records medians, the ratio this/comparator and peak memory per side.
"""
from __future__ import annotations

import gc
import statistics
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional

from . import env


@dataclass
class Mode:
    name: str
    reader_rows: int          # rows of the pure-Python reader workload
    spark_rows: int           # rows of the Spark workloads
    warmup: int
    reps: int
    warmup_seconds: float = 0.0   # ...and warm-up runs until each side has run this long
    measured_seconds: float = 0.0  # ...and timed runs until each side has run this long
    max_reps: int = 0             # (at most this many timed runs a side)
    max_warmup: int = 0           # (at most this many warm-up rounds past `warmup`: a side of
                                  # milliseconds, such as reading files from the page cache,
                                  # would otherwise take hundreds of rounds to reach 5 s)


# Full mode warms each side up three times: a fresh JVM needs a few runs of a
# workload before the JIT has compiled both readers (one warm-up left Lance's
# code partly interpreted in the first timed runs, which skewed the medians).
# Short workloads (single-column scans of 0.2-0.5 s) run more: warm-up runs
# until each side has run 5 s, timed runs until each side has 3 s of them, so
# their medians move less between runs (5 timed runs of 0.3 s moved by +-0.1).
FULL = Mode("full", reader_rows=1_000_000, spark_rows=10_000_000, warmup=3, reps=5,
            warmup_seconds=5.0, measured_seconds=3.0, max_reps=15, max_warmup=40)
QUICK = Mode("quick", reader_rows=1_000_000, spark_rows=500_000, warmup=1, reps=3)


def warming(rounds: int, warmed: Iterable[float], mode: Mode, least: Optional[int] = None) -> bool:
    """Whether another warm-up round is due after `rounds` of them, each side having run for
    `warmed` seconds: until `least` rounds (the mode's `warmup` by default), then until every side
    has run the mode's `warmup_seconds`, at most `max_warmup` rounds. `least` 1 asks for one round
    only (no seconds)."""
    least = mode.warmup if least is None else least
    seconds = mode.warmup_seconds if least > 1 else 0.0
    return rounds < least or (rounds < mode.max_warmup and min(warmed) < seconds)


def warm_up(sides: Dict[str, Callable[[], Any]], least: int, mode: Mode = FULL) -> int:
    """Warm-up rounds of `sides` (each called once a round) after a first one the caller ran, as
    `warming` says; returns the rounds, the first included."""
    warm = {s: 0.0 for s in sides}
    rounds = 1
    while warming(rounds, warm.values(), mode, least):
        for s, f in sides.items():
            t = time.perf_counter()
            f()
            warm[s] += time.perf_counter() - t
        rounds += 1
    return rounds


@dataclass
class Prepared:
    this: Callable[[], Any]
    other: Callable[[], Any]
    rows: int
    #: optional: compares the two sides' results (from the warm-up); returns a note or raises
    check: Optional[Callable[[Any, Any], str]] = None
    #: facts to report (bytes of a column, file counts, ...), JSON-serialisable
    facts: Dict[str, Any] = field(default_factory=dict)
    #: called after timing with the medians; returns more facts (throughputs ...)
    derive: Optional[Callable[[float, float], Dict[str, Any]]] = None
    #: optional: called untimed before every run of a side ("this" or "other"), e.g. to put a
    #: table back in its initial state before a DML statement
    reset: Optional[Callable[[str], None]] = None
    #: the sides time themselves (e.g. a query in a child process, without its start-up):
    #: they return a Timed instead of their result
    self_timed: bool = False


@dataclass
class Timed:
    """What a self-timed side returns: its own time, its result and memory facts of the process
    that ran it (``jvm_heap_peak``, ``jvm_rss_peak``)."""
    seconds: float
    result: Any
    memory: Dict[str, Optional[int]] = field(default_factory=dict)


@dataclass
class Workload:
    name: str
    kind: str                 # "python" or "spark"
    this_label: str
    comparator: str
    target: Optional[float]   # ratio this/comparator to stay at or under; None: informational
    target_text: str
    description: str
    prepare: Callable[["Context"], Prepared]


REGISTRY: Dict[str, Workload] = {}


def workload(name: str, *, kind: str, this: str, comparator: str, target: Optional[float],
             target_text: str, description: str):
    """Register a workload: ``@workload("name", kind="spark", ...)`` on ``def prepare(ctx)``."""
    def deco(fn: Callable[["Context"], Prepared]):
        if name in REGISTRY:
            raise ValueError(f"workload {name!r} registered twice")
        REGISTRY[name] = Workload(name, kind, this, comparator, target, target_text,
                                  description, fn)
        return fn
    return deco


class Context:
    """What a workload's prepare() gets: the mode, a lazily created Spark session, logging."""

    def __init__(self, mode: Mode, driver_memory: str, log: Callable[[str], None] = print):
        self.mode = mode
        self.driver_memory = driver_memory
        self.log = log
        self._spark = None
        self._jvm_mem = None
        self._stage_input = None

    @property
    def spark(self):
        if self._spark is None:
            self.log(f"starting Spark (local[*], driver memory {self.driver_memory}) ...")
            self._spark = env.spark_session(self.driver_memory)
            self._jvm_mem = env.JvmMemory(self._spark)
            self._stage_input = env.StageInput(self._spark)
        return self._spark

    @property
    def jvm_memory(self) -> Optional[env.JvmMemory]:
        return self._jvm_mem

    @property
    def stage_input(self) -> Optional[env.StageInput]:
        return self._stage_input

    def stop(self) -> None:
        if self._spark is not None:
            self._spark.stop()
            self._spark = None


def _measure(fn: Callable[[], Any], ctx: Context, spark: bool) -> Dict[str, Any]:
    gc.collect()
    env.reset_peak_rss()
    rss0 = env.current_rss()
    if spark:
        ctx.jvm_memory.reset()
        ctx.stage_input.mark()
    t0 = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - t0
    m: Dict[str, Any] = {"seconds": elapsed, "py_rss_peak": env.peak_rss()}
    if rss0 is not None and m["py_rss_peak"] is not None:
        m["py_rss_growth"] = m["py_rss_peak"] - rss0
    if isinstance(result, Timed):
        m = {"seconds": result.seconds, **result.memory}
        result = result.result
    elif spark:
        m.update(ctx.jvm_memory.read())
        m.update(ctx.stage_input.since_mark())
    m["_result"] = result
    return m


def _peak(runs: List[Dict[str, Any]], key: str) -> Optional[int]:
    vals = [r[key] for r in runs if r.get(key) is not None]
    return max(vals) if vals else None


def run(w: Workload, ctx: Context) -> Dict[str, Any]:
    """Prepare, warm up and time one workload; returns a JSON-serialisable record."""
    rec: Dict[str, Any] = {"name": w.name, "kind": w.kind, "this_label": w.this_label,
                           "comparator": w.comparator, "target": w.target,
                           "target_text": w.target_text, "description": w.description}
    try:
        spark = w.kind == "spark"
        if spark:
            ctx.spark  # noqa: B018 - start the session before preparing the data
        p = w.prepare(ctx)
        rec["rows"] = p.rows
        rec["facts"] = dict(p.facts)
        sides = {"this": p.this, "other": p.other}
        def measure(s: str) -> Dict[str, Any]:
            if p.reset is not None:
                p.reset(s)
            return _measure(sides[s], ctx, spark)

        warmed = {s: 0.0 for s in sides}
        i = 0
        while warming(i, warmed.values(), ctx.mode):
            ms = {s: measure(s) for s in sides}
            for s in sides:
                warmed[s] += ms[s]["seconds"]
            if i == 0 and p.check is not None:
                rec["check"] = p.check(ms["this"]["_result"], ms["other"]["_result"])
            del ms
            i += 1
        rec["warmup_runs"] = i
        runs: Dict[str, List[Dict[str, Any]]] = {"this": [], "other": []}
        i = 0
        while i < ctx.mode.reps or (i < ctx.mode.max_reps and min(
                sum(r["seconds"] for r in runs[s]) for s in runs) < ctx.mode.measured_seconds):
            order = ("this", "other") if i % 2 == 0 else ("other", "this")
            for s in order:
                m = measure(s)
                m.pop("_result")
                runs[s].append(m)
            i += 1
        rec["runs"] = runs
        med = {s: statistics.median(r["seconds"] for r in runs[s]) for s in runs}
        rec["this_s"], rec["other_s"] = med["this"], med["other"]
        rec["ratio"] = med["this"] / med["other"] if med["other"] > 0 else None
        rec["meets_target"] = None if w.target is None or rec["ratio"] is None else rec["ratio"] <= w.target
        for s in runs:
            for k in ("py_rss_peak", "py_rss_growth", "jvm_heap_peak", "jvm_rss_peak"):
                v = _peak(runs[s], k)
                if v is not None:
                    rec.setdefault("memory", {}).setdefault(s, {})[k] = v
            if spark and not p.self_timed:
                rec.setdefault("input_bytes", {})[s] = statistics.median(r["input_bytes"] for r in runs[s])
        if p.derive is not None:
            rec["facts"].update(p.derive(med["this"], med["other"]))
        if p.self_timed:
            rec["self_timed"] = True
        ctx.log(f"  {w.name}: this {med['this']:.3f}s, {w.comparator} {med['other']:.3f}s, "
                f"ratio {rec['ratio']:.2f}" + (f" (target <= {w.target})" if w.target else ""))
    except Exception as e:  # a broken workload is reported, the others still run
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()
        ctx.log(f"  {w.name}: FAILED {rec['error']}")
    return rec
