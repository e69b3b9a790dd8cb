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
        svc,
        lambda s: s.registry.find(name) is None and s.registry.refreshes > refreshes,
        "the tables of the dropped database to go",
    )


def _qbeast(spark, path) -> None:
    from use import QbeastTable

    df = spark.range(0, 100, numPartitions=1).selectExpr("id", "CAST(id % 10 AS DOUBLE) AS x")
    QbeastTable.write(df, str(path), ["x"], cube_size=50)


def test_the_metastore_source_lists_delta_tables_of_every_database(spark, tmp_path) -> None:
    from use.delta.storage import resolve_table_root
    from use.service import LocationSource
    from use.service.metastore import CombinedSource, MetastoreSource

    warehouse = tmp_path / "warehouse"
    registered, by_path = warehouse / "registered", warehouse / "by_path"
    _qbeast(spark, registered)
    _qbeast(spark, by_path)
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
        combined = {
            t.location: t for t in CombinedSource(MetastoreSource(spark), LocationSource(directories=[warehouse])).list_tables()
        }
        assert combined[resolve_table_root(str(registered))].name == "spark_catalog.svc_db.events"  # the metastore's name wins
        assert resolve_table_root(str(by_path)) in combined  # written by path into the warehouse
        assert combined[resolve_table_root(str(registered))].version == 0
    finally:
        spark.sql("DROP DATABASE svc_db CASCADE")


def test_a_schema_another_process_changed_reaches_the_metastore_mirror(spark, tmp_path) -> None:
    """JDBC metadata calls (a BI tool's GetColumns) read the metastore's copy of a table's schema:
    after delta-rs adds a column, the service's next listing, or the table's next load, brings it up
    to the log."""
    import deltalake
    import pyarrow as pa

    from use.delta.storage import resolve_table_root
    from use.service.metastore import MetastoreSource

    external = spark._jsparkSession.sharedState().externalCatalog()

    def mirrored_columns() -> list[str]:
        return list(external.getTable("svc_mirror", "m").schema().fieldNames())

    spark.sql("CREATE DATABASE IF NOT EXISTS svc_mirror")
    try:
        spark.sql("CREATE TABLE svc_mirror.m (a INT) USING delta")
        root = resolve_table_root(str(external.getTable("svc_mirror", "m").location()))
        source = MetastoreSource(spark)
        source.list_tables()
        deltalake.write_deltalake(
            root, pa.table({"a": pa.array([1], pa.int32()), "extra": ["e"]}), mode="append", schema_mode="merge"
        )
        assert mirrored_columns() == ["a"]  # another process: the metastore does not know yet
        source.list_tables()
        assert mirrored_columns() == ["a", "extra"]

        deltalake.write_deltalake(
            root, pa.table({"a": pa.array([2], pa.int32()), "more": [1.5]}), mode="append", schema_mode="merge"
        )
        assert spark.sql("SELECT count(*) FROM svc_mirror.m").collect()[0][0] == 2  # a load catches up too
        assert mirrored_columns() == ["a", "extra", "more"]
    finally:
        spark.sql("DROP DATABASE svc_mirror CASCADE")
