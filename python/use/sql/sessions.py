"""The Python sessions and DataFrames behind the JVM objects a bridge call hands over: each statement
runs in its own session (a JDBC connection's, a child session), whose settings (`SET ...`) count."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

__all__ = ["calling_session", "dataframe", "session_for", "session_of", "written_session"]


def session_for(spark: SparkSession, jsession: Any) -> SparkSession:
    """The Python session for a JVM session: the installed one, or a wrapper of another session of
    this driver (a JDBC connection's, a child session), whose own settings (`SET ...`) it reads."""
    if jsession is None or jsession.equals(spark._jsparkSession):
        return spark
    return SparkSession(spark.sparkContext, jsparkSession=jsession)


def calling_session(spark: SparkSession, args: list[Any]) -> SparkSession:
    """The session of the statement that made a call: the shim passes it as the call's first JVM
    argument (CALL, the manual trigger, an insight table's read), so the statement runs with its
    session's settings, e.g. the `spark.qbeast.use.optimization.*` defaults a JDBC client SET, read
    by `use.optimize.loop_core.session_defaults` as the Python API reads them."""
    return session_for(spark, args[0] if args else None)


def written_session(spark: SparkSession, args: list[Any]) -> SparkSession:
    """The session of a write call's DataFrame, which the shim hands over first (None, or no
    argument, when the call writes no rows: a DELETE of whole files): else the installed one."""
    return session_of(spark, args[0]) if args and args[0] is not None else spark


def session_of(spark: SparkSession, jdf: Any) -> SparkSession:
    """The Python session for a JVM DataFrame: the installed one, or a wrapper of the JDBC/child
    session the DataFrame belongs to."""
    return session_for(spark, jdf.sparkSession())


def dataframe(spark: SparkSession, jdf: Any) -> Any:
    """A pyspark DataFrame over a JVM Dataset handed over by the shim."""
    return DataFrame(jdf, session_of(spark, jdf))
