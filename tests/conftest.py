"""Shared fixtures: one local SparkSession for the whole test run, one process per oracle engine, and
fresh table directories.

The tests come in three tiers, one folder each, marked by their folder: `tests/unit` (pure: no JVM,
`make test-fast`), `tests/spark` (a local Spark in this process or a child), `tests/server` (`use
serve` subprocesses over JDBC). A unit test that asks for Spark fails, so the fast tier stays fast.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

TIERS = ("unit", "spark", "server")
_HERE = Path(__file__).resolve().parent


def tier_of(path: Path) -> str | None:
    """The tier of a test file: the folder under tests/ it lies in."""
    try:
        first = Path(path).resolve().relative_to(_HERE).parts[0]
    except (ValueError, IndexError):
        return None
    return first if first in TIERS else None


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = tier_of(item.path)
        if tier is None:
            raise pytest.UsageError(f"{item.nodeid}: every test lives in one of tests/{{{','.join(TIERS)}}}/")
        item.add_marker(getattr(pytest.mark, tier))


# The oracle engines (tests/oracles, docs/oracles.md): the fixture that gives each, and the last test
# (in run order) that asks for it, after which its process is stopped.
ORACLE_ENGINES = ("delta_spark", "qbeast_spark")
_LAST_ENGINE_USER = pytest.StashKey[dict[str, str]]()


def pytest_collection_finish(session):
    """Note each engine's last user among the tests that will run (after -k/-m deselection). Under
    xdist a worker may not run that test; its engine then lives to the end of its run, as any session
    fixture does."""
    last: dict[str, str] = {}
    for item in session.items:
        for name in ORACLE_ENGINES:
            if name in getattr(item, "fixturenames", ()):
                last[name] = item.nodeid
    session.config.stash[_LAST_ENGINE_USER] = last


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Stop an engine after its last test, not at the end of the run: its JVM (about 1 GB) would idle
    through every later module."""
    try:
        return (yield)
    finally:
        for name, nodeid in item.config.stash.get(_LAST_ENGINE_USER, {}).items():
            engine = (getattr(item, "funcargs", None) or {}).get(name)
            if nodeid == item.nodeid and engine is not None:
                engine.close()


@pytest.fixture(scope="session")
def delta_spark(tmp_path_factory):
    """delta-spark's engine, one process for every test of the run that asks for it: a JVM starts in
    about 15 s, a request takes a second or less. Tests share it, so each works on tables of its own."""
    from oracles.engine import engine_fixture, start_delta_spark

    yield from engine_fixture(start_delta_spark, tmp_path_factory)


@pytest.fixture(scope="session")
def qbeast_spark(tmp_path_factory):
    """qbeast-spark's engine (pyspark 3.5 in a virtualenv of its own), shared as `delta_spark` is;
    its tests skip, saying why, where its jar cannot be had."""
    from oracles.engine import engine_fixture, start_qbeast_spark

    yield from engine_fixture(start_qbeast_spark, tmp_path_factory)


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


@pytest.fixture(autouse=True)
def _unit_tests_run_no_jvm(request):
    """The unit tier is pure: a test there that needs a Spark session belongs in tests/spark."""
    if tier_of(request.node.path) == "unit":
        wanted = {"spark", "db", "use_server", "service_server", *ORACLE_ENGINES} & set(request.fixturenames)
        if wanted:
            pytest.fail(
                f"{request.node.nodeid} is in tests/unit but uses {sorted(wanted)}: move it to tests/spark or tests/server"
            )


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


# The JDBC tests' tables and scratch directories (golden scripts' ${SCRATCH}, tmp_path) lie in the
# temp dir, outside a server's data dir: the shared servers allow it (`use serve --allowed-root`).
# Their JDBC clients (server_support, golden.py) connect as $USER or use-tests and may VACUUM with force.
_TEMP_ROOT = ("--allowed-root", tempfile.gettempdir(), "--admin", ",".join({"use-tests", os.environ.get("USER", "use-tests")}))


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
    server = ServerProcess(root / "data", root / "cwd", args=_TEMP_ROOT)
    server.start()
    yield server
    code = server.stop(signal.SIGINT)
    assert code == 0, f"use serve exited {code} on SIGINT:\n{server.report()}"
    assert "received SIGINT" in server.log(), server.report()
    assert list(server.workdir.iterdir()) == [], "use serve left files in its working directory"


@pytest.fixture(scope="session")
def service_server(tmp_path_factory):
    """The one `use serve` subprocess of the optimization service's end-to-end tests: a 2-second
    interval (the shared `use_server` keeps the default 10 minutes, so its tables never change
    under the JDBC tests), a data dir of its own. Started only if a test asks for it; a test may
    kill and restart it on the same data dir."""
    import signal

    from server_support import ServerProcess

    root = tmp_path_factory.mktemp("use-serve-service")
    server = ServerProcess(root / "data", root / "cwd", args=("--conf", "spark.qbeast.use.optimization-interval=2s", *_TEMP_ROOT))
    server.start()
    yield server
    server.stop(signal.SIGINT)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    for name in ("use_server", "service_server"):
        server = getattr(item, "funcargs", {}).get(name)
        if report.failed and server is not None:
            report.sections.append((f"use serve ({name})", server.report()))


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
