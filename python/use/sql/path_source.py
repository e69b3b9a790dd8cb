"""`format("qbeast")` on a path in a session with USE's SQL extension.

Spark lets no Python data source take a name a JVM class answers to, and `qbeast` is the shim's
provider (so `USING qbeast` works in every session). That provider hands path reads and writes to
this source: the same Python data source as `use.qbeast.datasource`, under another name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from use.qbeast.datasource import PUSHDOWN_CONF, QbeastDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Must equal the shim's `use.sql.QbeastPathProvider.PythonName`.
NAME = "use_qbeast_python"


class QbeastPathSource(QbeastDataSource):
    @classmethod
    def name(cls) -> str:
        return NAME


def register(spark: SparkSession) -> None:
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(QbeastPathSource)
