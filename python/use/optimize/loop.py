"""The optimize() loop of the optimization guide: plan, run, repeat until nothing is selected.

Every iteration plans from a *fresh* snapshot, so work done by the previous iteration and by
concurrent writers is always seen, and a task abandoned because its input vanished is simply planned
again (or not) from the new state. The planner only plans tasks whose rewrite gains something
(`use.optimize.gain`), so the loop reaches a fixed point: the planner selects nothing, and a further
run commits nothing.

Why a run ended (`OptimizeResult.outcome`), one meaning each:

* `converged`: the planner selected nothing: the table is at the fixed point of the strategy chain
  for this configuration, and another run with it commits nothing (until the table changes);
* `done`: a one-shot request (an explicit file list, a revision rewrite) ran all its tasks; it says
  nothing about the rest of the table (a later run may still find work);
* `max_iterations`, `stopped`: the run was cut short by its iteration budget or a stop request;
  the work left is planned by the next run;
* `conflicts`: too many tasks in a row were abandoned because concurrent writers removed their
  files; the writers win, the next run re-plans;
* `no_progress`: a committed rewrite did not deliver the gain the planner estimated for it (fewer
  files, or fewer blocks per cube): an estimate is wrong, which is a bug to report; the run stops
  there so it cannot rewrite without end. Read-cost gains (sampling overhead, key overlap) cannot be
  measured from a commit and are judged by the next plan instead;
* `dry_run`: only planned.

A stop request is checked between tasks, and a stop arriving while a task's Spark jobs run cancels
them (`use.optimize.executor.run_task`): the running task always ends cleanly (committed, or
abandoned with its written files deleted), the run returns, and the table is never left half
optimized. The loop core (`run_loop`) takes the snapshot/plan/execute steps as callables; `optimize`
wires them to the real Delta log, planner and Spark executor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from use.errors import CLI, PYTHON, SQL, InvalidArgumentError
from use.optimize import yielding
from use.optimize.executor import ABANDONED, COMMITTED, IterationMetrics

if TYPE_CHECKING:  # pragma: no cover
    from use.delta.log import DeltaLog
    from use.optimize.config import OptimizationConfig
    from use.optimize.plan import MergeTask, Plan

__all__ = [
    "StopToken",
    "IterationMetrics",
    "OptimizeResult",
    "run_loop",
    "with_planning_time",
    "optimize_path",
    "optimizations",
    "optimizations_table",
    "session_defaults",
    "CONVERGED",
    "MAX_ITERATIONS",
    "STOPPED",
    "DRY_RUN",
    "NO_PROGRESS",
    "CONFLICTS",
    "DONE",
    "COMMITTED",
    "ABANDONED",
]

#: How long an optimization waits for a row-level write on its table (`yielding`) before it goes on;
#: a task whose commit would come during one is abandoned anyway.
YIELD_TIMEOUT_S = 300.0

# Why a run ended (`OptimizeResult.outcome`; the module docstring gives each one meaning).
CONVERGED = "converged"  # the planner selected nothing: the fixed point; another run commits nothing
MAX_ITERATIONS = "max_iterations"  # the iteration budget was used up
STOPPED = "stopped"  # a stop was requested
DRY_RUN = "dry_run"  # only planned
NO_PROGRESS = "no_progress"  # a commit did not deliver its estimated gain (a bug); stopped to not loop
CONFLICTS = "conflicts"  # too many consecutive tasks lost to concurrent writers; the writers win
DONE = "done"  # a one-shot request (explicit files, revision rewrite) ran all its tasks

S = TypeVar("S")


class StopToken:
    """A cooperative stop request shared between the thread that runs optimize() and any other.

    Wraps a `threading.Event` so a service can hand in its own event; `optimize(stop=...)` also
    accepts a bare `threading.Event`.
    """

    def __init__(self, event: threading.Event | None = None) -> None:
        self._event = event if event is not None else threading.Event()

    def request_stop(self) -> None:
        self._event.set()

    stop = request_stop

    @property
    def stop_requested(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    @property
    def event(self) -> threading.Event:
        return self._event


StopLike = StopToken | threading.Event | None


class _EitherStop(StopToken):
    """Stop requested when any of the given tokens is set (a loop stops on `stop` or `cancel`)."""

    def __init__(self, *tokens: StopLike) -> None:
        super().__init__()
        self._tokens = tokens

    @property
    def stop_requested(self) -> bool:
        return any(is_stop_requested(t) for t in self._tokens)


def is_stop_requested(stop: StopLike) -> bool:
    if stop is None:
        return False
    if isinstance(stop, StopToken):
        return stop.stop_requested
    if isinstance(stop, threading.Event):
        return stop.is_set()
    raise InvalidArgumentError(f"stop must be a use.optimize.loop.StopToken or a threading.Event, got {type(stop).__name__}")


@dataclass(frozen=True)
class OptimizeResult:
    """The outcome of one optimize() run: every task it ran, in order, and why it ended.

    Iterating over the result yields the per-iteration metrics. For a dry run `plan` is the plan that
    would have run and `iterations` is empty; for a run that ended because nothing more was
    selected (`converged`, `done`) it is that last, empty plan (its strategies and table version).
    """

    iterations: tuple[IterationMetrics, ...]
    outcome: str
    plan: Plan | None = None
    dry_run: bool = False
    note: str | None = None  # why nothing was selected, when nothing was (`use.optimize.report`)

    def __str__(self) -> str:
        from use.optimize.report import render_result

        return render_result(self)

    def __iter__(self) -> Iterator[IterationMetrics]:
        return iter(self.iterations)

    def __len__(self) -> int:
        return len(self.iterations)

    @property
    def committed(self) -> tuple[IterationMetrics, ...]:
        return tuple(m for m in self.iterations if m.committed)

    @property
    def versions(self) -> tuple[int, ...]:
        return tuple(m.version for m in self.iterations if m.version is not None)

    def to_table(self) -> Any:
        """One row per iteration (`ITERATION_METRICS_SCHEMA`), e.g. the result rows of a SQL
        `CALL ... optimize(...)`; a `pyarrow.Table`."""
        import pyarrow as pa

        from use.optimize.executor import ITERATION_METRICS_SCHEMA

        return pa.Table.from_pylist([m.to_dict() for m in self.iterations], schema=ITERATION_METRICS_SCHEMA)

    def totals(self) -> dict[str, int]:
        """Sums over committed iterations (abandoned ones changed nothing)."""
        done = self.committed
        keys = ("files_in", "files_out", "bytes_in", "bytes_out", "blocks_in", "blocks_out", "rows", "time_ms")
        out = {k: int(sum(getattr(m, k) for m in done)) for k in keys}
        out["iterations"] = len(self.iterations)
        out["committed"] = len(done)
        return out


def _validate_max_iterations(max_iterations: int | None) -> None:
    if max_iterations is None:
        return
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
        raise InvalidArgumentError(
            f"max_iterations must be a positive integer (the merge tasks to run at most), got {max_iterations!r}",
            hints={
                PYTHON: "pass max_iterations=10, or None for no limit",
                CLI: "pass --max-iterations 10, or leave it out for no limit",
                SQL: "pass max_iterations => 10, or leave it out for no limit",
            },
        )


def delivered(task: Any, m: IterationMetrics) -> bool:
    """Did a committed rewrite deliver the gain its plan estimated (`MergeTask.gain`)?

    Indexing always does (staging files leave revision 0), so does clustering (its files become one
    ZCube of the key, which is not selected again) and relabelling (its files leave their revision). A file gain must show as fewer files out
    than in; a block gain as fewer blocks beyond one per cube (blocks - cubes: a compaction puts
    each cube in one file, though rows moving down into child cubes may add blocks of new cubes) or
    fewer files. A read-cost gain is not measurable from the commit and is taken as delivered: the
    next plan judges it (its files are not selected again). A task without an estimate (not from
    the planner) must reduce files or blocks.
    """
    if m.kind in ("index", "cluster", "relabel"):
        return True
    fewer_files = m.files_out < m.files_in
    gain = getattr(task, "gain", None)
    if gain is None:
        return fewer_files or m.blocks_out < m.blocks_in
    if gain.read_cost > 0:
        return True
    fewer_redundant = m.blocks_out - m.cubes_out < m.blocks_in - m.cubes_in
    return (gain.files > 0 and fewer_files) or (gain.blocks > 0 and (fewer_redundant or fewer_files))


def run_loop(
    *,
    snapshot_fn: Callable[[], S],
    plan_fn: Callable[[S], Plan],
    execute_fn: Callable[[MergeTask, S], IterationMetrics],
    max_iterations: int | None = None,
    stop: StopLike = None,
    all_tasks: bool = False,
    single_pass: bool = False,
    dry_run: bool = False,
    on_iteration: Callable[[IterationMetrics], None] | None = None,
    max_consecutive_abandoned: int = 8,
) -> OptimizeResult:
    """Plan from a fresh snapshot, run the best task (or all, by score), repeat.

    `execute_fn(task, snapshot)` must run the task against the snapshot it was planned on and return
    its metrics, with status ABANDONED (and nothing changed) when it lost to a concurrent writer.
    An abandoned task ends the current plan: the next iteration re-plans from a fresh snapshot.
    `single_pass` (or a plan marked `one_shot`: explicit file lists, whole-revision rewrites) runs one
    plan and ends (`done`): its tasks were asked for, so they are not held to a gain estimate. Every
    other committed task must deliver its estimated gain (`delivered`), or the run ends `no_progress`.
    """
    _validate_max_iterations(max_iterations)
    is_stop_requested(stop)  # validates the type before any work
    done: list[IterationMetrics] = []
    abandoned_streak = 0

    def result(outcome: str) -> OptimizeResult:
        return OptimizeResult(tuple(done), outcome)

    while True:
        if is_stop_requested(stop):
            return result(STOPPED)
        if max_iterations is not None and len(done) >= max_iterations:
            return result(MAX_ITERATIONS)
        snapshot = snapshot_fn()
        plan = plan_fn(snapshot)
        if dry_run:
            return OptimizeResult((), DRY_RUN, plan=plan, dry_run=True)
        # Highest score first; ties keep the planner's order (sorted is stable).
        tasks: Sequence[MergeTask] = sorted(plan.tasks, key=lambda t: -float(t.score or 0.0))
        one_shot = single_pass or bool(getattr(plan, "one_shot", False))
        if not tasks:
            return replace(result(DONE if one_shot and done else CONVERGED), plan=plan)
        if not all_tasks and not one_shot:
            tasks = tasks[:1]
        for task in tasks:
            if is_stop_requested(stop):
                return result(STOPPED)
            if max_iterations is not None and len(done) >= max_iterations:
                return result(MAX_ITERATIONS)
            metrics = replace(execute_fn(task, snapshot), iteration=len(done) + 1)
            done.append(metrics)
            if on_iteration is not None:
                on_iteration(metrics)
            if not metrics.committed:
                abandoned_streak += 1
                if abandoned_streak >= max_consecutive_abandoned:
                    return result(CONFLICTS)
                break  # the plan is stale: re-plan from a fresh snapshot
            abandoned_streak = 0
            if not one_shot and not delivered(task, metrics):
                return result(NO_PROGRESS)
        else:
            if one_shot:
                return result(DONE)


# --- wiring to the real table -------------------------------------------------------------------------------


def session_conf(spark: Any, prefix: str) -> dict[str, str]:
    """The session's Spark conf entries whose key starts with `prefix` (e.g. `spark.qbeast.use.`)."""
    try:
        conf = dict(spark.conf.getAll)  # pyspark >= 4.0: a dict of the runtime conf
    except Exception:  # noqa: BLE001 - older or remote sessions: fall back to the context conf
        conf = dict(spark.sparkContext.getConf().getAll())
    return {k: str(v) for k, v in conf.items() if k.startswith(prefix)}


