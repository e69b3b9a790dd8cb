"""The table registry: every table the service may optimize, with its properties, kept current.

Two ways in, because the seeds' service must see both kinds of change:

* pull: a `TableSource` lists every table with its properties; `refresh()` (run by the service every
  interval) diffs the listing against what the registry knows, which is how commits by other
  processes (delta-rs, another Spark, the Python API) are seen within one interval;
* push: `on_event(TableEvent)` applies one create/alter/drop at once, which is how SQL changes made
  in the server's own session are seen immediately (the catalog calls it after its commit).

The key of a table is its location, normalized as `use.delta` opens tables (a metastore's
`file:/...` and a plain path are the same table) (the Delta log is the truth for properties, and a location has
one log whatever names point at it). Tables that arrived by a push and that the source does not list
(e.g. registered by path) are re-read from their log at every refresh and leave only by a drop event,
so a source that does not know them cannot silently drop them.

Pure: the registry touches storage only through the `TableSource` and the `reader` it is given
(`use.service.sources` has the ones over Delta logs).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from use.delta.storage import resolve_table_root
from use.errors import InvalidArgumentError

__all__ = [
    "CREATED",
    "ALTERED",
    "DROPPED",
    "TableInfo",
    "TableEvent",
    "TableChange",
    "TableSource",
    "TableRegistry",
]

_log = logging.getLogger("use.service.registry")

CREATED = "created"
ALTERED = "altered"
DROPPED = "dropped"
_KINDS = (CREATED, ALTERED, DROPPED)


def _frozen(props: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType({str(k): str(v) for k, v in (props or {}).items()})


@dataclass(frozen=True)
class TableInfo:
    """One table as a source sees it: where it is, what operators call it, its properties.

    `properties` is the log's `metaData.configuration`. `error` is set when the log could not be
    read (then `properties` are the last ones known, empty if none), so a corrupt table stays
    visible with its error instead of vanishing.
    """

    location: str
    name: str
    properties: Mapping[str, str] = field(default_factory=dict)
    version: int | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if not self.location:
            raise InvalidArgumentError("a table needs a location (its root directory)")
        object.__setattr__(self, "location", resolve_table_root(self.location))
        object.__setattr__(self, "properties", _frozen(self.properties))

    def __hash__(self) -> int:
        return hash((self.location, self.name, self.version))


@dataclass(frozen=True)
class TableEvent:
    """A catalog change pushed to the registry (CREATE/ALTER/DROP TABLE in the server's session).

    `properties=None` means "read them from the table's log" (the log is the truth; the catalog
    commits before it pushes). For a drop only the location matters.
    """

    kind: str
    location: str
    name: str | None = None
    properties: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise InvalidArgumentError(f"TableEvent.kind must be one of {', '.join(_KINDS)}, got {self.kind!r}")
        if not self.location:
            raise InvalidArgumentError("a TableEvent needs the table's location")
        object.__setattr__(self, "location", resolve_table_root(self.location))
        if self.properties is not None:
            object.__setattr__(self, "properties", _frozen(self.properties))


@dataclass(frozen=True)
class TableChange:
    """What a refresh or an event changed: `before` is None for a new table, `after` for a dropped one."""

    kind: str
    location: str
    before: TableInfo | None
    after: TableInfo | None


class TableSource(Protocol):
    """Lists every table the service should know, with properties read from each table's log.

    Today `use.service.sources.LocationSource` (paths or directories of tables); a source over the
    Spark metastore plugs in here without touching the registry.
    """

    def list_tables(self) -> Iterable[TableInfo]:
        """Every table now; may raise if the listing itself fails (the registry then keeps what it knew)."""
        ...


Reader = Callable[[str, str], "TableInfo | None"]
Listener = Callable[[TableChange], None]


class TableRegistry:
    """Thread-safe map location -> TableInfo, fed by a source (pull) and by events (push).

    Listeners get every `TableChange`, in order, after the registry's lock is released (so a
    listener may call back into the registry).
    """

    def __init__(self, source: TableSource, reader: Reader | None = None) -> None:
        self._source = source
        self._reader = reader
        self._tables: dict[str, TableInfo] = {}
        self._pushed: set[str] = set()
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._refreshes = 0

    # --- reading ---------------------------------------------------------------------------------

    def tables(self) -> dict[str, TableInfo]:
        with self._lock:
            return dict(self._tables)

    def get(self, location: str) -> TableInfo | None:
        with self._lock:
            return self._tables.get(location)

    def find(self, table: str) -> TableInfo | None:
        """A table by location or by name (names compared case-insensitively, as Spark does)."""
        with self._lock:
            if table in self._tables:
                return self._tables[table]
            wanted = table.lower()
            for info in self._tables.values():
                if info.name.lower() == wanted:
                    return info
            return None

    @property
    def refreshes(self) -> int:
        """How many refreshes have completed (tests and the service await it)."""
        with self._lock:
            return self._refreshes

    def subscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    # --- pull ------------------------------------------------------------------------------------

    def refresh(self) -> list[TableChange]:
        """List the source (and re-read pushed tables it does not list), apply the difference.

        If the source's listing fails, nothing changes (a transient storage error must not look
        like every table being dropped) and the error propagates to the caller, which logs it.
        """
        listed = {info.location: info for info in self._source.list_tables()}
        with self._lock:
            pushed = [loc for loc in self._pushed if loc not in listed]
        for loc in pushed:
            known = self.get(loc)
            info = self._read(loc, known.name if known is not None else loc)
            if info is not None:
                listed[loc] = info
        with self._lock:
            changes: list[TableChange] = []
            for info in listed.values():
                change = self._apply_locked(self._keep_known_properties(info))
                if change is not None:
                    changes.append(change)
            for loc in [loc for loc in self._tables if loc not in listed]:
                if loc in self._pushed:
                    continue  # unreadable right now: a drop event removes it, not a failed read
                changes.append(TableChange(DROPPED, loc, self._tables.pop(loc), None))
            self._refreshes += 1
        self._notify(changes)
        return changes

    # --- push ------------------------------------------------------------------------------------

    def on_event(self, event: TableEvent) -> TableChange | None:
        """Apply one catalog event at once; returns the change (None if it changed nothing)."""
        if event.kind == DROPPED:
            with self._lock:
                self._pushed.discard(event.location)
                before = self._tables.pop(event.location, None)
            change = TableChange(DROPPED, event.location, before, None) if before is not None else None
        else:
            name = event.name or event.location
            if event.properties is not None:
                info: TableInfo | None = TableInfo(event.location, name, event.properties)
            else:
                info = self._read(event.location, name)
            if info is None:
                _log.warning("event %s for %s: no table there (yet); ignored", event.kind, event.location)
                return None
            with self._lock:
                self._pushed.add(event.location)
                change = self._apply_locked(self._keep_known_properties(info))
        if change is not None:
            self._notify([change])
        return change

    # --- internals -------------------------------------------------------------------------------

    def _read(self, location: str, name: str) -> TableInfo | None:
        if self._reader is None:
            return None
        return self._reader(location, name)

    def _keep_known_properties(self, info: TableInfo) -> TableInfo:
        """A table whose log cannot be read keeps its last known properties (and carries the error),
        so its schedule continues and its runs record the failure instead of it silently stopping."""
        if info.error is None or info.properties:
            return info
        with self._lock:
            known = self._tables.get(info.location)
        if known is None:
            return info
        return TableInfo(info.location, info.name, known.properties, known.version, info.error)

    def _apply_locked(self, info: TableInfo) -> TableChange | None:
        before = self._tables.get(info.location)
        if before == info:
            return None
        self._tables[info.location] = info
        return TableChange(CREATED if before is None else ALTERED, info.location, before, info)

    def _notify(self, changes: list[TableChange]) -> None:
        if not changes:
            return
        with self._lock:
            listeners = list(self._listeners)
        for change in changes:
            for listener in listeners:
                listener(change)
