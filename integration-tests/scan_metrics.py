"""The metrics of a Spark query's Lance scan node (what the Spark UI shows), for tests."""
from __future__ import annotations


def scan_metrics(df) -> dict:
    """Runs df as a Spark job (scans small enough to be read on the driver are not, here:
    `localScanRows` 0) and returns its Lance scan node's metrics and the stages' input bytes."""
    spark = df.sparkSession
    spark.conf.set("spark.lance.localScanRows", "0")
    try:
        return _scan_metrics(spark, df)
    finally:
        spark.conf.unset("spark.lance.localScanRows")


def _scan_metrics(spark, df) -> dict:
    sc = spark.sparkContext._jsc.sc()
    gw = spark.sparkContext._gateway
    no_quantiles = gw.new_array(gw.jvm.double, 0)

    def stages():
        sc.listenerBus().waitUntilEmpty(10_000)
        seq = sc.statusStore().stageList(None, False, False, no_quantiles, None)
        return {(int(seq.apply(i).stageId()), int(seq.apply(i).attemptId())): seq.apply(i)
                for i in range(seq.length())}

    before = set(stages())
    qe = df._jdf.queryExecution()
    rows = df.collect()
    leaves = qe.executedPlan().collectLeaves()
    metrics = None
    for i in range(leaves.size()):
        m = leaves.apply(i).metrics()
        if m.contains("readRequests"):
            metrics = {k: int(m.get(k).get().value()) for k in
                       ("pagesRead", "lanceBytesRead", "readRequests", "storageWaitMs")}
            for k in ("rowsSelectedByIndex", "fragmentsPrunedByIndex", "fragmentsDecidedByIndex"):
                if m.contains(k):
                    metrics[k] = int(m.get(k).get().value())
    assert metrics is not None, qe.executedPlan().toString()
    new = [s for k, s in stages().items() if k not in before]
    metrics["input_bytes"] = sum(int(s.inputBytes()) for s in new)
    metrics["rows"] = rows
    return metrics
