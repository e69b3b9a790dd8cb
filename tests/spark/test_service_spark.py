"""The service on the shared SparkSession with real small tables: properties set by another writer
start runs that converge, catalog events stop them at once, a manual trigger runs once, a broken
table fails alone, appends racing the service all land. Every wait is on the service's own state
changes (or the log) with a deadline, never a fixed sleep."""

from __future__ import annotations

import os
import threading

import pytest

from optimize_support import CUBE_SIZE, arrow_rows, expected_rows, fragmented_qbeast, rows_df, table_rows
from service_support import AUTO, Services, await_service, corrupt_log, set_properties
from use import QbeastTable
from use.delta import DeltaLog
from use.optimize.events import optimizations_table
from use.optimize.keys import POOL, POOL_PROPERTY
from use.service import ALTERED, OptimizationService, TableEvent
from use.service.runner import SparkRunner, job_group
from use.service.schedule import backoff_s


@pytest.fixture
def make_service(spark, tmp_path):
    """Services on `spark` with their state in tmp; all stopped at teardown."""
    made = Services(tmp_path / "service")

    def make(paths, *, interval: float = 1.0, max_concurrent: int = 1, runner=None) -> OptimizationService:
        return made(paths, runner or SparkRunner(spark), interval=interval, max_concurrent=max_concurrent)

    yield make
    made.stop_all()


def converged(path: str):
    """The table has been optimized and its latest plan check found nothing to do."""

    def check(svc: OptimizationService) -> bool:
        st = svc.table(path)
        return bool(st and st.runs >= 1 and st.run is None and st.layout and st.layout.pending_tasks == 0)

    return check


def events(path: str) -> int:
    return optimizations_table(path).num_rows


def optimize_autos(path: str) -> set[str]:
    """The `auto` parameter of the table's OPTIMIZE commits (Delta: true when no one asked for it)."""
    import json

    log_dir = os.path.join(path, "_delta_log")
    found = set()
    for name in sorted(os.listdir(log_dir)):
        if name.endswith(".json") and name[:-5].isdigit():
            with open(os.path.join(log_dir, name)) as f:
                for line in f:
                    info = json.loads(line).get("commitInfo")
                    if info and info.get("operation") == "OPTIMIZE":
                        found.add(info["operationParameters"]["auto"])
    return found


def stage_pools_and_descriptions(spark, group: str) -> tuple[set[str], set[str]]:
    """The scheduler pools of the stages, and the descriptions, of the jobs of one job group."""
    sc = spark.sparkContext
    store = sc._jsc.sc().statusStore()
    empty = sc._gateway.new_array(sc._gateway.jvm.double, 0)
    pools, descriptions = set(), set()
    for jid in sc.statusTracker().getJobIdsForGroup(group):
        descriptions.add(store.job(jid).description().get())
        for sid in sc.statusTracker().getJobInfo(jid).stageIds:
            pools.add(store.stageData(int(sid), False, None, False, empty).head().schedulingPool())
    return pools, descriptions


def test_properties_set_by_another_writer_start_runs_that_converge_and_unset_stops_them(spark, tmp_path, make_service) -> None:
    path = fragmented_qbeast(spark, str(tmp_path / "t"), appends=3)
    expected = table_rows(spark, path)
    svc = make_service([path])
    await_service(svc, lambda s: s.table(path) is not None, "the table to be registered")
    assert svc.table(path).state == "idle" and events(path) == 0

    # Another process sets the property: the service sees it at its next refresh and optimizes.
    set_properties(path, AUTO)
    await_service(svc, converged(path), "the table to converge")
    st = svc.table(path)
    assert st.state == "scheduled" and st.continuous and st.failures == 0 and st.last_run.outcome == "converged"
    assert events(path) >= 1 and table_rows(spark, path) == expected and optimize_autos(path) == {"true"}
    assert st.layout.version == DeltaLog.for_path(path).snapshot().version and st.layout.records == sum(expected.values())
    # The run's jobs went to the service's pool, with its job group and a description naming the run.
    pools, descriptions = stage_pools_and_descriptions(spark, job_group(st.last_run.run_id))
    assert pools == {POOL}
    assert descriptions and all(
        d.startswith(f"USE service: scheduled optimization of {path} (run {st.last_run.run_id})") for d in descriptions
    )
    rows = {r["location"]: r for r in svc.table_states().to_pylist()}
    assert rows[path]["optimization_state"] in ("scheduled", "running") and rows[path]["last_run_outcome"] == "converged"

    # UNSET through the catalog: the schedule stops at once (no refresh needed).
    set_properties(path, unset=AUTO)
    change = svc.on_event(TableEvent(ALTERED, path, "spark_catalog.default.t"))
    assert change is not None and "use.optimization.autoOptimize.enabled" not in change.after.properties
    st = svc.table(path)
    assert st.state == "idle" and st.next_run_at is None and st.name == "spark_catalog.default.t"
    runs, n_events = st.runs, events(path)
    # New appends fragment the table again; the service sees them and does nothing.
    QbeastTable.write(rows_df(spark, 10_000, 200), path, ["x", "y"], cube_size=CUBE_SIZE)
    version = DeltaLog.for_path(path).snapshot().version
    refreshes = svc.registry.refreshes
    await_service(svc, lambda s: s.registry.refreshes >= refreshes + 2 and s.registry.get(path).version == version,
                  "two refreshes that saw the append")  # fmt: skip
    assert svc.table(path).runs == runs and svc.table(path).state == "idle" and events(path) == n_events


