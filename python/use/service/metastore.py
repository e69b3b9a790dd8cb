"""The tables of `use serve`: every Delta/Qbeast table of the Spark session catalog, plus the Delta
tables found under the warehouse directory (`MetastoreSource`, `CombinedSource`), and the catalog's
create/alter/drop events pushed to the service at once (`MetastoreEvents`).

Why both: the metastore is how SQL users name their tables (`spark_catalog.db.t`), but a table
written by path into the warehouse (the Python API, delta-rs, another Spark) has no registration and
must be served too. A location listed by both keeps its metastore name.

Cheap by design: one listing of the metastore per refresh (namespaces, then every table of each
namespace in one `getTablesByName` call on the external catalog), no query per table; properties come
from each table's Delta log through `read_table` (cached `DeltaLog`s), never from the metastore,
whose copy of the properties is not the truth for Delta tables. It runs on the service thread: Spark
catalog calls from a background thread are fine.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from use.delta.listing import LOG_DIR_NAME
from use.delta.storage import resolve_table_root
from use.insights.lake import DELTA_PROVIDERS
from use.runtime.jvm import driver_jvm
from use.runtime.shim import shim_loaded
from use.service.registry import ALTERED, CREATED, DROPPED, TableEvent, TableInfo, TableRegistry, TableSource
from use.service.sources import read_table

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["CombinedSource", "MetastoreEvents", "MetastoreSource", "SERVED_PROVIDERS", "table_name"]

_log = logging.getLogger("use.service.metastore")

#: Providers whose tables the service serves (others only when their location holds a Delta log):
#: the providers USE serves.
SERVED_PROVIDERS = DELTA_PROVIDERS
CATALOG = "spark_catalog"


def _seq(jvm: Any, scala_seq: Any) -> list[Any]:
    """A Scala Seq from py4j as a Python list."""
    return list(jvm.scala.jdk.javaapi.CollectionConverters.asJava(scala_seq))


def _option(opt: Any) -> Any:
    return opt.get() if opt.isDefined() else None


def _served(table: Any) -> tuple[str, str] | None:
    """(location, `spark_catalog.db.t`) of a metastore entry (a JVM `CatalogTable`) the service
    serves: provider delta or qbeast, or any table whose location holds a Delta log; None else."""
    uri = _option(table.storage().locationUri())
    if uri is None:
        return None  # a view: no location
    provider = (_option(table.provider()) or "").lower()
    location = resolve_table_root(str(uri.toString()))
    if provider in SERVED_PROVIDERS or os.path.isdir(os.path.join(location, LOG_DIR_NAME)):
        ident = table.identifier()
        return location, table_name(_option(ident.database()) or "default", ident.table())
    return None


def table_name(database: str, table: str) -> str:
    """The name the service gives a metastore table (what `metastore_summary` and the trigger use)."""
    return f"{CATALOG}.{database}.{table}"


class MetastoreSource:
    """Delta and Qbeast tables of the session catalog (see the module docstring)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._versions: dict[str, int | None] = {}

    def locations(self) -> list[tuple[str, str]]:
        """(location, `spark_catalog.db.t`) of every served table now; raises if the listing fails."""
        jvm = driver_jvm(self.spark)
        external = self.spark._jsparkSession.sharedState().externalCatalog()
        out: list[tuple[str, str]] = []
        for db in _seq(jvm, external.listDatabases()):
            names = external.listTables(db)
            if names.isEmpty():
                continue
            for table in _seq(jvm, external.getTablesByName(db, names)):
                served = _served(table)
                if served is not None:
                    out.append(served)
        return out

    def list_tables(self) -> Iterable[TableInfo]:
        out = []
        for location, name in self.locations():
            info = read_table(location, name)
            if info is not None:
                out.append(info)
                self._catch_up_mirror(info)
        return out

    def _catch_up_mirror(self, info: TableInfo) -> None:
        """A registered table whose log moved since the last listing (or that is listed for the
        first time) is loaded once through the session catalog, whose load brings the metastore's
        mirror of its schema and properties up to its log (`UseCatalog.catchUpMirror`): a table
        another process changed then shows its columns to JDBC metadata calls (BI tools) within one
        interval, as its properties reach the schedules. Nothing is read when the version is the
        one already seen; a failure is the next query's to report."""
        seen = self._versions.get(info.location, -1)
        self._versions[info.location] = info.version
        if info.error is not None or info.version is None or seen == info.version:
            return
        database, _, table = info.name[len(CATALOG) + 1 :].partition(".")
        try:
            self.spark.table(f"{CATALOG}.`{database.replace('`', '``')}`.`{table.replace('`', '``')}`")
        except Exception as exc:  # noqa: BLE001 - the mirror is for tools only; the log is the truth
            _log.debug("loading %s to refresh its metastore entry failed: %s", info.name, exc)


