"""The py4j callback object the JVM shim calls (`use.sql.UseBridge`), and its registration.

Every call is `call(method, request_json, args)`: the method's function gets the session, the
parsed request and the JVM objects passed along (Catalyst filters, a write's DataFrame), and
returns a JSON-ready dict. Errors never cross as Python tracebacks: a `UseError` becomes
`{"error": {"kind", "message", "sqlState"}}` (the shim raises it as one clean AnalysisException
with that SQLSTATE); a Spark error raised by a nested Spark call keeps Spark's own message and
SQLSTATE; anything else (a bug) is logged here with its traceback and reported by type and message.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark.java_gateway import ensure_callback_server_started

import use.errors as E
from use.delta.actions import commit_user_metadata, commit_user_name
from use.errors import SQL, UseError
from use.optimize.auto_compact import compacting_after
from use.optimize.keys import SESSION_USER_KEY
from use.runtime.conf import statement_table_defaults
from use.sql import dml, lake, procedures, save, scan, stream, tables, write
from use.sql.sessions import calling_session, written_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log = logging.getLogger(__name__)

Method = Callable[["SparkSession", dict[str, Any], list[Any]], dict[str, Any]]

_lock = threading.Lock()
_registered: Bridge | None = None


def _methods() -> dict[str, Method]:
    return {
        "describe": tables.describe,
        "create": _with_user(_with_table_defaults(tables.create, from_dataframe=False), from_dataframe=False),
        "abandon": tables.abandon,
        "stage": tables.stage,
        "commitStaged": _with_user(_with_table_defaults(tables.commit_staged, from_dataframe=False), from_dataframe=False),
        "alterProperties": tables.alter_properties,
        "alterSchema": tables.alter_schema,
        "truncate": tables.truncate,
        "planScans": scan.plan_scans,
        "streamLatest": stream.stream_latest,
        "streamVersion": stream.stream_version,
        "streamBatch": stream.stream_batch,
        "write": _with_auto_compaction(_with_table_defaults(_with_user(_with_user_metadata(write.write)))),
        "savePath": _with_auto_compaction(_with_table_defaults(_with_user(_with_user_metadata(save.save_path)))),
        "rewriteRows": _with_auto_compaction(_with_user(_with_user_metadata(dml.rewrite_rows)), until_statement_ends=True),
        "rowLevelBegin": dml.writes_begin,
        "rowLevelEnd": dml.writes_end,
        "insightNames": lake.names,
        "insightRead": lake.read_request,
        "procedures": procedures.describe_procedures,
        "callProcedure": _with_user(procedures.call_procedure, from_dataframe=False),
        "manualTrigger": procedures.manual_trigger,
    }


#: Delta's session setting for the `commitInfo.userMetadata` of a statement's commits.
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


def _with_user_metadata(method: Method) -> Method:
    """A writing call whose commits carry Delta's user metadata: the writer option `userMetadata`
    (`df.write.option(...)`, saveAsTable, writeTo), else the statement's session setting
    `spark.databricks.delta.commitInfo.userMetadata` (the session of the DataFrame written, e.g. a
    JDBC client's SET)."""

    def run(spark: SparkSession, req: dict[str, Any], args: list[Any]) -> dict[str, Any]:
        given = next((str(v) for k, v in (req.get("options") or {}).items() if str(k).lower() == "usermetadata"), None)
        if given is None:
            # each of these calls hands over the written DataFrame first, if any (a DELETE of whole files has none)
            session = written_session(spark, args)
            given = session.conf.get(USER_METADATA_CONF, None) or None
        with commit_user_metadata(given):
            return method(spark, req, args)

    return run


def _with_user(method: Method, from_dataframe: bool = True) -> Method:
    """A call whose commits carry the statement's user as `commitInfo.userName`: the JDBC user
    `use serve` records in each session (`spark.qbeast.use.session.user`), from the session of the
    DataFrame written or the one the shim passes first; no user outside such a session."""

    def run(spark: SparkSession, req: dict[str, Any], args: list[Any]) -> dict[str, Any]:
        session = written_session(spark, args) if from_dataframe else calling_session(spark, args)
        with commit_user_name(session.conf.get(SESSION_USER_KEY, None) or None):
            return method(spark, req, args)

    return run


def _with_table_defaults(method: Method, from_dataframe: bool = True) -> Method:
    """A call that may create a table, in the statement's session's defaults for new tables' properties
    (Delta's `spark.databricks.delta.properties.defaults.*`, `use.runtime.conf.statement_table_defaults`):
    the session of the DataFrame written, or the one the shim passes first (CREATE TABLE, REPLACE)."""

    def run(spark: SparkSession, req: dict[str, Any], args: list[Any]) -> dict[str, Any]:
        if from_dataframe:
            session = written_session(spark, args)
        else:
            session = calling_session(spark, args)
        with statement_table_defaults(session):
            return method(spark, req, args)

    return run


def _with_auto_compaction(method: Method, until_statement_ends: bool = False) -> Method:
    """A writing call followed by Delta's auto compaction of what it wrote, in the writing statement's
    session, before the statement returns (`use.optimize.auto_compact`; a row-level statement's
    step leaves it to `rowLevelEnd`); the session's settings are checked before anything is written."""

    def run(spark: SparkSession, req: dict[str, Any], args: list[Any]) -> dict[str, Any]:
        # each of these calls hands over the written DataFrame first, if any (a DELETE of whole files has none)
        with compacting_after(written_session(spark, args), until_statement_ends=until_statement_ends):
            return method(spark, req, args)

    return run


def error_kind(exc: BaseException) -> str:
    """The error class a USE error reaches SQL users with: `USE_` and its `use.errors` class in
    Spark's style (`TableNotFoundError` -> `USE_TABLE_NOT_FOUND_ERROR`, `UseError` -> `USE_ERROR`).

    One rule for every class, so clients can branch on them: each is `USE_<NAME>_ERROR`, and the
    shim's own errors (`UseException.Kinds` in Bridge.scala) follow it too, taking the name of the
    `use.errors` class that means the same when there is one."""
    if type(exc) is UseError:
        return "USE_ERROR"
    return "USE_" + re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).upper()


