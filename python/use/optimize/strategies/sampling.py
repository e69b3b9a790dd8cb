"""SamplingOverheadReduction: rewrite the files that make `sample(f)` read rows it throws away.

A `sample(f)` reads every file holding a block with `minWeight < Weight(f)` (the reader keeps blocks
with `weightFrom <= maxWeight and weightTo > minWeight`, weightFrom = MinValue) and filters rows by
weight. A file of the revision is an *overhead file* (continuous-optimization.txt) when

1. it has an optimizable block: Weight(f) falls strictly inside the block's weight range
   (`minWeight < Weight(f) < maxWeight`) and the cube's current maxWeight (the smallest maxWeight of
   the cube's blocks, as in the index status) is below the block's range end: the rows between the
   cube maxWeight and the block end are offsets that a compaction moves to child cubes; or
2. it mixes sampled and non-sampled blocks, so the sample reads the non-sampled blocks for nothing.

Overhead bytes of a file = its bytes x (1 - needed rows / rows), where a block's needed rows are its
elementCount x the share of its weight range below Weight(f) (weights are uniform hashes). Files
are taken by overhead ratio (highest first) up to `bytes-per-iter` per round and cut into tasks of at
most `task-max-bytes`. Score: overhead bytes removed per byte rewritten = overhead / bytes.

Known limit: condition 2 depends on how the executor rolls cubes up into files; a rewrite that rolls
sampled and non-sampled cubes into one file again leaves the file selectable (the loop's progress
guard ends such a run).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.errors import ConfigError
from use.optimize.config import PREFIX, OptimizationConfig
from use.optimize.plan import KIND_COMPACT, MergeTask, Plan
from use.optimize.strategies._common import chunks, paths_of, revision_rewrite_plan, sizes_of, take_prefix, target_revision
from use.optimize.strategies.registry import register
from use.qbeast.weight import weight_from_fraction


def overhead_per_file(snapshot: Any, revision_id: int, f: float) -> tuple[np.ndarray, np.ndarray]:
    """(is_overhead_file, overhead_bytes) for every row of `snapshot.files` (False/0 outside the revision)."""
    w = np.int64(weight_from_fraction(f))
    blocks: pa.Table = snapshot.blocks
    n = snapshot.files.num_rows
    rid = np.asarray(blocks.column("revision_id").to_numpy(zero_copy_only=False), dtype=np.int64)
    bmask = rid == revision_id
    fi = np.asarray(blocks.column("file_index").to_numpy(zero_copy_only=False), dtype=np.int64)[bmask]
    lo = np.asarray(blocks.column("min_weight").to_numpy(zero_copy_only=False), dtype=np.int64)[bmask]
    hi = np.asarray(blocks.column("max_weight").to_numpy(zero_copy_only=False), dtype=np.int64)[bmask]
    ec = np.asarray(blocks.column("element_count").to_numpy(zero_copy_only=False), dtype=np.float64)[bmask]
    if fi.size == 0:
        return np.zeros(n, dtype=bool), np.zeros(n, dtype=np.float64)
    cube_col = blocks.column("cube_id")
    cube_col = cube_col.filter(pa.array(bmask)) if not bmask.all() else cube_col
    codes = pc.dictionary_encode(cube_col.combine_chunks() if isinstance(cube_col, pa.ChunkedArray) else cube_col)
    code = np.asarray(codes.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    cube_max = np.full(len(codes.dictionary), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(cube_max, code, hi)

    sampled = lo < w
    optimizable = sampled & (w < hi) & (cube_max[code] < hi)
    n_sampled = np.bincount(fi, weights=sampled, minlength=n)
    n_blocks = np.bincount(fi, minlength=n)
    n_opt = np.bincount(fi, weights=optimizable, minlength=n)
    is_overhead = (n_opt > 0) | ((n_sampled > 0) & (n_sampled < n_blocks))

    share = np.clip((w - lo) / np.maximum(hi - lo, 1).astype(np.float64), 0.0, 1.0)
    needed = np.bincount(fi, weights=ec * share, minlength=n)
    rows = np.bincount(fi, weights=ec, minlength=n)
    ratio = np.where((rows > 0) & (n_sampled > 0), 1.0 - needed / np.maximum(rows, 1.0), 0.0)
    overhead = np.where(is_overhead, ratio * sizes_of(snapshot), 0.0)
    return is_overhead, overhead


@register("SamplingOverheadReduction", "SamplingOverhead")
class SamplingOverheadReduction:
    name: ClassVar[str]
    applies_to_qbeast: ClassVar[bool] = True
    applies_to_delta: ClassVar[bool] = False

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
        if not snapshot.is_qbeast:
            return None
        f = config.sampling_fraction
        if f is None:
            raise ConfigError(
                f"SamplingOverheadReduction needs {PREFIX}sampling-fraction: set it to a number strictly "
                "between 0 and 1, e.g. 0.1"
            )
        rid = target_revision(snapshot, config)
        if rid <= 0:
            return None
        if config.revision_rewrite:
            return revision_rewrite_plan(snapshot, config, self.name, rid)
        is_overhead, overhead = overhead_per_file(snapshot, rid, f)
        idx = np.flatnonzero(is_overhead).astype(np.int64)
        if idx.size == 0:
            return None
        sizes_all = sizes_of(snapshot)
        ratio = overhead[idx] / np.maximum(sizes_all[idx], 1)
        idx = idx[np.lexsort((idx, -ratio))]
        sizes = sizes_all[idx]
        k = take_prefix(sizes, config.bytes_per_iter)
        idx, sizes = idx[:k], sizes[:k]
        tasks = []
        for i, j in chunks(sizes, config.task_limit):
            nbytes = int(sizes[i:j].sum())
            ob = float(overhead[idx[i:j]].sum())
            reason = (
                f"sample({f:g}) overhead: {j - i} file(s) with offset blocks or mixed sampled/non-sampled "
                f"blocks, ~{int(ob)} overhead bytes"
            )
            tasks.append(MergeTask(self.name, rid, paths_of(snapshot, idx[i:j]), nbytes, j - i, ob / max(1, nbytes), reason, KIND_COMPACT))
        return Plan(tuple(tasks), self.name, snapshot.version)
