"""The service thread with a runner that only records what it is asked (no Spark): concurrency limit,
events waking the service at once, a failing runner, and bad calls. Real tables (delta-rs), real
state file, real threads; every wait is on an event or on the service's state."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from service_support import AUTO, Services, await_service, plain_table, set_properties
from use.errors import ConfigError, ServiceError, TableNotFoundError
from use.service import ALTERED, LocationSource, OptimizationService, TableEvent


class RecordingRunner:
    """Runs nothing: records each run, holds it until `gate` opens (or a stop), fails some tables."""

    def __init__(self, fail: tuple[str, ...] = (), conflicts: tuple[str, ...] = ()) -> None:
        self.fail = set(fail)
        self.conflicts = set(conflicts)
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self.started: list[str] = []

    def session_conf(self) -> dict[str, str]:
        return {}

    def optimize(self, start, *, stop, cancel, on_iteration) -> str:
        with self.lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.started.append(start.location)
        try:
            if start.location in self.fail:
                raise OSError("disk on fire\nsecond line")
            if start.location in self.conflicts:
                return "conflicts"
            while not self.gate.wait(0.05):
                if stop.stop_requested:
                    return "stopped"
            return "converged"
        finally:
            with self.lock:
                self.active -= 1


def known(svc: OptimizationService, *paths: str) -> bool:
    return all(svc.table(p) is not None for p in paths)


def table_with_work(path: str, properties: dict[str, str] | None = None) -> str:
    """A plain Delta table of three small files: bin packing always has a task for it (two files
    into one would save a single file open, which the guard leaves alone)."""
    plain_table(path, properties)
    for ids in ([10, 11], [12, 13]):
        write_deltalake(path, pa.table({"id": pa.array(ids, pa.int64())}), mode="append")
    return path


@pytest.fixture
def services(tmp_path):
    made = Services(tmp_path / "state")
    yield made
    made.stop_all()


def test_at_most_max_concurrent_runs_at_once(tmp_path, services) -> None:
    paths = [table_with_work(str(tmp_path / n), AUTO) for n in ("a", "b", "c")]
    runner = RecordingRunner()
    svc = services(paths, runner, max_concurrent=2)
    await_service(svc, lambda s: len([r for r in s.status().to_pylist() if r["status"] == "running"]) == 2, "two runs")
    rows = svc.status().to_pylist()
    queued = [r for r in rows if r["status"] == "queued"]
    assert len(queued) == 1 and queued[0]["queue_position"] == 1 and queued[0]["score"] > 0
    assert runner.active == 2
    runner.gate.set()
    await_service(svc, lambda s: known(s, *paths) and all(s.table(p).runs >= 1 for p in paths), "every table to run")
    assert runner.max_active == 2


def test_a_failing_run_is_recorded_and_the_service_goes_on(tmp_path, services) -> None:
    bad = table_with_work(str(tmp_path / "bad"), AUTO)
    good = table_with_work(str(tmp_path / "good"), AUTO)
    runner = RecordingRunner(fail=(bad,))
    runner.gate.set()
    svc = services([bad, good], runner, max_concurrent=1)
    await_service(
        svc, lambda s: known(s, bad, good) and s.table(bad).failures >= 2 and s.table(good).runs >= 2, "failures and runs"
    )
    st = svc.table(bad)
    assert svc.running and st.last_error == "OSError: disk on fire" and st.last_run.outcome == "failed"
    assert st.next_run_at - st.last_error_at >= 2.0 - 1e-6  # backoff: the 2nd retry waits 2 intervals


def test_a_run_that_gives_up_on_conflicts_is_a_failure(tmp_path, services) -> None:
    path = table_with_work(str(tmp_path / "t"), AUTO)
    runner = RecordingRunner(conflicts=(str(tmp_path / "t"),))
    runner.gate.set()
    svc = services([path], runner)
    await_service(svc, lambda s: known(s, path) and s.table(path).failures >= 1, "the failure")
    assert "concurrent writers" in svc.table(path).last_error and svc.table(path).last_run.outcome == "failed"


def test_a_catalog_event_is_acted_on_at_once(tmp_path, services) -> None:
    path = table_with_work(str(tmp_path / "t"))
    runner = RecordingRunner()
    runner.gate.set()
    svc = services([path], runner, interval=3600.0)  # no refresh will come in this test's lifetime
    await_service(svc, lambda s: s.table(path) is not None, "the table")
    assert svc.table(path).state == "idle"
    set_properties(path, AUTO)
    svc.on_event(TableEvent(ALTERED, path, "spark_catalog.default.t"))
    await_service(svc, lambda s: s.table(path).runs >= 1, "the run the event asked for")
    assert runner.started == [path] and svc.table(path).name == "spark_catalog.default.t"


def test_unset_during_a_run_asks_it_to_stop_after_its_task(tmp_path, services) -> None:
    path = table_with_work(str(tmp_path / "t"), AUTO)
    runner = RecordingRunner()
    svc = services([path], runner, interval=3600.0)
    await_service(svc, lambda s: s.table(path) is not None and s.table(path).run is not None, "a run")
    set_properties(path, unset=AUTO)
    svc.on_event(TableEvent(ALTERED, path))
    await_service(svc, lambda s: s.table(path).run is None, "the run to stop")
    st = svc.table(path)
    assert st.last_run.outcome == "stopped" and st.state == "idle" and st.next_run_at is None


def test_bad_calls_are_clear_errors(tmp_path, services) -> None:
    path = table_with_work(str(tmp_path / "t"))
    runner = RecordingRunner()
    fresh = OptimizationService(LocationSource([path]), tmp_path / "s2", runner=runner)
    with pytest.raises(ServiceError, match="not started"):
        fresh.status()
    with pytest.raises(ServiceError, match="SparkSession"):
        OptimizationService(LocationSource([path]), tmp_path / "s3").start()
    svc = services([path], runner)
    with pytest.raises(ServiceError, match="already started"):
        svc.start()
    await_service(svc, lambda s: s.table(path) is not None, "the table")
    before = svc.table(path)
    with pytest.raises(TableNotFoundError, match="no table"):
        svc.trigger(str(tmp_path / "nope"), {})
    with pytest.raises(ConfigError, match="bytes-per-iter"):
        svc.trigger(path, {"use.optimization.bytes-per-iter": "-1"})
    assert svc.table(path) == before
    svc.stop()
    svc.stop()  # idempotent
    assert not svc.running