class CombinedSource:
    """Several sources as one: a location listed twice keeps the first source's entry (its name)."""

    def __init__(self, *sources: TableSource) -> None:
        self.sources = sources

    def list_tables(self) -> Iterable[TableInfo]:
        seen: dict[str, TableInfo] = {}
        for source in self.sources:
            for info in source.list_tables():
                seen.setdefault(info.location, info)
        return list(seen.values())


class EventTarget(Protocol):
    """What `MetastoreEvents` hands events to (`use.service.OptimizationService`)."""

    registry: TableRegistry

    def on_event(self, event: TableEvent) -> object | None:
        """Apply the event; None when it changed nothing."""
        ...

    def refresh_now(self) -> None: ...


class MetastoreEvents:
    """Catalog events of the session's metastore, handed to the service as `TableEvent`s at once.

        The shim's `use.sql.CatalogEvents` listens on the shared external catalog (every session's
        DDL: JDBC, PySpark, USE's own catalog) and queues (kind, database, table); this class drains the
        queue on its own thread, so the DDL's thread never waits for the service. A created or altered
        table is looked up in the metastore for its location (properties are then read from its log by
        the registry); a dropped one is found by name among the tables the service knows. A dropped
        database drops the tables it named, and then, like events lost to a full queue, asks the
    service for a full listing.
        Without the shim (a session built without it) there are no events, only the listing every
        interval.
    """

    def __init__(self, spark: SparkSession, target: EventTarget, poll_ms: int = 500) -> None:
        self.spark = spark
        self.target = target
        self.poll_ms = poll_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handled = 0
        self._lock = threading.Condition()

    def start(self) -> bool:
        """Install the listener and start draining; False (and a warning) without the shim."""
        if not shim_loaded(self.spark, _EVENTS_CLASS):
            _log.warning("the JVM shim is not loaded: catalog changes are seen at the next listing, not at once")
            return False
        external = self.spark._jsparkSession.sharedState().externalCatalog()
        self._events().install(external)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="use-service-catalog-events", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Stop draining (within one poll) and remove the listener; idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join()
        try:
            self._events().uninstall()
        except Exception as exc:  # noqa: BLE001 - the JVM may be going down with the server
            _log.debug("removing the catalog listener failed: %s", exc)

    @property
    def handled(self) -> int:
        """How many catalog events have been handled (tests await it)."""
        with self._lock:
            return self._handled

    def wait_handled(self, count: int, timeout: float) -> bool:
        """Block until at least `count` events have been handled or `timeout` seconds pass."""
        with self._lock:
            return self._lock.wait_for(lambda: self._handled >= count, timeout)

    def _events(self) -> Any:
        jvm = driver_jvm(self.spark)
        return jvm.use.sql.CatalogEvents

    def _loop(self) -> None:
        events = self._events()
        while not self._stop.is_set():
            try:
                lines = str(events.poll(self.poll_ms) or "")
            except Exception as exc:  # noqa: BLE001 - the JVM is stopping, or a py4j hiccup
                if self._stop.is_set():
                    return
                _log.warning("reading catalog events failed (%s); retrying", exc)
                self._stop.wait(1.0)
                continue
            for line in filter(None, lines.split("\n")):
                kind, database, table = line.split("\t")
                try:
                    self.handle(kind, database, table)
                except Exception as exc:  # noqa: BLE001 - one bad event must not stop the others
                    _log.warning("catalog event %s of %s.%s not applied (%s); the next listing will see it",
                                 kind, database, table, exc)  # fmt: skip
                with self._lock:
                    self._handled += 1
                    self._lock.notify_all()

    def handle(self, kind: str, database: str, table: str) -> None:
        """Apply one queued event (see the class docstring)."""
        if kind == "overflow":
            self.target.refresh_now()
            return
        if kind == "droppedDatabase":  # Spark sends no event per table: drop those it named
            prefix = table_name(database, "").lower()
            for info in self.target.registry.tables().values():
                if info.name.lower().startswith(prefix):
                    self.target.on_event(TableEvent(DROPPED, info.location, info.name))
            self.target.refresh_now()  # a table left by path in the warehouse comes back by its path
            return
        name = table_name(database, table)
        if kind == DROPPED:
            known = self.target.registry.find(name)
            if known is not None and self.target.on_event(TableEvent(DROPPED, known.location, name)) is not None:
                _log.info("catalog event: %s dropped", name)
            return
        entry = self._table(database, table)
        if entry is None:
            return  # not a served table (or gone again already: its drop event follows)
        location, name = entry
        if self.target.on_event(TableEvent(CREATED if kind == CREATED else ALTERED, location, name)) is not None:
            _log.info("catalog event: %s %s", name, kind)

    def _table(self, database: str, table: str) -> tuple[str, str] | None:
        external = self.spark._jsparkSession.sharedState().externalCatalog()
        if not external.tableExists(database, table):
            return None
        return _served(external.getTable(database, table))


_EVENTS_CLASS = "use.sql.CatalogEvents"
