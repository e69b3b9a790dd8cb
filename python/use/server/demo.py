"""`use serve --demo` (what `make run` starts): the SQL server with the optimization service, plus a
small demo Qbeast table with continuous optimization on, so a newcomer sees the service at work.

The table is made on a fresh data dir only (a restart keeps the table and its optimized layout), in
SQL as a user would: `CREATE TABLE default.demo_events ... USING qbeast` (managed, in
`<warehouse>/demo_events`), several small `INSERT`s, which leave fragmented cubes, then `ALTER TABLE
... SET TBLPROPERTIES ('use.optimization.autoOptimize.enabled'='true', 'use.optimization.type'=
'LeveledCompaction')`: the strategy the table would get by default, named so that the seeds' query
for continuously optimized tables (`table_properties['use.optimization.type'] is not null`) finds it.
The service lists the metastore when it starts (after this service), so it schedules the table at once.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from use.optimize.keys import INTERVAL_KEY

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
TYPE_KEY = "use.optimization.type"
#: The demo table's strategy: the default for a Qbeast table, named as the seeds name it.
DEMO_STRATEGY = "LeveledCompaction"


def demo_conf(conf_pairs: Sequence[str]) -> list[str]:
    """The `--conf` pairs with the demo's interval first (a `--conf` of the caller's wins)."""
    return [f"{INTERVAL_KEY}={DEMO_INTERVAL}", *conf_pairs]


def demo_table_path(options: ServerOptions) -> Path:
    return options.data_dir.warehouse / DEMO_TABLE


class DemoTable:
    """A `Service` that only acts at start: makes the demo table if the metastore has none."""

    name = "demo-table"

    def __init__(self, options: ServerOptions) -> None:
        self.path = demo_table_path(options)

    def start(self, spark: SparkSession) -> None:
        if spark.catalog.tableExists(f"default.{DEMO_TABLE}"):
            return  # a restart: the table is there, with whatever the service made of it
        if (self.path / "_delta_log").is_dir():  # a data dir of an older demo: register its table
            spark.sql(f"CREATE TABLE default.{DEMO_TABLE} USING qbeast LOCATION '{self.path}'")
            return
        spark.sql(
            f"CREATE TABLE default.{DEMO_TABLE} (id BIGINT, x DOUBLE, y DOUBLE) USING qbeast "
            "OPTIONS ('columnsToIndex'='x,y', 'cubeSize'='1000')"
        )
        for part in range(DEMO_APPENDS):  # small appends: fragmented cubes for the service to merge
            lo, hi = part * DEMO_ROWS_PER_APPEND, (part + 1) * DEMO_ROWS_PER_APPEND
            spark.sql(
                f"INSERT INTO default.{DEMO_TABLE} SELECT id, rand({part}) * 1000 AS x, rand({part + 100}) * 1000 AS y "
                f"FROM range({lo}, {hi}, 1, 2)"
            )
        spark.sql(
            f"ALTER TABLE default.{DEMO_TABLE} SET TBLPROPERTIES ('{AUTO_OPTIMIZE_KEY}'='true', '{TYPE_KEY}'='{DEMO_STRATEGY}')"
        )

    def stop(self) -> None:
        pass


#: What the demo prints to watch the optimizer: the seeds' two queries (its events, the tables
#: optimized continuously), on the demo table, and the service's queue.
DEMO_QUERIES = (
    f"SELECT * FROM use_catalog.spark_catalog.default.{DEMO_TABLE}.optimizations",
    f"SELECT * FROM use_catalog.system_lake_tables.metastore_summary WHERE table_properties['{TYPE_KEY}'] is not null",
    "SELECT * FROM use_catalog.system_lake_tables.service_status",
)


def demo_services(options: ServerOptions) -> list[Service]:
    """The demo table first, then the default services (the optimization service finds it)."""
    from use.server.process import default_services  # deferred: imports pyspark; `use --help` reads DEMO_INTERVAL

    return [DemoTable(options), *default_services(options)]


def print_demo(options: ServerOptions, out: Callable[[str], None]) -> None:
    """How to connect and what to look at, printed once the server is ready. The commands run this
    server's interpreter by its absolute path, so they work from any directory (a relative
    `.venv/bin/python` worked only from the repository's root)."""
    interval = options.conf.get(INTERVAL_KEY, DEMO_INTERVAL)
    host, port = options.connect_host, options.port
    python = shlex.quote(sys.executable)
    lines = [
        "",
        f"demo: Qbeast table default.{DEMO_TABLE} ({DEMO_APPENDS} small appends), continuous optimization on",
        f"      (table properties {AUTO_OPTIMIZE_KEY}=true, {TYPE_KEY}={DEMO_STRATEGY});",
        f"      the service optimizes it every {interval}.",
        f"JDBC URL: {options.jdbc_url}",
        "",
        "connect with beeline:",
        f"  java -cp \"$({python} -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/jars/*\" \\",
        f'      org.apache.hive.beeline.BeeLine -u {options.jdbc_url} -n "$USER"',
        "or with PyHive:",
        f"  {python} -c \"from pyhive import hive; c = hive.connect(host='{host}', port={port}).cursor(); "
        f"c.execute('SELECT count(*) FROM {DEMO_TABLE}'); print(c.fetchall())\"",
        "",
        "the optimizer at work (run these in beeline): its optimization events, the tables it schedules,",
        "and its queue and running runs:",
        *(f"  {q};" for q in DEMO_QUERIES),
        f"the service's log: {options.data_dir.log_file} (lines of use.service)",
        "",
        "stop with Ctrl-C",
    ]
    for line in lines:
        out(line)
