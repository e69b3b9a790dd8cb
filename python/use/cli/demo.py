"""`use demo`: a short, real tour of the engine on embedded defaults.

It is what `make run` runs, so a newcomer sees every layer work end to end on their machine: a Delta
table is created, appended to and inspected through our own log; then a Qbeast table is written,
sampled and optimized on a local Spark. Everything lands in a fresh directory that is printed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="run a short end-to-end demo on embedded defaults")
    parser.add_argument("--path", help="directory to create the demo tables in (default: a new temp dir)")
    parser.add_argument("--rows", type=int, default=200_000, help="rows in the Qbeast part (default 200000)")
    parser.add_argument("--delta-only", action="store_true", help="skip the Spark/Qbeast part")
    parser.set_defaults(func=run)


def _print_table(title: str, table: pa.Table, limit: int = 10) -> None:
    print(f"\n== {title}")
    print(table.slice(0, limit).to_pandas().to_string(index=False) if table.num_rows else "(empty)")


def run(args: argparse.Namespace) -> int:
    root = Path(args.path or tempfile.mkdtemp(prefix="use-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"USE demo: tables under {root}")
    _delta_part(root / "events_delta")
    if not args.delta_only:
        _qbeast_part(root / "events_qbeast", args.rows)
    return 0


def _delta_part(path: Path) -> None:
    from use.delta import DeltaLog
    from use.delta.datafile import write_data_file

    schema = pa.schema([("id", pa.int64()), ("city", pa.string()), ("amount", pa.float64())])
    log = DeltaLog.for_path(str(path))
    log.create(schema, configuration={"delta.checkpointInterval": "10"})
    for batch in range(3):
        ids = list(range(batch * 1000, (batch + 1) * 1000))
        data = pa.table(
            {"id": ids, "city": [("BCN", "NYC", "TYO")[i % 3] for i in ids], "amount": [i * 0.5 for i in ids]},
            schema=schema,
        )
        add = write_data_file(log.table_root, data)
        txn = log.start_transaction()
        txn.add(add)
        txn.commit("WRITE", parameters={"mode": "Append"}, metrics={"numFiles": "1", "numOutputRows": str(len(ids))})
    snap = log.snapshot()
    print(f"\n== Delta table {path}: version {snap.version}, {snap.files.num_rows} live files, schema {snap.schema}")
    entries = log.history()
    history = pa.table(
        {
            "version": [h.version for h in entries],
            "operation": [h.operation for h in entries],
            "parameters": [str(h.parameters) for h in entries],
        }
    )
    _print_table("history (newest first)", history)
    _print_table("snapshot files", snap.files.select(["path", "size", "data_change"]))


def _qbeast_part(path: Path, rows: int) -> None:
    from pyspark.sql import functions as F

    from use import QbeastTable
    from use.optimize.loop import format_iteration
    from use.session import spark_session

    spark = spark_session("use-demo")
    df = spark.range(rows).select(
        (F.rand(1) * 1000).alias("x"), (F.rand(2) * 1000).alias("y"), F.col("id").cast("string").alias("payload")
    )
    # The column stats pre-size the index space, so every append lands in the same revision.
    space = {"x_min": 0.0, "x_max": 1000.0, "y_min": 0.0, "y_max": 1000.0}
    started = time.monotonic()
    for part in range(4):  # four appends leave fragmented cubes for the optimizer
        part_df = df.where(F.col("payload").cast("long") % 4 == part)
        QbeastTable.write(part_df, str(path), ["x", "y"], cube_size=5_000, column_stats=space)
    print(f"\n== Qbeast table {path}: 4 appends of {rows // 4} rows in {time.monotonic() - started:.1f}s")
    table = QbeastTable.for_path(spark, str(path))
    print(table.index_metrics()[table.latest_revision_id])
    sample = table.read(sample=0.1)
    print(f"sample(0.1): {sample.count()} rows of {rows}")
    result = table.optimize(max_iterations=20)
    print(f"\n== optimize: {len(result.iterations)} iterations, outcome {result.outcome}")
    for m in result.iterations:
        print(f"  {format_iteration(m)}")
    print(table.index_metrics()[table.latest_revision_id])
    table.optimizations().select("optimization_name", "revision_id", "process_time_ms").show(truncate=False)
