"""UnindexedFilesSelection: index staging (revision 0) files into the latest revision.

The guide: files of the unindexed revision are ordered ascendingly by modification time, those
modified before `fromTimestamp` are ignored, and the first `batchBytes` bytes of files are selected;
their rows are indexed into the latest revision (a new revision appears if they escape its space).
`batchBytes` is this strategy's per-task IO limit: the whole batch is one "index" task, because
indexing one batch in one write keeps the index less fragmented than several small appends.
"Up to batchBytes" is cumulative: files are taken while the running total stays <= batchBytes; a
first file larger than the batch is taken alone, or it could never be indexed (indexing a file
always gains: it leaves the staging revision, which every query reads in full).
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from use.display import format_bytes
from use.optimize.plan import KIND_INDEX, MergeTask, Plan
from use.optimize.strategies._common import (
    index_score,
    io_limit,
    paths_of,
    revision_ids_of,
    revision_rewrite_plan,
    sizes_of,
    sort_files,
    take_prefix,
)
from use.optimize.strategies.registry import register

if TYPE_CHECKING:
    from use.optimize.config import OptimizationConfig


@register("UnindexedFilesSelection", "UnindexedFiles")
class UnindexedFilesSelection:
    name: ClassVar[str]
    applies_to_qbeast: ClassVar[bool] = True
    applies_to_delta: ClassVar[bool] = False  # a plain Delta table has no index columns to index by

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
        if not snapshot.is_qbeast:
            return None
        if config.revision_rewrite and config.target_revision_id == 0:
            return revision_rewrite_plan(snapshot, config, self.name, 0)
        files = snapshot.files
        mtime = np.asarray(files.column("modification_time").to_numpy(zero_copy_only=False), dtype=np.int64)
        mask = (revision_ids_of(snapshot) == 0) & (mtime >= config.unindexed_from_timestamp)
        idx = np.flatnonzero(mask).astype(np.int64)
        if idx.size == 0:
            return None
        idx = sort_files(snapshot, idx, [("modification_time", "ascending")])
        sizes = sizes_of(snapshot)[idx]
        k = take_prefix(sizes, io_limit(KIND_INDEX, config))
        sel = idx[:k]
        nbytes = int(sizes[:k].sum())
        since = ""
        if config.unindexed_from_timestamp:
            ts = _dt.datetime.fromtimestamp(config.unindexed_from_timestamp / 1000, _dt.UTC)
            since = f" modified since {ts:%Y-%m-%d %H:%M:%S} UTC"
        reason = (
            f"index {k} of {idx.size} staging files{since}, oldest first, "
            f"up to batchBytes={format_bytes(config.unindexed_batch_bytes)}"
        )
        task = MergeTask(self.name, 0, paths_of(snapshot, sel), nbytes, k, index_score(nbytes, k, config), reason, KIND_INDEX)
        return Plan((task,), self.name, snapshot.version)
