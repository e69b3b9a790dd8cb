"""Leveled compaction (the guide) and level-wise cube defragmentation (continuous optimization).

Both classify the files of one indexed revision into levels and group blocks per cube:

* file level = floor(log10(largest block elementCount of the file)): level 0 = [1, 9] elements,
  1 = [10, 99], 2 = [100, 999], ... (exact integer arithmetic; files whose blocks are all empty
  have no level and are left alone);
* per level, the blocks of that level's files are grouped by cube and their elementCounts summed;
  a group whose total is below 10^(level+1) is discarded, so merging a group always creates at least
  one file of a higher level (the guarantee that makes the process converge level by level).

`LeveledCompactionSelection` orders the remaining groups by (level, cube depth, number of blocks)
ascending and selects the files of the first group only. `CubeDefragmentation` keeps the groups of
the lowest level that has any, orders them by (cube depth, number of blocks) and takes their files,
group after group, until `bytes-per-iter`. Ties are broken by the cube id string, so a selection is
deterministic.

Both obey the per-task IO limit (`task-max-bytes`) strictly: a merge takes at least two files of
one cube (one file alone holds one block per cube: rewriting it removes no fragmentation) and never
more bytes than the limit, files taken smallest first (most files eliminated per byte). A group
whose two smallest files together exceed the limit cannot be merged within it and is skipped (the
next group is taken); a table where no group can be merged within the limit is at its fixed point
for that limit. `CubeDefragmentation` fills tasks of at most the limit group after group: a group
joins the open task when that task then holds two or more of its files, else it opens a task of its
own smallest files that fit (two or more), else it is skipped; so every task removes blocks. Score: `open_file_cost * (files_in - files_out) / bytes`.

When no level group qualifies, both fall back to inner-cube consolidation, which with size tiers
(the default) is tried first: `use.optimize.strategies.consolidation`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from use.display import format_bytes
from use.optimize.plan import KIND_COMPACT, MergeTask, Plan
from use.optimize.strategies._common import (
    RevisionBlocks,
    distinct,
    levels_of,
    merge_prefix,
    merge_score,
    paths_of,
    revision_rewrite_plan,
    sizes_of,
    sort_files,
    target_revision,
    two_smallest_fit,
)
from use.optimize.strategies.consolidation import consolidation_plan
from use.optimize.strategies.registry import register

if TYPE_CHECKING:
    from use.optimize.config import OptimizationConfig


@dataclass(frozen=True)
class BlockGroups:
    """Qualifying (level, cube) block groups of one revision, as parallel numpy arrays.

    Per group: `level`, `depth`, `total` (summed elementCount), `nblocks`, `cube_rank` (rank of the cube
    id string among the revision's cubes, for tie-breaking), `cube_code` (index into `cubes`) and
    `inner` (the cube is an inner cube, `RevisionBlocks.inner_cubes`).
    Per block of the revision: `block_group` (group index, -1 if the block's group was discarded or
    its file has no level) and `block_file` (row in `snapshot.files`).
    """

    level: np.ndarray
    depth: np.ndarray
    total: np.ndarray
    nblocks: np.ndarray
    cube_rank: np.ndarray
    cube_code: np.ndarray
    inner: np.ndarray
    cubes: pa.Array
    block_group: np.ndarray
    block_file: np.ndarray
    block_count: np.ndarray

    @property
    def size(self) -> int:
        return int(self.level.size)

    def cube(self, g: int) -> str:
        return str(self.cubes[int(self.cube_code[g])].as_py())

    def files_of(self, g: int) -> np.ndarray:
        return np.unique(self.block_file[self.block_group == g])

    def elements_in(self, g: int, files: np.ndarray) -> np.ndarray:
        """The group's elementCount in each of `files` (rows of `snapshot.files`)."""
        sel = self.block_group == g
        pos = np.searchsorted(files, self.block_file[sel])
        return np.bincount(pos, weights=self.block_count[sel], minlength=files.size).astype(np.int64)


def block_groups(snapshot: Any, revision_id: int) -> BlockGroups:
    """Level every file of the revision, group its blocks by (level, cube), keep the qualifying groups."""
    rb = RevisionBlocks.of(snapshot, revision_id)
    fi, ec, depth, codes, cubes = rb.file, rb.count, rb.depth, rb.code, rb.cubes
    ncubes = max(1, len(cubes))

    file_level = levels_of(rb.file_max_counts(snapshot.files.num_rows))
    level = file_level[fi]
    ok = (level >= 0) & rb.keeps()  # a block of offsets only is no part of its cube's group
    key = level * ncubes + codes
    key = np.where(ok, key, -1)
    # np.unique(key, return_index=True, return_inverse=True) by one unstable argsort (several times
    # faster on millions of blocks); `first` may be any block of its group (only the depth, a cube
    # property, is read from it)
    order = np.argsort(key)
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]]) if key.size else np.zeros(0, np.int64)
    uniq, first = sorted_key[starts], order[starts]
    inv = np.empty(key.size, dtype=np.int64)
    inv[order] = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, key.size]))
    total = np.bincount(inv, weights=ec, minlength=uniq.size)
    nblocks = np.bincount(inv, minlength=uniq.size)
    g_level = uniq // ncubes
    g_code = uniq % ncubes
    thresholds = np.power(10.0, g_level + 1)
    qualifies = (uniq >= 0) & (total >= thresholds)
    new_id = np.full(uniq.size, -1, dtype=np.int64)
    new_id[qualifies] = np.arange(int(qualifies.sum()))
    cube_rank_of_code = rb.cube_rank()
    q_code = g_code[qualifies]
    return BlockGroups(
        level=g_level[qualifies],
        depth=depth[first][qualifies],
        total=total[qualifies].astype(np.int64),
        nblocks=nblocks[qualifies].astype(np.int64),
        cube_rank=cube_rank_of_code[q_code] if len(cubes) else q_code,
        cube_code=q_code,
        inner=rb.inner_cubes(snapshot.revisions[revision_id].desired_cube_size)[q_code],
        cubes=cubes,
        block_group=new_id[inv],
        block_file=fi,
        block_count=ec,
    )


