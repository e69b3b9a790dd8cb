"""`use serve` runs the continuous optimization service: end to end, over real JDBC (PyHive), against
one real server subprocess with a 2-second interval (`service_server` in conftest, shared by the
tests of this file; the last one kills and restarts it on the same data dir).

Tables are created and written over JDBC; properties are set over JDBC (catalog events) or
committed to the log by this process (another writer: seen within an interval). The optimizations
are read from each table's log with the Python API (`use.optimize.events.optimizations_table`),
rows with delta-rs, the service's state from its state file in the data dir. Every wait polls
those with a deadline; no fixed sleeps.
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from service_support import set_properties

AUTO = "use.optimization.autoOptimize.enabled"
BYTES = "use.optimization.bytes-per-iter"
DEADLINE_S = 240.0
ROWS = 200  # rows per small append: fragments for the service to merge


def _await(what: str, predicate: Callable[[], Any], server, timeout: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{server.report()}")
        time.sleep(0.2)  # the event happens in another process: poll its files
    return value


def _insert(name: str, part: int) -> str:
    lo, hi = part * ROWS, (part + 1) * ROWS
    return f"INSERT INTO {name} SELECT id, CAST(id % 100 AS DOUBLE) AS x FROM range({lo}, {hi})"


def _create(server, name: str, appends: int, properties: dict[str, str] | None = None) -> Path:
    """A managed Qbeast table written in small appends over JDBC; its location."""
    props = ""
    if properties:
        props = " TBLPROPERTIES (" + ", ".join(f"'{k}'='{v}'" for k, v in properties.items()) + ")"
    server.sql(
        f"CREATE TABLE {name} (id BIGINT, x DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='x', 'cubeSize'='100'){props}",
        *(_insert(name, part) for part in range(appends)),
    )
    return server.data_dir / "warehouse" / name


def _optimize_commits(path: Path) -> list[Any]:
    from use.delta import DeltaLog

    return sorted((c for c in DeltaLog(str(path)).history() if c.operation == "OPTIMIZE"), key=lambda c: c.version)


def _events(path: Path) -> int:
    from use.optimize.events import optimizations_table

    return optimizations_table(str(path)).num_rows


def _ids(path: Path) -> list[int]:
    import deltalake

    return sorted(deltalake.DeltaTable(str(path)).to_pyarrow_table(columns=["id"]).column("id").to_pylist())


def _state(server, path: Path) -> dict | None:
    """The service's saved state of the table (the state file is replaced atomically)."""
    from use.delta.storage import resolve_table_root

    file = server.data_dir / "service" / "optimization-service.json"
    if not file.exists():
        return None
    tables = json.loads(file.read_text())["tables"]
    return next((t for t in tables if t["location"] == resolve_table_root(str(path))), None)


def _converged(server, path: Path) -> bool:
    """A run ended with nothing left to select, and the plan check of the latest version agrees."""
    from use.delta import DeltaLog

    st = _state(server, path)
    return (
        st is not None and st["run"] is None and st["last_run"] is not None and st["last_run"]["outcome"] == "converged"
        and st["layout"] is not None and st["layout"]["pending_tasks"] == 0
        and st["layout"]["version"] == DeltaLog(str(path)).snapshot().version
    )  # fmt: skip


