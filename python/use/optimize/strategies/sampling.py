"""SamplingOverheadReduction: rewrite the files that make `sample(f)` read rows it throws away.

A `sample(f)` reads every file holding a block with `minWeight < Weight(f)` (the reader keeps blocks
with `weightFrom <= maxWeight and weightTo > minWeight`, weightFrom = MinValue) and filters rows by
weight. Let W = Weight(f). A cube is *separable* when its parent's maxWeight is >= W - 1: its rows lie
in `(parent.maxWeight, maxWeight]` (§2.3), all at or above W, so no sample(f) needs them. A file of
the revision is an *overhead file* (continuous-optimization.txt), restricted to overhead a rewrite
can actually remove, when

1. it has an optimizable block: W falls strictly inside the block's weight range
   (`minWeight < W < maxWeight`), the cube's current maxWeight (the smallest maxWeight of the cube's
   blocks, as in the index status) is below the block's range end, and that maxWeight is >= W - 1:
   the rows above it are offsets that the rewrite moves into child cubes, which are separable; or
2. it mixes blocks the sample reads (`minWeight < W`) with blocks of separable cubes.

The rewrite (`rewrite_with_existing_weights` with the sampling fraction: a sampling-aware rollup)
puts separable cubes into files of their own, so after it neither condition holds for its output
and the file is not selected again. What the seed's wording would also count but no rewrite with
the existing weights can change is left alone: offsets that move into children the sample still
reads (cube maxWeight < W - 1), and a block that happens to have no row below W although its cube
may hold such rows (it stays in the sampled file). The executor passes a configured
`sampling-fraction` to every compaction, whatever the strategy, so no other strategy re-mixes what
this one separated. A separating rewrite writes more files than it reads and keeps the blocks: its
gain is read cost (`use.optimize.gain`), which the optimize loop does not hold to fewer files or
blocks; the next plan judges it, and selects nothing of what the rewrite separated.

Overhead bytes of a file = its bytes x (1 - needed rows / rows), where a block's needed rows are its
elementCount x the share of its weight range below Weight(f) (weights are uniform hashes). Files
are taken by overhead ratio (highest first) up to `bytes-per-iter` per round and cut into tasks of at
most `task-max-bytes`; an overhead file larger than the limit is a task alone (separating one
file's sampled blocks from the rest is a gain by itself, and a file cannot be split). Score: overhead
bytes removed per byte rewritten = overhead / bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from use.display import format_bytes
from use.errors import ConfigError
from use.optimize.keys import PREFIX
from use.optimize.plan import KIND_COMPACT, MergeTask, Plan
from use.optimize.strategies._common import (
    RevisionBlocks,
    chunks,
    paths_of,
    revision_rewrite_plan,
    sizes_of,
    take_prefix,
    target_revision,
)
from use.optimize.strategies.registry import register
from use.qbeast.weight import MIN_WEIGHT, weight_from_fraction

if TYPE_CHECKING:
    from use.optimize.config import OptimizationConfig


def overhead_per_file(snapshot: Any, revision_id: int, f: float) -> tuple[np.ndarray, np.ndarray]:
    """(is_overhead_file, overhead_bytes) for every row of `snapshot.files` (False/0 outside the revision)."""
    w = np.int64(weight_from_fraction(f))
    n = snapshot.files.num_rows
    rb = RevisionBlocks.of(snapshot, revision_id)
    if rb.size == 0:
        return np.zeros(n, dtype=bool), np.zeros(n, dtype=np.float64)
    fi, lo, hi, code = rb.file, rb.min_weight, rb.max_weight, rb.code
    ec = rb.count.astype(np.float64)
    cube_max = rb.cube_max_weight()
    parent = rb.parent_code()
    # The root's parent, or a parent absent from the revision, counts as MinValue: sampled.
    parent_max = np.where(parent >= 0, cube_max[np.maximum(parent, 0)], np.int64(MIN_WEIGHT))
    separable_cube = parent_max + 1 >= w
    sep = separable_cube[code]

    read = lo < w
    optimizable = read & (w < hi) & (cube_max[code] < hi) & (cube_max[code] + 1 >= w)
    n_read = np.bincount(fi, weights=read, minlength=n)
    n_sep = np.bincount(fi, weights=sep, minlength=n)
    n_opt = np.bincount(fi, weights=optimizable, minlength=n)
    is_overhead = (n_opt > 0) | ((n_read > 0) & (n_sep > 0))

    share = np.clip((w - lo) / np.maximum(hi - lo, 1).astype(np.float64), 0.0, 1.0)
    needed = np.bincount(fi, weights=ec * share, minlength=n)
    rows = np.bincount(fi, weights=ec, minlength=n)
    ratio = np.where((rows > 0) & (n_read > 0), 1.0 - needed / np.maximum(rows, 1.0), 0.0)
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
                f"blocks, ~{format_bytes(ob)} of overhead"
            )
            tasks.append(
                MergeTask(self.name, rid, paths_of(snapshot, idx[i:j]), nbytes, j - i, ob / max(1, nbytes), reason, KIND_COMPACT)
            )
        return Plan(tuple(tasks), self.name, snapshot.version)
