"""The optimize() loop core: termination, ordering, stop requests and re-planning after conflicts.

These drive `run_loop` with small in-memory plan/execute steps (the loop's contract is about control
flow, not Spark); the end-to-end runs on real tables are in test_optimize_executor.py and below.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field

import pytest

from use.errors import InvalidArgumentError
from use.optimize.loop_core import (
    CONFLICTS,
    CONVERGED,
    DONE,
    DRY_RUN,
    MAX_ITERATIONS,
    NO_PROGRESS,
    STOPPED,
    StopToken,
    delivered,
    run_loop,
)
from use.optimize.plan import Gain
from use.optimize.report import format_metrics_table
from use.optimize.task_metrics import ABANDONED, COMMITTED, IterationMetrics


@dataclass(frozen=True)
class _Task:
    name: str
    score: float
    kind: str = "compact"
    gain: Gain | None = None


@dataclass(frozen=True)
class _Plan:
    tasks: tuple[_Task, ...]
    one_shot: bool = False


@dataclass
class _Table:
    """A toy table: a queue of pending tasks, which an executed task consumes."""

    pending: list[_Task]
    version: int = 0
    ran: list[str] = field(default_factory=list)


def _metrics(task: _Task, status: str = COMMITTED, version: int | None = 1, shrink: bool = True) -> IterationMetrics:
    return IterationMetrics(
        strategy="toy",
        kind=task.kind,
        reason=task.name,
        revision_id=1,
        status=status,
        read_version=0,
        version=version if status == COMMITTED else None,
        files_in=4,
        bytes_in=400,
        min_file_size_in=100,
        max_file_size_in=100,
        avg_file_size_in=100.0,
        files_out=1 if shrink else 4,
        bytes_out=390,
        min_file_size_out=390,
        max_file_size_out=390,
        avg_file_size_out=390.0,
        cubes_in=2,
        cubes_out=2,
        blocks_in=8,
        blocks_out=2 if shrink else 8,
        rows=10,
        time_ms=5,
        score=task.score,
    )


def _steps(table: _Table, *, abandon: set[str] | None = None, shrink: bool = True):
    abandon = abandon if abandon is not None else set()

    def snapshot_fn() -> int:
        return table.version

    def plan_fn(version: int) -> _Plan:
        return _Plan(tuple(table.pending))

    def execute_fn(task: _Task, version: int) -> IterationMetrics:
        table.ran.append(task.name)
        if task.name in abandon:
            abandon.discard(task.name)  # lose once, then succeed on re-plan
            return _metrics(task, ABANDONED)
        table.pending.remove(task)
        table.version += 1
        return _metrics(task, version=table.version, shrink=shrink)

    return dict(snapshot_fn=snapshot_fn, plan_fn=plan_fn, execute_fn=execute_fn)


def test_runs_best_task_each_iteration_until_nothing_selected() -> None:
    table = _Table([_Task("a", 1.0), _Task("b", 3.0), _Task("c", 2.0)])
    result = run_loop(**_steps(table))
    assert result.outcome == CONVERGED
    assert table.ran == ["b", "c", "a"]
    assert [m.iteration for m in result] == [1, 2, 3]
    assert result.versions == (1, 2, 3)
    assert result.totals()["committed"] == 3


def test_all_tasks_mode_runs_a_whole_plan_in_score_order() -> None:
    table = _Table([_Task("a", 1.0), _Task("b", 3.0)])
    result = run_loop(**_steps(table), all_tasks=True)
    assert table.ran == ["b", "a"] and result.outcome == CONVERGED


def test_max_iterations_bounds_the_run() -> None:
    table = _Table([_Task(str(i), float(i)) for i in range(5)])
    result = run_loop(**_steps(table), max_iterations=2)
    assert result.outcome == MAX_ITERATIONS and len(result) == 2 and len(table.pending) == 3


def test_stop_requested_between_tasks_finishes_the_running_one() -> None:
    table = _Table([_Task(str(i), float(i)) for i in range(5)])
    stop = StopToken()
    steps = _steps(table)
    inner = steps["execute_fn"]

    def execute_then_stop(task: _Task, version: int) -> IterationMetrics:
        metrics = inner(task, version)
        stop.request_stop()  # arrives while the task is running
        return metrics

    steps["execute_fn"] = execute_then_stop
    result = run_loop(**steps, stop=stop)
    assert result.outcome == STOPPED and len(result) == 1 and result.iterations[0].committed


def test_a_bare_threading_event_is_a_stop_and_a_pre_set_stop_runs_nothing() -> None:
    table = _Table([_Task("a", 1.0)])
    event = threading.Event()
    event.set()
    result = run_loop(**_steps(table), stop=event)
    assert result.outcome == STOPPED and table.ran == []


def test_an_abandoned_task_re_plans_from_a_fresh_snapshot() -> None:
    table = _Table([_Task("a", 1.0), _Task("b", 3.0)])
    result = run_loop(**_steps(table, abandon={"b"}), all_tasks=True)
    # b lost once; the rest of that plan was dropped and b was planned again.
    assert table.ran == ["b", "b", "a"]
    assert [m.status for m in result] == [ABANDONED, COMMITTED, COMMITTED]
    assert result.outcome == CONVERGED


def test_endless_conflicts_give_up_without_raising() -> None:
    table = _Table([_Task("a", 1.0)])
    steps = _steps(table)
    steps["execute_fn"] = lambda task, version: _metrics(task, ABANDONED)
    result = run_loop(**steps, max_consecutive_abandoned=3)
    assert result.outcome == CONFLICTS and len(result) == 3 and not result.committed


def test_a_rewrite_without_progress_ends_the_run() -> None:
    table = _Table([_Task("a", 1.0), _Task("b", 0.5)])
    result = run_loop(**_steps(table, shrink=False))
    assert result.outcome == NO_PROGRESS and len(result) == 1


def _counts(**kw: int) -> IterationMetrics:
    base = _metrics(_Task("t", 1.0))
    return dataclasses.replace(base, **kw)


def test_a_commit_is_held_to_the_gain_its_plan_estimated() -> None:
    files_gain = _Task("f", 1.0, gain=Gain(files=1))
    blocks_gain = _Task("b", 1.0, gain=Gain(blocks=2))
    read_gain = _Task("r", 1.0, gain=Gain(read_cost=100.0))
    # fewer files: a file gain is delivered; the same files count: it is not
    assert delivered(files_gain, _counts(files_in=2, files_out=1))
    assert not delivered(files_gain, _counts(files_in=1, files_out=1, blocks_in=5, blocks_out=4))
    # blocks: redundancy (blocks beyond one per cube) must drop, even when offsets add blocks of
    # new child cubes (4 blocks of 2 cubes -> 6 blocks of 6 cubes, in as many files)
    assert delivered(blocks_gain, _counts(files_in=2, files_out=2, blocks_in=4, cubes_in=2, blocks_out=6, cubes_out=6))
    assert not delivered(blocks_gain, _counts(files_in=1, files_out=1, blocks_in=5, cubes_in=5, blocks_out=5, cubes_out=5))
    # a sampling separation: more files, the same blocks; its read-cost gain is left to the next plan
    assert delivered(read_gain, _counts(files_in=1, files_out=2, blocks_in=5, blocks_out=5, cubes_in=5, cubes_out=5))
    # indexing always delivers; a task from outside the planner must shrink files or blocks
    assert delivered(_Task("i", 1.0, kind="index"), _counts(files_in=1, files_out=3))
    assert not delivered(_Task("x", 1.0), _counts(files_in=1, files_out=1, blocks_in=5, blocks_out=5))


def test_a_separation_that_grows_files_does_not_end_the_run() -> None:
    table = _Table([_Task("a", 1.0, gain=Gain(read_cost=10.0)), _Task("b", 0.5, gain=Gain(read_cost=10.0))])
    steps = _steps(table)
    inner = steps["execute_fn"]
    steps["execute_fn"] = lambda task, v: dataclasses.replace(inner(task, v), files_in=1, files_out=2, blocks_out=8)
    result = run_loop(**steps)
    assert result.outcome == CONVERGED and len(result.committed) == 2


def test_a_one_shot_plan_is_not_held_to_a_gain() -> None:
    """A revision rewrite rewrites every file it was asked to, converged or not: `done`."""
    table = _Table([_Task("a", 1.0, gain=Gain()), _Task("b", 2.0, gain=Gain())])
    steps = _steps(table, shrink=False)
    plan_fn = steps["plan_fn"]
    steps["plan_fn"] = lambda v: dataclasses.replace(plan_fn(v), one_shot=True)
    result = run_loop(**steps)
    assert result.outcome == DONE and len(result.committed) == 2


def test_single_pass_runs_one_plan() -> None:
    table = _Table([_Task("a", 1.0), _Task("b", 2.0)])
    steps = _steps(table)
    result = run_loop(**steps, single_pass=True)
    assert result.outcome == DONE and table.ran == ["b", "a"]


def test_dry_run_returns_the_plan_and_executes_nothing() -> None:
    table = _Table([_Task("a", 1.0)])
    result = run_loop(**_steps(table), dry_run=True)
    assert result.outcome == DRY_RUN and result.dry_run and table.ran == []
    assert [t.name for t in result.plan.tasks] == ["a"]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", True])
def test_bad_max_iterations_is_a_typed_error(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="max_iterations"):
        run_loop(**_steps(_Table([])), max_iterations=bad)  # type: ignore[arg-type]


def test_bad_stop_is_a_typed_error() -> None:
    with pytest.raises(InvalidArgumentError, match="stop"):
        run_loop(**_steps(_Table([])), stop="now")  # type: ignore[arg-type]


def test_metrics_table_has_one_row_per_iteration() -> None:
    table = _Table([_Task("a", 1.0), _Task("b", 2.0)])
    text = format_metrics_table(run_loop(**_steps(table)).iterations)
    assert len(text.splitlines()) == 4 and "blocks out" in text


# --- the loop on real tables ---------------------------------------------------------------------------


def test_dry_run_plans_and_writes_nothing(spark, tmp_path) -> None:
    from optimize_support import directory_state, plain_delta
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest

    path = plain_delta(str(tmp_path / "t"))
    before = directory_state(path)
    result = optimize_path(spark, OptimizeRequest(path, dry_run=True))
    assert result.outcome == DRY_RUN and result.plan is not None and result.plan.tasks
    assert result.plan.tasks[0].kind == "binpack" and not result.iterations
    assert directory_state(path) == before


def test_stop_request_ends_the_run_after_the_running_task(spark, tmp_path) -> None:
    from optimize_support import deltars_rows, directory_state, plain_delta
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest

    path = plain_delta(str(tmp_path / "t"))
    rows = deltars_rows(path)
    stop = StopToken()
    stop.request_stop()
    before = directory_state(path)
    assert optimize_path(spark, OptimizeRequest(path), stop=stop).outcome == STOPPED
    assert directory_state(path) == before  # a stop before the first task touches nothing

    stop = StopToken()
    seen: list[int] = []

    def stop_after_first(metrics: IterationMetrics) -> None:
        seen.append(metrics.iteration)
        stop.request_stop()

    # Three partitions = three bins; one task per plan, so only the stop can end the run early.
    result = optimize_path(spark, OptimizeRequest(path), stop=stop, on_iteration=stop_after_first)
    assert result.outcome == STOPPED and seen == [1] and len(result.committed) == 1
    assert deltars_rows(path) == rows
    assert optimize_path(spark, OptimizeRequest(path)).outcome == CONVERGED  # the rest can be done later
    assert deltars_rows(path) == rows


def test_bad_arguments_raise_typed_errors_and_change_nothing(spark, tmp_path) -> None:
    from optimize_support import directory_state, plain_delta, staging_qbeast
    from use import DeltaTable, QbeastTable
    from use.errors import ConfigError, InvalidArgumentError, TableNotFoundError, UnknownStrategyError
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest

    qpath = staging_qbeast(spark, str(tmp_path / "q"))
    dpath = plain_delta(str(tmp_path / "d"))
    before = (directory_state(qpath), directory_state(dpath))
    table = QbeastTable.for_path(spark, qpath)
    cases = [
        (UnknownStrategyError, "NoSuchStrategy", lambda: table.optimize(strategy="NoSuchStrategy")),
        (ConfigError, "bytes-per-iter", lambda: table.optimize(bytes_per_iter=-5)),
        (ConfigError, "bytes-per-iter", lambda: table.optimize(bytes_per_iter="lots")),
        (InvalidArgumentError, "revision", lambda: table.optimize(revision_id=7)),
        (InvalidArgumentError, "not live files", lambda: table.optimize(files=["no-such-file.parquet"])),
        (InvalidArgumentError, "single string", lambda: table.optimize(files="a.parquet")),
        (InvalidArgumentError, "max_iterations", lambda: table.optimize(max_iterations=0)),
        (InvalidArgumentError, "stop", lambda: table.optimize(stop="now")),
        (ConfigError, "unknown optimization key", lambda: table.optimize(no_such_key=1)),
        (InvalidArgumentError, "plain Delta table", lambda: optimize_path(spark, OptimizeRequest(dpath, revision_id=1))),
        (InvalidArgumentError, "dry_run", lambda: DeltaTable.for_path(spark, dpath).optimize(dry_run="yes")),
        (TableNotFoundError, "no table", lambda: optimize_path(spark, OptimizeRequest(str(tmp_path / "missing")))),
        (TableNotFoundError, "no Delta table", lambda: DeltaTable.for_path(spark, str(tmp_path / "missing"))),
    ]
    for error, text, call in cases:
        with pytest.raises(error, match=text):
            call()
    assert (directory_state(qpath), directory_state(dpath)) == before
    assert not (tmp_path / "missing").exists()


def test_stop_while_a_task_runs_cancels_it_cleanly(spark, tmp_path, monkeypatch) -> None:
    """A stop arriving while the task's Spark jobs run cancels them: the task is abandoned with its
    files deleted, the run stops and the table is as before. Also when the rewrite's jobs end between
    two of the watcher's cancels (a small task's job is quicker than its period): here the watcher
    cancels once only, before the jobs start, so they all run to the end; the task is still not
    committed (it was, before)."""
    from optimize_support import data_files, deltars_rows, plain_delta
    from use.delta import DeltaLog
    from use.optimize import executor
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest

    path = plain_delta(str(tmp_path / "t"))
    rows = deltars_rows(path)
    on_disk = data_files(path)
    stop = StopToken()
    real_rewrite = executor._rewrite

    def rewrite_with_stop(*args, **kwargs):
        stop.request_stop()  # the service asks to stop just as the rewrite's jobs start
        return real_rewrite(*args, **kwargs)

    cancelled_once = threading.Event()

    def watch_once(self) -> None:
        self._event.wait()
        self._sc.cancelJobGroup(self._group)
        cancelled_once.set()

    def rewrite_after_the_cancel(*args, **kwargs):
        stop.request_stop()
        assert cancelled_once.wait(60)  # the one cancel has gone: the jobs below run to the end
        return real_rewrite(*args, **kwargs)

    monkeypatch.setattr(executor, "_rewrite", rewrite_with_stop)
    result = optimize_path(spark, OptimizeRequest(path), stop=stop)
    assert result.outcome == STOPPED and len(result) == 1
    m = result.iterations[0]
    assert (m.status, m.error) == (ABANDONED, "StopRequested")
    assert data_files(path) == on_disk and deltars_rows(path) == rows
    stop = StopToken()
    monkeypatch.setattr(executor._StopWatcher, "_watch", watch_once)
    monkeypatch.setattr(executor, "_rewrite", rewrite_after_the_cancel)
    result = optimize_path(spark, OptimizeRequest(path), stop=stop)
    assert result.outcome == STOPPED and (result.iterations[0].status, result.iterations[0].error) == (ABANDONED, "StopRequested")
    assert deltars_rows(path) == rows
    live = set(DeltaLog.for_path(path).snapshot().files.column("path").to_pylist())
    assert data_files(path) == on_disk | live  # nothing written that is not committed
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None  # job properties restored


def test_a_separate_cancel_lets_the_running_task_commit_on_stop(spark, tmp_path, monkeypatch) -> None:
    """With `cancel` given apart from `stop`, a stop arriving during a task lets it finish and commit
    (the service's UNSET); the task's jobs carry the given job group and description."""
    from optimize_support import deltars_rows, plain_delta
    from use.optimize import executor
    from use.optimize.loop import optimize_path
    from use.optimize.request import OptimizeRequest

    path = plain_delta(str(tmp_path / "t"))
    rows = deltars_rows(path)
    stop, cancel = StopToken(), StopToken()
    real_rewrite = executor._rewrite
    seen: list[tuple[str | None, str | None]] = []

    def rewrite_with_stop(spark_, *args, **kwargs):
        stop.request_stop()
        sc = spark_.sparkContext
        seen.append((sc.getLocalProperty("spark.jobGroup.id"), sc.getLocalProperty("spark.job.description")))
        return real_rewrite(spark_, *args, **kwargs)

    monkeypatch.setattr(executor, "_rewrite", rewrite_with_stop)
    result = optimize_path(spark, OptimizeRequest(path), stop=stop, cancel=cancel, job_group="my-group", job_description="my run")
    assert result.outcome == STOPPED and len(result) == 1 and result.iterations[0].status == COMMITTED
    assert deltars_rows(path) == rows
    assert seen[0][0] == "my-group" and seen[0][1].startswith("my run: binpack")
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("my-group")
    # A set cancel alone also ends the loop (the task it cancelled is not re-planned forever).
    stop2, cancel2 = StopToken(), StopToken()
    cancel2.request_stop()
    assert optimize_path(spark, OptimizeRequest(path), stop=stop2, cancel=cancel2).outcome == STOPPED


def test_result_as_an_arrow_table() -> None:
    table = _Table([_Task("a", 1.0), _Task("b", 2.0)])
    rows = run_loop(**_steps(table)).to_table()
    assert rows.num_rows == 2 and rows.column("reason").to_pylist() == ["b", "a"]
    assert rows.schema.field("version").type == "int64" and rows.column("error").null_count == 2
