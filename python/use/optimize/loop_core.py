"""The optimize loop's core, without Spark: plan from a fresh snapshot, run a task, repeat until nothing
is selected. `run_loop` takes the snapshot/plan/execute steps as callables (`use.optimize.loop.optimize_path`
wires them to the real Delta log, planner and Spark executor; the unit tests to in-memory tables).

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

The planning inputs a run takes from its session and the clock (`session_defaults`,
`with_planning_time`) are here too, so that the service's plan check and the insights plan as a
run does without importing Spark.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from use.errors import CLI, PYTHON, SQL, InvalidArgumentError
from use.optimize.keys import SPARK_OPT_PREFIX
from use.optimize.report import render_result
from use.optimize.task_metrics import ITERATION_METRICS_SCHEMA, IterationMetrics

if TYPE_CHECKING:  # pragma: no cover
    from use.delta.log import DeltaLog
    from use.optimize.config import OptimizationConfig
    from use.optimize.plan import MergeTask, Plan

__all__ = [
    "CONFLICTS",
    "CONVERGED",
    "DONE",
    "DRY_RUN",
    "MAX_ITERATIONS",
    "NO_PROGRESS",
    "STOPPED",
    "EitherStop",
    "OptimizeResult",
    "StopLike",
    "StopToken",
    "delivered",
    "is_stop_requested",
    "run_loop",
    "session_conf",
    "session_defaults",
    "validate_max_iterations",
    "with_planning_time",
]


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


class EitherStop(StopToken):
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
    raise InvalidArgumentError(f"stop must be a use.optimize.loop_core.StopToken or a threading.Event, got {type(stop).__name__}")


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
        return pa.Table.from_pylist([m.to_dict() for m in self.iterations], schema=ITERATION_METRICS_SCHEMA)

    def totals(self) -> dict[str, int]:
        """Sums over committed iterations (abandoned ones changed nothing)."""
        done = self.committed
        keys = ("files_in", "files_out", "bytes_in", "bytes_out", "blocks_in", "blocks_out", "rows", "time_ms")
        out = {k: int(sum(getattr(m, k) for m in done)) for k in keys}
        out["iterations"] = len(self.iterations)
        out["committed"] = len(done)
        return out


def validate_max_iterations(max_iterations: int | None, name: str = "max_iterations") -> None:
    """A run's iteration budget: None (no limit) or a positive integer; InvalidArgumentError naming it
    `name` (the caller's spelling: `--max-iterations` on the command line) otherwise."""
    if max_iterations is None:
        return
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
        raise InvalidArgumentError(
            f"{name} must be a positive integer (the merge tasks to run at most), got {max_iterations!r}",
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
    validate_max_iterations(max_iterations)
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


# --- the settings and the clock a run plans with ------------------------------------------------------------


def session_conf(spark: Any, prefix: str) -> dict[str, str]:
    """The session's Spark conf entries whose key starts with `prefix` (e.g. `spark.qbeast.use.`)."""
    try:
        conf = dict(spark.conf.getAll)  # pyspark >= 4.0: a dict of the runtime conf
    except Exception:  # noqa: BLE001 - older or remote sessions: fall back to the context conf
        conf = dict(spark.sparkContext.getConf().getAll())
    return {k: str(v) for k, v in conf.items() if k.startswith(prefix)}


def session_defaults(spark: Any) -> dict[str, str]:
    """`spark.qbeast.use.optimization.*` session settings (table-key defaults)."""
    return session_conf(spark, SPARK_OPT_PREFIX)


def with_planning_time(config: OptimizationConfig, log: DeltaLog, now: float) -> OptimizationConfig:
    """`config` with the inputs of the time-aware rules: the planning time `now` (seconds) for
    `tiering.max-wait`, and when a commit last changed the rows (`DeltaLog.last_data_change_ms`, read
    only with `tiering.idle-after` on) for `tiering.idle-after`. Inputs, so strategies stay pure; a
    run's loop and the service's plan check (`use.service.probe`) pass the same."""
    last_change = log.last_data_change_ms() if config.tiering_idle_after is not None else None
    return replace(config, now_ms=int(now * 1000), last_data_change_ms=last_change)
