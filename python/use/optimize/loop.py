"""The optimize() loop of the optimization guide: plan, run, repeat until nothing is selected.

Every iteration plans from a *fresh* snapshot, so work done by the previous iteration and by
concurrent writers is always seen, and a task abandoned because its input vanished is simply planned
again (or not) from the new state. The loop ends when the planner selects nothing, when
`max_iterations` tasks have run, when a stop is requested, or when a task made no progress (a guard
against a strategy that keeps selecting work it cannot improve).

A stop request is cooperative: it is checked between tasks, so the running task always finishes
cleanly (committed, or abandoned with its written files deleted) and the table is never left half
optimized. The loop core (`run_loop`) takes the snapshot/plan/execute steps as callables; `optimize`
wires them to the real Delta log, planner and Spark executor.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from use.errors import InvalidArgumentError
from use.optimize.executor import ABANDONED, COMMITTED, IterationMetrics

if TYPE_CHECKING:  # pragma: no cover
    from use.optimize.plan import MergeTask, Plan

__all__ = [
    "StopToken",
    "IterationMetrics",
    "OptimizeResult",
    "run_loop",
    "format_metrics_table",
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

# Why a run ended (`OptimizeResult.outcome`).
CONVERGED = "converged"  # the planner selected nothing
MAX_ITERATIONS = "max_iterations"  # the iteration budget was used up
STOPPED = "stopped"  # a stop was requested
DRY_RUN = "dry_run"  # only planned
NO_PROGRESS = "no_progress"  # a rewrite reduced neither files nor blocks; re-running would loop forever
CONFLICTS = "conflicts"  # too many consecutive tasks lost to concurrent writers; the writers win
DONE = "done"  # a single-pass run (explicit files) ran its plan

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
    would have run and `iterations` is empty.
    """

    iterations: tuple[IterationMetrics, ...]
    outcome: str
    plan: Plan | None = None
    dry_run: bool = False

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
            f"max_iterations must be a positive integer or None (no limit), got {max_iterations!r}"
        )


def _made_progress(m: IterationMetrics) -> bool:
    """Indexing always progresses (staging files leave revision 0); a rewrite must shrink something."""
    if m.kind == "index":
        return True
    return m.files_out < m.files_in or m.blocks_out < m.blocks_in


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
    `single_pass` runs one plan and ends (explicit file lists: the files are gone afterwards).
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
        if not tasks:
            return result(DONE if single_pass and done else CONVERGED)
        if not all_tasks and not single_pass:
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
            if not _made_progress(metrics):
                return result(NO_PROGRESS)
        else:
            if single_pass:
                return result(DONE)


# --- presentation ---------------------------------------------------------------------------------------

_COLUMNS: tuple[tuple[str, str], ...] = (
    ("iter", "iteration"),
    ("strategy", "strategy"),
    ("kind", "kind"),
    ("rev", "revision_id"),
    ("status", "status"),
    ("version", "version"),
    ("files in", "files_in"),
    ("files out", "files_out"),
    ("bytes in", "bytes_in"),
    ("bytes out", "bytes_out"),
    ("avg in", "avg_file_size_in"),
    ("avg out", "avg_file_size_out"),
    ("cubes in", "cubes_in"),
    ("cubes out", "cubes_out"),
    ("blocks in", "blocks_in"),
    ("blocks out", "blocks_out"),
    ("rows", "rows"),
    ("ms", "time_ms"),
)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.0f}"
    return str(value)


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain fixed-width text table (CLI output and benchmarks)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells)
    return "\n".join(lines)


def format_metrics_table(iterations: Sequence[IterationMetrics]) -> str:
    return format_table(
        [h for h, _ in _COLUMNS], [[getattr(m, attr) for _, attr in _COLUMNS] for m in iterations]
    )


def format_iteration(m: IterationMetrics) -> str:
    """One progress line per iteration."""
    if not m.committed:
        return (
            f"iteration {m.iteration}: {m.strategy}/{m.kind} revision {m.revision_id}: abandoned "
            f"({m.error or 'conflict'}); re-planning"
        )
    return (
        f"iteration {m.iteration}: {m.strategy}/{m.kind} revision {m.revision_id}: "
        f"{m.files_in} files ({m.bytes_in} B, {m.blocks_in} blocks) -> {m.files_out} files "
        f"({m.bytes_out} B, {m.blocks_out} blocks), {m.rows} rows, {m.time_ms} ms, version {m.version}"
    )
