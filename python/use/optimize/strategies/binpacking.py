"""Plain-file strategies: Delta OPTIMIZE bin packing and Relyt's small-file strategy.

Both rewrite files as plain Delta files ("binpack" tasks), so they only ever touch files without an
index: every file of a plain Delta table, or the staging (revision 0) files of a Qbeast table. A
binpack rewrite of indexed files would drop their block metadata; indexed revisions are compacted by
the leveled strategies instead.

* `BinPacking` (Delta's OptimizeExecutor): files smaller than `min-file-size` (default =
  `max-file-size` = 1 GiB, Delta's defaults) are grouped by partition, sorted by size (then log order) and
  packed greedily into bins of at most min(`max-file-size`, `task-max-bytes`) bytes; bins holding a
  single file are dropped (rewriting one file alone gains nothing).
* `SmallFiles` (Relyt): files smaller than `small-files.max-size` (64 MiB) are small; when the table
  has at least `small-files.count-threshold` (50) of them, they are merged per partition into tasks
  of at most `task-max-bytes`.

A plan holds the best bins (by score) up to `bytes-per-iter`; the loop does the rest in later
iterations (small steps). Score: `open_file_cost * (files_in - files_out) / bytes`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from use.display import format_bytes
from use.optimize.plan import Plan
from use.optimize.strategies._common import (
    budget,
    pack_bins,
    plain_revision,
    revision_ids_of,
    revision_rewrite_plan,
    sizes_of,
)
from use.optimize.strategies.registry import register

if TYPE_CHECKING:
    from use.optimize.config import OptimizationConfig


def plain_files(snapshot: Any) -> np.ndarray:
    """Rows of files a binpack rewrite may touch: all of a plain table, the staging files of a Qbeast one."""
    if not snapshot.is_qbeast:
        return np.arange(snapshot.files.num_rows, dtype=np.int64)
    return np.flatnonzero(revision_ids_of(snapshot) == 0).astype(np.int64)


@register("BinPacking", "BinPack")
class BinPacking:
    name: ClassVar[str]
    applies_to_qbeast: ClassVar[bool] = True
    applies_to_delta: ClassVar[bool] = True

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
        if config.revision_rewrite and not snapshot.is_qbeast:
            return revision_rewrite_plan(snapshot, config, self.name, plain_revision(snapshot))
        idx = plain_files(snapshot)
        idx = idx[sizes_of(snapshot)[idx] < config.min_file_size_limit]
        cap = min(config.max_file_size, config.task_limit)
        tasks = pack_bins(
            snapshot, idx, cap, strategy=self.name, revision_id=plain_revision(snapshot), config=config,
            reason=f"bin of {{n}} files below min-file-size={format_bytes(config.min_file_size_limit)}, up to {format_bytes(cap)}",
            bytes_per_iter=config.bytes_per_iter,
        )  # fmt: skip
        if not tasks:
            return None
        return Plan(tuple(budget(tasks, config.bytes_per_iter)), self.name, snapshot.version)


@register("SmallFiles")
class SmallFiles:
    name: ClassVar[str]
    applies_to_qbeast: ClassVar[bool] = True
    applies_to_delta: ClassVar[bool] = True

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
        idx = plain_files(snapshot)
        idx = idx[sizes_of(snapshot)[idx] < config.small_files_max_size]
        if idx.size < config.small_files_count_threshold:
            return None
        tasks = pack_bins(
            snapshot, idx, config.task_limit, strategy=self.name, revision_id=plain_revision(snapshot), config=config,
            reason=(f"{{n}} of the table's {idx.size} small files (< {format_bytes(config.small_files_max_size)}, "
                    f"threshold {config.small_files_count_threshold})"),
            bytes_per_iter=config.bytes_per_iter,
        )  # fmt: skip
        if not tasks:
            return None
        return Plan(tuple(budget(tasks, config.bytes_per_iter)), self.name, snapshot.version)
