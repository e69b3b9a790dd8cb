"""`OptimizeRequest`: one optimization as every surface asks for it, checked once.

The Python facade (`t.optimize(...)`), the command line (`use optimize`), `CALL
use_catalog.system.optimize` and the manual trigger, the service's runs and Delta's auto compaction
all describe the run they want as this one frozen value, and `use.optimize.loop.optimize_path(spark,
request, ...)` runs it. Every value is checked when the request is built, before any table is read:
a bad one is a typed error naming the argument as the caller's `surface` spells it (the keyword in
Python and in a CALL, the flag on the command line; a `use.optimization.*` setting by its key) and
carrying each surface's way to pass a good one (`use.errors`: `for_surface`). What depends on the
table (a revision it has, its columns, a setting a strategy needs, the partitions `where` selects)
is checked when the run reads the table, still before anything is written.

Pure: no Spark, no storage.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from use.errors import CLI, PYTHON, SQL, SURFACES, InvalidArgumentError
from use.optimize.config import parse_argument, parse_override, zorder_strategy
from use.optimize.config_values import BadValue, parse_bool, parse_int_text
from use.optimize.loop_core import validate_max_iterations

if TYPE_CHECKING:  # pragma: no cover
    from use.optimize.partition_filter import PartitionFilter

__all__ = ["OptimizeRequest", "check_where", "where_hints"]

#: How the command line spells the arguments it takes as flags (Python and CALL use the keyword).
_FLAGS = {
    "revision_id": "--revision-id",
    "max_iterations": "--max-iterations",
    "all_tasks": "--all-tasks",
    "dry_run": "--dry-run",
    "revision_rewrite": "--revision-rewrite",
}


def where_hints(example: str) -> dict[str, str]:
    """How each surface passes a partition predicate (`where`), e.g. `p = 'a'`."""
    return {PYTHON: f'pass where="{example}"', CLI: f'pass --where "{example}"', SQL: f"OPTIMIZE <table> WHERE {example}"}


def check_where(where: Any) -> str:
    """`where` (Delta's OPTIMIZE ... WHERE) is a non-empty predicate text; InvalidArgumentError if not."""
    if not isinstance(where, str) or not where.strip():
        raise InvalidArgumentError(
            f"where must be a predicate on partition columns, e.g. \"p = 'a'\", got {where!r}", hints=where_hints("p = 'a'")
        )
    return where


@dataclass(frozen=True)
class OptimizeRequest:
    """Every argument of one optimization of the table at `location` (module docstring).

    `revision_id`: the revision to optimize (None: the table's setting, else the latest); `files`:
    rewrite exactly these data files, once; `strategy`: one strategy name or several (the chain);
    `bytes_per_iter`: bytes rewritten per iteration (an integer, or text such as "100000000");
    `zorder_by`: Delta's OPTIMIZE ... ZORDER BY columns (a list or "a,b": the `ZOrder` strategy, or
    the key of `strategy="Hilbert"`); `revision_rewrite`: rewrite the whole revision once; `where`: a
    predicate on partition columns (Delta's OPTIMIZE ... WHERE); `dry_run`: plan only;
    `max_iterations`: the merge tasks to run at most; `all_tasks`: run every task of a plan before
    re-planning; `overrides`: `use.optimization.*` settings for this run only, by key or field name
    (they win over the table's properties; the arguments above win over them); `auto`: the run was
    scheduled by the table's properties (its commits say so); `scope`: the partitions to optimize, for
    a caller that knows them already (auto compaction: those a write added data to); `surface`: who
    asks (`use.errors.PYTHON`, `CLI` or `SQL`), which names the arguments in its errors. On the
    command line `revision_id` and `max_iterations` may be given as text (a flag's value).

    The values are kept normalized: `files`, `strategy` and `zorder_by` as tuples, `bytes_per_iter`
    as an integer, `overrides` read-only.
    """

    location: str
    revision_id: int | None = None
    files: Sequence[str] | None = None
    strategy: str | Sequence[str] | None = None
    bytes_per_iter: int | str | None = None
    zorder_by: str | Sequence[str] | None = None
    revision_rewrite: bool | str | None = None
    where: str | None = None
    dry_run: bool = False
    max_iterations: int | None = None
    all_tasks: bool = False
    overrides: Mapping[str, Any] = field(default_factory=dict, hash=False)
    auto: bool = False
    scope: PartitionFilter | None = field(default=None, compare=False)
    surface: str = field(default=PYTHON, compare=False)

    def __post_init__(self) -> None:
        if self.surface not in SURFACES:
            raise InvalidArgumentError(f"surface must be one of {', '.join(SURFACES)}, got {self.surface!r}")
        if not isinstance(self.location, str) or not self.location.strip():
            raise InvalidArgumentError(
                f"the table to optimize must be a path (a non-empty string), got {self.location!r}",
                hints={
                    PYTHON: "open the table with QbeastTable.for_path or DeltaTable.for_path",
                    CLI: "pass --table-location PATH",
                },
            )
        self._check_flags()
        self._set("revision_id", self._revision_id())
        self._set("max_iterations", self._max_iterations())
        self._set("files", self._files())
        self._set("strategy", self._typed("strategy"))
        self._set("bytes_per_iter", self._typed("bytes_per_iter"))
        self._set("zorder_by", self._typed("zorder_by"))
        self._set("revision_rewrite", self._revision_rewrite())
        self._set("overrides", self._overrides())
        if self.where is not None:
            check_where(self.where)
            if self.scope is not None:
                raise InvalidArgumentError("where and scope cannot be combined: both name the partitions to optimize")
            if self.files is not None:
                raise InvalidArgumentError("where and files cannot be combined: files names the data files to rewrite already")
        zorder_strategy(self.strategy, self.zorder_by, self.files)  # zorder_by with files is refused

    # --- what the run reads -------------------------------------------------------------------------

    def arguments(self) -> dict[str, Any]:
        """The arguments that set configuration keys (`use.optimize.config.ARGUMENTS`), as
        `OptimizationConfig.from_properties` takes them: `zorder_by` alone asks for the `ZOrder`
        strategy (`zorder_strategy`)."""
        return {
            "bytes_per_iter": self.bytes_per_iter,
            "strategy": zorder_strategy(self.strategy, self.zorder_by),
            "zorder_by": self.zorder_by,
        }

    def settings(self) -> dict[str, Any]:
        """The run's own `use.optimization.*` settings: `overrides`, and `revision-rewrite` when given."""
        given = dict(self.overrides)
        if self.revision_rewrite is not None:
            given["revision-rewrite"] = self.revision_rewrite
        return given

    # --- checks -------------------------------------------------------------------------------------

    def _name(self, argument: str) -> str:
        return _FLAGS.get(argument, argument) if self.surface == CLI else argument

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # normalizing a frozen value while it is built

    def _check_flags(self) -> None:
        if not isinstance(self.dry_run, bool):
            raise InvalidArgumentError(
                f"{self._name('dry_run')} must be true or false, got {self.dry_run!r}",
                hints={PYTHON: "pass dry_run=True or False", SQL: "pass dry_run => true or false, or leave it out (false)"},
            )
        if not isinstance(self.all_tasks, bool):
            raise InvalidArgumentError(
                f"{self._name('all_tasks')} must be True or False, got {self.all_tasks!r}",
                hints={PYTHON: "pass all_tasks=True or False", CLI: "pass --all-tasks, or leave it out"},
            )
        if not isinstance(self.auto, bool):
            raise InvalidArgumentError(f"auto must be True or False, got {self.auto!r}")

    def _cli_int(self, argument: str, value: Any) -> Any:
        """A flag's value is text: read as an integer on the command line only."""
        if self.surface != CLI or not isinstance(value, str):
            return value
        try:
            return parse_int_text(value, "an integer")
        except BadValue:
            raise InvalidArgumentError(f"{self._name(argument)} must be an integer, got {value!r}") from None

    def _revision_id(self) -> int | None:
        value = self._cli_int("revision_id", self.revision_id)
        if value is None:
            return None
        name = self._name("revision_id")
        hints = {
            PYTHON: "pass revision_id=1, or None for the latest",
            CLI: "pass --revision-id 1, or leave it out for the latest",
            SQL: "pass revision_id => 1, or leave it out for the latest",
        }
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise InvalidArgumentError(f"{name} must be an integer revision id, got {value!r}", hints=hints)
        if value < 0:
            raise InvalidArgumentError(
                f"{name} must be a revision id (an integer >= 0; 0 is the staging revision), got {value!r}", hints=hints
            )
        return int(value)

    def _max_iterations(self) -> int | None:
        value: int | None = self._cli_int("max_iterations", self.max_iterations)
        validate_max_iterations(value, self._name("max_iterations"))
        return value

    def _files(self) -> tuple[str, ...] | None:
        files = self.files
        if files is None:
            return None
        if isinstance(files, str) or not isinstance(files, Sequence) or not all(isinstance(f, str) for f in files):
            raise InvalidArgumentError("files must be a list of data file paths (strings), not a single string")
        return tuple(files)

    def _typed(self, argument: str) -> Any:
        raw = getattr(self, argument)
        return None if raw is None else parse_argument(argument, raw, self.surface)

    def _revision_rewrite(self) -> bool | None:
        raw = self.revision_rewrite
        if raw is None:
            return None
        try:
            return parse_bool(raw)
        except BadValue:
            raise InvalidArgumentError(f"{self._name('revision_rewrite')} must be true or false, got {raw!r}") from None

    def _overrides(self) -> Mapping[str, Any]:
        given = self.overrides if self.overrides is not None else {}
        if not isinstance(given, Mapping):
            raise InvalidArgumentError(
                f"overrides must map use.optimization.* keys to values (e.g. {{'max-file-size': 268435456}}), got {given!r}"
            )
        kept = {key: raw for key, raw in given.items() if raw is not None}  # None: not given
        for key, raw in kept.items():
            parse_override(key, raw)
        return MappingProxyType(kept)
