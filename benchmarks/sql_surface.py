"""The SQL surface against the Python API and plain parquet, side by side in one run.

One Qbeast table (`--rows` rows, indexed on x, y) is read four ways, each running the same
aggregation so every side returns one small row:
- `catalog`: `spark.sql(...)` on the table registered in the session catalog (`USING qbeast
  LOCATION`), in this driver;
- `jdbc`: the same statement over JDBC (PyHive) to a `use serve` subprocess that has the table
  registered (its own JVM on the same cores, warmed only by the JDBC queries: "jdbc - catalog" is
  the round trip plus that JVM's own speed; the small result and `SELECT 1` show the round trip);
- `QbeastTable.read(filter=..., sample=...)`: the Python API (the same file pruning, no catalog);
- `spark.read.parquet`: Spark's parquet reader on the same files, no pruning by the index.
Two queries: a selective filter (a box of ~0.1% of the rows) and a 1% sample (`TABLESAMPLE (1
PERCENT)`, `read(sample=0.01)`, `df.sample(0.01)`). Each time is the best of `--rounds` alternated
rounds after two warm-up rounds (warm JVM on every side; see `alternated`).

Then `INSERT INTO` a new Qbeast table of `--insert-rows` rows from a cached view against
`QbeastTable.write` of the same DataFrame to a new path (best of `--write-rounds`, alternated).

A third query, a 2-row result of a 3-row Delta table, and `SELECT 1` over JDBC show what a JDBC
round trip costs by itself.

Goals (issue 11): catalog overhead (catalog - QbeastTable.read) <= 50 ms per warm query; JDBC
round trip of a small result <= 100 ms warm (jdbc - catalog for the same query); INSERT <= 1.1x
`QbeastTable.write` (its CPU shown too: on a shared machine wall times of one write vary more).

Usage: nice .venv/bin/python benchmarks/sql_surface.py [--rows 1000000] [--insert-rows 1000000]
       [--rounds 5] [--write-rounds 2] [--driver-memory 2g] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON_DIR, fmt_table, timed_cpu
from qbeast_write_read import alternated

INDEXED = ["x", "y"]
# x, y uniform in [0, 1000): a 31.6 x 31.6 box holds ~0.1% of the rows.
FILTER = "x >= 100 AND x < 131.6 AND y >= 200 AND y < 231.6"
AGG = "count(*) AS n, sum(amount) AS total"
READY_TIMEOUT_S = 600.0


def rows_df(spark: Any, n: int) -> Any:
    """`n` rows: id, indexed x, y doubles in [0, 1000), amount, category, a ~40-character string."""
    return spark.range(n).selectExpr(
        "id",
        "rand(1) * 1000 AS x",
        "rand(2) * 1000 AS y",
        "rand(3) * 100 AS amount",
        "CAST(id % 17 AS INT) AS category",
        "sha1(CAST(id AS STRING)) AS payload",
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A `use serve` subprocess on a data dir of its own; ready when it prints its JDBC URL.

    A process of its own, as users run it: its JVM is warmed only by the JDBC queries, so "jdbc -
    catalog" of the larger queries holds that JVM's own speed besides the round trip."""

    def __init__(self, data_dir: str, driver_memory: str) -> None:
        from use.server import READY_PREFIX

        self.port = _free_port()
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
        cli = "import sys; from use.cli import main; sys.exit(main())"
        command = [
            sys.executable, "-c", cli, "serve", "--data-dir", data_dir, "--port", str(self.port),
            "--master", "local[2]", "--no-service",
            "--conf", "spark.sql.shuffle.partitions=4", "--conf", f"spark.driver.memory={driver_memory}",
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            command, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        self.lines: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line)
                if line.startswith(READY_PREFIX):
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(READY_TIMEOUT_S) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("use serve did not start:\n" + "".join(self.lines))

    def connect(self) -> Any:
        from pyhive import hive

        return hive.connect(host="127.0.0.1", port=self.port, username="bench")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--insert-rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write-rounds", type=int, default=2)
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--keep", help="keep the tables and the server's data dir here (default: a temp dir, removed)")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from use import QbeastTable
    from use.session import spark_session

    work = args.keep or tempfile.mkdtemp(prefix="use-sql-surface-")
    os.makedirs(work, exist_ok=True)
    spark = spark_session(
        "sql-surface-bench",
        master="local[2]",
        conf={
            "spark.driver.memory": args.driver_memory,
            "spark.sql.shuffle.partitions": "4",
            "spark.sql.warehouse.dir": os.path.join(work, "warehouse"),
        },
    )
    server: Server | None = None
    try:
        path = os.path.join(work, "points")
        t0 = time.perf_counter()
        QbeastTable.write(rows_df(spark, args.rows), path, INDEXED, cube_size=max(1000, args.rows // 500))
        print(f"wrote {args.rows} rows to {path} in {time.perf_counter() - t0:.1f} s", flush=True)
        spark.sql("CREATE DATABASE IF NOT EXISTS bench")
        spark.sql(f"CREATE TABLE IF NOT EXISTS bench.points USING qbeast LOCATION '{path}'")
        qt = QbeastTable.for_path(spark, path)

        server = Server(os.path.join(work, "server"), args.driver_memory)
        jdbc = server.connect()
        cursor = jdbc.cursor()
        cursor.execute("CREATE DATABASE IF NOT EXISTS bench")
        cursor.execute(f"CREATE TABLE IF NOT EXISTS bench.points USING qbeast LOCATION '{path}'")
        # A small result with next to nothing to compute: what a JDBC round trip itself costs
        # through the catalog (the table's snapshot and file planning included).
        tiny = os.path.join(work, "tiny")
        spark.sql(f"CREATE TABLE IF NOT EXISTS bench.tiny USING delta LOCATION '{tiny}' AS SELECT id, 'v' AS v FROM range(3)")
        cursor.execute(f"CREATE TABLE IF NOT EXISTS bench.tiny USING delta LOCATION '{tiny}'")

        def over_jdbc(sql: str) -> Callable[[], object]:
            def run() -> object:
                cursor.execute(sql)
                return cursor.fetchall()

            return run

        def collect(df_fn: Callable[[], Any]) -> Callable[[], object]:
            return lambda: [tuple(r) for r in df_fn().collect()]

        agg = [F.count("*").alias("n"), F.sum("amount").alias("total")]
        filtered_sql = f"SELECT {AGG} FROM bench.points WHERE {FILTER}"
        sampled_sql = f"SELECT {AGG} FROM bench.points TABLESAMPLE (1 PERCENT)"
        queries = {
            "filter": {
                "catalog": collect(lambda: spark.sql(filtered_sql)),
                "jdbc": over_jdbc(filtered_sql),
                "QbeastTable.read": collect(lambda: qt.read(filter=FILTER).agg(*agg)),
                "spark.read.parquet": collect(lambda: spark.read.parquet(path).where(FILTER).agg(*agg)),
            },
            "sample 1%": {
                "catalog": collect(lambda: spark.sql(sampled_sql)),
                "jdbc": over_jdbc(sampled_sql),
                "QbeastTable.read": collect(lambda: qt.read(sample=0.01).agg(*agg)),
                "spark.read.parquet": collect(lambda: spark.read.parquet(path).sample(0.01).agg(*agg)),
            },
        }
        tiny_sql = "SELECT * FROM bench.tiny WHERE id < 2"
        queries["small result"] = {"catalog": collect(lambda: spark.sql(tiny_sql)), "jdbc": over_jdbc(tiny_sql)}
        read_rows = []
        overheads: dict[str, tuple[float, float]] = {}
        for name, fns in queries.items():
            best = alternated(fns, args.rounds)
            firsts = {label: [r[0] for r in out] for label, (_, out) in best.items() if label != "spark.read.parquet"}  # type: ignore[union-attr]
            if len({repr(v) for v in firsts.values()}) != 1:
                print(f"WARNING: {name}: results differ: {firsts}", flush=True)
            for label, (seconds, out) in best.items():
                read_rows.append([name, label, round(seconds * 1000, 1), str(out[0][0]) if out else "-"])  # type: ignore[index]
            reference = best.get("QbeastTable.read", best["catalog"])[0]
            overheads[name] = ((best["catalog"][0] - reference) * 1000, (best["jdbc"][0] - best["catalog"][0]) * 1000)
        ping = alternated({"SELECT 1": over_jdbc("SELECT 1")}, args.rounds)["SELECT 1"][0] * 1000
        read_rows.append(["SELECT 1", "jdbc", round(ping, 1), "1"])
        print()
        print(fmt_table(["query", "side", "best ms", "first value"], read_rows))

        # INSERT INTO a Qbeast table vs QbeastTable.write, the same cached rows.
        source = rows_df(spark, args.insert_rows).cache()
        source.count()
        source.createOrReplaceTempView("insert_source")
        counter = iter(range(1_000_000))

        def insert() -> object:
            i = next(counter)
            spark.sql(
                f"CREATE TABLE bench.ins_{i} (id BIGINT, x DOUBLE, y DOUBLE, amount DOUBLE, category INT, payload STRING) "
                f"USING qbeast OPTIONS ('columnsToIndex'='x,y', 'cubeSize'='{max(1000, args.insert_rows // 500)}') "
                f"LOCATION '{os.path.join(work, f'ins_{i}')}'"
            )
            return timed_cpu(lambda: spark.sql(f"INSERT INTO bench.ins_{i} SELECT * FROM insert_source"))

        def write() -> object:
            i = next(counter)
            target = os.path.join(work, f"write_{i}")
            return timed_cpu(lambda: QbeastTable.write(source, target, INDEXED, cube_size=max(1000, args.insert_rows // 500)))

        write_best: dict[str, tuple[float, float]] = {}
        for _ in range(args.write_rounds):
            for label, fn in (("INSERT INTO", insert), ("QbeastTable.write", write)):
                wall, cpu, _ = fn()  # type: ignore[misc]
                if label not in write_best or wall < write_best[label][0]:
                    write_best[label] = (wall, cpu)
        ratio = write_best["INSERT INTO"][0] / write_best["QbeastTable.write"][0]
        cpu_ratio = write_best["INSERT INTO"][1] / max(1e-9, write_best["QbeastTable.write"][1])
        print()
        print(fmt_table(
            ["write", "rows", "best wall s", "its CPU s"],
            [[label, args.insert_rows, wall, cpu] for label, (wall, cpu) in write_best.items()],
        ))  # fmt: skip

        goals = [
            [
                f"catalog overhead, {name} (catalog - QbeastTable.read)",
                f"{catalog:.1f} ms",
                "<= 50 ms",
                "met" if catalog <= 50 else "MISSED",
            ]
            for name, (catalog, _) in overheads.items()
            if name != "small result"
        ]
        goals += [
            [f"JDBC round trip, {name} (jdbc - catalog)", f"{rt:.1f} ms", "<= 100 ms", "met" if rt <= 100 else "MISSED"]
            for name, (_, rt) in overheads.items()
        ]
        goals.append(["JDBC round trip, SELECT 1", f"{ping:.1f} ms", "<= 100 ms", "met" if ping <= 100 else "MISSED"])
        goals.append(["INSERT / QbeastTable.write (wall)", f"{ratio:.2f}x", "<= 1.1x", "met" if ratio <= 1.1 else "MISSED"])
        goals.append(["INSERT / QbeastTable.write (CPU)", f"{cpu_ratio:.2f}x", "(shown)", ""])
        print()
        print(fmt_table(["goal", "measured", "target", ""], goals))
        jdbc.close()
        return 0
    finally:
        if server is not None:
            server.stop()
        spark.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