def test_sql_properties_schedule_runs_that_converge_unset_stops_them_and_two_tables_both_run(service_server) -> None:
    server = service_server
    ev = _create(server, "ev", 4)
    expected = list(range(4 * ROWS))
    _await("the service to know the new table", lambda: _state(server, ev), server)
    assert _events(ev) == 0

    server.sql(f"ALTER TABLE ev SET TBLPROPERTIES ('{AUTO}'='true')")
    _await("optimization events of the table", lambda: _events(ev), server)
    _await("the layout to converge", lambda: _converged(server, ev), server)
    assert _ids(ev) == expected

    # UNSET: the schedule stops (a run in progress ends after its current task), no new events.
    # The clock is two more tables, scheduled afterwards, one by SQL, one by another writer
    # committing the property to its log (seen at the next listing): with at most one run at a
    # time (the default) both get runs, and the first table none in all that time.
    server.sql(f"ALTER TABLE ev UNSET TBLPROPERTIES ('{AUTO}')")
    _await(
        "the UNSET to stop the schedule",
        lambda: (st := _state(server, ev)) and not st["continuous"] and st["run"] is None,
        server,
    )
    settled = _events(ev)
    a, b = _create(server, "ta", 3), _create(server, "tb", 3)
    server.sql(f"ALTER TABLE ta SET TBLPROPERTIES ('{AUTO}'='true')")
    set_properties(str(b), {AUTO: "true"})
    _await("runs of both scheduled tables", lambda: _events(a) and _events(b), server)
    assert _events(ev) == settled
    assert _ids(ev) == expected and _ids(a) == _ids(b) == list(range(3 * ROWS))

    log = server.log()  # the service logs into the data dir
    assert "optimization service started: interval 2s, at most 1 concurrent run(s)" in log
    assert "catalog events reach the optimization service at once" in log
    assert "catalog event: spark_catalog.default.ev altered" in log  # the SET/UNSET over JDBC, as events
    assert "use.service: run " in log


def test_a_bytes_per_iter_change_during_a_run_is_used_by_the_next_run(service_server) -> None:
    server = service_server
    old, new = "1000000", "2000000"
    path = _create(server, "bpi", 4, {AUTO: "true", BYTES: old})
    _await("a run of the table", lambda: ((st := _state(server, path)) and st["run"]) or _optimize_commits(path), server)
    server.sql(f"ALTER TABLE bpi SET TBLPROPERTIES ('{BYTES}'='{new}')")
    # The run in progress (if it still is) ends with the configuration it started with; it may
    # well take everything there is, so the next run gets new appends to work on.
    _await("the run to end", lambda: (st := _state(server, path)) and st["run"] is None and st["runs"] >= 1, server)
    server.sql(_insert("bpi", 4), _insert("bpi", 5))
    _await(
        "an optimization with the new bytes-per-iter",
        lambda: any(c.parameters.get("bytesPerIter") == new for c in _optimize_commits(path)),
        server,
    )
    used = [c.parameters["bytesPerIter"] for c in _optimize_commits(path)]
    first_new = used.index(new)
    assert set(used[:first_new]) <= {old} and set(used[first_new:]) == {new}, used
    assert _ids(path) == list(range(6 * ROWS))


def test_appends_over_jdbc_while_the_service_optimizes_all_land(service_server) -> None:
    server = service_server
    path = _create(server, "app", 2, {AUTO: "true"})
    errors: list[BaseException] = []
    appended = [2]
    optimized_meanwhile = threading.Event()

    def append() -> None:
        conn = server.connect()
        try:
            cur = conn.cursor()
            # At least 6 appends, and on until an optimization has committed between two of them.
            while appended[0] < 8 or (not optimized_meanwhile.is_set() and appended[0] < 40):
                cur.execute(_insert("app", appended[0]))
                appended[0] += 1
                commits = _optimize_commits(path)
                if commits and commits[-1].version > 2:
                    optimized_meanwhile.set()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            conn.close()

    appender = threading.Thread(target=append, name="jdbc-appender")
    appender.start()
    appender.join(DEADLINE_S * 2)
    assert not appender.is_alive(), "the appender did not finish"
    assert errors == [], errors
    assert optimized_meanwhile.is_set(), "the service committed no optimization while the appends ran"
    assert _ids(path) == list(range(appended[0] * ROWS))  # no row lost, none duplicated
    rows = server.sql("SELECT count(*), count(DISTINCT id) FROM app")
    assert rows == [(appended[0] * ROWS, appended[0] * ROWS)]


