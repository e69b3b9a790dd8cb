"""The tables of `use_catalog` (`use.sql.LakeTables` in the shim): what the driver decides before a
reader runs, and what the reader computes in a Python worker.

A query on an insight table goes through two processes:

1. the driver (`read_request`, called by the shim's `loadTable` over the bridge) checks the name
   (an unknown insight or table is Spark's TABLE_OR_VIEW_NOT_FOUND, with the valid names), checks
   that the table is a Delta/Qbeast table with a log and that the settings the insight reads are
   valid (`use.insights.check`: an error in the worker would reach the client as a Python
   traceback inside a failed job), and hands the reader everything that exists
   only in the driver: the session's `spark.qbeast.use.optimization.*` defaults, the metastore's
   table list (the shim lists it: catalogs are the JVM's), and the continuous-optimization service's
   state (`use.service.active.current()`: per-table state, next run, last error and note for
   `metastore_summary`, the whole `service_status` table). These become the reader's options;
2. the reader (`use.sql.insight_source`, a `pyspark.sql.datasource` source in a Python worker)
   calls `compute(options)` at execution time: it reads the Delta log of each table (the latest
   snapshot when the query runs, so every query sees the latest commit) and returns the pure
   function's `pyarrow.Table` (`use.insights`).
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

from use.delta import DeltaLog
from use.delta.log_cache import shared_log
from use.delta.storage import resolve_table_root
from use.errors import InvalidArgumentError, TableNotFoundError
from use.insights import (
    LAKE_INSIGHTS,
    TABLE_INSIGHTS,
    ServiceState,
    TableIdentity,
    check,
    for_path,
    lake_optimizations,
    metastore_summary,
)
from use.insights.facts import TableFacts
from use.insights.lake import DELTA_PROVIDERS, NOT_SERVED
from use.optimize.loop_core import session_defaults
from use.service import SERVICE_STATUS_SCHEMA
from use.service.active import current
from use.sql.protocol import (
    InsightNamesReply,
    InsightNamesRequest,
    InsightReadReply,
    InsightReadRequest,
    TableRef,
    arrow_stream,
    read_arrow_stream,
)
from use.sql.sessions import calling_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LAKE_TABLES", "compute", "names", "read_request", "lake_schema"]


def _service_status_schema() -> pa.Schema:
    return SERVICE_STATUS_SCHEMA


#: `use_catalog.system_lake_tables.<name>`: the lake-wide insights plus the service's status.
LAKE_TABLES: tuple[str, ...] = (*LAKE_INSIGHTS, "service_status")


def lake_schema(name: str) -> pa.Schema:
    return _service_status_schema() if name == "service_status" else LAKE_INSIGHTS[name]


def names(spark: SparkSession, req: InsightNamesRequest, args: list[Any]) -> InsightNamesReply:
    """The names the shim lists (SHOW TABLES IN use_catalog.system_lake_tables / <c>.<db>.<t>)."""
    return InsightNamesReply(tuple(TABLE_INSIGHTS), LAKE_TABLES)


def _spark_schema_json(schema: pa.Schema) -> str:
    return from_arrow_schema(schema).json()


def _unknown(name: str, what: str, valid: tuple[str, ...] | list[str]) -> TableNotFoundError:
    return TableNotFoundError(f"{name} is not {what}; the valid names are {', '.join(valid)}")


def _check_table(table: TableRef) -> str:
    """The location of the table the request names; a clean error when it has no Delta log."""
    name, location = table.name, table.location
    provider = (table.provider or "").lower()
    if not table.by_path and provider not in DELTA_PROVIDERS:
        kind = f"a {provider} table" if provider else "a view or a table without a provider"
        raise InvalidArgumentError(
            f"{name} is {kind}: insight tables exist for Delta and Qbeast tables only (USING delta / USING qbeast); "
            "convert it with CALL use_catalog.system.convert_to_qbeast or rewrite it as a Delta table"
        )
    if not location:
        raise InvalidArgumentError(f"{name} has no location: insight tables need a Delta or Qbeast table directory")
    if not DeltaLog.for_path(location).exists():
        raise TableNotFoundError(
            f"{name} has no Delta log at {location} (the directory is gone or holds no _delta_log with commits); "
            "check the location"
        )
    return str(location)


def _epoch_ms(value: Any) -> int | None:
    """A timestamp of `TABLE_STATE_SCHEMA` (a datetime from `to_pylist`) as epoch ms, for the JSON options."""
    return None if value is None else int(value.timestamp() * 1000)


def _check_settings(location: str, insight: str, spark_conf: Mapping[str, str]) -> None:
    """Refuse now, while the query is planned, what the reader would refuse in the table's settings
    and the session's defaults (`use.insights.check`): raised in the reader's Python worker it
    would reach the client as a Python traceback inside a failed Spark job, not as this one clean
    error with its SQLSTATE."""
    log = shared_log(resolve_table_root(location))
    check(TableFacts(log, log.snapshot()), insight, spark_conf=dict(spark_conf))


def _service_states() -> dict[str, dict[str, Any]]:
    """Per-table service columns of `metastore_summary` from this driver's service, by table root."""
    service = current()
    if service is None:
        return {}
    states = service.table_states().to_pylist()
    return {
        resolve_table_root(s["location"]): {
            "state": s["optimization_state"],
            "next_run_ms": _epoch_ms(s["next_run_at"]),
            "last_error": s["last_error"],
            "note": s["note"],
            "note_ms": _epoch_ms(s["note_at"]),
        }
        for s in states
    }


