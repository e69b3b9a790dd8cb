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


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="write the results of sql/*.sql to sql/*.out instead of comparing (review the diff)",
    )


@pytest.fixture(scope="session")
def update_golden(request) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="session")
def use_server(tmp_path_factory):
    """One `use serve` subprocess shared by every JDBC test (one more JVM per run, not one per
    test): a free loopback port, a data dir under the run's tmp dir, readiness awaited from its
    output. The restart test stops and starts it again on the same data dir (SIGTERM); at the end
    it is stopped with SIGINT, as Ctrl-C does, and must exit 0 leaving nothing in its working
    directory. Its output and log are added to the report of any test using it that fails."""
    import signal

    from server_support import ServerProcess

    root = tmp_path_factory.mktemp("use-serve")
    server = ServerProcess(root / "data", root / "cwd")
    server.start()
    yield server
    code = server.stop(signal.SIGINT)
    assert code == 0, f"use serve exited {code} on SIGINT:\n{server.report()}"
    assert "received SIGINT" in server.log(), server.report()
    assert list(server.workdir.iterdir()) == [], "use serve left files in its working directory"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    server = getattr(item, "funcargs", {}).get("use_server")
    if report.failed and server is not None:
        report.sections.append(("use serve", server.report()))


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
