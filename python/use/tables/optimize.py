"""`t.optimize`: the optimizer of one table, as a callable accessor (in the manner of delta-rs's
`dt.optimize`).

`t.optimize(...)` optimizes until nothing is selected and `t.optimize.dry_run(...)` only plans. The
arguments are the same on every table and are those of `use optimize` and `CALL
use_catalog.system.optimize`: they become one `use.optimize.request.OptimizeRequest`, checked before
the table is read, which `use.optimize.loop.optimize_path` runs. What does not apply to a table is
refused by the run with a typed error before anything is written (a `revision_id` on a plain Delta
table, `zorder_by` on a Qbeast table, whose index already clusters its rows).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from use.errors import InvalidArgumentError
from use.optimize.loop import optimize_path
from use.optimize.report import format_iteration
from use.optimize.request import OptimizeRequest

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from use.optimize.loop_core import OptimizeResult, StopLike
    from use.optimize.task_metrics import IterationMetrics

__all__ = ["Optimize", "Progress", "progress_callback"]

#: `progress=` of `optimize()`: True prints one line per iteration (as `use optimize` does), False
#: prints nothing, a callable receives each iteration's metrics.
Progress = bool | Callable[["IterationMetrics"], None]


def progress_callback(progress: Progress) -> Callable[[IterationMetrics], None] | None:
    """The `on_iteration` hook for `optimize(progress=...)`."""
    if progress is True:
        return lambda m: print(format_iteration(m), flush=True)
    if progress is False or progress is None:
        return None
    if callable(progress):
        return progress
    raise InvalidArgumentError(
        f"progress must be True (print one line per iteration), False (silent) or a callable, got {progress!r}"
    )


class Optimize:
    """The optimizer of the table at `path` (module docstring)."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self._spark = spark
        self._path = path

    def __call__(
        self,
        revision_id: int | None = None,
        files: Sequence[str] | None = None,
        strategy: str | Sequence[str] | None = None,
        bytes_per_iter: int | str | None = None,
        dry_run: bool = False,
        max_iterations: int | None = None,
        stop: StopLike = None,
        all_tasks: bool = False,
        progress: Progress = True,
        zorder_by: str | Sequence[str] | None = None,
        where: str | None = None,
        **config_overrides: Any,
    ) -> OptimizeResult:
        """Optimize until nothing is selected; returns `use.optimize.loop_core.OptimizeResult`.

        `revision_id`: the revision of a Qbeast table to optimize (default: the table's setting,
        else the latest). `files`: rewrite exactly these data files, once. `strategy`: a strategy
        name or a chain of them (default: the table's). `bytes_per_iter`: bytes rewritten per
        iteration. `zorder_by` (columns, or "a,b"): Delta's OPTIMIZE ... ZORDER BY on a plain Delta
        table, the `ZOrder` strategy, or the key of `strategy="Hilbert"`. `where` (e.g. `"date >=
        '2024-01-01'"`, on partition columns): Delta's OPTIMIZE ... WHERE, only the partitions it
        selects are rewritten. `dry_run`: plan only (as `dry_run(...)`). `max_iterations`: the merge
        tasks to run at most; `all_tasks=True` runs every task of each plan before re-planning;
        `stop` (a `StopToken` or `threading.Event`) ends the run between tasks.

        Prints one line per iteration (as `use optimize`) unless `progress=False` (or a callable,
        which gets each iteration's metrics); `print(result)` shows the metrics table and a summary.
        `config_overrides` are `use.optimization.*` keys for this run, by field name
        (`max_file_size=...`) or as a mapping passed as `overrides=`; they win over table properties.
        """
        request = self._request(
            revision_id=revision_id, files=files, strategy=strategy, bytes_per_iter=bytes_per_iter, dry_run=dry_run,
            max_iterations=max_iterations, all_tasks=all_tasks, zorder_by=zorder_by, where=where, overrides=config_overrides,
        )  # fmt: skip
        return optimize_path(self._spark, request, stop=stop, on_iteration=progress_callback(progress))

    def dry_run(
        self,
        revision_id: int | None = None,
        files: Sequence[str] | None = None,
        strategy: str | Sequence[str] | None = None,
        bytes_per_iter: int | str | None = None,
        zorder_by: str | Sequence[str] | None = None,
        where: str | None = None,
        **config_overrides: Any,
    ) -> OptimizeResult:
        """The plan `optimize(...)` with these arguments would run first, nothing written: the result's
        `plan` (its tasks, files and scores; `plan.to_table()` as rows), and `print(result)` shows it
        or, when nothing is selected, why."""
        request = self._request(
            revision_id=revision_id, files=files, strategy=strategy, bytes_per_iter=bytes_per_iter, dry_run=True,
            zorder_by=zorder_by, where=where, overrides=config_overrides,
        )  # fmt: skip
        return optimize_path(self._spark, request)

    def _request(self, *, overrides: dict[str, Any], **arguments: Any) -> OptimizeRequest:
        """The request of a call: `overrides=` (a mapping) and the keyword settings merged, the
        keywords winning; everything checked by `OptimizeRequest` itself."""
        given = overrides.pop("overrides", None)
        settings: Any = overrides if given is None else {**given, **overrides} if isinstance(given, Mapping) else given
        return OptimizeRequest(self._path, overrides=settings, **arguments)  # a non-mapping `given` is refused there

    def __repr__(self) -> str:
        return f"Optimize({self._path!r})"
