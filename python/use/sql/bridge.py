"""The py4j callback object the JVM shim calls (`use.sql.UseBridge`), and its registration.

Every call is `call(method, request_json, args)`: the method's function gets the session, the
parsed request and the JVM objects passed along (Catalyst filters, a write's DataFrame), and
returns a JSON-ready dict. Errors never cross as Python tracebacks: a `UseError` becomes
`{"error": {"kind", "message"}}` (the shim raises it as one clean AnalysisException); a Spark error
raised by a nested Spark call keeps Spark's own message; anything else (a bug) is logged here with
its traceback and reported by type and message.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from use.errors import UseError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log = logging.getLogger(__name__)

Method = Callable[["SparkSession", dict[str, Any], list[Any]], dict[str, Any]]

_lock = threading.Lock()
_registered: Bridge | None = None


def _methods() -> dict[str, Method]:
    from use.sql import scan, tables, write

    return {
        "describe": tables.describe,
        "create": tables.create,
        "abandon": tables.abandon,
        "stage": tables.stage,
        "commitStaged": tables.commit_staged,
        "alterProperties": tables.alter_properties,
        "truncate": tables.truncate,
        "planScans": scan.plan_scans,
        "write": write.write,
    }


def error_kind(exc: BaseException) -> str:
    """`TableNotFoundError` -> `USE_TABLE_NOT_FOUND_ERROR` (Spark's style of error class names)."""
    return "USE_" + re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).upper()


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
        text = str(chosen.getMessage())
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
            return json.dumps({"error": {"kind": error_kind(exc), "message": str(exc)}})
        except Exception as exc:  # noqa: BLE001 - every failure must reach Spark as one message
            spark_message = _spark_message(exc)
            if spark_message is not None:
                return json.dumps({"error": {"kind": "USE_SPARK_ERROR", "message": spark_message}})
            _log.exception("USE's SQL bridge failed in %s", method)
            return json.dumps({"error": {"kind": "USE_INTERNAL_ERROR", "message": f"{type(exc).__name__}: {exc}"}})

    class Java:
        implements = ["use.sql.UseBridge"]


def register_bridge(spark: SparkSession) -> Bridge:
    """Start py4j's callback server (once) and register a bridge for this driver (idempotent).

    The bridge is kept referenced here: py4j holds only a weak proxy."""
    global _registered
    from pyspark.java_gateway import ensure_callback_server_started

    with _lock:
        gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
        ensure_callback_server_started(gateway)
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        if _registered is None or _registered.spark.sparkContext is not spark.sparkContext or not jvm.use.sql.Bridge.isRegistered():
            _registered = Bridge(spark)
            jvm.use.sql.Bridge.register(_registered)
        return _registered


def session_of(spark: SparkSession, jdf: Any) -> SparkSession:
    """The Python session for a JVM DataFrame: the installed one, or a wrapper of the JDBC/child
    session the DataFrame belongs to."""
    from pyspark.sql import SparkSession as PySparkSession

    jsession = jdf.sparkSession()
    if jsession.equals(spark._jsparkSession):  # type: ignore[attr-defined]
        return spark
    return PySparkSession(spark.sparkContext, jsparkSession=jsession)


def dataframe(spark: SparkSession, jdf: Any) -> Any:
    """A pyspark DataFrame over a JVM Dataset handed over by the shim."""
    from pyspark.sql import DataFrame

    return DataFrame(jdf, session_of(spark, jdf))
