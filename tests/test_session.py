"""The session USE builds: PySpark's own error reporting keeps working around USE's helpers."""

from __future__ import annotations

import pytest


def test_query_errors_stay_spark_errors_after_quiet_query_errors(spark) -> None:
    from pyspark.errors import ArithmeticException

    from use.session import quiet_query_errors

    with quiet_query_errors():
        pass
    # PySpark logs an error with a SQL context through its query-error logger before raising it; a
    # plain logger under that name used to turn every such error into a TypeError.
    with pytest.raises(ArithmeticException, match="DIVIDE_BY_ZERO"):
        spark.sql("SELECT id / (id - id) FROM range(1)").collect()
