"""Shared fixtures: one local SparkSession for the whole test run, and fresh table directories."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from use.session import spark_session

    session = spark_session(
        "use-tests",
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.driver.memory": "2g",
            # managed SQL tables (tests/test_sql_*) live here, not in the working directory
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
        },
    )
    yield session
    session.stop()


@pytest.fixture
def table_path(tmp_path):
    """A path where a test may create one table (the directory does not exist yet)."""
    return str(tmp_path / "table")


@pytest.fixture
def db(spark) -> Iterator[str]:
    """A database of its own for one test (current while the test runs; dropped after)."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    spark.sql(f"CREATE DATABASE {name}")
    previous = spark.catalog.currentDatabase()
    spark.catalog.setCurrentDatabase(name)
    try:
        yield name
    finally:
        spark.catalog.setCurrentDatabase(previous)
        spark.sql(f"DROP DATABASE {name} CASCADE")