class GatedRunner(SparkRunner):
    """A SparkRunner whose first run only waits at a gate (a run in progress a test can act during,
    which leaves the table's work to the next run), recording the bytes-per-iter each run saw."""

    def __init__(self, spark) -> None:
        super().__init__(spark)
        self.started = threading.Event()
        self.gate = threading.Event()
        self.seen: list[str | None] = []
        self.pools: list[str | None] = []

    def optimize(self, start, *, stop, cancel, on_iteration):
        conf = DeltaLog.for_path(start.location).snapshot().configuration
        self.seen.append(conf.get("use.optimization.bytes-per-iter"))
        if len(self.seen) == 1:
            self.started.set()
            assert self.gate.wait(600)
            return "stopped"

        def record(m):
            self.pools.append(self.spark.sparkContext.getLocalProperty(POOL_PROPERTY))
            on_iteration(m)

        return super().optimize(start, stop=stop, cancel=cancel, on_iteration=record)


def test_changed_parameters_during_a_run_take_effect_in_the_next_run_at_once(spark, tmp_path, make_service) -> None:
    path = fragmented_qbeast(spark, str(tmp_path / "t"), appends=3)
    set_properties(path, {**AUTO, "use.optimization.bytes-per-iter": "1000000"})
    runner = GatedRunner(spark)
    svc = make_service([path], interval=3600.0, runner=runner)  # only a reschedule can explain a 2nd run
    assert runner.started.wait(300)
    set_properties(path, {"use.optimization.bytes-per-iter": "2000000"})
    svc.on_event(TableEvent(ALTERED, path))
    assert svc.table(path).state == "running" and svc.table(path).reschedule_after_run
    assert svc.status().to_pylist()[0]["status"] == "running"
    runner.gate.set()
    await_service(svc, lambda s: s.table(path).runs >= 2 and s.table(path).run is None, "the rescheduled run")
    st = svc.table(path)
    assert runner.seen == ["1000000", "2000000"] and st.last_run.outcome == "converged" and events(path) >= 1
    assert runner.pools and set(runner.pools) == {POOL}
    assert st.next_run_at >= st.last_run.started_at + 3600.0 - 1  # then the normal cadence


def test_manual_trigger_runs_once_on_an_idle_table_and_is_ignored_on_a_continuous_one(spark, tmp_path, make_service) -> None:
    idle = fragmented_qbeast(spark, str(tmp_path / "idle"), appends=3)
    auto = fragmented_qbeast(spark, str(tmp_path / "auto"), appends=3)
    set_properties(auto, AUTO)
    expected = table_rows(spark, idle)
    svc = make_service([idle, auto], interval=3600.0)
    await_service(svc, lambda s: s.table(idle) is not None and s.table(auto) is not None, "both tables")
    props_before = dict(DeltaLog.for_path(idle).snapshot().configuration)

    decision = svc.trigger(idle, {"use.optimization.type": "LeveledCompaction", "use.optimization.bytes-per-iter": "5000000"})
    assert decision.accepted
    await_service(svc, lambda s: s.table(idle).runs >= 1 and s.table(idle).run is None, "the manual run")
    st = svc.table(idle)
    assert st.last_run.trigger == "manual" and st.last_run.outcome == "converged" and st.state == "idle"
    assert st.note == "manual optimization done" and events(idle) >= 1 and table_rows(spark, idle) == expected
    assert optimize_autos(idle) == {"false"}  # asked for, as OPTIMIZE and CALL optimize are
    assert dict(DeltaLog.for_path(idle).snapshot().configuration) == props_before  # properties untouched

    ignored = svc.trigger(auto, {"use.optimization.type": "LeveledCompaction"})
    assert not ignored.accepted and "continuous optimization configured" in ignored.reason
    row = next(r for r in svc.table_states().to_pylist() if r["location"] == auto)
    assert row["note"] == ignored.reason


