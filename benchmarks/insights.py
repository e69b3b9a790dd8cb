"""Warm latency of `use_catalog`'s tables and of a dry-run CALL, from PySpark and over JDBC.

Starts one in-process `UseServer` (Hive metastore in a temporary data dir, Thrift server, no
optimization service) and, in database `bench`:
  * `ev`: a Delta table whose log holds `--events` OPTIMIZE commits, each with an OptimizationEvent
    (written with `use.delta` transactions, as `benchmarks/insights_pure.py` does);
  * `t000`..: `--tables` small Delta tables of 5 commits each, registered with CREATE TABLE ... LOCATION;
  * `q`: a small Qbeast table for `CALL use_catalog.system.optimize(table => 'bench.q', dry_run => true)`.
Each query runs once to warm up, then `--runs` times; the median is reported, with Spark's fixed
cost per query (`SELECT 1`) beside. A statement that fails (e.g. the procedure does not exist yet)
is reported as "not available" with its error.

Goals (issue 12 §6): optimizations on 1,000 events <= 1 s, metastore_summary over 100 tables <= 3 s,
CALL optimize(dry_run => true) <= 200 ms.

    .venv/bin/python benchmarks/insights.py [--events 1000 --tables 100 --runs 5]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import event_log, fmt_table, median_seconds  # importing _common puts python/ on the path

QUERIES = [
    ("optimizations, {events} events", "SELECT * FROM use_catalog.spark_catalog.bench.ev.optimizations", 1.0),
    ("metastore_summary, {tables} tables", "SELECT * FROM use_catalog.system_lake_tables.metastore_summary", 3.0),
    ("CALL optimize(dry_run => true)", "CALL use_catalog.system.optimize(table => 'bench.q', dry_run => true)", 0.2),
    ("SELECT 1 (Spark's fixed cost)", "SELECT 1", None),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _measure(fn: Callable[[], object], runs: int) -> tuple[float | None, str]:
    try:
        return median_seconds(fn, runs), ""
    except Exception as exc:  # noqa: BLE001 - a statement that cannot run yet is reported, not fatal
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, first[:120]


def setup(spark, root: Path, events: int, tables: int) -> None:
    t0 = time.perf_counter()
    spark.sql("CREATE DATABASE bench")
    event_log(str(root / "ev"), events)
    spark.sql(f"CREATE TABLE bench.ev USING delta LOCATION '{root / 'ev'}'")
    for i in range(tables):
        path = root / f"t{i:03d}"
        event_log(str(path), 4)
        spark.sql(f"CREATE TABLE bench.t{i:03d} USING delta LOCATION '{path}'")
    spark.sql("CREATE TABLE bench.q (id INT, x DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='id,x', 'cubeSize'='1000')")
    for w in range(3):
        spark.sql(f"INSERT INTO bench.q SELECT CAST(id AS INT), rand({w}) FROM range({w * 5000}, {(w + 1) * 5000})")
    print(f"setup: {events:,} events, {tables} tables, one Qbeast table in {time.perf_counter() - t0:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--tables", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    from pyhive import hive

    from use.server.config import ServerOptions
    from use.server.process import UseServer

    with tempfile.TemporaryDirectory(prefix="use-bench-insights-") as tmp:
        port = _free_port()
        options = ServerOptions.from_flags(data_dir=Path(tmp) / "data", port=port, master="local[2]", service=False)
        server = UseServer(options, services=[])
        server.start()
        try:
            spark = server.spark
            setup(spark, Path(tmp) / "tables", args.events, args.tables)
            connection = hive.connect(host="127.0.0.1", port=port, username="bench")
            cursor = connection.cursor()

            def jdbc(sql: str) -> Callable[[], object]:
                def run() -> object:
                    cursor.execute(sql)
                    return cursor.fetchall()

                return run

            body = []
            for label, sql, goal in QUERIES:
                name = label.format(events=f"{args.events:,}", tables=args.tables)
                py, py_err = _measure(lambda sql=sql: spark.sql(sql).collect(), args.runs)
                jd, jd_err = _measure(jdbc(sql), args.runs)
                note = py_err or jd_err
                status = "not available: " + note if py is None and jd is None else note
                goal_text = f"<= {goal * 1000:.0f} ms" if goal else ""
                met = "" if goal is None or py is None or jd is None else ("yes" if max(py, jd) <= goal else "no")
                body.append([
                    name, "-" if py is None else f"{py * 1000:.0f}", "-" if jd is None else f"{jd * 1000:.0f}",
                    goal_text, met, status,
                ])  # fmt: skip
                print(f"  {name}: pyspark {body[-1][1]} ms, jdbc {body[-1][2]} ms {status}", flush=True)
            connection.close()
        finally:
            server.stop()
    print()
    print(f"warm latency, median of {args.runs} runs after one warm-up (local[2])")
    print(fmt_table(["query", "PySpark ms", "JDBC ms", "goal", "met", "note"], body))


if __name__ == "__main__":
    main()
