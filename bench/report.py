"""docs/benchmarks.md, docs/benchmarks.png and bench/results/*.json from one run's records."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .env import REPO, RESULTS_DIR


def _gib(n: Optional[int]) -> str:
    return "?" if n is None else f"{n / 2**30:.2f} GiB"


def _mib(n) -> str:
    if not isinstance(n, (int, float)):
        return str(n)
    return f"{n / 2**20:,.1f} MiB"


def _mem_cell(rec: Dict[str, Any]) -> str:
    mem = rec.get("memory") or {}
    t, o = mem.get("this", {}), mem.get("other", {})

    def pair(k: str) -> str:
        return f"{_gib(t.get(k))} / {_gib(o.get(k))}"

    if rec["kind"] == "spark" or "jvm_heap_peak" in t:
        return f"JVM heap {pair('jvm_heap_peak')}; JVM RSS {pair('jvm_rss_peak')}"
    grow = f"{_mib(t.get('py_rss_growth'))} / {_mib(o.get('py_rss_growth'))}"
    return f"RSS {pair('py_rss_peak')} (growth in the run {grow})"


def _ratio_cell(rec: Dict[str, Any]) -> str:
    r = rec.get("ratio")
    if r is None:
        return "-"
    mark = "" if rec.get("meets_target") is None else (" ✓" if rec["meets_target"] else " ✗")
    return f"{r:.2f}x{mark}"


def write_json(results: Dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = results["machine"]["date"].replace(":", "").replace("+", "p")
    path = RESULTS_DIR / f"{stamp}-{results['mode']['name']}.json"
    path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return path


def write_plot(records: List[Dict[str, Any]], path: Path, mode: str) -> Optional[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = [r for r in records if r.get("ratio") is not None]
    if not recs:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.7 * len(recs)))
    ys = list(range(len(recs)))[::-1]
    colors = ["#4c72b0" if r.get("meets_target") is None else
              ("#55a868" if r["meets_target"] else "#c44e52") for r in recs]
    ax.barh(ys, [r["ratio"] for r in recs], color=colors, height=0.55)
    for y, r in zip(ys, recs):
        ax.text(r["ratio"], y, f" {r['ratio']:.2f}x", va="center", fontsize=9)
        if r.get("target") is not None:
            ax.plot([r["target"]] * 2, [y - 0.4, y + 0.4], color="black", linestyle="--", linewidth=1.5)
            ax.text(r["target"], y + 0.42, f"target {r['target']:g}x", ha="center", fontsize=8)
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_yticks(ys, [f"{r['name']}\nvs {r['comparator']}" for r in recs], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("time ratio this / comparator (log scale; lower is better)")
    ax.set_title(f"lance_spark benchmarks ({mode} mode)")
    ax.set_xlim(min(0.1, min(r["ratio"] for r in recs) / 2),
                max(10.0, max(r["ratio"] for r in recs) * 2.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no version/date: fewer diffs
    plt.close(fig)
    return path


def _facts_lines(rec: Dict[str, Any]) -> List[str]:
    out = []
    f = rec.get("facts") or {}
    if rec["name"] == "decode_throughput" and "spark_gb_per_s" in f:
        out.append(f"Spark decode: **{f['spark_gb_per_s']:.2f} GB/s** of int64 values "
                   f"({_mib(f['value_bytes'])} in {rec['this_s']:.3f} s); page cache: "
                   f"**{f['page_cache_gb_per_s']:.2f} GB/s** ({_mib(f['file_bytes'])} in "
                   f"{f['data_files']} file(s), {rec['other_s']:.4f} s).")
        if f.get("spark_net_gb_per_s"):
            out.append(f"Spark's fixed cost per query (same query on a 1-row dataset): "
                       f"{f['spark_fixed_s']:.3f} s; net of it, Spark decodes "
                       f"**{f['spark_net_gb_per_s']:.2f} GB/s**.")
        if f.get("parquet_s"):
            out.append(f"For reference, Spark on Parquet (same rows, snappy; timed separately, not "
                       f"alternated): {f['parquet_s']:.3f} s = **{f['parquet_gb_per_s']:.2f} GB/s** "
                       "of int64 values.")
    if rec["name"] == "spark_scan_larger_than_memory" and "peak_task_bytes" in f:
        out.append(f"Dataset: Lance {_gib(f['dataset_bytes'])} ({rec['rows']:,} rows), Parquet "
                   f"{_gib(f['parquet_bytes'])}; child JVM heap limit {_mib(f['heap_max_bytes'])} "
                   f"(`spark.driver.memory={f['heap_setting']}`, `local[{f['cores']}]`): the Lance "
                   f"data is **{f['dataset_to_heap']}x the heap**. Runs that succeeded: "
                   f"{f['runs_succeeded']}.")
        out.append(f"Peak reader memory per task (Lance scan node metric, max over tasks and runs): "
                   f"**{_mib(f['peak_task_bytes'])}** for batches of {f['batch_rows']:,} rows x "
                   f"~{f['batch_bytes'] / f['batch_rows']:.0f} bytes per row in Arrow = "
                   f"{_mib(f['batch_bytes'])} per batch (**{f['peak_to_batch']}x** the batch).")
        hp, rp = f["child_heap_peak_bytes"], f["child_rss_peak_bytes"]
        out.append(f"Child JVM peaks: heap used {_mib(hp['lance'])} (Lance) / {_mib(hp['parquet'])} "
                   f"(Parquet), each the sum of the heap pools' peaks, which peak at different "
                   f"times (so it can exceed the limit); RSS {_gib(rp['lance'])} / "
                   f"{_gib(rp['parquet'])}.")
    if rec["name"] == "spark_full_scan" and "ahead_readRequests" in f:
        out.append(f"Storage reads (Lance scan metrics, one more run each): "
                   f"{f['sync_pagesRead']:,} page decodes, {f['sync_readRequests']:,} merged read "
                   f"requests for {_mib(f['sync_lanceBytesRead'])}. Time tasks spent on storage "
                   f"(summed over tasks): {f['sync_storageWaitMs']:,} ms as timed (local files: "
                   f"each task reads a batch, then decodes it); {f['ahead_storageWaitMs']:,} ms with "
                   f"`readAhead=true`, which overlaps the reads with the decode on the read pool, "
                   f"but took {f['ahead_s']:.3f} s in a single run against {rec['this_s']:.3f} s: "
                   "on 2 busy cores, page-cache reads are CPU work that competes with the decode.")
    if rec["name"] == "spark_plan_100k_fragments" and "per fragment (bytes)" in f:
        out.append(f"Driver heap kept by one planned scan over {f['fragments']:,} fragments (after full "
                   f"collections, with and without one held): "
                   f"**{f['driver heap kept by one planned scan (MiB)']} MiB**, about "
                   f"{f['per fragment (bytes)']:,} bytes per fragment: the bound grows linearly with the "
                   "fragments, as the manifest does.")
    if rec["name"] == "spark_projection":
        ib = rec.get("input_bytes") or {}
        out.append(f"Column `{'l05'}` on disk: Lance {_mib(f.get('lance_column_bytes'))} of "
                   f"{_mib(f.get('lance_bytes'))}; Parquet {_mib(f.get('parquet_column_bytes'))} of "
                   f"{_mib(f.get('parquet_bytes'))}.")
        out.append(f"Spark input metrics (bytesRead per query): Lance {_mib(ib.get('this'))}; "
                   f"Parquet {_mib(ib.get('other'))} as timed, which undercounts: Parquet's "
                   "vectored reads (on by default) run on other threads than the task's, which "
                   "Spark's thread-local Hadoop statistics miss; an untimed probe with "
                   "`parquet.hadoop.vectored.io.enabled=false` read "
                   f"{_mib(f.get('parquet_bytes_read_unvectored'))}.")
    elif rec["kind"] == "spark" and rec.get("input_bytes"):
        ib = rec["input_bytes"]
        other = "" if rec["comparator"].startswith("page-cache") else (
            f", comparator {_mib(ib.get('other'))}"
            + (" (undercounted: vectored Parquet reads, see spark_projection)"
               if "Parquet" in rec["comparator"] else ""))
        out.append(f"Spark input metrics (bytesRead per query): this {_mib(ib.get('this'))}{other}.")
    shown = {"ahead_s", "ahead_pagesRead", "ahead_readRequests", "ahead_lanceBytesRead", "ahead_storageWaitMs",
             "sync_pagesRead", "sync_readRequests", "sync_lanceBytesRead", "sync_storageWaitMs",
             "spark_gb_per_s", "page_cache_gb_per_s", "spark_fixed_s", "spark_net_gb_per_s",
             "parquet_s", "parquet_gb_per_s", "value_bytes", "file_bytes",
             "lance_column_bytes", "parquet_column_bytes", "parquet_bytes_read_unvectored"}
    if rec["name"] == "spark_scan_larger_than_memory":
        shown = set(f)   # all in the lines above
    rest = {k: v for k, v in f.items() if k not in shown
            and not (rec["name"] == "spark_projection" and k in ("lance_bytes", "parquet_bytes"))}
    if rest:
        out.append("Data: " + ", ".join(
            f"{k} {_mib(v) if k.endswith('bytes') else v}" for k, v in rest.items()) + ".")
    if rec.get("check"):
        out.append(f"Check (warm-up results of both sides): {rec['check']}.")
    return out


def _tpch_summary(recs: List[Dict[str, Any]]) -> List[str]:
    """The geometric mean of the TPC-H query ratios, per set of tables (this connector's, pylance's),
    when the run has them."""
    import math

    out: List[str] = []
    for prefix, whose, target in (("tpch_q", "tables written by this connector", "<= 0.8x; none above 1.1x"),
                                  ("tpch_pylance_q", "tables written by pylance", "<= 0.9x")):
        q = [r for r in recs if r["name"].startswith(prefix) and not r.get("error") and r.get("other_s")]
        if not q:
            continue
        ratios = [r["this_s"] / r["other_s"] for r in q]
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        worst = max(q, key=lambda r: r["this_s"] / r["other_s"])
        out += ["", f"**TPC-H, {whose}**: {len(q)} queries, geometric mean of the ratios **{geo:.2f}x** "
                    f"(target {target}); slowest relative to Parquet `{worst['name']}` at "
                    f"{worst['this_s'] / worst['other_s']:.2f}x; "
                    f"sum of times {sum(r['this_s'] for r in q):.2f} s vs {sum(r['other_s'] for r in q):.2f} s."]
    return out


def write_markdown(results: Dict[str, Any], path: Path, png: Optional[Path]) -> Path:
    m = results["machine"]
    mode = results["mode"]
    recs = results["workloads"]
    cmd = "python -m bench" + (" --quick" if mode["name"] == "quick" else "")
    if results.get("only"):
        cmd += " --only " + ",".join(results["only"])
    L: List[str] = ["# Benchmarks", ""]
    make = "" if results.get("only") else f" (`make bench{'-quick' if mode['name'] == 'quick' else ''}`)"
    L.append(f"Generated by `{cmd}`{make}; "
             "do not edit by hand. The harness and how to add a workload: "
             "[bench/README.md](../bench/README.md).")
    L.append("")
    if mode["name"] == "quick":
        L += [f"> **Quick-mode numbers**: {mode['reader_rows']:,} rows for the Python reader, "
              f"{mode['spark_rows']:,} rows for Spark, {mode['warmup']} warm-up + {mode['reps']} "
              "timed repetitions. At this size Spark's fixed per-query cost (planning, job "
              "scheduling) is a large part of every time; run `make bench` for the full-size "
              "numbers (10M rows, 1 + 5 repetitions).", ""]
    L += ["## Machine", "", "| nproc | memory | CPU model | date | versions |", "|---|---|---|---|---|"]
    vers = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    L.append(f"| {m['nproc']} | {_gib(m['memory_bytes'])} | {m['cpu_model']} | {m['date']} | {vers} |")
    L += ["", f"lance_spark measured from `{os.path.relpath(results['lance_spark'], REPO)}`; "
              f"connector jar `{os.path.relpath(results['jar'], REPO) if results.get('jar') else '-'}`; "
              f"Spark `local[*]`, driver memory {results['driver_memory']}.", ""]
    L += ["## Results", "",
          "| workload | rows | this (s) | comparator | comparator (s) | ratio | target | "
          "peak memory (this / comparator) |",
          "|---|---:|---:|---|---:|---:|---|---|"]
    for r in recs:
        if r.get("error"):
            L.append(f"| `{r['name']}` | {r.get('rows', '-'):,} | - | {r['comparator']} | - | "
                     f"FAILED | {r['target_text']} | - |" if isinstance(r.get("rows"), int) else
                     f"| `{r['name']}` | - | - | {r['comparator']} | - | FAILED | {r['target_text']} | - |")
            continue
        L.append(f"| `{r['name']}` | {r['rows']:,} | {r['this_s']:.3f} | {r['comparator']} | "
                 f"{r['other_s']:.3f} | {_ratio_cell(r)} | {r['target_text']} | {_mem_cell(r)} |")
    L += ["", "Times are medians; ratio = this / comparator (lower is better; ✓/✗ against the "
              "target where there is one)."]
    L += _tpch_summary(recs)
    if png is not None:
        L += ["", f"![ratios]({os.path.relpath(png, path.parent)})"]
    L += ["", "## Workloads", ""]
    for r in recs:
        L.append(f"### `{r['name']}`: {r['this_label']} vs {r['comparator']}")
        L += ["", r["description"], ""]
        if r.get("error"):
            L += [f"**Failed**: `{r['error']}`", ""]
            continue
        for line in _facts_lines(r):
            L.append(f"- {line}")
        L.append("")
    L += ["## Method", "",
          f"- Each workload runs both sides in the same Python process (and the same Spark "
          f"session): {mode['warmup']} warm-up run(s) of each side (the first one's results are "
          f"compared; several let the JIT compile both sides' code), then "
          f"{mode['reps']} timed repetitions alternating the order (A B, B A, ...). Medians are "
          "reported; every run is in the JSON under `bench/results/`.",
          "- Data is generated from a fixed seed with numpy and cached in `bench/data/` under a "
          "content key (kind, rows, seed, schema version, format settings). Lance data is written by "
          "pylance at file version 2.0 (default 1,048,576 rows per file); Parquet data is the same "
          "rows rewritten by Spark with its defaults (snappy), id-range partitioned into "
          "max(4, rows / 1,048,576) files.",
          "- Peak memory: the Python process's peak RSS (Linux `VmHWM`, reset through "
          "`/proc/self/clear_refs` before every run) and its growth over the RSS at the start of "
          "the run, for Python workloads (memory-mapped pages count once touched). For Spark workloads, "
          "the driver JVM (in `local[*]` it is the only executor): peak heap used = sum of the "
          "heap memory pools' peak usage (`MemoryPoolMXBean`, reset before every run) and the JVM "
          "process's peak RSS. Heap peaks follow the garbage collector's sizing (eden fills "
          "before a collection), so they bound the need from above rather than measure it.",
          "- Spark input bytes are the stages' `inputMetrics.bytesRead` from the status store.",
          "- This is a measuring tool, not a test: nothing fails on a missed target.", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(L))
    return path


def target_bars(bars: List[Tuple[str, float, float]], path: Path, title: str, digits: int = 3) -> None:
    """A horizontal bar per (label, ratio, target) on a log scale, green where the ratio meets
    its target (dashed), red where not: the plot of the issue-target benchmarks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.7 * len(bars)))
    ys = list(range(len(bars)))[::-1]
    ax.barh(ys, [b[1] for b in bars], color=["#55a868" if b[1] <= b[2] else "#c44e52" for b in bars], height=0.55)
    for y, (_, ratio, target) in zip(ys, bars):
        ax.text(ratio, y, f" {ratio:.{digits}f}x", va="center", fontsize=8)
        ax.plot([target] * 2, [y - 0.4, y + 0.4], color="black", linestyle="--", linewidth=1.2)
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_yticks(ys, [b[0] for b in bars], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("time ratio (log scale; lower is better; dashed: the issue's target)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def save_run(kind: str, payload: Dict[str, Any]) -> Path:
    """Writes one run's figures as bench/results/<time>-<kind>.json (with the machine's facts)."""
    from datetime import datetime

    from .env import machine

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{kind}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=1, default=str))
    return path
