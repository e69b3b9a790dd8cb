"""Cube statuses of one revision, built from the block table (spec §3.0, §3.3).

A cube's status folds all of its blocks across files: `max_weight` is the *minimum* of the blocks'
maxWeight (blocks written before the cube filled up carry a larger, stale estimate), the element
count is the sum, and the normalized weight says how full the cube is (< 1 inner cube, >= 1 leaf).
Statuses are kept as numpy arrays sorted in cube (pre-order) order, one entry per cube, which is
what the writer's weight estimation, the sampling reader and the strategies walk.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.errors import InvalidArgumentError
from use.qbeast.cube import cube_sort_keys, symbols_per_level
from use.qbeast.revision import Revision
from use.qbeast.weight import MAX_WEIGHT, fraction
from use.qbeast.weight_records import empty_block_mask

if TYPE_CHECKING:
    from use.qbeast.snapshot import QbeastSnapshot


@dataclass(frozen=True, eq=False)
class IndexStatus:
    """Statuses of the cubes of `revision`; arrays are parallel and sorted by cube order."""

    revision: Revision
    cube_ids: np.ndarray  # object array of str, sorted in cube order
    max_weights: np.ndarray  # int32
    element_counts: np.ndarray  # int64
    normalized_weights: np.ndarray  # float64
    block_counts: np.ndarray  # int64, blocks (file parts) per cube

    @classmethod
    def empty(cls, revision: Revision) -> IndexStatus:
        return cls(
            revision,
            np.empty(0, dtype=object),
            np.empty(0, dtype=np.int32),
            np.empty(0, dtype=np.int64),
            np.empty(0, dtype=np.float64),
            np.empty(0, dtype=np.int64),
        )

    @classmethod
    def from_blocks(cls, revision: Revision, blocks: pa.Table) -> IndexStatus:
        """Fold a block table (rows of other revisions are ignored) into cube statuses; empty blocks
        (`use.qbeast.weight_records`) lower a cube's maxWeight and add neither rows nor blocks.

        The staging revision has no tree: its status is the root alone, with MaxValue and count 0,
        as qbeast-spark loads it.
        """
        if revision.is_staging:
            return cls(
                revision,
                np.array([""], dtype=object),
                np.array([MAX_WEIGHT], dtype=np.int32),
                np.array([0], dtype=np.int64),
                np.array([np.inf], dtype=np.float64),
                np.array([0], dtype=np.int64),
            )
        if blocks.num_rows and "revision_id" in blocks.column_names:
            blocks = blocks.filter(pc.equal(blocks.column("revision_id"), revision.revision_id))
        if blocks.num_rows == 0:
            return cls.empty(revision)
        # an empty block (`use.qbeast.weight_records`) records the cube's weight, not a part of it
        holding = pa.array((~empty_block_mask(blocks)).astype(np.int64))
        blocks = blocks.append_column("_holding", holding)
        grouped = blocks.group_by("cube_id").aggregate([("max_weight", "min"), ("element_count", "sum"), ("_holding", "sum")])
        cubes = np.asarray(grouped.column("cube_id").to_numpy(zero_copy_only=False), dtype=object)
        keys = cube_sort_keys(np.char.encode(cubes.astype(str), "ascii") if cubes.size else np.array([], dtype="S1"))
        order = np.argsort(keys, kind="stable")
        max_w = grouped.column("max_weight_min").to_numpy(zero_copy_only=False).astype(np.int32)[order]
        counts = grouped.column("element_count_sum").to_numpy(zero_copy_only=False).astype(np.int64)[order]
        nblocks = grouped.column("_holding_sum").to_numpy(zero_copy_only=False).astype(np.int64)[order]
        return cls(revision, cubes[order], max_w, counts, _normalized(max_w, counts, revision.desired_cube_size), nblocks)

    @classmethod
    def from_snapshot(cls, snapshot: QbeastSnapshot, revision_id: int | None = None) -> IndexStatus:
        """Statuses of one revision of a QbeastSnapshot (its latest by default)."""
        rid = snapshot.latest_revision_id if revision_id is None else revision_id
        return cls.from_blocks(snapshot.revision(rid), snapshot.status_blocks_of_revision(rid))

    # --- lookups --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self.cube_ids.shape[0])

    @cached_property
    def _position(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.cube_ids.tolist())}

    def _index(self, cube: str) -> int:
        i = self._position.get(str(cube))
        if i is None:
            raise InvalidArgumentError(f"cube {cube!r} is not in the index of revision {self.revision.revision_id}")
        return i

    def __contains__(self, cube: object) -> bool:
        return str(cube) in self._position

    @property
    def cubes(self) -> list[str]:
        cubes: list[str] = self.cube_ids.tolist()
        return cubes

    def cube_weights(self) -> dict[str, int]:
        """Cube -> maxWeight (what the writer seeds its domain estimation with)."""
        return dict(zip(self.cube_ids.tolist(), self.max_weights.tolist(), strict=False))

    def cube_normalized_weights(self) -> dict[str, float]:
        return dict(zip(self.cube_ids.tolist(), self.normalized_weights.tolist(), strict=False))

    def cube_element_counts(self) -> dict[str, int]:
        return dict(zip(self.cube_ids.tolist(), self.element_counts.tolist(), strict=False))

    def max_weight_of(self, cube: str) -> int:
        return int(self.max_weights[self._index(cube)])

    def element_count_of(self, cube: str) -> int:
        return int(self.element_counts[self._index(cube)])

    def normalized_weight(self, cube: str) -> float:
        return float(self.normalized_weights[self._index(cube)])

    def is_leaf(self, cube: str) -> bool:
        """A cube that still takes every weight (maxWeight == MaxValue, normalized weight >= 1)."""
        return int(self.max_weights[self._index(cube)]) == MAX_WEIGHT

    def leaf_mask(self) -> np.ndarray:
        leaves: np.ndarray = self.max_weights == MAX_WEIGHT
        return leaves

    def tree_leaf_mask(self) -> np.ndarray:
        """Cubes with no descendant in the index (qbeast-spark's `DenormalizedBlock.isLeaf`): in
        pre-order, a cube is a tree leaf unless the next cube starts with its string."""
        n = len(self)
        if n == 0:
            return np.zeros(0, dtype=bool)
        cubes = self.cube_ids.astype(str)
        out = np.ones(n, dtype=bool)
        if n > 1:
            out[:-1] = ~np.char.startswith(cubes[1:].astype(str), cubes[:-1])
        return out

    def is_tree_leaf(self, cube: str) -> bool:
        return bool(self.tree_leaf_mask()[self._index(cube)])

    # --- domains (§3.3) -------------------------------------------------------------------------

    def cube_domains(self) -> dict[str, float]:
        """Estimated number of rows that fell into each cube's region, from the existing index:
        tree sizes rolled up bottom-up, then split top-down in proportion to sibling tree sizes.

        Follows qbeast-spark (`IndexStatus.cubeDomains`): a parent missing from the index receives
        its children's tree size but passes nothing further up, and the children of a cube without
        a domain get domain 0.
        """
        if len(self) == 0:
            return {}
        spl = symbols_per_level(self.revision.dimension_count)
        cubes = self.cube_ids.tolist()
        counts = self.element_counts.tolist()
        tree: dict[str, float] = {c: float(n) for c, n in zip(cubes, counts, strict=False)}
        by_level: dict[int, list[str]] = {}
        for c in cubes:
            by_level.setdefault(len(c) // spl, []).append(c)
        min_level, max_level = min(by_level), max(by_level)
        for level in range(max_level, min_level, -1):
            for c in by_level.get(level, []):
                tree[c[:-spl]] = tree.get(c[:-spl], 0.0) + tree.get(c, 0.0)
        domains: dict[str, float] = {}
        for level in range(min_level, max_level + 1):
            groups: dict[str | None, list[str]] = {}
            for c in by_level.get(level, []):
                groups.setdefault(c[:-spl] if c else None, []).append(c)
            for parent, children in groups.items():
                if parent is None:
                    for c in children:
                        domains[c] = tree.get(c, 0.0)
                    continue
                parent_domain = domains.get(parent, 0.0)
                subtree = sum(tree.get(c, 0.0) for c in children)
                for c in children:
                    domains[c] = (tree.get(c, 0.0) / subtree * parent_domain) if subtree else 0.0
        return domains

    def __repr__(self) -> str:
        return f"IndexStatus(revision={self.revision.revision_id}, cubes={len(self)})"


def _normalized(max_w: np.ndarray, counts: np.ndarray, desired_cube_size: int) -> np.ndarray:
    inner = max_w.astype(np.int64) < MAX_WEIGHT
    with np.errstate(divide="ignore"):
        leaf = np.where(counts > 0, desired_cube_size / np.maximum(counts, 1).astype(np.float64), np.inf)
    return np.where(inner, fraction(max_w.astype(np.int64)), leaf)


@dataclass(frozen=True)
class InputBlocks:
    """What a rewrite knows of its input files before reading them: their block rows
    (`use.qbeast.blocks.BLOCK_TABLE_SCHEMA`), how many files there are, and the rows they hold by
    their Delta stats (`None` when some file has no row count)."""

    blocks: pa.Table
    num_files: int
    num_rows: int | None


def counts_in_place(source: InputBlocks, revision: Revision, cube_weights: Mapping[str, int]) -> dict[str, int] | None:
    """Rows per cube of a rewrite's input with `cube_weights` (the revision's cube maxWeights), read
    from the input files' blocks instead of counted over the rows; `None` when the blocks do not
    prove where every row goes, and only a pass over the rows can tell.

    A row is placed by walking down from the root: it passes a cube whose maxWeight is below its
    weight and stops in the first cube whose maxWeight is at least its weight, or that has none
    (`use.qbeast.estimate.assign_cubes`). A block of cube c records the lowest weight of its rows
    (`min_weight`) and c's maxWeight when they were written (`max_weight`, every row's weight is at
    most that). So every row of the block stays in c when c's maxWeight now is still the block's
    (a cube's maxWeight only ever goes down, so it is the minimum over its blocks, and a block
    holding a larger one has rows the rewrite may move down to c's children: the offsets of
    `use.qbeast.estimate`), and every ancestor of c has a maxWeight below the block's lowest row
    weight (an ancestor without one would stop the rows above c). Then the elementCount of the
    blocks per cube is exactly what the counting pass would find.

    Every input file must have blocks of this revision (a staging file or one of another revision
    needs the pass), and the blocks must account for every row of the files' Delta stats.
    """
    blocks, num_files, num_rows = source.blocks, source.num_files, source.num_rows
    if num_rows is None or blocks.num_rows == 0 or revision.is_staging:
        return None
    if not pc.all(pc.equal(blocks.column("revision_id"), revision.revision_id)).as_py():
        return None
    if len(pc.unique(blocks.column("file_index"))) != num_files:
        return None
    if int(pc.sum(blocks.column("element_count")).as_py() or 0) != int(num_rows):
        return None
    grouped = blocks.group_by("cube_id").aggregate([("max_weight", "max"), ("min_weight", "min"), ("element_count", "sum")])
    cubes = grouped.column("cube_id").to_pylist()
    highest = grouped.column("max_weight_max").to_numpy(zero_copy_only=False).astype(np.int64)
    lowest = grouped.column("min_weight_min").to_numpy(zero_copy_only=False).astype(np.int64)
    counts = grouped.column("element_count_sum").to_numpy(zero_copy_only=False).astype(np.int64)
    spl = symbols_per_level(revision.dimension_count)
    # One entry per cube of the input (a few thousand at most), not per row or block.
    for cube, hi, lo in zip(cubes, highest.tolist(), lowest.tolist(), strict=False):
        weight = cube_weights.get(cube)
        if weight is None or hi > int(weight):
            return None
        for end in range(0, len(cube), spl):
            above = cube_weights.get(cube[:end])
            if above is None or int(above) >= lo:
                return None
    return {c: int(n) for c, n in zip(cubes, counts.tolist(), strict=False) if n > 0}