def test_deletes_updates_and_merges_over_jdbc_while_the_service_optimizes_all_apply(service_server) -> None:
    """Row-level statements rewrite files the service may be compacting at the same moment: each
    one applies exactly (the table ends as a model of the statements says), none fails, and the
    service keeps committing optimizations in between."""
    import deltalake

    server = service_server
    path = _create(server, "dml", 3, {AUTO: "true"})
    model = {i: float(i % 100) for i in range(3 * ROWS)}
    statements = 0
    conn = server.connect()
    try:
        cur = conn.cursor()
        first = len(_optimize_commits(path))
        # At least 12 statements, and on until two optimizations have committed among them.
        while statements < 12 or (len(_optimize_commits(path)) < first + 2 and statements < 60):
            k, lo = statements % 4, (statements * 37) % (3 * ROWS)
            if k == 0:
                cur.execute(f"DELETE FROM dml WHERE id >= {lo} AND id < {lo + 20}")
                model = {i: x for i, x in model.items() if not lo <= i < lo + 20}
            elif k == 1:
                cur.execute(f"UPDATE dml SET x = -x - 1 WHERE id >= {lo} AND id < {lo + 20}")
                model.update({i: -x - 1 for i, x in model.items() if lo <= i < lo + 20})
            elif k == 2:
                cur.execute(f"MERGE INTO dml USING (SELECT id + {lo} AS id, 0.5 AS x FROM range(30)) s ON dml.id = s.id "
                            "WHEN MATCHED THEN UPDATE SET x = s.x WHEN NOT MATCHED THEN INSERT *")  # fmt: skip
                model.update({i: 0.5 for i in range(lo, lo + 30)})
            else:
                cur.execute(_insert("dml", 10 + statements))
                model.update({i: float(i % 100) for i in range((10 + statements) * ROWS, (11 + statements) * ROWS)})
            statements += 1
    finally:
        conn.close()
    assert len(_optimize_commits(path)) >= first + 2, "the service committed no optimizations among the statements"
    table = deltalake.DeltaTable(str(path)).to_pyarrow_table(columns=["id", "x"])
    assert dict(zip(table.column("id").to_pylist(), table.column("x").to_pylist(), strict=False)) == model
    assert table.num_rows == len(model)  # no row duplicated


def test_manual_trigger_over_jdbc_runs_once_on_an_unscheduled_table_and_is_ignored_on_a_scheduled_one(service_server) -> None:
    server = service_server
    idle = _create(server, "man", 2)
    trigger = "ALTER TABLE use_catalog.spark_catalog.default.{} SET TBLPROPERTIES ('use.optimization.type'='LeveledCompaction')"
    try:
        server.sql(trigger.format("man"))
    except Exception as exc:
        # Until then the stubs refuse it (USE_NOT_SUPPORTED_ERROR), or do not resolve the table in
        # use_catalog at all (TABLE_OR_VIEW_NOT_FOUND: the insight tables' branch).
        text = str(exc)
        if "USE_NOT_SUPPORTED_ERROR" in text or ("TABLE_OR_VIEW_NOT_FOUND" in text and "use_catalog" in text):
            pytest.skip("the manual trigger over SQL (ALTER TABLE use_catalog...) is not there yet (issue 12 §4, "
                        "procedures branch); tests/test_service_spark.py covers OptimizationService.trigger")  # fmt: skip
        raise
    _await("the manual run", lambda: (st := _state(server, idle)) and st["runs"] >= 1 and st["run"] is None, server)
    assert _events(idle) > 0
    st = _state(server, idle)
    assert not st["continuous"] and st["next_run_at"] is None and st["last_run"]["trigger"] == "manual"
    assert "use.optimization.type" not in dict(server.sql("SHOW TBLPROPERTIES man"))  # properties unchanged

    scheduled = _create(server, "man2", 1, {AUTO: "true"})
    _await("the service to schedule the table", lambda: (st := _state(server, scheduled)) and st["continuous"], server)
    server.sql(trigger.format("man2"))
    # The ALTER returned no rows; the SQL user reads why nothing happened from the status tables.
    status = "SELECT note, note_at FROM use_catalog.system_lake_tables.service_status WHERE table_name = '{}'"
    summary = ("SELECT optimization_note, optimization_note_at FROM use_catalog.system_lake_tables.metastore_summary "
               "WHERE database = 'default' AND table_name = '{}'")  # fmt: skip
    # The table is scheduled, so the trigger is ignored; the service names the first reason that
    # holds: a scheduled run in progress at that moment, else the continuous optimization.
    ignored = "manual optimization ignored: "
    ((note, note_at),) = _await(
        "the trigger to be ignored, with its reason over JDBC",
        lambda: [r for r in server.sql(status.format("spark_catalog.default.man2")) if r[0] and r[0].startswith(ignored)],
        server,
    )
    assert "the table has continuous optimization configured" in note or "is already running" in note, note
    assert note_at is not None
    assert server.sql(summary.format("man2")) == [(note, note_at)]
    assert server.sql(summary.format("man")) == [("manual optimization done", ANY)]  # an idle table: no status row


