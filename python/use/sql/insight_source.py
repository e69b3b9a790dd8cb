"""The reader of every `use_catalog` table: one Python Data Source (`pyspark.sql.datasource`),
registered as `SOURCE_NAME`, that runs in a Python worker and yields the rows of
`use.sql.lake.compute(options)` as `pyarrow.RecordBatch`es.

The shim always hands it the table's schema and options (`use.sql.lake.read_request`), so Spark never
asks it to infer one. Registrations are per SparkSession: `install` registers it on the driver's
session and tells the shim to copy it into every other session that reads a `use_catalog` table
(each JDBC connection of the Thrift server is a new session).

Spark plans each query by calling `reader()` in a Python planner process, which imports this module:
it imports only pyspark and pyarrow; the insights (numpy, the Delta log reader, the planner) are
imported by `read()`, in the executors' Python workers (reused from query to query).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from use.runtime.jvm import driver_jvm
from use.sql.lake import compute

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["InsightSource", "SOURCE_NAME", "register"]

#: The name the source is registered under (the shim's `LakeTables.SourceName`).
SOURCE_NAME = "use_insight"
#: Tables per partition of a lake-wide table: each table's log is read apart, so a lake of many
#: tables is read by several tasks at once (one partition for a small lake).
TABLES_PER_PARTITION = 32


@dataclass(frozen=True)
class TableRange(InputPartition):
    """The tables `start` to `stop` (exclusive) of a lake-wide table's list."""

    start: int
    stop: int


class InsightReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        tables = self.options.get("tables")
        if not tables:
            return [InputPartition(None)]
        n = len(json.loads(tables))
        return [TableRange(i, min(n, i + TABLES_PER_PARTITION)) for i in range(0, n, TABLES_PER_PARTITION)] or [
            InputPartition(None)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        part = (partition.start, partition.stop) if isinstance(partition, TableRange) else None
        table = compute(self.options, tables=part)
        # Spark's Arrow types for the declared schema (timestamps in microseconds, UTC): cast, never
        # guess. pyspark 4.3 asks for the time zone by name (`timezone`), 4.1 assumes UTC.
        utc = {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_schema).parameters else {}
        arrow_schema = to_arrow_schema(self.schema, **utc)  # type: ignore[arg-type]  # pyspark 4.1's stub lacks timezone
        yield from table.cast(arrow_schema).to_batches()


class InsightSource(DataSource):
    """`use_catalog`'s tables (see the module docstring); not meant for `spark.read.format`."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> Any:
        raise ValueError("use_catalog's tables are read through the catalog (SELECT * FROM use_catalog....)")

    def reader(self, schema: StructType) -> DataSourceReader:
        return InsightReader({str(k).lower(): str(v) for k, v in self.options.items()}, schema)


def register(spark: SparkSession) -> None:
    """Register the source on `spark` and let the shim copy it into the driver's other sessions."""
    spark.dataSource.register(InsightSource)
    driver_jvm(spark).use.sql.LakeTables.remember(spark._jsparkSession)
