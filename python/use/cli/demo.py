"""`use demo`: a short, real tour of the engine on embedded defaults.

It is what `make run` runs, so a newcomer sees every layer work end to end on their machine: a Delta
table is created, appended to and inspected through our own log; then a Qbeast table is written,
sampled and optimized on a local Spark. Everything lands in a fresh directory that is printed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from use.cli.history import render_history
from use.display import format_bytes_exact, plural, text_table
from use.errors import InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: The Qbeast part appends its rows in this many writes (to leave fragmented cubes to optimize).
APPENDS = 4
TABLES = ("events_delta", "events_qbeast")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("demo", help="run a short end-to-end demo on embedded defaults")
    parser.add_argument("--path", help="a new or empty directory for the demo tables (default: a new temp dir)")
    parser.add_argument("--rows", type=int, default=200_000, help=f"rows in the Qbeast part, at least {APPENDS} (default 200000)")
    parser.add_argument("--delta-only", action="store_true", help="skip the Spark/Qbeast part")
    parser.set_defaults(func=run)


def _print_table(title: str, table: pa.Table, limit: int = 10) -> None:
    print(f"\n== {title}")
    if not table.num_rows:
        print("(empty)")
        return
    rows = table.slice(0, limit).to_pylist()
    print(text_table(table.column_names, [list(r.values()) for r in rows]))


def _check_args(args: argparse.Namespace) -> None:
    """Every flag is checked before anything is created (also the ones --delta-only ignores)."""
    if args.rows < APPENDS:
        raise InvalidArgumentError(
            f"--rows must be at least {APPENDS} (the demo appends its rows in {APPENDS} writes), got {args.rows}"
        )
    if args.path is None:
        return
    if os.path.exists(args.path) and not os.path.isdir(args.path):
        raise InvalidArgumentError(f"--path {args.path} is a file; pass a new or empty directory")
    # Anything already there is refused, not only an earlier demo's tables: the demo creates and
    # writes files, and a directory holding something else is not the demo's to write into.
    entries = sorted(os.listdir(args.path)) if os.path.isdir(args.path) else []
    if entries:
        shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
        raise InvalidArgumentError(
            f"--path {args.path} is not empty (it holds {shown}); pass a new or empty directory, "
            "or leave --path out for a fresh temporary one"
        )


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    root = Path(args.path or tempfile.mkdtemp(prefix="use-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"USE demo: tables under {root}")
    _delta_part(root / TABLES[0])
    if not args.delta_only:
        _qbeast_part(root / TABLES[1], args.rows)
    return 0


def _delta_part(path: Path) -> None:
    """The Delta log on its own (no Spark): create, three appends of pyarrow data, history, snapshot.
    Spark users write plain Delta tables with `DeltaTable.write(df, path)` instead."""
    # deferred: pyarrow and the Delta log take a noticeable time to import; `use --help` imports every subcommand module
    import pyarrow as pa

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
    print("\n== history (newest first)")
    print(render_history(log.history()))
    files = snap.files.select(["path", "size", "data_change"])
    sizes = pa.array([format_bytes_exact(n) for n in files.column("size").to_pylist()], pa.string())
    _print_table("snapshot files", files.set_column(1, "size", sizes))


def append_summary(rows: int) -> str:
    """`10 rows in 4 appends (3 + 3 + 2 + 2)`: row ids go to append `id % APPENDS`, so the first
    `rows % APPENDS` appends hold one row more."""
    sizes = [rows // APPENDS + (1 if part < rows % APPENDS else 0) for part in range(APPENDS)]
    shown = f"{sizes[0]:,} each" if len(set(sizes)) == 1 else " + ".join(f"{s:,}" for s in sizes)
    return f"{rows:,} rows in {APPENDS} appends ({shown})"


def _qbeast_part(path: Path, rows: int) -> None:
    # deferred: Spark is heavy to import, and `use --help` and `use demo --delta-only` run without it
    from pyspark.sql import functions as F

    from use.session import spark_session  # deferred: imports pyspark (as above)
    from use.tables import QbeastTable  # deferred: imports pyspark (as above)

    spark = spark_session("use-demo")
    df = spark.range(rows).select(
        (F.rand(1) * 1000).alias("x"), (F.rand(2) * 1000).alias("y"), F.col("id").cast("string").alias("payload")
    )
    # The column stats pre-size the index space, so every append lands in the same revision.
    space = {"x_min": 0.0, "x_max": 1000.0, "y_min": 0.0, "y_max": 1000.0}
    started = time.monotonic()
    for part in range(APPENDS):  # several appends leave fragmented cubes for the optimizer
        part_df = df.where(F.col("payload").cast("long") % APPENDS == part)
        QbeastTable.write(part_df, str(path), ["x", "y"], cube_size=5_000, column_stats=space)
    print(f"\n== Qbeast table {path}: {append_summary(rows)} in {time.monotonic() - started:.1f}s")
    table = QbeastTable.for_path(spark, str(path))
    print(table.index_metrics(table.latest_revision_id))
    sample = table.read(sample=0.1)
    print(f"sample(0.1): {plural(sample.count(), 'row')} of {rows:,}")
    print("\n== optimize (one line per iteration)")
    result = table.optimize(max_iterations=20)
    print(result)
    print(table.index_metrics(table.latest_revision_id))
    table.optimizations().select("optimization_name", "revision_id", "started_at", "process_time_ms").show(truncate=False)