def session_defaults(spark: Any) -> dict[str, str]:
    """`spark.qbeast.use.optimization.*` session settings (table-key defaults)."""
    from use.optimize.config import SPARK_OPT_PREFIX

    return session_conf(spark, SPARK_OPT_PREFIX)


def with_planning_time(config: OptimizationConfig, log: DeltaLog, now: float) -> OptimizationConfig:
    """`config` with the inputs of the time-aware rules: the planning time `now` (seconds) for
    `tiering.max-wait`, and when a commit last changed the rows (`DeltaLog.last_data_change_ms`, read
    only with `tiering.idle-after` on) for `tiering.idle-after`. Inputs, so strategies stay pure; a
    run's loop and the service's plan check (`use.service.probe`) pass the same."""
    last_change = log.last_data_change_ms() if config.tiering_idle_after is not None else None
    return replace(config, now_ms=int(now * 1000), last_data_change_ms=last_change)


def optimize_path(
    spark: Any,
    location: str,
    *,
    revision_id: int | None = None,
    files: Sequence[str] | None = None,
    strategy: str | Sequence[str] | None = None,
    bytes_per_iter: int | str | None = None,
    zorder_by: str | Sequence[str] | None = None,
    revision_rewrite: bool | str | None = None,
    dry_run: bool = False,
    max_iterations: int | None = None,
    stop: StopLike = None,
    all_tasks: bool = False,
    overrides: Mapping[str, Any] | None = None,
    on_iteration: Callable[[IterationMetrics], None] | None = None,
    cancel: StopLike = None,
    job_group: str | None = None,
    job_description: str | None = None,
    where: str | None = None,
    auto: bool = False,
    scope: Any = None,
) -> OptimizeResult:
    """Optimize the table at `location` until the planner selects nothing (the guide's optimize()).

    Configuration comes from the table's `use.optimization.*` properties, the session's
    `spark.qbeast.use.optimization.*` defaults and `overrides`, with the keyword arguments winning.
    `strategy` replaces the strategy chain (one name or several); `zorder_by` (columns, or "a,b")
    is Delta's OPTIMIZE ... ZORDER BY (the `ZOrder` strategy, or the key of `strategy="Hilbert"`);
    `files` rewrites exactly those files once; `where` (a predicate on partition columns, Delta's
    OPTIMIZE ... WHERE) keeps the run to the partitions it selects when the run starts
    (`use.optimize.partition_filter`). Every argument is checked, and the first plan made,
    before anything is written, so bad input raises a typed error and leaves the table as it was;
    an error about an argument names it and says how to pass it on each surface (the Python API,
    `use optimize` and `CALL use_catalog.system.optimize` all call this).

    `stop` ends the run between tasks; `cancel` (default: `stop` itself) also cancels the Spark jobs
    of the task that is running, which is then abandoned. Passing a separate `cancel` lets a caller
    ask for "finish the current task, then end" (the service on UNSET) and keep the hard stop for a
    shutdown. `job_group`/`job_description` label the run's Spark jobs (see `run_task`); `auto`
    marks the commits of a run the table's properties scheduled (`run_task`). `scope` (a
    `use.optimize.partition_filter.PartitionFilter`) is `where` for a caller that knows the
    partitions already (auto compaction: those a write added data to).
    """
    from use.delta import DeltaLog
    from use.delta.snapshot import check_write_support
    from use.errors import TableNotFoundError
    from use.optimize.config import OptimizationConfig, zorder_strategy
    from use.optimize.executor import run_task
    from use.optimize.plan import Plan
    from use.optimize.planner import Planner
    from use.qbeast.snapshot import QbeastSnapshot

    if not isinstance(dry_run, bool):
        raise InvalidArgumentError(
            f"dry_run must be true or false, got {dry_run!r}",
            hints={PYTHON: "pass dry_run=True or False", SQL: "pass dry_run => true or false, or leave it out (false)"},
        )
    if not isinstance(all_tasks, bool):
        raise InvalidArgumentError(f"all_tasks must be True or False, got {all_tasks!r}")
    _validate_max_iterations(max_iterations)
    is_stop_requested(stop)
    is_stop_requested(cancel)
    if files is not None:
        if isinstance(files, str) or not all(isinstance(f, str) for f in files):
            raise InvalidArgumentError("files must be a list of data file paths (strings), not a single string")
        files = list(files)
    log = DeltaLog.for_path(location)
    if not log.exists():
        raise TableNotFoundError(
            f"no table at {location!r}: there is no Delta log with commits; check the path or write the table first"
        )
    first = log.snapshot()
    if where is not None:
        from use.optimize.partition_filter import partition_filter

        if scope is not None:
            raise InvalidArgumentError("where and scope cannot be combined: both name the partitions to optimize")
        if files is not None:
            raise InvalidArgumentError("where and files cannot be combined: files names the data files to rewrite already")
        scope = partition_filter(spark, first, where)
    if not dry_run:
        # Before any file is rewritten: a feature USE reads but cannot write refuses here.
        check_write_support(first.protocol, first.metadata, first.table_root)
    given: dict[str, Any] = dict(overrides or {})
    if revision_rewrite is not None:
        given["revision-rewrite"] = revision_rewrite
    strategy = zorder_strategy(strategy, zorder_by, files)
    arguments = {"bytes_per_iter": bytes_per_iter, "strategy": strategy, "zorder_by": zorder_by}
    config = OptimizationConfig.from_properties(
        first.configuration, given, spark_conf=session_defaults(spark), arguments=arguments
    )
    config = with_planning_time(config, log, time.time())
    planner = Planner(None, config)
    planned_once = [False]

    def snapshot_fn() -> tuple[Any, Any]:
        # a DELETE/UPDATE/MERGE of this table running in this process goes first (`yielding`)
        yielding.wait_until_idle(log.table_root, YIELD_TIMEOUT_S, lambda: is_stop_requested(stop) or is_stop_requested(cancel))
        snap = log.snapshot()  # the commit is made on the whole snapshot; the plan sees the scope's files
        return snap, QbeastSnapshot.from_delta(snap if scope is None else scope.restrict(snap))

    def plan_fn(state: tuple[Any, Any]) -> Plan:
        _, qsnap = state
        selection = files
        if files is not None and planned_once[0]:
            # Re-planning an explicit selection after a lost conflict: only what is still live.
            live = set(qsnap.files.column("path").to_pylist())
            selection = [f for f in files if f in live]
            if not selection:
                return Plan.empty("ExplicitFiles", qsnap.version)
        planned_once[0] = True
        return planner.plan(qsnap, files=selection, revision_id=revision_id)

    def execute_fn(task: MergeTask, state: tuple[Any, Any]) -> IterationMetrics:
        snap, qsnap = state
        return run_task(
            spark,
            log,
            snap,
            qsnap,
            task,
            config,
            stop=stop if cancel is None else cancel,
            job_group=job_group,
            job_description=job_description,
            auto=auto,
        )

    result = run_loop(
        snapshot_fn=snapshot_fn,
        plan_fn=plan_fn,
        execute_fn=execute_fn,
        max_iterations=max_iterations,
        stop=stop if cancel is None else _EitherStop(stop, cancel),
        all_tasks=all_tasks,
        dry_run=dry_run,
        on_iteration=on_iteration,
    )
    nothing = result.outcome == CONVERGED or (result.outcome == DRY_RUN and (result.plan is None or result.plan.is_empty))
    if nothing and not result.iterations and files is None:
        from use.optimize.report import explain_nothing_selected

        qsnap = QbeastSnapshot.from_delta(first)
        result = replace(result, note=explain_nothing_selected(qsnap, planner.chain(qsnap)))
    return result


def optimizations_table(location: str) -> Any:
    """Every optimization event of the table at `location`, oldest first, as an Arrow table
    (`OPTIMIZATIONS_SCHEMA`: the seed's fields and the commit version)."""
    from use.delta import DeltaLog
    from use.optimize.events import events_from_history

    history = DeltaLog.for_path(location).history()
    return events_from_history(reversed(history))


def optimizations(spark: Any, location: str) -> Any:
    """The table's optimization events as a Spark DataFrame (the `<table>.optimizations` rows), with
    `started_at` and `finished_at` as timestamps (the events store epoch milliseconds)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql.pandas.types import from_arrow_schema

    table = optimizations_table(location)
    for name in ("started_at", "finished_at"):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, pc.cast(table.column(i), pa.timestamp("ms", tz="UTC")))
    if table.num_rows == 0:
        return spark.createDataFrame([], from_arrow_schema(table.schema))
    return spark.createDataFrame(table)
