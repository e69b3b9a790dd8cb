"""The optimize() loop on a real table: `optimize_path` wires the loop's core (`use.optimize.loop_core`:
plan, run, repeat until nothing is selected) to the Delta log, the planner and the Spark executor.

Every iteration plans from a *fresh* snapshot, so work done by the previous iteration and by
concurrent writers is always seen, and a task abandoned because its input vanished is simply planned
again (or not) from the new state. The planner only plans tasks whose rewrite gains something
(`use.optimize.gain`), so the loop reaches a fixed point: the planner selects nothing, and a further
run commits nothing (`use.optimize.loop_core` says what each outcome means).

A stop request is checked between tasks, and a stop arriving while a task's Spark jobs run cancels
them (`use.optimize.executor.run_task`): the running task always ends cleanly (committed, or
abandoned with its written files deleted), the run returns, and the table is never left half
optimized.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import from_arrow_schema

from use.delta import DeltaLog
from use.delta.snapshot import check_write_support
from use.errors import PYTHON, SQL, InvalidArgumentError, TableNotFoundError
from use.optimize import yielding
from use.optimize.config import OptimizationConfig, zorder_strategy
from use.optimize.events import optimizations_table
from use.optimize.executor import run_task
from use.optimize.loop_core import (
    CONVERGED,
    DRY_RUN,
    EitherStop,
    OptimizeResult,
    StopLike,
    is_stop_requested,
    run_loop,
    session_defaults,
    validate_max_iterations,
    with_planning_time,
)
from use.optimize.partition_filter import partition_filter
from use.optimize.planner import Planner
from use.optimize.report import explain_nothing_selected
from use.qbeast.snapshot import QbeastSnapshot

if TYPE_CHECKING:  # pragma: no cover
    from use.optimize.plan import MergeTask, Plan
    from use.optimize.task_metrics import IterationMetrics

__all__ = ["optimize_path", "optimizations"]

#: How long an optimization waits for a row-level write on its table (`yielding`) before it goes on;
#: a task whose commit would come during one is abandoned anyway.
YIELD_TIMEOUT_S = 300.0


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
    if not isinstance(dry_run, bool):
        raise InvalidArgumentError(
            f"dry_run must be true or false, got {dry_run!r}",
            hints={PYTHON: "pass dry_run=True or False", SQL: "pass dry_run => true or false, or leave it out (false)"},
        )
    if not isinstance(all_tasks, bool):
        raise InvalidArgumentError(f"all_tasks must be True or False, got {all_tasks!r}")
    validate_max_iterations(max_iterations)
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
        stop=stop if cancel is None else EitherStop(stop, cancel),
        all_tasks=all_tasks,
        dry_run=dry_run,
        on_iteration=on_iteration,
    )
    nothing = result.outcome == CONVERGED or (result.outcome == DRY_RUN and (result.plan is None or result.plan.is_empty))
    if nothing and not result.iterations and files is None:
        qsnap = QbeastSnapshot.from_delta(first)
        result = replace(result, note=explain_nothing_selected(qsnap, planner.chain(qsnap)))
    return result


def optimizations(spark: Any, location: str) -> Any:
    """The table's optimization events as a Spark DataFrame (the `<table>.optimizations` rows), with
    `started_at` and `finished_at` as timestamps (the events store epoch milliseconds)."""
    table = optimizations_table(location)
    for name in ("started_at", "finished_at"):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, pc.cast(table.column(i), pa.timestamp("ms", tz="UTC")))
    if table.num_rows == 0:
        return spark.createDataFrame([], from_arrow_schema(table.schema))
    return spark.createDataFrame(table)
