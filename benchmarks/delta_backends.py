"""What backs Delta on Spark: USE's own log (Python) vs delta-spark (JVM, through py4j), side by side.

One run, both engines on the same tables, each in its own process as a user would run it: USE in this
process (its log is pure Python; its Spark session only for the SQL INSERT), delta-spark 4.4 in a
worker process on the same pyspark (tests/oracles; its jars fetched and pinned by
`python tests/oracles/fetch.py delta-spark`). Prints, per measure, the median of `--runs`:
  start-up      process start to a session that answered its first query, and its resident memory
                (the process tree: Python and JVM) after the run
  snapshot      a table of --commits commits (a checkpoint every 10) and --files live files: a cold
                snapshot with its file list in Python (Arrow), a warm one with no new commit, one
                after a new commit
  commit        one commit of one file (log only: no data written), and a one-row SQL INSERT
  features      the table features each reads and writes (delta-spark: its supported-features map)

    .venv/bin/python benchmarks/delta_backends.py [--commits 200 --files 2000 --runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import fmt_table, median_seconds  # noqa: E402  (puts python/ on the path)
from oracles.engine import EngineProcess, start_delta_spark, tree_rss  # noqa: E402
from use.delta.snapshot import READER_FEATURES_SUPPORTED, WRITER_FEATURES_WRITABLE  # noqa: E402

_DELTA_SPARK_TIMINGS = """
import time, statistics, json
from pyspark.sql import DataFrame
delta = jvm.org.apache.spark.sql.delta
none = jvm.scala.Option.empty()
path = args["path"]

def files_to_python(snap):
    return DataFrame(snap.allFiles().toDF(), spark).select("path", "size", "partitionValues", "stats").toArrow().num_rows

def median(f, runs):
    f()
    out = []
    for _ in range(runs):
        t = time.perf_counter(); f(); out.append(time.perf_counter() - t)
    return statistics.median(out)

def cold():
    delta.DeltaLog.clearCache()
    return files_to_python(delta.DeltaLog.forTable(spark._jsparkSession, path).update(False, none, none))

result = {"snapshot cold": median(cold, args["runs"])}
log = delta.DeltaLog.forTable(spark._jsparkSession, path)
result["snapshot warm"] = median(lambda: files_to_python(log.update(False, none, none)), args["runs"])
operation = getattr(getattr(delta, "DeltaOperations$ManualUpdate$"), "MODULE$")
Action = getattr(getattr(delta.actions, "Action$"), "MODULE$")
def commit_one():
    add = Action.fromJson(json.dumps({"add": {"path": f"ds-{time.time_ns()}.parquet", "partitionValues": {}, "size": 1,
                                              "modificationTime": 0, "dataChange": True}}))
    log.startTransaction().commit(jvm.org.apache.spark.api.python.PythonUtils.toSeq([add]), operation)
result["commit one file"] = median(commit_one, args["runs"])
def after_commit():
    commit_one()
    t = time.perf_counter(); files_to_python(log.update(False, none, none)); return time.perf_counter() - t