def test_a_failing_table_is_recorded_and_retried_while_the_others_run(spark, tmp_path, make_service) -> None:
    good = fragmented_qbeast(spark, str(tmp_path / "good"), appends=3)
    missing = fragmented_qbeast(spark, str(tmp_path / "missing"), appends=3)
    corrupt = fragmented_qbeast(spark, str(tmp_path / "corrupt"), appends=3)
    for p in (good, missing, corrupt):
        set_properties(p, AUTO)
    for base, _, names in os.walk(missing):  # every data file gone: any merge task fails to read
        for n in names:
            if n.endswith(".parquet") and "_delta_log" not in base:
                os.unlink(os.path.join(base, n))
    expected = table_rows(spark, good)
    svc = make_service([good, missing, corrupt])
    await_service(svc, lambda s: s.table(corrupt) is not None and s.table(corrupt).continuous, "the tables to be scheduled")
    corrupt_log(corrupt)  # a scheduled table whose log goes bad
    await_service(
        svc,
        lambda s: converged(good)(s) and s.table(missing).failures >= 2 and s.table(corrupt).failures >= 2,
        "the good table to converge and both broken tables to fail twice",
    )
    assert svc.running and table_rows(spark, good) == expected
    m, c = svc.table(missing), svc.table(corrupt)
    assert m.last_run.outcome == "failed" and "does not exist" in m.last_error
    assert "CorruptLogError" in c.last_error
    for st in (m, c):
        if st.run is None and st.next_run_at is not None:
            assert st.next_run_at == pytest.approx(st.last_error_at + backoff_s(st.failures, 1.0, 6 * 3600.0))
    status = {r["location"]: r for r in svc.table_states().to_pylist()}
    assert status[corrupt]["failures"] >= 2 and "CorruptLogError" in status[corrupt]["last_error"]


def test_appends_racing_the_service_all_land(spark, tmp_path, make_service) -> None:
    from deltalake import write_deltalake

    path = fragmented_qbeast(spark, str(tmp_path / "t"), appends=3)
    set_properties(path, AUTO)
    expected = table_rows(spark, path)
    svc = make_service([path])
    await_service(svc, lambda s: s.table(path) is not None and s.table(path).run is not None, "a run to start")
    errors: list[BaseException] = []
    lock = threading.Lock()

    def qbeast_appender() -> None:
        try:
            for i in range(3):
                df = rows_df(spark, 100_000 + i * 150, 150)
                QbeastTable.write(df, path, ["x", "y"], cube_size=CUBE_SIZE)
                with lock:
                    expected.update(tuple(r) for r in df.select("id", "x", "y", "s").collect())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def deltars_appender() -> None:
        try:
            for i in range(4):
                batch = arrow_rows(200_000 + i * 50, 50)
                write_deltalake(path, batch, mode="append")
                with lock:
                    expected.update(expected_rows([batch]))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=qbeast_appender), threading.Thread(target=deltars_appender)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors
    final = DeltaLog.for_path(path).snapshot().version
    svc.refresh_now()
    await_service(svc, lambda s: converged(path)(s) and s.table(path).layout.version >= final, "convergence after the appends")
    assert table_rows(spark, path) == expected  # no row lost or duplicated
    assert svc.table(path).failures == 0


def test_stop_cancels_the_running_task_cleanly_and_the_run_resumes_at_the_next_start(
    spark, tmp_path, make_service, monkeypatch
) -> None:
    from optimize_support import data_files
    from use.optimize import executor

    path = fragmented_qbeast(spark, str(tmp_path / "t"), appends=3)
    set_properties(path, AUTO)
    expected = table_rows(spark, path)
    version, on_disk = DeltaLog.for_path(path).snapshot().version, data_files(path)
    in_task = threading.Event()
    holder: list[OptimizationService] = []
    real_rewrite = executor._rewrite

    def rewrite_after_stop(*args, **kwargs):
        in_task.set()
        assert holder[0].wait_until(lambda s: not s.running, 300)  # the stop arrives while the task runs
        return real_rewrite(*args, **kwargs)

    monkeypatch.setattr(executor, "_rewrite", rewrite_after_stop)
    svc = make_service([path])
    holder.append(svc)
    assert in_task.wait(300)
    svc.stop()  # returns once the run has ended
    st = svc.table(path)
    assert st.run is None and st.last_run.outcome == "stopped" and st.last_run.progress.committed == 0
    assert st.next_run_at is not None and st.next_run_at <= st.last_run.finished_at  # due at the next start
    assert DeltaLog.for_path(path).snapshot().version == version  # nothing committed, half or whole
    assert data_files(path) == on_disk and table_rows(spark, path) == expected  # its files were deleted
