"""The lake-wide insight tables as views of the session catalog, where BI tools find them.

A BI tool browses a JDBC source through the driver's metadata calls (getSchemas, getTables,
getColumns), which Spark's Thrift server answers from the session catalog only: `use_catalog`, a
catalog of its own whose namespaces nest four deep (`use_catalog.spark_catalog.db.t.layout`), never
appears there, and JDBC's catalog/schema/table names could not spell it anyway. So at every start
the server keeps a schema `use_insights` of the session catalog holding one read-only view per
lake-wide insight table (`SELECT * FROM use_catalog.system_lake_tables.<name>`): the schema and its
views are what `getSchemas`, `getTables` and `getColumns` list, and a query of a view reads the
insight table as it is at that moment.

Why lake-wide views only, and why at start: they cover every table (a report filters
`metastore_summary` or `optimizations` by `table_name`) and never go stale as tables come and go, so
nothing has to follow the catalog's events, and a table created or dropped by another process
sharing the metastore, or while the server was down, is right at once. `CREATE OR REPLACE` at each
start keeps the views' columns those of the running version, and brings back a view a user dropped.
The per-table insights (`files`, `cubes`, `layout`, `plan`, ...) stay SQL-only: diagnostics of one
table, read by name in `use_catalog`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["INSIGHTS_SCHEMA", "INSIGHT_VIEWS", "create_insight_views"]

log = logging.getLogger("use.server")

#: The session catalog's schema that holds the views.
INSIGHTS_SCHEMA = "use_insights"
#: view name -> the `use_catalog` table it shows.
INSIGHT_VIEWS: dict[str, str] = {
    name: f"use_catalog.system_lake_tables.{name}" for name in ("metastore_summary", "optimizations", "service_status")
}


def create_insight_views(spark: SparkSession) -> None:
    """(Re)create `use_insights` and its views (the server calls it at every start, before its services)."""
    spark.sql(
        f"CREATE DATABASE IF NOT EXISTS {INSIGHTS_SCHEMA} "
        "COMMENT 'USE insight tables: read-only views of use_catalog.system_lake_tables'"
    )
    for view, source in INSIGHT_VIEWS.items():
        spark.sql(f"CREATE OR REPLACE VIEW {INSIGHTS_SCHEMA}.{view} COMMENT 'read-only: {source}' AS SELECT * FROM {source}")
    log.info("insight views: %s", ", ".join(f"{INSIGHTS_SCHEMA}.{v}" for v in INSIGHT_VIEWS))
