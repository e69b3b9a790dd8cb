"""Lake-wide insight rows (`use_catalog.system_lake_tables.*`): one row per table of the metastore,
and the optimization events of every table.

The caller (the SQL surface, on the driver) lists the metastore and hands each table's identity in;
these functions read each Delta/Qbeast table's facts from its location and never raise for one
table: a table whose directory is gone, whose log is corrupt or whose properties are invalid gets
its row anyway, with what could be read filled in and the reasons in `error`. Tables of other
providers (parquet, csv, views, ...) get their identity columns only.

Optimization state: `optimization_state`, `next_optimization_at`, `last_optimization_error` and
`optimization_note` / `optimization_note_at` (the service's latest decision on the table, e.g. why a
manual trigger was ignored) are the continuous-optimization service's to fill (a `ServiceState` per
table); without a service they read "not served" and nulls. Everything else comes from the table's
Delta log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta.deletion_vectors import deleted_counts
from use.insights.facts import TableFacts
from use.insights.health import health
from use.insights.planning import next_plan
from use.insights.tables import STRING_MAP, TIMESTAMP, file_records, optimizations, timestamps
from use.optimize.config import is_continuous
from use.optimize.events import EVENT_TAG, OPTIMIZATIONS_SCHEMA
from use.optimize.keys import PREFIX

__all__ = [
    "DELTA_PROVIDERS",
    "LAKE_OPTIMIZATIONS_SCHEMA",
    "METASTORE_SUMMARY_SCHEMA",
    "NOT_SERVED",
    "ServiceState",
    "TableIdentity",
    "lake_optimizations",
    "metastore_summary",
    "metastore_summary_row",
]

#: Providers whose tables have a Delta log USE reads (a Qbeast table is a Delta table).
DELTA_PROVIDERS = frozenset({"delta", "qbeast"})
#: `optimization_state` when no continuous-optimization service runs.
NOT_SERVED = "not served"

_IDENTITY_FIELDS = [
    ("catalog", pa.string()),
    ("database", pa.string()),
    ("table_name", pa.string()),
]

METASTORE_SUMMARY_SCHEMA = pa.schema(
    [
        *_IDENTITY_FIELDS,
        ("table_type", pa.string()),
        ("provider", pa.string()),
        ("location", pa.string()),
        ("table_properties", STRING_MAP),
        ("is_qbeast", pa.bool_()),
        ("latest_version", pa.int64()),
        ("last_commit_time", TIMESTAMP),
        ("num_files", pa.int64()),
        ("size_in_bytes", pa.int64()),
        ("num_records", pa.int64()),
        ("latest_revision_id", pa.int64()),
        ("auto_optimize", pa.bool_()),
        ("optimization_settings", STRING_MAP),
        ("optimization_state", pa.string()),
        ("next_optimization_at", TIMESTAMP),
        ("last_optimization_error", pa.string()),
        ("optimization_note", pa.string()),
        ("optimization_note_at", TIMESTAMP),
        ("last_optimization_time", TIMESTAMP),
        ("optimization_count", pa.int64()),
        ("pending_bytes", pa.int64()),
        ("health_score", pa.float64()),
        ("health_parts", pa.map_(pa.string(), pa.float64())),
        ("error", pa.string()),
    ]
)

LAKE_OPTIMIZATIONS_SCHEMA = pa.schema([*_IDENTITY_FIELDS, *OPTIMIZATIONS_SCHEMA])

_TIME_COLUMNS = ("last_commit_time", "next_optimization_at", "optimization_note_at", "last_optimization_time")


@dataclass(frozen=True)
class TableIdentity:
    """A metastore table as the catalog lists it (`table_properties` as the metastore holds them;
    a summary row of a Delta/Qbeast table shows the log's configuration over them)."""

    catalog: str
    database: str
    table_name: str
    table_type: str | None = None
    provider: str | None = None
    location: str | None = None
    table_properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def has_delta_log(self) -> bool:
        return (self.provider or "").lower() in DELTA_PROVIDERS and bool(self.location)

    def name(self) -> str:
        return f"{self.catalog}.{self.database}.{self.table_name}"


@dataclass(frozen=True)
class ServiceState:
    """What the continuous-optimization service knows of one table (issue 13 fills it):
    `state` is idle, scheduled, running or "not served"; `note` is the service's latest decision on
    the table (`use.service.schedule.TableState.note`); times are epoch ms."""

    state: str = NOT_SERVED
    next_run_ms: int | None = None
    last_error: str | None = None
    note: str | None = None
    note_ms: int | None = None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _log_columns(facts: TableFacts, errors: list[str], spark_conf: Mapping[str, str] | None) -> dict[str, Any]:
    """The columns read from the table's log; each independent part records its own failure."""
    snap = facts.snapshot
    sizes = np.asarray(snap.files.column("size").to_numpy(zero_copy_only=False), dtype=np.int64)
    out: dict[str, Any] = {
        "latest_version": facts.version,
        "last_commit_time": facts.commit_time_ms,
        "num_files": int(sizes.size),
        "size_in_bytes": int(sizes.sum()),
        "optimization_settings": [(k, v) for k, v in sorted(facts.snapshot.configuration.items()) if k.startswith(PREFIX)],
    }

    def attempt(fn: Callable[[], dict[str, Any]]) -> None:
        try:
            out.update(fn())
        except Exception as exc:  # noqa: BLE001 - one failing part must not hide the others (module docstring)
            errors.append(_describe(exc))

    def records() -> dict[str, Any]:
        recs = file_records(snap)
        if recs.null_count:
            return {"num_records": None}
        # the live rows: what the files store less what their deletion vectors delete
        deleted = int(pc.sum(deleted_counts(snap.files)).as_py() or 0)
        return {"num_records": int(np.asarray(recs.to_numpy(zero_copy_only=False)).sum()) - deleted}

    def index() -> dict[str, Any]:
        q = facts.qsnap
        return {"is_qbeast": bool(q.is_qbeast), "latest_revision_id": int(q.latest_revision_id) if q.is_qbeast else None}

    def events() -> dict[str, Any]:
        times = [e.timestamp for e in facts.history if EVENT_TAG in ((e.commit_info or {}).get("tags") or {})]
        return {"optimization_count": len(times), "last_optimization_time": max(times) if times else None}

    def optimizer() -> dict[str, Any]:
        out["auto_optimize"] = is_continuous(facts.snapshot.configuration)  # known even if planning fails below
        config = facts.planning_config(spark_conf)
        table_health = health(facts.qsnap, config)
        return {
            "pending_bytes": next_plan(facts.qsnap, config).bytes,
            "health_score": table_health.score,
            "health_parts": list(table_health.parts.items()),
        }

    for part in (records, index, events, optimizer):
        attempt(part)
    return out


#: Property prefixes the Delta log owns: in the metastore they are only a mirror of the log's
#: configuration, kept in step by SQL DDL but not by other writers (delta-rs, the Python API).
_LOG_OWNED_PREFIXES = ("delta.", "use.", "qbeast.")


def _properties(metastore: Mapping[str, str], configuration: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """A Delta/Qbeast table's properties as SHOW TBLPROPERTIES shows them: the log's configuration
    is the truth (a key set or removed by another writer counts), the metastore adds only the keys
    the log does not own (e.g. `owner`), so a stale mirrored key never shows."""
    merged = {k: v for k, v in metastore.items() if not str(k).startswith(_LOG_OWNED_PREFIXES)}
    merged.update(configuration)
    return [(str(k), None if v is None else str(v)) for k, v in sorted(merged.items())]


def summary_row(
    identity: TableIdentity,
    *,
    service: ServiceState | None = None,
    spark_conf: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The `metastore_summary` row of one table as a dict (times in epoch ms); never raises."""
    service = service or ServiceState()
    row: dict[str, Any] = {
        "catalog": identity.catalog,
        "database": identity.database,
        "table_name": identity.table_name,
        "table_type": identity.table_type,
        "provider": identity.provider,
        "location": identity.location,
        "table_properties": [(str(k), None if v is None else str(v)) for k, v in identity.table_properties.items()],
        "optimization_state": service.state,
        "next_optimization_at": service.next_run_ms,
        "last_optimization_error": service.last_error,
        "optimization_note": service.note,
        "optimization_note_at": service.note_ms,
    }
    if not identity.has_delta_log:
        return row
    errors: list[str] = []
    try:
        facts = TableFacts.load(identity.location or "")
    except Exception as exc:  # noqa: BLE001 - a missing or unreadable table is reported in its row
        errors.append(_describe(exc))
    else:
        row["table_properties"] = _properties(identity.table_properties, facts.snapshot.configuration)
        row.update(_log_columns(facts, errors, spark_conf))
    row["error"] = "; ".join(errors) or None
    return row


def _summary_table(rows: list[dict[str, Any]]) -> pa.Table:
    ms_schema = METASTORE_SUMMARY_SCHEMA
    for name in _TIME_COLUMNS:
        ms_schema = ms_schema.set(ms_schema.get_field_index(name), pa.field(name, pa.int64()))
    table = pa.Table.from_pylist(rows, schema=ms_schema)
    for name in _TIME_COLUMNS:
        i = table.schema.get_field_index(name)
        table = table.set_column(i, METASTORE_SUMMARY_SCHEMA.field(name), timestamps(table.column(i)))
    return table


def metastore_summary_row(
    identity: TableIdentity,
    *,
    service: ServiceState | None = None,
    spark_conf: Mapping[str, str] | None = None,
) -> pa.Table:
    """`metastore_summary`'s row for one table (a one-row table with `METASTORE_SUMMARY_SCHEMA`).

    For a Delta/Qbeast table it reads the latest snapshot at `identity.location`: version, commit
    time, files, bytes, records (null if a file's stats lack numRecords), latest revision, the
    `use.optimization.*` settings and whether the table's properties ask for continuous
    optimization, the events (count and time of the last) still in the log, `pending_bytes` (the
    bytes of the planner's next plan, all its tasks, planned at the time of the call) and the
    health score (`use.insights.layout`).
    `spark_conf` adds session defaults to the table's settings, as `optimize()` does. Never raises:
    failures go to `error`.
    """
    return _summary_table([summary_row(identity, service=service, spark_conf=spark_conf)])


def metastore_summary(
    identities: Iterable[TableIdentity],
    *,
    service: Callable[[TableIdentity], ServiceState | None] | None = None,
    spark_conf: Mapping[str, str] | None = None,
) -> pa.Table:
    """`metastore_summary` rows for many tables, in the given order (see `metastore_summary_row`);
    `service(identity)` gives each table's service state (None: not served)."""
    rows = [summary_row(i, service=service(i) if service is not None else None, spark_conf=spark_conf) for i in identities]
    return _summary_table(rows)


def lake_optimizations(identities: Iterable[TableIdentity]) -> pa.Table:
    """Every optimization event of the given Delta/Qbeast tables, with the table's name first, table
    by table in the given order, each oldest first. A table that cannot be read contributes no rows
    (its `metastore_summary` row says why)."""
    parts = []
    for identity in identities:
        if not identity.has_delta_log:
            continue
        try:
            events = optimizations(TableFacts.load(identity.location or "").history)
        except Exception:  # noqa: BLE001 - one unreadable table never fails the lake-wide query
            continue
        n = events.num_rows
        names = [pa.array([v] * n, pa.string()) for v in (identity.catalog, identity.database, identity.table_name)]
        parts.append(pa.Table.from_arrays([*names, *events.columns], schema=LAKE_OPTIMIZATIONS_SCHEMA))
    return pa.concat_tables(parts) if parts else LAKE_OPTIMIZATIONS_SCHEMA.empty_table()
