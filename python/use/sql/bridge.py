"""The py4j callback object the JVM shim calls (`use.sql.UseBridge`), and its registration.

Every call is `call(method, request_json, args)`: the method's request message
(`use.sql.protocol`) is decoded first, then its function gets the session, the typed request and
the JVM objects passed along (Catalyst filters, a write's DataFrame), and returns the typed reply,
encoded back. A method that commits also gets the statement's `CommitOptions`, built here from the
statement's session (`Commits`): no commit depends on state set around it.

Errors never cross as Python tracebacks: a `UseError` becomes `{"error": ErrorReply}` (the shim
raises it as one clean AnalysisException with that SQLSTATE), `retryable` when it is a lost conflict
a new attempt on the latest snapshot may win (the shim retries DML steps only then); a Spark error
raised by a nested Spark call keeps Spark's own message and SQLSTATE; anything else (a bug, a
message the shim cannot have sent) is logged here with its traceback and reported by type and message.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.java_gateway import ensure_callback_server_started

import use.errors as E
from use.delta.commit_options import CommitOptions
from use.errors import SQL, UseError
from use.optimize.auto_compact import compacting_after
from use.optimize.keys import SESSION_USER_KEY
from use.runtime.conf import session_table_defaults
from use.runtime.jvm import driver_jvm
from use.sql import dml, lake, procedures, save, scan, stream, tables, write
from use.sql.protocol import (
    REQUESTS,
    AbandonRequest,
    AlterPropertiesRequest,
    AlterSchemaRequest,
    CallProcedureRequest,
    CommitStagedRequest,
    CreateRequest,
    DescribeRequest,
    ErrorReply,
    InsightNamesRequest,
    InsightReadRequest,
    ManualTriggerRequest,
    PlanScansRequest,
    ProceduresRequest,
    ProvidersRequest,
    RewriteRowsRequest,
    RowLevelBeginRequest,
    RowLevelEndRequest,
    SaveRequest,
    StageRequest,
    StreamBatchRequest,
    StreamLatestRequest,
    StreamVersionRequest,
    TruncateRequest,
    WriteRequest,
    decode,
    encode,
)
from use.sql.sessions import calling_session, written_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log = logging.getLogger(__name__)

_lock = threading.Lock()
_registered: Bridge | None = None

#: Delta's session setting for the `commitInfo.userMetadata` of a statement's commits.
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"

#: The conflicts a new attempt of a DML step on the latest snapshot may win (Delta's retried ones).
RETRYABLE = (E.ConcurrentDeleteReadError, E.ConcurrentDeleteDeleteError, E.ConcurrentAppendError, E.MetadataChangedError)

#: Error classes of failures that are no `UseError`.
SPARK_ERROR = "USE_SPARK_ERROR"
INTERNAL_ERROR = "USE_INTERNAL_ERROR"

#: When a writing call's auto compaction runs: after the call, or when its row-level statement ends
#: (`rowLevelEnd`; meanwhile this process's optimizations of the table yield to the statement).
AFTER_CALL, AFTER_STATEMENT = "call", "statement"


@dataclass(frozen=True)
class Commits:
    """How the commits of a method's call are made (its `CommitOptions`), from the statement's
    `session` (the session of the DataFrame written, or the one the shim passes first): Delta's
    user metadata (the writer option `userMetadata`, else the session's `USER_METADATA_CONF`), the
    session's defaults for new tables' properties (`spark.databricks.delta.properties.defaults.*`),
    the session's user (`spark.qbeast.use.session.user`, a JDBC session's in `use serve`: `userName`),
    and Delta's auto compaction of what the call wrote (`use.optimize.auto_compact`, `compaction`:
    AFTER_CALL or AFTER_STATEMENT), its settings checked before anything is written."""

    session: Callable[[SparkSession, list[Any]], SparkSession]
    user_metadata: bool = False
    table_defaults: bool = False
    compaction: str | None = None


@dataclass(frozen=True)
class Method:
    """A bridge method: its request class (whose `REPLY` its function returns) and function, called
    `run(spark, request, args)`, or with `commits` `run(spark, request, args, commit_options)`."""

    request: type
    run: Callable[..., Any]
    commits: Commits | None = None

    def invoke(self, spark: SparkSession, request: Any, args: list[Any]) -> Any:
        if self.commits is None:
            return self.run(spark, request, args)
        c = self.commits
        session = c.session(spark, args)
        compacting = compacting_after(session, until_statement_ends=c.compaction == AFTER_STATEMENT) if c.compaction else None
        with compacting if compacting is not None else contextlib.nullcontext() as recorder:
            defaults = session_table_defaults(session) if c.table_defaults else {}
            metadata = _user_metadata(request, session) if c.user_metadata else None
            # the JDBC user `use serve` records in each session: commitInfo.userName
            user = session.conf.get(SESSION_USER_KEY, None) or None
            return self.run(spark, request, args, CommitOptions(metadata, defaults, recorder, user))


def _user_metadata(request: Any, session: SparkSession) -> str | None:
    """The writer option `userMetadata` (`df.write.option(...)`, saveAsTable, writeTo), else the
    statement's session setting (the session of the DataFrame written, e.g. a JDBC client's SET)."""
    options: Mapping[str, str] = getattr(request, "options", None) or {}
    given = next((str(v) for k, v in options.items() if str(k).lower() == "usermetadata"), None)
    return given if given is not None else (session.conf.get(USER_METADATA_CONF, None) or None)


def _methods() -> dict[str, Method]:
    writing = Commits(written_session, user_metadata=True, table_defaults=True, compaction=AFTER_CALL)
    creating = Commits(calling_session, table_defaults=True)
    methods = (
        Method(DescribeRequest, tables.describe),
        Method(CreateRequest, tables.create, creating),
        Method(AbandonRequest, tables.abandon),
        Method(StageRequest, tables.stage),
        Method(CommitStagedRequest, tables.commit_staged, creating),
        Method(AlterPropertiesRequest, tables.alter_properties),
        Method(AlterSchemaRequest, tables.alter_schema),
        Method(TruncateRequest, tables.truncate),
        Method(PlanScansRequest, scan.plan_scans),
        Method(StreamLatestRequest, stream.stream_latest),
        Method(StreamVersionRequest, stream.stream_version),
        Method(StreamBatchRequest, stream.stream_batch),
        Method(WriteRequest, write.write, writing),
        Method(SaveRequest, save.save_path, writing),
        # each DELETE/UPDATE/MERGE step hands over its rows first (none when whole files go)
        Method(RewriteRowsRequest, dml.rewrite_rows, Commits(written_session, user_metadata=True, compaction=AFTER_STATEMENT)),
        Method(RowLevelBeginRequest, dml.writes_begin),
        Method(RowLevelEndRequest, dml.writes_end),
        Method(ProvidersRequest, tables.providers),
        Method(InsightNamesRequest, lake.names),
        Method(InsightReadRequest, lake.read_request),
        Method(ProceduresRequest, procedures.describe_procedures),
        Method(CallProcedureRequest, procedures.call_procedure),
        Method(ManualTriggerRequest, procedures.manual_trigger),
    )
    by_name = {m.request.METHOD: m for m in methods}  # type: ignore[attr-defined]
    missing = sorted(set(REQUESTS) - set(by_name))
    if missing:
        raise UseError(f"internal: the bridge has no function for the protocol's methods {', '.join(missing)}")
    return by_name


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


def error_reply(exc: BaseException, method: str) -> ErrorReply:
    """What the shim raises for a failed call (see the module doc)."""
    if isinstance(exc, UseError):
        return ErrorReply(error_kind(exc), exc.for_surface(SQL), sql_state(exc), retryable=isinstance(exc, RETRYABLE))
    spark_message = _spark_message(exc)
    if spark_message is not None:
        found = _SPARK_SQL_STATE.search(spark_message)
        return ErrorReply(SPARK_ERROR, spark_message, found.group(1) if found else "XX000")
    _log.error("USE's SQL bridge failed in %s", method, exc_info=exc)
    return ErrorReply(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}", "XX000")


class Bridge:
    """Implements the shim's `use.sql.UseBridge` for one driver (the session it was installed on
    answers for every session of that driver: JDBC sessions hand over their own DataFrames)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._methods = _methods()

    def call(self, method: str, request: str, args: Any) -> str:
        try:
            m = self._methods.get(method)
            if m is None:
                raise UseError(f"the JVM shim called an unknown method {method!r}; the shim and the Python package differ")
            reply = m.invoke(self.spark, decode(m.request, json.loads(request)), list(args) if args is not None else [])
            expected = m.request.REPLY  # type: ignore[attr-defined]
            if not isinstance(reply, expected):
                raise TypeError(f"{method} answered {type(reply).__name__}, not its reply {expected.__name__}")
            return json.dumps(encode(reply))
        except Exception as exc:  # noqa: BLE001 - every failure must reach Spark as one message
            return json.dumps({"error": encode(error_reply(exc, method))})

    class Java:
        implements = ["use.sql.UseBridge"]


def register_bridge(spark: SparkSession) -> Bridge:
    """Start py4j's callback server (once) and register a bridge for this driver (idempotent).

    The bridge is kept referenced here: py4j holds only a weak proxy."""
    global _registered

    with _lock:
        ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]  # pyspark leaves it untyped
        jvm = driver_jvm(spark)
        if (
            _registered is None
            or _registered.spark.sparkContext is not spark.sparkContext
            or not jvm.use.sql.Bridge.isRegistered()
        ):
            _registered = Bridge(spark)
            jvm.use.sql.Bridge.register(_registered)
        return _registered
