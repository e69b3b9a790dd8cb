"""Running one MergeTask on Spark: read exactly its files, rewrite them, commit once.

A merge task is the unit of optimization work (Relyt's MERGE task, Delta's bin). Its whole life is:
read the task's input files with Spark's own parquet reader, rewrite the rows (index them into the
latest revision, compact them with the revision's existing weights, or bin-pack them for a plain Delta
table), then commit `remove`s of the inputs and `add`s of the outputs, all `dataChange=false`, in ONE
Delta transaction started from the snapshot the task was planned on. The OptimizationEvent goes into
that same commit's `commitInfo.tags`, so an event exists if and only if the rewrite does.

Failure discipline: files written by a task are deleted again whenever the task does not commit
(conflict, error, interrupted run), so an abandoned task leaves no stray files. A conflict that means
the input is gone (a file being rewritten was removed concurrently) abandons the task; the loop then
re-plans from a fresh snapshot. Concurrent blind appends never conflict with the rewrite because
`dataChange=false` actions are rebased over them by the transaction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

# Status of a task after `run_task`.
COMMITTED = "committed"
ABANDONED = "abandoned"


@dataclass(frozen=True)
class IterationMetrics:
    """What one merge task did, shaped like Delta's OptimizeMetrics (files/bytes/sizes in and out).

    `*_in` describe the removed input files, `*_out` the added output files. Cubes and blocks come
    from the Qbeast block tags (a plain Delta file counts as one root block). `version` is the commit
    version, None when the task was abandoned (then `error` says why and nothing changed).
    """

    strategy: str
    kind: str
    reason: str
    revision_id: int
    status: str
    read_version: int
    version: int | None
    files_in: int
    bytes_in: int
    min_file_size_in: int
    max_file_size_in: int
    avg_file_size_in: float
    files_out: int
    bytes_out: int
    min_file_size_out: int
    max_file_size_out: int
    avg_file_size_out: float
    cubes_in: int
    cubes_out: int
    blocks_in: int
    blocks_out: int
    rows: int
    time_ms: int
    score: float = 0.0
    iteration: int = 0
    error: str | None = None

    @property
    def committed(self) -> bool:
        return self.status == COMMITTED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))
