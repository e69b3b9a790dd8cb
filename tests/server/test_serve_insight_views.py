"""BI tools find the insight tables: the JDBC metadata calls (getSchemas, getTables, getColumns) of
PyHive and of the Hive JDBC driver (beeline's `!tables`, `!columns`) list `use_insights` and its
views over a real `use serve`, and the views read the insight tables as the tables change."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from pyhive.hive import _check_status
from TCLIService import ttypes

import use.insights as insights
from golden import beeline_command
from use.server.insight_views import INSIGHT_VIEWS, INSIGHTS_SCHEMA


def _metadata(conn: Any, call: str, **fields: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
    """A Thrift metadata call (GetSchemas, GetTables, GetColumns) as a BI tool's driver makes it,
    its result set read through PyHive's cursor (PyHive has no public call for these)."""
    response = getattr(conn.client, call)(getattr(ttypes, f"T{call}Req")(sessionHandle=conn.sessionHandle, **fields))
    _check_status(response)
    cursor = conn.cursor()
    cursor._state = cursor._STATE_RUNNING
    cursor._operationHandle = response.operationHandle
    rows = cursor.fetchall()
    return [d[0].lower() for d in cursor.description], rows


def _column(names: list[str], rows: list[tuple[Any, ...]], name: str) -> list[Any]:
    i = names.index(name)
    return [r[i] for r in rows]


def test_pyhive_metadata_calls_list_the_insight_views(use_server) -> None:
    conn = use_server.connect()
    try:
        names, rows = _metadata(conn, "GetSchemas")
        assert INSIGHTS_SCHEMA in _column(names, rows, "table_schem")
        names, rows = _metadata(conn, "GetTables", schemaName=INSIGHTS_SCHEMA, tableName="%")
        assert sorted(_column(names, rows, "table_name")) == sorted(INSIGHT_VIEWS)
        assert set(_column(names, rows, "table_type")) == {"VIEW"}
        for view, schema in (
            ("metastore_summary", insights.METASTORE_SUMMARY_SCHEMA),
            ("optimizations", insights.LAKE_INSIGHTS["optimizations"]),
        ):
            names, rows = _metadata(conn, "GetColumns", schemaName=INSIGHTS_SCHEMA, tableName=view, columnName="%")
            assert _column(names, rows, "column_name") == schema.names, view
        names, rows = _metadata(
            conn, "GetColumns", schemaName=INSIGHTS_SCHEMA, tableName="metastore_summary", columnName="health%"
        )
        assert dict(zip(_column(names, rows, "column_name"), _column(names, rows, "type_name"), strict=True)) == {
            "health_score": "DOUBLE", "health_parts": "MAP<STRING, DOUBLE>"}  # fmt: skip
    finally:
        conn.close()


def test_the_views_follow_the_tables_and_are_read_only(use_server, tmp_path: Path) -> None:
    conn = use_server.connect()
    try:
        cursor = conn.cursor()
        cursor.execute(f"CREATE TABLE bi_t USING delta LOCATION '{tmp_path}/bi_t' AS SELECT id FROM range(10)")
        query = f"SELECT table_name, health_score FROM {INSIGHTS_SCHEMA}.metastore_summary WHERE table_name = 'bi_t'"
        cursor.execute(query)
        assert cursor.fetchall() == [("bi_t", 100.0)]
        cursor.execute("DROP TABLE bi_t")
        cursor.execute(query)
        assert cursor.fetchall() == []
        with pytest.raises(Exception, match="(?i)view|not allowed|insert"):
            cursor.execute(f"INSERT INTO {INSIGHTS_SCHEMA}.metastore_summary SELECT * FROM {INSIGHTS_SCHEMA}.metastore_summary")
    finally:
        conn.close()


def test_beeline_tables_and_columns_list_the_insight_views(use_server) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "meta.sql"
        script.write_text("!tables\n!columns metastore_summary\n")
        done = subprocess.run(
            beeline_command(use_server.url, script), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, check=False,
        )  # fmt: skip
    out = done.stdout
    # beeline prints the metadata result sets as tables (tsv2 here): find (schema, table, type) and
    # (schema, table, column) among the cells of each line, whatever the separator
    cells = [[c.strip() for c in re.split(r"[\t|]", line)] for line in out.splitlines()]
    listed = {tuple(row[i : i + 3]) for row in cells for i in range(len(row) - 2)}
    assert {(INSIGHTS_SCHEMA, view, "VIEW") for view in INSIGHT_VIEWS} <= listed, out
    assert {(INSIGHTS_SCHEMA, "metastore_summary", c) for c in insights.METASTORE_SUMMARY_SCHEMA.names} <= listed, out