result["snapshot after a commit"] = statistics.median(after_commit() for _ in range(args["runs"]))
result["sql insert"] = median(lambda: spark.sql(f"INSERT INTO delta.`{args['sql_path']}` VALUES (1, 'a')"), args["runs"])
features = delta.TableFeature.allSupportedFeaturesMap()
features = jvm.scala.jdk.javaapi.CollectionConverters.asJava(features)
result["features"] = {str(v.name()): bool(v.isReaderWriterFeature()) for v in features.values()}
"""


def _build_log(path: Path, commits: int, files: int) -> None:
    """A table of `commits` commits adding `files` files in all (log only), checkpointed every 10."""
    import pyarrow as pa

    from use.delta import AddFile, DeltaLog

    log = DeltaLog.for_path(str(path))
    log.create(pa.schema([("id", pa.int64()), ("s", pa.string())]), configuration={"delta.checkpointInterval": "10"})
    per = max(1, files // commits)
    stats = json.dumps(
        {"numRecords": 100, "minValues": {"id": 0, "s": "a"}, "maxValues": {"id": 99, "s": "z"}, "nullCount": {"id": 0, "s": 0}}
    )
    for _ in range(commits):
        adds = [AddFile(f"part-{uuid.uuid4()}.parquet", 1000, 0, stats=stats) for _ in range(per)]
        log.start_transaction().add(*adds).commit("WRITE")


def _use_timings(spark, path: Path, sql_path: str, runs: int) -> dict[str, float]:
    from use.delta import AddFile, DeltaLog

    def cold() -> int:
        return DeltaLog.for_path(str(path)).snapshot().files.num_rows

    out = {"snapshot cold": median_seconds(cold, runs)}
    log = DeltaLog.for_path(str(path))
    out["snapshot warm"] = median_seconds(lambda: log.snapshot().files.num_rows, runs)

    def commit_one() -> None:
        log.start_transaction().add(AddFile(f"use-{time.time_ns()}.parquet", 1, 0)).commit("WRITE")

    out["commit one file"] = median_seconds(commit_one, runs)

    def after_commit() -> float:
        commit_one()
        t = time.perf_counter()
        _ = log.snapshot().files.num_rows
        return time.perf_counter() - t

    out["snapshot after a commit"] = statistics.median(after_commit() for _ in range(runs))
    out["sql insert"] = median_seconds(lambda: spark.sql(f"INSERT INTO delta.`{sql_path}` VALUES (1, 'a')"), runs)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="delta-backends-") as tmp:
        root = Path(tmp)
        for name in ("use", "ds"):
            _build_log(root / name, opts.commits, opts.files)

        began = time.perf_counter()
        from use.session import spark_session  # imported here: pyspark's import is part of the start-up timed

        spark = spark_session(
            "delta-backends", master="local[2]", conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}
        )
        spark.range(1).collect()
        use_start = time.perf_counter() - began
        spark.sql(f"CREATE TABLE delta.`{root / 'use-sql'}` (id BIGINT, s STRING) USING delta")
        engine: EngineProcess = start_delta_spark(root)
        try:
            engine.sql(f"CREATE TABLE delta.`{root / 'ds-sql'}` (id BIGINT, s STRING) USING delta")
            ours = _use_timings(spark, root / "use", str(root / "use-sql"), opts.runs)
            theirs = engine.py(_DELTA_SPARK_TIMINGS, path=str(root / "ds"), sql_path=str(root / "ds-sql"), runs=opts.runs)
            use_rss, ds_rss = tree_rss(os.getpid()) - engine.rss_bytes(), engine.rss_bytes()
            ds_start = engine.startup_s
        finally:
            engine.close()
            spark.stop()

    measures = ["snapshot cold", "snapshot warm", "snapshot after a commit", "commit one file", "sql insert"]
    body: list[list[object]] = [["start-up to first query (s)", use_start, ds_start, ds_start / use_start]]
    body += [[f"{m} (ms)", ours[m] * 1000, theirs[m] * 1000, theirs[m] / ours[m]] for m in measures]
    body.append(["resident memory (MiB)", use_rss / 2**20, ds_rss / 2**20, ds_rss / use_rss])
    print(f"{opts.commits} commits, {opts.files} live files, median of {opts.runs} runs")
    print(fmt_table(["measure", "USE log (Python)", "delta-spark (py4j)", "delta-spark / USE"], body))
    features = theirs["features"]  # name -> is a reader (reader+writer) feature
    refused = sorted(f for f, reader in features.items() if reader and f not in READER_FEATURES_SUPPORTED)
    print(f"\ntable features delta-spark 4.4 supports: {len(features)}")
    print(
        "  USE writes tables with (column mapping only unmapped; constraints, generated, identity and default columns "
        f"only while the table declares none): {', '.join(sorted(WRITER_FEATURES_WRITABLE & set(features)))}"
    )
    print(f"  USE reads, does not write: {', '.join(sorted(set(features) - WRITER_FEATURES_WRITABLE - set(refused)))}")
    print(f"  USE refuses to read: {', '.join(refused)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
