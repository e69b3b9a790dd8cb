"""Helpers for the SQL tests (tests/test_sql_*; their `db` fixture is in conftest.py): what a
table's directory and log hold, to check that a refused statement changed nothing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


def rows(spark, query: str) -> list[tuple[Any, ...]]:
    """The rows of a query, as sorted tuples."""
    return sorted(tuple(r) for r in spark.sql(query).collect())


def location(spark, table: str) -> str:
    """A table's directory, as the catalog serves it."""
    from use.delta.storage import resolve_table_root

    detail = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()}
    return resolve_table_root(detail["Location"])


def state(root: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The commit files and the data files under a table root (what a statement may change)."""
    log_dir = os.path.join(root, "_delta_log")
    commits = tuple(sorted(os.listdir(log_dir))) if os.path.isdir(log_dir) else ()
    data = []
    for base, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "_delta_log"]
        data += [os.path.relpath(os.path.join(base, f), root) for f in files]
    return commits, tuple(sorted(data))


def commit_actions(root: str, version: int) -> list[dict[str, Any]]:
    import json

    with open(os.path.join(root, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def add_void_column(root: str, name: str) -> None:
    """Give the table's first commit a `void` column, as delta-spark's mergeSchema of an all-NULL
    column records one."""
    import json

    first = os.path.join(root, "_delta_log", f"{0:020d}.json")
    actions = commit_actions(root, 0)
    for a in actions:
        if "metaData" in a:
            schema = json.loads(a["metaData"]["schemaString"])
            schema["fields"].append({"name": name, "type": "void", "nullable": True, "metadata": {}})
            a["metaData"]["schemaString"] = json.dumps(schema)
    with open(first, "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")


@contextmanager
def refused(match: str) -> Iterator[None]:
    """The statement fails with one clean message (USE's or Spark's own), no Python traceback and
    no JVM stack trace in it."""
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException, match=match) as info:
        yield
    message = str(info.value)
    assert "Traceback" not in message and "\tat " not in message and "py4j" not in message.lower(), message