def test_last_error_shows_a_failing_table_over_jdbc_and_is_cleared_once_it_runs_again(service_server, tmp_path) -> None:
    server = service_server
    path = _create(server, "flaky", 3)
    aside = tmp_path / "aside"
    moved = [f.relative_to(path) for f in path.rglob("*.parquet") if "_delta_log" not in f.parts]
    for rel in moved:  # every data file gone: a run's merge tasks fail to read them
        (aside / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path / rel, aside / rel)
    server.sql(f"ALTER TABLE flaky SET TBLPROPERTIES ('{AUTO}'='true')")
    status = ("SELECT failures, last_error, last_error_at, note FROM use_catalog.system_lake_tables.service_status "
              "WHERE table_name = 'spark_catalog.default.flaky'")  # fmt: skip
    summary = ("SELECT last_optimization_error, optimization_note FROM use_catalog.system_lake_tables.metastore_summary "
               "WHERE database = 'default' AND table_name = 'flaky'")  # fmt: skip
    ((failures, error, error_at, _),) = _await("a failed run", lambda: [r for r in server.sql(status) if r[0] >= 1], server)
    assert error and error_at is not None and _events(path) == 0
    assert server.sql(summary)[0][0] is not None  # metastore_summary agrees while it fails

    for rel in moved:  # the files are back: the next retry succeeds
        shutil.move(aside / rel, path / rel)
    ((failures, error, error_at, note),) = _await(
        "a successful run to clear the error", lambda: [r for r in server.sql(status) if r[0] == 0], server
    )
    assert (error, error_at) == (None, None) and _events(path) > 0
    assert note.startswith("recovered after ") and "the last error was: " in note  # the error is history now
    assert server.sql(summary) == [(None, note)]
    assert _ids(path) == list(range(3 * ROWS))


def test_kill_9_during_a_run_then_restart_on_the_same_data_dir_resumes_the_schedule(service_server) -> None:
    server = service_server
    path = _create(server, "killed", 5, {AUTO: "true"})
    expected = list(range(5 * ROWS))
    _await("a run of the table", lambda: ((st := _state(server, path)) and st["run"]) or _optimize_commits(path), server)
    server.stop(signal.SIGKILL)
    assert _ids(path) == expected  # nothing half-committed: delta-rs reads the same rows

    server.start()
    assert "table state(s) restored" in server.log()
    _await("the restored schedule", lambda: (st := _state(server, path)) and st["continuous"], server)
    before = len(_optimize_commits(path))
    server.sql(_insert("killed", 5), _insert("killed", 6))
    _await("an optimization after the restart", lambda: len(_optimize_commits(path)) > before, server)
    assert _ids(path) == list(range(7 * ROWS))
