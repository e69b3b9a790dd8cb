"""What a merge task did and the figures it is measured by, without Spark: `IterationMetrics` (Delta's
OptimizeMetrics shape, one per task) and the metadata helpers that compute them from a snapshot's
files and blocks. The service's plan check and the SQL surface read these too; running a task is
`use.optimize.executor`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta.actions import paths_in
from use.delta.stats_parse import parse_stats
from use.errors import InvalidArgumentError

if TYPE_CHECKING:
    from use.optimize.plan import MergeTask
    from use.qbeast.snapshot import QbeastSnapshot

__all__ = [
    "ABANDONED",
    "COMMITTED",
    "ITERATION_METRICS_SCHEMA",
    "IterationMetrics",
    "blocks_of_rows",
    "cubes_and_blocks",
    "file_sizes",
    "num_records",
    "operation_metrics",
    "reindexed_blocks",
    "size_stats",
    "task_file_rows",
]

# Status of a task after `run_task`.
COMMITTED = "committed"
ABANDONED = "abandoned"


@dataclass(frozen=True)
class IterationMetrics:
    """What one merge task did, shaped like Delta's OptimizeMetrics (files/bytes/sizes in and out).

    `*_in` describe the removed input files, `*_out` the added output files. Cubes and blocks come
    from the Qbeast block tags (a plain Delta file counts as one root block). `version` is the commit
    version, None when the task was abandoned (then `error` says why and nothing changed).
    `revision_id` is the revision the output files belong to, as the commit's OptimizationEvent
    says: for an index task the revision its rows were indexed into (the input's revision, 0 for
    staging files or the superseded ones, is the planned task's, named in `reason`), -1 on a plain
    Delta table.
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


_ARROW_TYPES = {"str": pa.string(), "str | None": pa.string(), "int": pa.int64(), "int | None": pa.int64(),
                "float": pa.float64()}  # fmt: skip

#: `IterationMetrics` as Arrow columns (one row per iteration: `OptimizeResult.to_table()`).
ITERATION_METRICS_SCHEMA = pa.schema([(f.name, _ARROW_TYPES[str(f.type)]) for f in fields(IterationMetrics)])


# --- figures of a task's files (Arrow, no per-file Python objects beyond one commit's worth) ---------


def task_file_rows(qsnap: QbeastSnapshot, task: MergeTask) -> np.ndarray:
    """Row indices of the task's files in the planned snapshot; every one must be live there."""
    files = qsnap.files
    if files.num_rows == 0:
        idx = np.zeros(0, np.int64)
    else:
        mask = paths_in(files, list(task.paths))
        idx = np.flatnonzero(mask.to_numpy(zero_copy_only=False)).astype(np.int64)
    if idx.size != len(set(task.paths)):
        live = set(files.column("path").take(pa.array(idx, pa.int64())).to_pylist()) if idx.size else set()
        gone = [p for p in task.paths if p not in live]
        raise InvalidArgumentError(
            f"merge task files {gone[:3]}{' ...' if len(gone) > 3 else ''} are not live files of {qsnap.table_root} "
            f"at version {qsnap.version}; plan the task from the snapshot it runs against"
        )
    return idx


def blocks_of_rows(qsnap: QbeastSnapshot, idx: np.ndarray) -> pa.Table:
    """The block-table rows of the files at `idx`."""
    blocks = qsnap.blocks
    if blocks.num_rows == 0 or idx.size == 0:
        return blocks.slice(0, 0)
    return blocks.filter(pc.is_in(blocks.column("file_index"), value_set=pa.array(idx, pa.int64())))


def reindexed_blocks(blocks: pa.Table, idx: np.ndarray) -> pa.Table:
    """`blocks` of the files at snapshot rows `idx`, with file_index remapped to positions in `idx`."""
    if blocks.num_rows == 0:
        return blocks
    fi = blocks.column("file_index").to_numpy(zero_copy_only=False).astype(np.int64)
    pos = np.searchsorted(idx, fi)  # idx is sorted (flatnonzero)
    return blocks.set_column(blocks.schema.get_field_index("file_index"), "file_index", pa.array(pos, pa.int64()))


def num_records(files: pa.Table, schema: pa.Schema) -> int | None:
    """Rows in `files` by their Delta stats; None if any file has no row count."""
    if files.num_rows == 0:
        return 0

    counts = parse_stats(files, schema, columns=()).column("num_records")
    if counts.null_count:
        return None
    return int(pc.sum(counts).as_py() or 0)


def size_stats(sizes: np.ndarray) -> tuple[int, int, float]:
    if sizes.size == 0:
        return 0, 0, 0.0
    return int(sizes.min()), int(sizes.max()), float(sizes.mean())


def file_sizes(files: pa.Table) -> np.ndarray:
    if files.num_rows == 0:
        return np.zeros(0, np.int64)
    sizes: np.ndarray = files.column("size").to_numpy(zero_copy_only=False).astype(np.int64)
    return sizes


def cubes_and_blocks(blocks: pa.Table) -> tuple[int, int]:
    if blocks.num_rows == 0:
        return 0, 0
    keys = pc.binary_join_element_wise(pc.cast(blocks.column("revision_id"), pa.string()), blocks.column("cube_id"), "/")
    return len(pc.unique(keys)), blocks.num_rows


def operation_metrics(removed_sizes: np.ndarray, added_sizes: np.ndarray, rows: int | None) -> dict[str, str]:
    """Delta's OPTIMIZE `operationMetrics` (all values strings, as Delta writes them)."""
    q = np.percentile(added_sizes, [25, 50, 75]) if added_sizes.size else np.zeros(3)
    out = {
        "numAddedFiles": str(int(added_sizes.size)),
        "numRemovedFiles": str(int(removed_sizes.size)),
        "numAddedBytes": str(int(added_sizes.sum())),
        "numRemovedBytes": str(int(removed_sizes.sum())),
        "minFileSize": str(int(added_sizes.min()) if added_sizes.size else 0),
        "p25FileSize": str(int(q[0])),
        "p50FileSize": str(int(q[1])),
        "p75FileSize": str(int(q[2])),
        "maxFileSize": str(int(added_sizes.max()) if added_sizes.size else 0),
        "numDeletionVectorsRemoved": "0",
    }
    if rows is not None:
        out["numOutputRows"] = str(rows)
    return out
