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
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import from_arrow_schema

from use.delta import DeltaLog
from use.delta.snapshot import check_write_support
from use.errors import InvalidArgumentError, TableNotFoundError
from use.optimize import yielding
from use.optimize.config import OptimizationConfig
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
    with_planning_time,
)
from use.optimize.partition_filter import partition_filter
from use.optimize.planner import Planner
from use.optimize.report import explain_nothing_selected
from use.optimize.request import OptimizeRequest
from use.qbeast.snapshot import QbeastSnapshot

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from use.optimize.plan import MergeTask, Plan
    from use.optimize.task_metrics import IterationMetrics

__all__ = ["optimize_path", "optimizations"]

#: How long an optimization waits for a row-level write on its table (`yielding`) before it goes on;
#: a task whose commit would come during one is abandoned anyway.
YIELD_TIMEOUT_S = 300.0


def optimize_path(
    spark: Any,
    request: OptimizeRequest,
    *,
    stop: StopLike = None,
    cancel: StopLike = None,
    on_iteration: Callable[[IterationMetrics], None] | None = None,
    job_group: str | None = None,
    job_description: str | None = None,
) -> OptimizeResult:
    """Run `request` (`use.optimize.request.OptimizeRequest`, checked when it was built) on its table
    until the planner selects nothing (the guide's optimize()).

    Configuration comes from the table's `use.optimization.*` properties, the session's
    `spark.qbeast.use.optimization.*` defaults and the request's settings, with its arguments
    winning. What depends on the table (its revisions and columns, a setting a strategy needs, the
    partitions `where` selects: `use.optimize.partition_filter`) is checked, and the first plan made,
    before anything is written, so bad input raises a typed error and leaves the table as it was.

    The rest are controls of this run, not part of what is asked: `stop` ends the run between
    tasks; `cancel` (default: `stop` itself) also cancels the Spark jobs of the task that is running,
    which is then abandoned. Passing a separate `cancel` lets a caller ask for "finish the current
    task, then end" (the service on UNSET) and keep the hard stop for a shutdown. `on_iteration`
    gets each iteration's metrics; `job_group`/`job_description` label the run's Spark jobs (see
    `run_task`).
    """
    if not isinstance(request, OptimizeRequest):
        raise InvalidArgumentError(
            f"optimize_path runs a use.optimize.request.OptimizeRequest, got {type(request).__name__}; build one with "
            "OptimizeRequest(location, ...)"
        )
    is_stop_requested(stop)
    is_stop_requested(cancel)
    files = None if request.files is None else list(request.files)
    location = request.location
    log = DeltaLog.for_path(location)
    if not log.exists():
        raise TableNotFoundError(
            f"no table at {location!r}: there is no Delta log with commits; check the path or write the table first"
        )
    first = log.snapshot()
    scope = request.scope if request.where is None else partition_filter(spark, first, request.where)
    if not request.dry_run:
        # Before any file is rewritten: a feature USE reads but cannot write refuses here.
        check_write_support(first.protocol, first.metadata, first.table_root)
    config = OptimizationConfig.from_properties(
        first.configuration, request.settings(), spark_conf=session_defaults(spark), arguments=request.arguments()
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
        return planner.plan(qsnap, files=selection, revision_id=request.revision_id)

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
            auto=request.auto,
        )

    result = run_loop(
        snapshot_fn=snapshot_fn,
        plan_fn=plan_fn,
        execute_fn=execute_fn,
        max_iterations=request.max_iterations,
        stop=stop if cancel is None else EitherStop(stop, cancel),
        all_tasks=request.all_tasks,
        dry_run=request.dry_run,
        on_iteration=on_iteration,
    )
    nothing = result.outcome == CONVERGED or (result.outcome == DRY_RUN and (result.plan is None or result.plan.is_empty))
    if nothing and not result.iterations and files is None:
        qsnap = QbeastSnapshot.from_delta(first)
        result = replace(result, note=explain_nothing_selected(qsnap, planner.chain(qsnap)))
    return result


def optimizations(spark: SparkSession, location: str) -> DataFrame:
    """The table's optimization events as a Spark DataFrame (the `<table>.optimizations` rows), with
    `started_at` and `finished_at` as timestamps (the events store epoch milliseconds)."""
    table = optimizations_table(location)
    for name in ("started_at", "finished_at"):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, pc.cast(table.column(i), pa.timestamp("ms", tz="UTC")))
    if table.num_rows == 0:
        return spark.createDataFrame([], from_arrow_schema(table.schema))
    return spark.createDataFrame(table)
