"""The reader of every `use_catalog` table: one Python Data Source (`pyspark.sql.datasource`),
registered as `use.sql.lake.SOURCE_NAME`, that runs in a Python worker and yields the rows of
`use.sql.lake.compute(options)` as `pyarrow.RecordBatch`es.

The shim always hands it the table's schema and options (`use.sql.lake.read_request`), so Spark never
asks it to infer one. Registrations are per SparkSession: `install` registers it on the driver's
session and tells the shim to copy it into every other session that reads a `use_catalog` table
(each JDBC connection of the Thrift server is a new session).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from use.sql.lake import SOURCE_NAME, compute

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["InsightSource", "register"]


class InsightReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        table = compute(self.options)
        # Spark's Arrow types for the declared schema (timestamps in microseconds): cast, never guess.
        yield from table.cast(to_arrow_schema(self.schema)).to_batches()


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
    spark.sparkContext._jvm.use.sql.LakeTables.remember(spark._jsparkSession)  # type: ignore[attr-defined]
