"""Benchmark harness of lance_spark: ``python -m bench [--quick] [--only NAME,...]``.

See bench/README.md.  Workloads live in :mod:`bench.workloads` and register themselves with
:func:`bench.harness.workload`; the runner times this project's side against a comparator
alternately in one process (and one Spark session) and writes docs/benchmarks.md.
"""
