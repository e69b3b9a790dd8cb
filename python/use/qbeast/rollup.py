"""Rollup of cubes into files (qbeast-format spec §3.5).

A cube's block is often much smaller than a good file (leaves, appends), so blocks are grouped:
deepest cubes first, a group still below the limit is merged into its parent's group. Each
surviving group becomes one file, named after the group's (shallowest) cube. The limit is the
revision's `desiredCubeSize`, as upstream.

The result is deterministic (ties are broken by cube order) so a retried Spark task puts every row
in the same file.

Sampling-aware rollup (optional, `sample_weight`): a `sample(f)` reads every file holding a block with
rows below Weight(f), in full. A cube whose parent's maxWeight is at least Weight(f) - 1 holds only
rows at or above Weight(f) (§2.3: its rows lie in `(parent.maxWeight, maxWeight]`), so no sample(f)
ever needs it; rolling it into a sampled parent's file makes every such sample read it for nothing
(the sampling-overhead strategy's "mixed" files). With `sample_weight` set, such a group is never
absorbed by a sampled group: the small non-sampled groups under one sampled cube are pooled into one
file of their own instead (named after the first of them in cube order). Sampled groups still roll
up as usual, and a file never mixes sampled and non-sampled cubes.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from use.errors import InvalidArgumentError
from use.qbeast.cube import cube_sort_key, symbols_per_level
from use.qbeast.domains import CubeLookup
from use.qbeast.weight import MIN_WEIGHT


@dataclass(frozen=True)
class RollupPlan:
    """`group_of[cube]` = the cube whose file holds it; `file_of_group[group cube]` = file index.

    File indexes are dense (0..num_files-1) in cube order of the group cubes.
    """

    group_of: Mapping[str, str]
    file_of_group: Mapping[str, int]

    @property
    def num_files(self) -> int:
        return len(self.file_of_group)

    def file_of(self, cube: str, dimensions: int) -> int:
        """File index for a cube: its own group's, or its nearest ancestor's that is in the plan."""
        spl = symbols_per_level(dimensions)
        c: str | None = cube
        while c is not None:
            g = self.group_of.get(c)
            if g is not None:
                return self.file_of_group[g]
            c = c[:-spl] if c else None
        raise InvalidArgumentError(f"cube {cube!r} has no ancestor in the rollup plan (the root is missing)")

    def file_lookup(self) -> CubeLookup:
        """Cube -> file index as a vectorized lookup table (for `use.qbeast.estimate.assign_cubes`)."""
        return CubeLookup({c: self.file_of_group[g] for c, g in self.group_of.items()})


def rollup(
    sizes: Mapping[str, int],
    limit: int,
    dimensions: int,
    *,
    cube_weights: Mapping[str, int] | None = None,
    sample_weight: int | None = None,
    whole: Collection[str] = frozenset(),
) -> RollupPlan:
    """Group cubes bottom-up until each group holds at least `limit` rows or reaches the root.

    `sample_weight` (Weight(f) of the sample to serve, with `cube_weights` the revision's cube
    maxWeights) keeps groups that no sample(f) reads out of files that it does read (module
    docstring). A cube whose parent has no known weight counts as sampled (the conservative side).
    A cube in `whole` keeps its group whatever its size (a rewrite's complete inner cubes:
    `use.qbeast.index_plan.whole_inner_cubes`); smaller groups below it still join it.
    """
    if limit < 1:
        raise InvalidArgumentError(f"rollup limit must be a positive int, got {limit}")
    if sample_weight is not None and cube_weights is None:
        raise InvalidArgumentError("a sampling-aware rollup (sample_weight) needs the revision's cube_weights")
    spl = symbols_per_level(dimensions)
    weights = cube_weights or {}

    def sampled(cube: str) -> bool:
        if sample_weight is None or not cube:
            return True
        return int(weights.get(cube[:-spl], MIN_WEIGHT)) + 1 < int(sample_weight)

    members: dict[str, list[str]] = {c: [c] for c in sizes}
    totals: dict[str, int] = {c: int(s) for c, s in sizes.items()}
    pooled: dict[str, str] = {}  # sampled cube -> the group pooling its small non-sampled children
    heap = [(-(len(c) // spl), cube_sort_key(c), c) for c in sizes]
    heapq.heapify(heap)
    while heap:
        _, _, cube = heapq.heappop(heap)
        if totals[cube] >= limit or not cube or cube in whole:
            continue
        parent = cube[:-spl]
        if sample_weight is not None and not sampled(cube) and sampled(parent):
            # A group's key is its shallowest cube: not sampled here means none of it is.
            pool = pooled.setdefault(parent, cube)
            if pool != cube:
                members[pool].extend(members.pop(cube))
                totals[pool] += totals.pop(cube)
            continue
        if parent in members:
            members[parent].extend(members.pop(cube))
            totals[parent] += totals.pop(cube)
        else:
            members[parent] = members.pop(cube)
            totals[parent] = totals.pop(cube)
            heapq.heappush(heap, (-(len(parent) // spl), cube_sort_key(parent), parent))
    groups = sorted(members, key=cube_sort_key)
    file_of_group = {g: i for i, g in enumerate(groups)}
    group_of = {c: g for g in groups for c in members[g]}
    # A group named after a cube that had no size of its own still owns that cube's rows.
    for g in groups:
        group_of.setdefault(g, g)
    return RollupPlan(group_of, file_of_group)
