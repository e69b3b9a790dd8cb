"""Catalog events: DDL in the session (PySpark here; JDBC in tests/test_serve_service.py) reaches
the optimization service at once, through the shim's queue, not at the next listing.

The service here lists no table at all (an empty `LocationSource`, a 1-hour interval), so whatever
it knows came from an event. Waits are on the service's own state changes, with a deadline.
"""

from __future__ import annotations

import pytest

from service_support import AUTO, Services, await_service
from use.service import OptimizationService
from use.service.metastore import MetastoreEvents, table_name

pytestmark = pytest.mark.spark

KEY = next(iter(AUTO))


class IdleRunner:
    """Never asked to run here (the tables have no data to optimize); says so if it is."""

    def session_conf(self) -> dict[str, str]:
        return {}

    def optimize(self, start, *, stop, cancel, on_iteration) -> str:
        return "converged"


@pytest.fixture
def evented(spark, tmp_path):
    """A service that only events feed, and the pump draining the session's catalog events."""
    services = Services(tmp_path / "service")
    svc = services([], IdleRunner(), interval=3600.0)
    events = MetastoreEvents(spark, svc, poll_ms=100)
    assert events.start(), "the shim (use.sql.CatalogEvents) is not loaded in the test session"
    spark.sql("CREATE DATABASE IF NOT EXISTS svc_events")
    yield svc, events
    events.stop()
    services.stop_all()
    spark.sql("DROP DATABASE IF EXISTS svc_events CASCADE")


def _state(svc: OptimizationService, name: str):
    info = svc.registry.find(name)
    return None if info is None else svc.table(info.location)


def test_create_alter_unset_drop_in_sql_reach_the_service_at_once(spark, evented) -> None:
    svc, _ = evented
    name = table_name("svc_events", "q")
    spark.sql("CREATE TABLE svc_events.q (id BIGINT, x DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='x')")
    await_service(svc, lambda s: _state(s, name) is not None, "the CREATE event")
    assert not _state(svc, name).continuous

    # USE's catalog commits the property to the log, then mirrors it into the metastore: the
    # mirror's update is the event, and the log already holds the value when it is read.
    spark.sql(f"ALTER TABLE svc_events.q SET TBLPROPERTIES ('{KEY}'='true')")
    await_service(svc, lambda s: _state(s, name).continuous, "the SET TBLPROPERTIES event")
    assert dict(svc.registry.find(name).properties)[KEY] == "true"

    spark.sql(f"ALTER TABLE svc_events.q UNSET TBLPROPERTIES ('{KEY}')")
    await_service(svc, lambda s: not _state(s, name).continuous, "the UNSET TBLPROPERTIES event")

    location = svc.registry.find(name).location
    spark.sql("DROP TABLE svc_events.q")
    await_service(svc, lambda s: s.registry.find(name) is None and s.table(location) is None, "the DROP event")


def test_a_table_created_with_its_properties_and_renamed_keeps_being_served(spark, evented) -> None:
    svc, _ = evented
    spark.sql(f"CREATE TABLE svc_events.d (id BIGINT) USING delta TBLPROPERTIES ('{KEY}'='true')")
    name = table_name("svc_events", "d")
    await_service(svc, lambda s: _state(s, name) is not None and _state(s, name).continuous, "the CTAS-like CREATE event")
    spark.range(3).writeTo("svc_events.d").append()  # a data write is no catalog change: nothing breaks
    spark.sql("ALTER TABLE svc_events.d RENAME TO svc_events.d2")
    renamed = table_name("svc_events", "d2")
    await_service(svc, lambda s: s.registry.find(name) is None and _state(s, renamed) is not None, "the RENAME events")
    assert _state(svc, renamed).continuous


def test_tables_the_service_does_not_serve_and_dropped_databases(spark, evented) -> None:
    svc, events = evented
    before = events.handled
    spark.sql("CREATE TABLE svc_events.p (id BIGINT) USING parquet")  # not Delta: not served
    spark.sql(f"CREATE TABLE svc_events.q2 (id BIGINT) USING delta TBLPROPERTIES ('{KEY}'='true')")
    name = table_name("svc_events", "q2")
    await_service(svc, lambda s: _state(s, name) is not None, "the Delta table's CREATE event")
    assert events.wait_handled(before + 2, 60)
    assert svc.registry.find(table_name("svc_events", "p")) is None
    refreshes = svc.registry.refreshes
    spark.sql("DROP DATABASE svc_events CASCADE")  # Spark sends no event per table
    await_service(
        svc, lambda s: s.registry.find(name) is None and s.registry.refreshes > refreshes, "the tables of the dropped database to go"
    )