def _service_status_ipc() -> str:
    service = current()
    table = service.status() if service is not None else _service_status_schema().empty_table()
    return base64.b64encode(arrow_stream(table)).decode("ascii")


def read_request(spark: SparkSession, req: InsightReadRequest, args: list[Any]) -> InsightReadReply:
    """The schema (Spark JSON) and reader options of one `use_catalog` table (see the module doc).

    `req.kind`: "table" (the insight of `req.table`) or "lake" (with `req.tables`: the metastore's
    tables as the shim lists them); `args`: the querying session, whose
    `spark.qbeast.use.optimization.*` defaults the reader gets (`session_defaults`, as the Python
    API and the procedures read them).
    """
    insight = req.insight
    defaults = session_defaults(calling_session(spark, args))
    conf = json.dumps(defaults)
    if req.kind == "table":
        if req.table is None:
            raise InvalidArgumentError("internal: an insight table's request without its table")
        if insight not in TABLE_INSIGHTS:
            raise _unknown(f"{req.table.name}.{insight}", "an insight table of a table", list(TABLE_INSIGHTS))
        location = _check_table(req.table)
        _check_settings(location, insight, defaults)
        options = {"kind": "table", "insight": insight, "location": location, "spark_conf": json.dumps(defaults)}
        return InsightReadReply(_spark_schema_json(TABLE_INSIGHTS[insight].schema), options)
    if insight not in LAKE_TABLES:
        raise _unknown(f"system_lake_tables.{insight}", "a lake-wide table of use_catalog", LAKE_TABLES)
    options = {"kind": "lake", "insight": insight, "spark_conf": conf}
    if insight == "service_status":
        options["arrow"] = _service_status_ipc()
    else:
        options["tables"] = json.dumps([dataclasses.asdict(t) for t in req.tables])  # `use.insights.TableIdentity` fields
    if insight == "metastore_summary":
        options["states"] = json.dumps(_service_states())
    return InsightReadReply(_spark_schema_json(lake_schema(insight)), options)


def _identities(text: str) -> list[TableIdentity]:
    return [
        TableIdentity(
            catalog=t["catalog"],
            database=t["database"],
            table_name=t["table_name"],
            table_type=t.get("table_type"),
            provider=t.get("provider"),
            location=t.get("location"),
            table_properties=t.get("table_properties") or {},
        )  # fmt: skip
        for t in json.loads(text)
    ]


def compute(options: Mapping[str, str], tables: tuple[int, int] | None = None) -> pa.Table:
    """The rows of one `use_catalog` table from the reader's options (runs in a Python worker);
    `tables` (start, stop) limits a lake-wide table to a slice of its tables (one partition)."""
    spark_conf = json.loads(options.get("spark_conf") or "{}")
    insight = options["insight"]
    if options["kind"] == "table":
        return for_path(options["location"], insight, spark_conf=spark_conf)
    if insight == "service_status":
        return read_arrow_stream(base64.b64decode(options["arrow"]))
    identities = _identities(options.get("tables") or "[]")
    if tables is not None:
        identities = identities[tables[0] : tables[1]]
    if insight == "optimizations":
        return lake_optimizations(identities)
    states = {k: ServiceState(**v) for k, v in json.loads(options.get("states") or "{}").items()}

    def service(identity: TableIdentity) -> ServiceState:
        if not identity.location:
            return ServiceState(NOT_SERVED)
        return states.get(resolve_table_root(identity.location), ServiceState(NOT_SERVED))

    return metastore_summary(identities, service=service, spark_conf=spark_conf)
