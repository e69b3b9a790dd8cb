"""`use serve --demo` (what `make run` starts): the SQL server with the optimization service, plus a
small demo Qbeast table with continuous optimization on, so a newcomer sees the service at work.

The table is written on a fresh data dir only (a restart keeps the table and its optimized layout):
several small appends into `<warehouse>/demo_events`, which leave fragmented cubes, then the property
`use.optimization.autoOptimize.enabled=true`. The service lists the warehouse directory, so it picks
the table up at its first refresh, which happens when it starts (after this service).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from use.optimize.config import INTERVAL_KEY

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from use.server.config import ServerOptions
    from use.server.process import Service

__all__ = ["DEMO_INTERVAL", "DEMO_TABLE", "demo_conf", "demo_services", "print_demo"]

#: The demo's optimization interval (the default, 10 minutes, is too long to watch).
DEMO_INTERVAL = "30s"
DEMO_TABLE = "demo_events"
DEMO_APPENDS = 6
DEMO_ROWS_PER_APPEND = 2_000
AUTO_OPTIMIZE_KEY = "use.optimization.autoOptimize.enabled"


def demo_conf(conf_pairs: Sequence[str]) -> list[str]:
    """The `--conf` pairs with the demo's interval first (a `--conf` of the caller's wins)."""
    return [f"{INTERVAL_KEY}={DEMO_INTERVAL}", *conf_pairs]


def demo_table_path(options: ServerOptions) -> Path:
    return options.data_dir.warehouse / DEMO_TABLE


class DemoTable:
    """A `Service` that only acts at start: writes the demo table if the data dir has none."""

    name = "demo-table"

    def __init__(self, options: ServerOptions) -> None:
        self.path = demo_table_path(options)

    def start(self, spark: SparkSession) -> None:
        if (self.path / "_delta_log").is_dir():
            return  # a restart: the table is there, with whatever the service made of it
        from pyspark.sql import functions as F

        from use import QbeastTable
        from use.optimize.delta_table import DeltaTable

        space = {"x_min": 0.0, "x_max": 1000.0, "y_min": 0.0, "y_max": 1000.0}
        for part in range(DEMO_APPENDS):  # small appends: fragmented cubes for the service to merge
            df = spark.range(part * DEMO_ROWS_PER_APPEND, (part + 1) * DEMO_ROWS_PER_APPEND, numPartitions=2).select(
                F.col("id"), (F.rand(part) * 1000).alias("x"), (F.rand(part + 100) * 1000).alias("y")
            )
            QbeastTable.write(df, str(self.path), ["x", "y"], cube_size=1_000, column_stats=space)
        DeltaTable.for_path(spark, str(self.path)).set_properties({AUTO_OPTIMIZE_KEY: "true"})

    def stop(self) -> None:
        pass


def demo_services(options: ServerOptions) -> list[Service]:
    """The demo table first, then the default services (the optimization service finds it)."""
    from use.server.process import default_services

    return [DemoTable(options), *default_services(options)]


def print_demo(options: ServerOptions, out: Callable[[str], None]) -> None:
    """How to connect and what to look at, printed once the server is ready."""
    path = demo_table_path(options)
    interval = options.conf.get(INTERVAL_KEY, DEMO_INTERVAL)
    lines = [
        "",
        f"demo: Qbeast table {path} ({DEMO_APPENDS} small appends), continuous optimization on",
        f"      (table property {AUTO_OPTIMIZE_KEY}=true); the service optimizes it every {interval}.",
        "",
        "connect with beeline:",
        '  java -cp "$(.venv/bin/python -c \'import os, pyspark; print(os.path.dirname(pyspark.__file__))\')/jars/*" \\',
        f'      org.apache.hive.beeline.BeeLine -u {options.jdbc_url} -n "$USER"',
        "or with PyHive:",
        f"  .venv/bin/python -c \"from pyhive import hive; c = hive.connect(host='{options.connect_host}', "
        f"port={options.port}).cursor(); c.execute('SHOW TABLES'); print(c.fetchall())\"",
        "",
        "the optimizer at work: its OPTIMIZE commits (newest first) and the table's files shrinking:",
        f"  .venv/bin/use history --table-location {path}",
        f"  .venv/bin/python -c \"import deltalake; t = deltalake.DeltaTable('{path}'); "
        "print('version', t.version(), len(t.files()), 'files')\"",
        "(SQL over Delta and Qbeast tables through JDBC arrives with the SQL extension.)",
        f"the service's log: {options.data_dir.log_file} (lines of use.service)",
        "",
        "stop with Ctrl-C",
    ]
    for line in lines:
        out(line)