def sql_state(exc: BaseException) -> str:
    """The SQLSTATE a USE error reaches JDBC/ODBC clients with (BI tools branch on its class: 42
    the statement names something wrong, 22 a bad value, 0A not supported, 40 retry)."""
    for kinds, state in (
        ((E.TableNotFoundError,), "42P01"),
        ((E.TableAlreadyExistsError,), "42P07"),
        ((E.SchemaMismatchError,), "42K09"),
        ((E.NotAQbeastTableError,), "42809"),
        ((E.UnsupportedFeatureError,), "0A000"),
        ((E.ConcurrentModificationError,), "40001"),
        ((E.AccessDeniedError,), "42501"),
        ((ValueError, LookupError, E.VersionNotFoundError), "22023"),
    ):
        if isinstance(exc, kinds):
            return state
    return "XX000"


_SPARK_SQL_STATE = re.compile(r"SQLSTATE: ([0-9A-Z]{5})")


def _spark_message(exc: BaseException) -> str | None:
    """The message of an error Spark raised under a nested Spark call (py4j's Py4JJavaError or
    pyspark's captured exceptions): the innermost Spark error's message (a failed job's cause, not
    the "Job aborted" wrapper), without JVM stack frames."""
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    if java is None:
        return None
    try:
        chosen, cause, seen = java, java, 0
        while cause is not None and seen < 20:
            if cause.getClass().getName().startswith("org.apache.spark") and cause.getMessage() is not None:
                chosen = cause
            cause, seen = cause.getCause(), seen + 1
        message = chosen.getMessage()
        # a job cancelled under the statement (a stopped stream, a killed query) fails with no message
        text = (
            str(message)
            if message is not None
            else f"{chosen.getClass().getName()} without a message: a Spark job of this statement failed or was cancelled"
        )
    except Exception:  # noqa: BLE001 - the JVM side is gone; fall back to the Python text
        return None
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith("at ") or line.startswith("\t"):
            break
        lines.append(line)
    return "\n".join(lines).strip() or type(exc).__name__


class Bridge:
    """Implements the shim's `use.sql.UseBridge` for one driver (the session it was installed on
    answers for every session of that driver: JDBC sessions hand over their own DataFrames)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._methods = _methods()

    def call(self, method: str, request: str, args: Any) -> str:
        try:
            fn = self._methods.get(method)
            if fn is None:
                raise UseError(f"the JVM shim called an unknown method {method!r}; the shim and the Python package differ")
            result = fn(self.spark, json.loads(request), list(args) if args is not None else [])
            return json.dumps(result)
        except UseError as exc:
            return json.dumps({"error": {"kind": error_kind(exc), "message": exc.for_surface(SQL), "sqlState": sql_state(exc)}})
        except Exception as exc:  # noqa: BLE001 - every failure must reach Spark as one message
            spark_message = _spark_message(exc)
            if spark_message is not None:
                found = _SPARK_SQL_STATE.search(spark_message)
                state = found.group(1) if found else "XX000"
                return json.dumps({"error": {"kind": "USE_SPARK_ERROR", "message": spark_message, "sqlState": state}})
            _log.exception("USE's SQL bridge failed in %s", method)
            message = f"{type(exc).__name__}: {exc}"
            return json.dumps({"error": {"kind": "USE_INTERNAL_ERROR", "message": message, "sqlState": "XX000"}})

    class Java:
        implements = ["use.sql.UseBridge"]


def register_bridge(spark: SparkSession) -> Bridge:
    """Start py4j's callback server (once) and register a bridge for this driver (idempotent).

    The bridge is kept referenced here: py4j holds only a weak proxy."""
    global _registered

    with _lock:
        gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
        ensure_callback_server_started(gateway)
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        if (
            _registered is None
            or _registered.spark.sparkContext is not spark.sparkContext
            or not jvm.use.sql.Bridge.isRegistered()
        ):
            _registered = Bridge(spark)
            jvm.use.sql.Bridge.register(_registered)
        return _registered
