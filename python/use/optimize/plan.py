"""What the planner hands to the executor: merge tasks and the plan that orders them.

A `MergeTask` is Relyt's MERGE task / Delta's bin: one bounded unit of rewrite work that the executor
commits in one transaction. A `Plan` is one iteration's worth of tasks, best first. Both are plain
frozen values so a plan can be printed for a dry run, shipped to the CLI, or compared in tests without
touching a table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from use.display import format_bytes, format_bytes_exact, shorten, text_table
from use.errors import InvalidArgumentError
from use.optimize.curves import CURVES

#: Task kinds. "index": staging rows are indexed into the latest revision (a new revision may appear);
#: "compact": files of one indexed revision are rewritten with that revision's existing cube weights;
#: "binpack": files are rewritten as plain Delta files (optionally sorted by `sort_columns`);
#: "cluster": files are rewritten as plain Delta files ordered by the `curve` key of `cluster_by`
#: (ZOrder/Hilbert, `use.optimize.clustering`), tagged as one ZCube;
#: "relabel": files of a superseded revision move into the latest by their tags alone, nothing read
#: or written (`use.qbeast.relabel`).
KIND_INDEX = "index"
KIND_COMPACT = "compact"
KIND_BINPACK = "binpack"
KIND_CLUSTER = "cluster"
KIND_RELABEL = "relabel"
KINDS = (KIND_INDEX, KIND_COMPACT, KIND_BINPACK, KIND_CLUSTER, KIND_RELABEL)

#: `revision_id` of tasks on a plain Delta table (no Qbeast revisions at all).
PLAIN_DELTA_REVISION = -1

#: `add.tags` key on every file written by a `revision-rewrite` task (value: the table version the
#: rewrite was planned on). It is how a revision rewrite is one-shot without hidden state: once every
#: live file of the revision carries it, nothing has changed the revision since it was rewritten, and
#: a revision rewrite selects nothing. Any write or other rewrite adds files without it.
REVISION_REWRITE_TAG = "use.optimization.revisionRewrite"


@dataclass(frozen=True)
class Gain:
    """What a task's rewrite is expected to reduce; a task with no gain is never planned.

    `files`: files fewer after the rewrite; `blocks`: redundant blocks removed (blocks beyond one per
    cube among the task's files: a rewrite puts each cube in one file); `read_cost`: bytes a query
    reads needlessly today that the rewrite removes (staging files scanned in full, sampling overhead,
    key-range overlap). Computed from the snapshot by `use.optimize.gain` (the planner's guard); the
    optimize loop checks the measurable parts (files, blocks) against the committed rewrite.
    """

    files: int = 0
    blocks: int = 0
    read_cost: float = 0.0

    def __bool__(self) -> bool:
        return self.files > 0 or self.blocks > 0 or self.read_cost > 0


def revision_label(revision_id: int) -> str:
    """`revision 3`, `staging revision 0`, or `plain Delta` for a table without an index (never "-1")."""
    if revision_id == PLAIN_DELTA_REVISION:
        return "plain Delta"
    if revision_id == 0:
        return "staging revision 0"
    return f"revision {revision_id}"


#: A partition's values as (column, value) pairs sorted by column: hashable, as a frozen task needs.
PartitionValues = tuple[tuple[str, str | None], ...]


def _freeze_partition(values: Mapping[str, str | None] | Iterable[tuple[str, str | None]] | None) -> PartitionValues:
    if values is None:
        return ()
    items = values.items() if isinstance(values, Mapping) else values
    return tuple(sorted((str(k), None if v is None else str(v)) for k, v in items))


@dataclass(frozen=True)
class MergeTask:
    """One rewrite: these files, of this revision, rewritten together in one commit.

    `score` is the estimated read cost saved per byte rewritten (dimensionless: bytes of read
    work saved per byte of rewrite IO; see `use.optimize.strategies` for each strategy's formula). It
    lets a scheduler run the most valuable task first across strategies and tables (Relyt's
    scheduling weight). `partition_values` is a sorted tuple of (column, value) pairs so the task stays
    hashable; `partition_dict` gives the mapping. `sort_columns` asks a "binpack" rewrite to sort the
    output by those columns (the cluster-key strategy: merged files must not overlap again).
    `cluster_by` and `curve` are the key of a "cluster" task (column names as Spark parses them,
    backticks around names with dots) and are set exactly for that kind.
    `revision_rewrite` marks the tasks of a `revision-rewrite` plan: their outputs carry
    `REVISION_REWRITE_TAG`. `gain` is set by the planner's guard (`use.optimize.gain`).
    """

    strategy: str
    revision_id: int
    paths: tuple[str, ...]
    bytes: int
    num_files: int
    score: float
    reason: str
    kind: str
    partition_values: PartitionValues = ()
    sort_columns: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()
    curve: str = ""
    revision_rewrite: bool = False
    gain: Gain | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidArgumentError(f"MergeTask.kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        object.__setattr__(self, "paths", tuple(self.paths))
        object.__setattr__(self, "partition_values", _freeze_partition(self.partition_values))
        object.__setattr__(self, "sort_columns", tuple(self.sort_columns))
        object.__setattr__(self, "cluster_by", tuple(self.cluster_by))
        if self.kind == KIND_CLUSTER and (not self.cluster_by or self.curve not in CURVES):
            raise InvalidArgumentError(
                f"a cluster MergeTask needs cluster_by columns and a curve in {', '.join(CURVES)}, "
                f"got {self.cluster_by!r} and {self.curve!r}"
            )
        if self.kind != KIND_CLUSTER and (self.cluster_by or self.curve):
            raise InvalidArgumentError(f"cluster_by and curve belong to cluster tasks, not to {self.kind!r} tasks")
        if self.num_files != len(self.paths):
            raise InvalidArgumentError(
                f"MergeTask.num_files ({self.num_files}) must equal the number of paths ({len(self.paths)})"
            )
        if not self.paths:
            raise InvalidArgumentError("a MergeTask needs at least one file path")

    @property
    def partition_dict(self) -> dict[str, str | None]:
        return dict(self.partition_values)

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "revision_id": self.revision_id,
            "kind": self.kind,
            "num_files": self.num_files,
            "bytes": self.bytes,
            "score": self.score,
            "reason": self.reason,
            "partition_values": self.partition_dict,
            "sort_columns": list(self.sort_columns),
            "cluster_by": list(self.cluster_by),
            "curve": self.curve,
            "revision_rewrite": self.revision_rewrite,
            "gain": None if self.gain is None else dataclasses.asdict(self.gain),
            "paths": list(self.paths),
        }


@dataclass(frozen=True)
class Plan:
    """One iteration's tasks, ordered by score descending (ties keep the strategy's order).

    An empty plan means "nothing to do": the optimize loop stops on it. `one_shot` marks plans that
    must run once and not be re-planned in a loop: an explicit file list, or a whole-revision rewrite
    (`use.optimization.revision-rewrite`), whose selection would otherwise repeat forever.
    """

    tasks: tuple[MergeTask, ...]
    strategy: str
    snapshot_version: int
    one_shot: bool = False

    def __post_init__(self) -> None:
        ordered = sorted(self.tasks, key=lambda t: -t.score)  # stable: ties keep insertion order
        object.__setattr__(self, "tasks", tuple(ordered))

    @classmethod
    def empty(cls, strategy: str, snapshot_version: int) -> Plan:
        return cls((), strategy, snapshot_version)

    @property
    def is_empty(self) -> bool:
        return not self.tasks

    def __bool__(self) -> bool:
        return bool(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tasks)

    @property
    def num_files(self) -> int:
        return sum(t.num_files for t in self.tasks)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(p for t in self.tasks for p in t.paths)

    def to_table(self) -> pa.Table:
        """One row per task (no paths): the dry-run result of `CALL ... optimize(dry_run => true)`."""
        return pa.table(
            {
                "task": pa.array(range(len(self.tasks)), pa.int64()),
                "strategy": pa.array([t.strategy for t in self.tasks], pa.string()),
                "kind": pa.array([t.kind for t in self.tasks], pa.string()),
                "revision_id": pa.array([t.revision_id for t in self.tasks], pa.int64()),
                "num_files": pa.array([t.num_files for t in self.tasks], pa.int64()),
                "bytes": pa.array([t.bytes for t in self.tasks], pa.int64()),
                "score": pa.array([t.score for t in self.tasks], pa.float64()),
                "partition_values": pa.array([list(t.partition_values) for t in self.tasks], pa.map_(pa.string(), pa.string())),
                "reason": pa.array([t.reason for t in self.tasks], pa.string()),
            }
        )

    def render(self, max_reason: int = 72) -> str:
        """A fixed-width table for dry runs and the CLI."""
        head = f"plan: strategy={self.strategy} snapshot_version={self.snapshot_version}"
        if self.is_empty:
            return head + "\nnothing to optimize"
        cols = ("#", "kind", "revision", "files", "bytes", "score", "partition", "reason")
        rows = [
            (
                i,
                t.kind,
                revision_label(t.revision_id),
                t.num_files,
                format_bytes(t.bytes),
                f"{t.score:.4g}",
                ",".join(f"{k}={v}" for k, v in t.partition_values) or "-",
                shorten(t.reason, max_reason),
            )
            for i, t in enumerate(self.tasks)
        ]
        out = [head, text_table(cols, rows)]
        out.append(
            f"total: {len(self.tasks)} task(s), {self.num_files} file(s), {format_bytes_exact(self.bytes)}"
            + (" (one-shot)" if self.one_shot else "")
        )
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()