def _indexed_revision(snapshot: Any, config: OptimizationConfig) -> int | None:
    if not snapshot.is_qbeast:
        return None
    rid = target_revision(snapshot, config)
    return rid if rid > 0 else None


def _group_reason(groups: BlockGroups, g: int, prefix: str) -> str:
    lvl = int(groups.level[g])
    return (
        f"{prefix}level {lvl} cube {groups.cube(g)!r} (depth {int(groups.depth[g])}): "
        f"{int(groups.nblocks[g])} blocks, {int(groups.total[g])} elements >= 10^{lvl + 1}"
    )


def _densest_within(
    groups: BlockGroups, g: int, idx: np.ndarray, sizes: np.ndarray, limit: int, k_smallest: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """A group cut by the IO limit: its files by the group's elements per byte (densest first), so
    the merged block grows the most for the bytes rewritten and reaches the next level sooner (the
    level rule's guarantee holds for the part). When the two densest files alone exceed the limit,
    the smallest files are kept (`idx`, already smallest first), as before."""
    elements = groups.elements_in(g, np.sort(idx))[np.searchsorted(np.sort(idx), idx)]
    density = elements / np.maximum(sizes, 1)
    order = np.lexsort((idx, sizes, -density))  # stable on size then row for equal densities
    d_idx, d_sizes = idx[order], sizes[order]
    k = merge_prefix(d_sizes, limit)
    if k == 0:
        return idx, sizes, k_smallest
    return d_idx, d_sizes, k


def mergeable_groups(snapshot: Any, groups: BlockGroups, limit: int) -> np.ndarray:
    """Per qualifying group: can two of its files be merged within `limit` bytes?"""
    sel = groups.block_group >= 0
    return two_smallest_fit(groups.block_group[sel], groups.block_file[sel], sizes_of(snapshot), groups.size, limit)


def _level_groups_or_plan(
    snapshot: Any, config: OptimizationConfig, name: str
) -> tuple[int, BlockGroups | None, np.ndarray, Plan | None]:
    """The steps both level-wise strategies share: pick the indexed revision, honour
    revision-rewrite, and fall back to consolidation when no level group can be merged within the
    IO limit. Returns `(revision, groups, mergeable, None)` when the caller should choose among the
    `mergeable` groups, else `(revision, None, _, plan_or_None)`."""
    none = np.zeros(0, dtype=bool)
    rid = _indexed_revision(snapshot, config)
    if rid is None:
        return -1, None, none, None
    if config.revision_rewrite:
        return rid, None, none, revision_rewrite_plan(snapshot, config, name, rid)
    if config.tiering_ratio > 0:
        # Tiered: consolidation before the level rule. New appends hold a block of the root; the
        # level rule would first merge them together and consolidation then merge that file with the
        # root's, rewriting the appended bytes twice per round; one task does both.
        first = consolidation_plan(snapshot, rid, config, name)
        if first is not None:
            return rid, None, none, first
    groups = block_groups(snapshot, rid)
    mergeable = mergeable_groups(snapshot, groups, config.task_limit) if groups.size else none
    if config.tiering_ratio > 0 and groups.size:
        # The tiers own the inner cubes' files: a level group there would merge fragments the tiers
        # left waiting, and the next task would merge the result with the cube's larger file (both
        # rewritten in one optimization; measured: 2.98 -> 2.89x at tiering.ratio=1.5, k = 10).
        mergeable = mergeable & ~groups.inner
    if not mergeable.any():
        return rid, None, none, consolidation_plan(snapshot, rid, config, name)
    return rid, groups, mergeable, None


@register("LeveledCompactionSelection", "LeveledCompaction")
class LeveledCompactionSelection:
    name: ClassVar[str]
    applies_to_qbeast: ClassVar[bool] = True
    applies_to_delta: ClassVar[bool] = False

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
        rid, groups, mergeable, early = _level_groups_or_plan(snapshot, config, self.name)
        if groups is None:
            return early
        order = np.lexsort((groups.cube_rank, groups.nblocks, groups.depth, groups.level))
        g = int(order[mergeable[order]][0])
        idx = sort_files(snapshot, groups.files_of(g), [("size", "ascending")])
        sizes = sizes_of(snapshot)[idx]
        k = merge_prefix(sizes, config.task_limit)  # >= 2: the group is mergeable
        if k < idx.size:
            idx, sizes, k = _densest_within(groups, g, idx, sizes, config.task_limit, k)
        nbytes = int(sizes[:k].sum())
        reason = _group_reason(groups, g, "")
        if k < idx.size:
            reason += f"; {k} of {idx.size} files within task-max-bytes={format_bytes(config.task_limit)}"
        task = MergeTask(
            self.name, rid, paths_of(snapshot, idx[:k]), nbytes, k, merge_score(nbytes, k, config), reason, KIND_COMPACT
        )
        return Plan((task,), self.name, snapshot.version)


@register("CubeDefragmentation")
class CubeDefragmentation:
    name: ClassVar[str]
    applies_to_qbeast: ClassVar[bool] = True
    applies_to_delta: ClassVar[bool] = False

    def select(self, snapshot: Any, config: OptimizationConfig) -> Plan | None:
        rid, groups, mergeable, early = _level_groups_or_plan(snapshot, config, self.name)
        if groups is None:
            return early
        limit = config.task_limit
        lowest = int(groups.level[mergeable].min())
        cand = np.flatnonzero(mergeable & (groups.level == lowest))
        order = cand[np.lexsort((groups.cube_rank[cand], groups.nblocks[cand], groups.depth[cand]))]
        rank = np.full(groups.size, -1, dtype=np.int64)
        rank[order] = np.arange(order.size)
        # (group rank, file) pairs of the chosen groups, by rank, then smallest file first
        bg = groups.block_group
        brank = np.where(bg >= 0, rank[np.maximum(bg, 0)], -1)
        sel = brank >= 0
        nfiles = max(1, snapshot.files.num_rows)
        pair = distinct(brank[sel] * nfiles + groups.block_file[sel])
        p_rank, p_file = pair // nfiles, pair % nfiles
        sizes_all = sizes_of(snapshot)
        o = np.lexsort((p_file, sizes_all[p_file], p_rank))
        p_rank, p_file = p_rank[o], p_file[o]
        bounds = np.searchsorted(p_rank, np.arange(order.size + 1))
        # Groups in order fill tasks of at most the limit. A group joins the open task when that
        # task then holds two or more of its files (some may be there already, brought by an earlier
        # group), else it opens a task with its own smallest files that fit (two or more), else it
        # is skipped. A file is read by one task only. Groups are taken until bytes-per-iter.
        used = np.zeros(snapshot.files.num_rows, dtype=bool)
        in_open = np.zeros(snapshot.files.num_rows, dtype=bool)
        tasks_files: list[list[int]] = []
        tasks_groups: list[list[int]] = []
        open_bytes = total = 0
        for r in range(order.size):
            files = p_file[bounds[r] : bounds[r + 1]]
            free = files[~used[files]]
            sizes = sizes_all[free]
            present = int(in_open[files].sum())
            k = int(np.searchsorted(np.cumsum(sizes), limit - open_bytes, side="right")) if tasks_files else 0
            if present + k >= 2 and k >= 1:
                take, new_task = free[:k], False
            else:
                k = merge_prefix(sizes, limit)
                if k == 0:
                    continue
                take, new_task = free[:k], True
            nbytes = int(sizes[:k].sum())
            if tasks_files and total + nbytes > config.bytes_per_iter:
                break
            if new_task:
                if tasks_files:
                    in_open[tasks_files[-1]] = False
                tasks_files.append([])
                tasks_groups.append([])
                open_bytes = 0
            tasks_files[-1].extend(take.tolist())
            tasks_groups[-1].append(r)
            used[take] = in_open[take] = True
            open_bytes += nbytes
            total += nbytes
        tasks = []
        for files_list, group_list in zip(tasks_files, tasks_groups, strict=False):
            files = np.asarray(files_list, dtype=np.int64)
            nbytes, n = int(sizes_all[files].sum()), int(files.size)
            reason = _group_reason(groups, int(order[group_list[0]]), f"lowest level {lowest}: ")
            if len(group_list) > 1:
                reason += f" and {len(group_list) - 1} more cube(s) of the level"
            tasks.append(
                MergeTask(self.name, rid, paths_of(snapshot, files), nbytes, n, merge_score(nbytes, n, config),
                          reason, KIND_COMPACT)
            )  # fmt: skip
        return Plan(tuple(tasks), self.name, snapshot.version)
