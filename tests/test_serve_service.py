"""`use serve` runs the continuous optimization service: end to end on a real server subprocess.

One more server for this file only (the shared one runs the default 10-minute interval): a
2-second interval, a data dir of its own. A Qbeast table written by path into its warehouse from
the test process (the shared Spark fixture) is picked up from the warehouse listing; properties
set and unset with `DeltaTable.set_properties` are seen within an interval. Events are awaited by
polling the Delta log with a deadline, never by fixed sleeps.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

AUTO = "use.optimization.autoOptimize.enabled"
DEADLINE_S = 240.0


def _await(what: str, predicate: Callable[[], bool], server, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{server.report()}")
        time.sleep(0.2)  # polling the log: the event is in another process


def _optimize_versions(path: Path) -> list[int]:
    from use.delta import DeltaLog

    return [c.version for c in DeltaLog(str(path)).history() if c.operation == "OPTIMIZE"]


def _ids(path: Path) -> list[int]:
    import deltalake

    return sorted(deltalake.DeltaTable(str(path)).to_pyarrow_table(columns=["id"]).column("id").to_pylist())


@pytest.fixture(scope="module")
def service_server(tmp_path_factory):
    from server_support import ServerProcess

    root = tmp_path_factory.mktemp("use-serve-service")
    server = ServerProcess(root / "data", root / "cwd", args=("--conf", "spark.qbeast.use.optimization-interval=2s"))
    server.start()
    yield server
    server.stop(signal.SIGINT)


def _write(spark, path: Path, appends: int) -> list[int]:
    from pyspark.sql import functions as F

    from use import QbeastTable

    for part in range(appends):  # small appends leave fragmented cubes
        df = spark.range(part * 300, (part + 1) * 300, numPartitions=1).select(
            "id", (F.col("id") % 100).cast("double").alias("x")
        )
        QbeastTable.write(df, str(path), ["x"], cube_size=200, column_stats={"x_min": 0.0, "x_max": 100.0})
    return list(range(appends * 300))


def _state(server, path: Path) -> dict | None:
    """The service's saved state of the table (the state file is replaced atomically)."""
    import json

    from use.delta.storage import resolve_table_root

    file = server.data_dir / "service" / "optimization-service.json"
    if not file.exists():
        return None
    tables = json.loads(file.read_text())["tables"]
    return next((t for t in tables if t["location"] == resolve_table_root(str(path))), None)


def test_the_server_optimizes_a_table_whose_property_asks_for_it(spark, service_server) -> None:
    from use.optimize.delta_table import DeltaTable

    server = service_server
    path = server.data_dir / "warehouse" / "events"
    expected = _write(spark, path, 4)
    assert _optimize_versions(path) == []

    table = DeltaTable.for_path(spark, str(path))
    table.set_properties({AUTO: "true"})
    _await("the service's first optimization commit", lambda: _optimize_versions(path), server)
    assert "optimization service started: interval 2s" in server.log()

    # UNSET: seen within an interval; the run in progress ends after its task, then no new
    # optimization commits. The clock is a second table enabled afterwards: once the service has
    # optimized it, it has run cycles after the UNSET, and the first table got none of them.
    table.unset_properties(AUTO)
    _await(
        "the service to see the UNSET and the run to end",
        lambda: (st := _state(server, path)) is not None and not st["continuous"] and st["run"] is None,
        server,
    )
    settled = _optimize_versions(path)
    other = server.data_dir / "warehouse" / "other"
    _write(spark, other, 3)
    DeltaTable.for_path(spark, str(other)).set_properties({AUTO: "true"})
    _await("an optimization of the second table", lambda: _optimize_versions(other), server)
    assert _optimize_versions(path) == settled
    assert _ids(path) == expected

    # kill -9 during a run (or just after it, if it was quicker than the poll), restart on the same
    # data dir: delta-rs reads the same rows, and the schedule resumes (new appends get optimized).
    table.set_properties({AUTO: "true"})
    _write(spark, path, 2)  # more fragments: work for the schedule
    expected = sorted(expected + list(range(600)))
    committed = len(_optimize_versions(path))
    _await(
        "a run of the table",
        lambda: ((st := _state(server, path)) is not None and st["run"] is not None)
        or len(_optimize_versions(path)) > committed,
        server,
    )
    server.stop(signal.SIGKILL)
    assert _ids(path) == expected
    server.start()
    assert "2 table state(s) restored" in server.log()
    _write(spark, path, 2)
    expected = sorted(expected + list(range(600)))
    before = len(_optimize_versions(path))
    _await("an optimization commit after the restart", lambda: len(_optimize_versions(path)) > before, server)
    assert _ids(path) == expected


def test_the_metastore_source_lists_delta_tables_of_every_database(spark, tmp_path) -> None:
    from use.delta.storage import resolve_table_root
    from use.service import LocationSource
    from use.service.metastore import CombinedSource, MetastoreSource

    warehouse = tmp_path / "warehouse"
    registered, by_path = warehouse / "registered", warehouse / "by_path"
    _write(spark, registered, 1)
    _write(spark, by_path, 1)
    plain = tmp_path / "plain"
    spark.range(3).write.parquet(str(plain))
    spark.sql("CREATE DATABASE IF NOT EXISTS svc_db")
    try:
        spark.sql(f"CREATE TABLE svc_db.events USING parquet LOCATION '{registered}'")
        spark.sql(f"CREATE TABLE svc_db.plain USING parquet LOCATION '{plain}'")  # no Delta log: not served
        spark.sql("CREATE VIEW svc_db.v AS SELECT 1 AS one")  # no location: not served
        listed = {t.location: t.name for t in MetastoreSource(spark).list_tables()}
        assert listed[resolve_table_root(str(registered))] == "spark_catalog.svc_db.events"
        assert resolve_table_root(str(plain)) not in listed
        combined = {t.location: t for t in CombinedSource(MetastoreSource(spark), LocationSource(directories=[warehouse])).list_tables()}
        assert combined[resolve_table_root(str(registered))].name == "spark_catalog.svc_db.events"  # the metastore's name wins
        assert resolve_table_root(str(by_path)) in combined  # written by path into the warehouse
        assert combined[resolve_table_root(str(registered))].version == 0
    finally:
        spark.sql("DROP DATABASE svc_db CASCADE")
