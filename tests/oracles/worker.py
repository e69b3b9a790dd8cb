"""A Spark engine in a process of its own, answering requests on stdin with one JSON line each on stdout.

Run by `tests/oracles/engine.py` (never imported by the tests): `python worker.py --jars a.jar:b.jar
--conf key=value ...` with the Python of the engine's own environment (the project's venv for
delta-spark, a pyspark 3.5 venv for qbeast-spark). It imports pyspark and pyarrow only: no USE code
runs here, so what this process reads and writes is the engine's own answer.

Requests: `{"op": "sql", "sql": "..."}` runs a statement and returns its rows; `{"op": "py", "code":
"...", "args": {...}}` runs Python with `spark`, `jvm` and `args` in scope and returns the value the code
assigns to `result` (a DataFrame's rows, or anything JSON can hold). Rows travel as Arrow IPC (base64)
so types arrive exact. A failure returns the exception's Java class (e.g. Delta's
`ConcurrentAppendException`), its error class and message, and the worker keeps serving.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
import traceback
from typing import Any


def _arrow(df: Any) -> str:
    import pyarrow as pa

    try:
        if hasattr(df, "toArrow"):  # pyspark 4
            table = df.toArrow()
        else:  # pyspark 3.5
            from pyspark.sql.pandas.types import to_arrow_schema

            batches = df._collect_as_arrow()
            table = pa.Table.from_batches(batches) if batches else to_arrow_schema(df.schema).empty_table()
    except pa.ArrowInvalid:
        # a command's metrics struct can hold NULLs in fields its schema declares non-nullable
        # (delta-spark's OPTIMIZE): the rows, with types inferred from their values
        table = pa.Table.from_pylist([row.asDict(recursive=True) for row in df.collect()])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode()


def _java_class(exc: BaseException) -> str | None:
    for attr in ("java_exception", "_origin"):
        java = getattr(exc, attr, None)
        if java is not None:
            try:
                return str(java.getClass().getName())
            except Exception:  # noqa: BLE001 - a dead gateway: no class to report
                return None
    return None


def _error_class(exc: BaseException) -> str | None:
    for name in ("getCondition", "getErrorClass"):
        getter = getattr(exc, name, None)
        if getter is not None:
            try:
                value = getter()
            except Exception:  # noqa: BLE001
                continue
            if value:
                return str(value)
    return None


def _answer(spark: Any, request: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import DataFrame

    if request["op"] == "sql":
        return {"arrow": _arrow(spark.sql(request["sql"]))}
    if request["op"] == "py":
        scope: dict[str, Any] = {"spark": spark, "jvm": spark.sparkContext._jvm, "args": request.get("args") or {}}
        exec(request["code"], scope)  # the test process is the only client
        value = scope.get("result")
        if isinstance(value, DataFrame):
            return {"arrow": _arrow(value)}
        return {"value": value}
    raise ValueError(f"unknown op {request['op']!r}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jars", default="")
    parser.add_argument("--conf", action="append", default=[])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--name", default="oracle")
    opts = parser.parse_args()

    # The protocol owns the original stdout; everything else printed in this process, the JVM's
    # System.out included (it inherits fd 1), goes to stderr, which the client sends to a log file.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(message: dict[str, Any]) -> None:
        protocol.write(json.dumps(message) + "\n")

    started = time.monotonic()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(opts.master).appName(opts.name)
    if opts.jars:
        builder = builder.config("spark.jars", ",".join(opts.jars.split(os.pathsep)))
    for item in opts.conf:
        key, _, value = item.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.range(1).collect()  # the first job pays the executor's start-up
    send({"ready": True, "spark": spark.version, "pid": os.getpid(), "startup_s": time.monotonic() - started})

    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        began = time.monotonic()
        try:
            reply = {"ok": True, **_answer(spark, request)}
        except Exception as exc:  # noqa: BLE001 - reported to the client, which raises it there
            reply = {
                "ok": False,
                "type": type(exc).__name__,
                "java_class": _java_class(exc),
                "error_class": _error_class(exc),
                "message": str(exc)[:8000],
                "traceback": traceback.format_exc()[-4000:],
            }
        reply["seconds"] = time.monotonic() - began
        send(reply)
    spark.stop()


if __name__ == "__main__":
    main()
