"""PySpark's query-error loggers, silenced while USE checks user input through Spark."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pyspark.logger import PySparkLogger

#: PySpark's loggers that print a query error (with its whole Java stack, as JSON) when the error is
#: created, whether or not the caller handles it (pyspark.errors.exceptions.base._log_exception).
QUERY_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@contextlib.contextmanager
def quiet_query_errors() -> Iterator[None]:
    """Silence PySpark's query-error loggers while USE checks user input through Spark (a filter
    string analyzed against a table): a bad input then gives only USE's own one-line typed error,
    not also an ERROR log with a Java stack. Other errors and other loggers are untouched."""
    # PySpark's own logger class: a plain logging.Logger made under one of these names first would
    # make PySpark's later error logging (with its `errorClass=` keyword) raise TypeError in place of
    # the query's error, for every query error of the process.
    loggers = [PySparkLogger.getLogger(name) for name in QUERY_ERROR_LOGGERS]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before, strict=False):
            lg.disabled = was
