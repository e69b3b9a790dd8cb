"""Per-partition cube-domain estimation (qbeast-format spec §3.2), vectorized with numpy.

The write estimates every cube's maxWeight before it assigns any row, from the *domain* of each
cube: how many rows of the input fall inside its region. Each Spark partition builds a small local
OTree over its own rows (with a per-partition cube capacity, `groupCubeSize`) and reports
`(cube, domain)` pairs; the driver sums them (`use.qbeast.estimate`).

The upstream builder feeds rows one by one, in ascending weight order, to the first cube on their
root-to-leaf path that still accepts them. Because a cube's acceptance depends only on the set of
rows that reach it (the smallest-weight rows win), the same result comes out level by level: at each
depth, group the rows not yet taken by their cube at that depth, sort each group by weight, let the
cube take the first `groupCubeSize` eligible rows and send the rest one level down. That is a
handful of numpy sorts per level instead of a Python object per row.

Existing cubes matter on an append to the same revision: an existing *inner* cube (maxWeight below
`MAX_WEIGHT`) only accepts rows with a strictly smaller weight, so new rows fill the tree below the
cubes that are already full; an existing leaf behaves like a new cube.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from use.errors import InvalidArgumentError
from use.qbeast.cube import container_symbols, cube_strings_at_depth, symbols_per_level
from use.qbeast.weight import MAX_WEIGHT, fraction

MIN_GROUP_CUBE_SIZE: int = 30
"""Floor of the per-partition cube capacity (upstream issue #104: smaller groups estimate badly)."""

DEFAULT_BUFFER_CAPACITY: int = 100_000
"""`spark.qbeast.index.cubeDomainsBufferCapacity`: rows estimated together in one local tree."""

_INITIAL_DEPTH: int = 12
# Smallest positive `1 - nw(parent)`; only reached if a full cube's last weight is MAX_WEIGHT.
_MIN_REMAINING_FRACTION: float = 1.0 / 4294967295.0


def group_cube_size(desired_cube_size: int, num_partitions: int, num_elements: int, buffer_capacity: int) -> int:
    """The per-partition cube capacity: the desired size split over the local trees that will be built.

    `max(30, desired // max(numPartitions, numElements // bufferCapacity))` with integer divisions,
    as upstream: each partition (or each buffer of rows) sees only a share of the rows, so its cubes
    must hold only that share of `desiredCubeSize` for the summed domains to be right.
    """
    if desired_cube_size < 1:
        raise InvalidArgumentError(f"desired_cube_size must be a positive int, got {desired_cube_size}")
    if buffer_capacity < 1:
        raise InvalidArgumentError(f"buffer_capacity must be a positive int, got {buffer_capacity}")
    groups = max(int(num_partitions), int(num_elements) // int(buffer_capacity), 1)
    return max(MIN_GROUP_CUBE_SIZE, int(desired_cube_size) // groups)


ESTIMATION_ROWS_PER_CUBE: int = 1_000
"""Rows of the input the domain estimation looks at per cube of the desired size."""

ESTIMATION_MIN_ROWS: int = 100_000
"""Below this many rows the estimation always reads every row."""


def estimation_fraction(desired_cube_size: int, num_rows: int) -> float:
    """The share of the input the write's domain estimation reads (1.0: all of it).

    A cube's weight comes from its domain, the rows in its region; a Bernoulli sample of fraction f
    estimates every domain without bias (scaled by 1/f), with a relative error of about
    `1/sqrt(f * domain)`. The smallest domains that set an inner cube's weight hold about a desired
    cube of rows, so `f = ESTIMATION_ROWS_PER_CUBE / desired_cube_size` keeps that error near 3%,
    well inside the +-20% a cube's size varies by anyway. Regions no sampled row reaches get no
    estimate; rows there land in the first unestimated cube on their path, a leaf, as rows past
    any estimate always do. Small inputs, or fractions above one half, are read in full.
    """
    if desired_cube_size < 1:
        raise InvalidArgumentError(f"desired_cube_size must be a positive int, got {desired_cube_size}")
    if num_rows <= ESTIMATION_MIN_ROWS:
        return 1.0
    fraction = max(ESTIMATION_ROWS_PER_CUBE / desired_cube_size, ESTIMATION_MIN_ROWS / num_rows)
    return 1.0 if fraction > 0.5 else float(fraction)


@dataclass(frozen=True)
class CubeDomains:
    """`(cube, domain)` pairs: `cubes` is a numpy `S` array of cube strings, `domains` float64.

    A cube can appear more than once (one entry per local tree); `aggregate()` sums them."""

    cubes: np.ndarray
    domains: np.ndarray

    def __post_init__(self) -> None:
        if self.cubes.shape != self.domains.shape or self.cubes.ndim != 1:
            raise InvalidArgumentError(
                f"cubes and domains must be 1-d arrays of one length, got {self.cubes.shape} and {self.domains.shape}"
            )

    def __len__(self) -> int:
        return int(self.cubes.shape[0])

    @staticmethod
    def empty() -> CubeDomains:
        return CubeDomains(np.zeros(0, dtype="S1"), np.zeros(0, dtype=np.float64))

    @staticmethod
    def concat(parts: Iterable[CubeDomains]) -> CubeDomains:
        items = [p for p in parts if len(p)]
        if not items:
            return CubeDomains.empty()
        width = max(1, max(p.cubes.dtype.itemsize for p in items))
        return CubeDomains(
            np.concatenate([p.cubes.astype(f"S{width}") for p in items]),
            np.concatenate([p.domains for p in items]),
        )

    def aggregate(self) -> CubeDomains:
        """One entry per cube, domains summed (summing is how local trees merge, §3.2)."""
        if not len(self):
            return self
        uniq, inverse = np.unique(self.cubes, return_inverse=True)
        sums = np.bincount(inverse.reshape(-1), weights=self.domains, minlength=uniq.shape[0])
        return CubeDomains(uniq, sums.astype(np.float64))

    def to_dict(self) -> dict[str, float]:
        agg = self.aggregate()
        return {c.decode("ascii"): float(d) for c, d in zip(agg.cubes.tolist(), agg.domains.tolist(), strict=False)}


KEY_SYMBOLS: int = 8
"""Cube strings of up to this many symbols map to uint64 keys in the same order (`_as_u8`)."""


class CubeLookup:
    """A small cube-string -> int64 table that numpy can probe for many rows at once.

    Cubes are few (the index's), rows are many: one `np.searchsorted` over a sorted `S` array
    answers a whole batch without a Python dict lookup per row.
    """

    def __init__(self, values: Mapping[str, int] | None = None) -> None:
        items = sorted((values or {}).items())
        width = max([1] + [len(k) for k, _ in items])
        self._cubes = np.array([k.encode("ascii") for k, _ in items], dtype=f"S{width}")
        self._values = np.array([int(v) for _, v in items], dtype=np.int64)
        self.max_depth_symbols = max([0] + [len(k) for k, _ in items])
        self._keys = _as_u8(self._cubes) if width <= 8 else None

    def __len__(self) -> int:
        return int(self._cubes.shape[0])

    def lookup(self, cubes: np.ndarray, default: int) -> tuple[np.ndarray, np.ndarray]:
        """`(values, found)` per probed cube string; `default` where the cube is absent."""
        out = np.full(cubes.shape[0], default, dtype=np.int64)
        found = np.zeros(cubes.shape[0], dtype=bool)
        if not len(self) or not cubes.shape[0]:
            return out, found
        width = max(self._cubes.dtype.itemsize, cubes.dtype.itemsize, 1)
        if width <= 8:
            # Cube strings never hold NUL bytes, so NUL-padded to 8 bytes and read big-endian they
            # become integers in the same order: one integer searchsorted, about twice as fast
            # as comparing byte strings (this is the hot loop of the row assignment).
            table, probe = _as_u8(self._cubes), _as_u8(cubes)
        else:
            table = self._cubes.astype(f"S{width}")
            probe = cubes.astype(f"S{width}")
        pos = np.minimum(np.searchsorted(table, probe), table.shape[0] - 1)
        found = table[pos] == probe
        out[found] = self._values[pos[found]]
        return out, found

    def lookup_keys(self, keys: np.ndarray, default: int) -> tuple[np.ndarray, np.ndarray]:
        """`lookup` for cube strings given as `KEY_SYMBOLS`-symbol integer keys (`_as_u8` order), for
        callers that build the keys of many rows level by level; only for tables of such cubes."""
        if self._keys is None:
            raise InvalidArgumentError(f"cubes longer than {KEY_SYMBOLS} symbols have no integer key; use lookup()")
        out = np.full(keys.shape[0], default, dtype=np.int64)
        if not len(self) or not keys.shape[0]:
            return out, np.zeros(keys.shape[0], dtype=bool)
        pos = np.minimum(np.searchsorted(self._keys, keys), self._keys.shape[0] - 1)
        found = self._keys[pos] == keys
        out[found] = self._values[pos[found]]
        return out, found


class JointLookup:
    """Two cube tables probed with one search: the row assignment asks both the cube weights and
    the rollup's files about the same cube strings at every depth, and the search is its hot spot."""

    def __init__(self, first: CubeLookup, second: CubeLookup) -> None:
        keys = sorted(set(first._cubes.tolist()) | set(second._cubes.tolist()))
        strings = np.array(keys, dtype=f"S{max([1] + [len(k) for k in keys])}")
        self._index = CubeLookup({k.decode("ascii"): i for i, k in enumerate(keys)})
        self._first, self._has_first = first.lookup(strings, 0)
        self._second, self._has_second = second.lookup(strings, 0)
        self.max_depth_symbols = max(first.max_depth_symbols, second.max_depth_symbols)
        self.first_max_depth_symbols = first.max_depth_symbols

    @property
    def has_keys(self) -> bool:
        """Whether every cube of both tables has an integer key (`CubeLookup.lookup_keys`)."""
        return self.max_depth_symbols <= KEY_SYMBOLS

    def lookup(self, cubes: np.ndarray, defaults: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`(first values, found in first, second values, found in second)` per probed cube string."""
        return self._answer(*self._index.lookup(cubes, 0), defaults)

    def lookup_keys(self, keys: np.ndarray, defaults: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`lookup` for integer cube keys (`CubeLookup.lookup_keys`)."""
        return self._answer(*self._index.lookup_keys(keys, 0), defaults)

    def _answer(
        self, pos: np.ndarray, found: np.ndarray, defaults: tuple[int, int]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        has_first = found & self._has_first[pos] if len(self._index) else found
        has_second = found & self._has_second[pos] if len(self._index) else found
        first = np.where(has_first, self._first[pos] if len(self._index) else 0, defaults[0])
        second = np.where(has_second, self._second[pos] if len(self._index) else 0, defaults[1])
        return first, has_first, second, has_second


def _as_u8(strings: np.ndarray) -> np.ndarray:
    """`S<=8` strings as big-endian uint64 keys (NUL-padded), order preserved."""
    return np.ascontiguousarray(strings.astype("S8")).view(">u8").astype(np.uint64)


class ExistingInnerCubes:
    """The existing inner cubes of the revision being appended to.

    Only inner cubes are kept: an existing leaf (maxWeight == MAX_WEIGHT) accepts rows like a cube
    that is not in the index at all.
    """

    def __init__(self, cube_weights: Mapping[str, int] | None = None) -> None:
        self._table = CubeLookup({c: int(w) for c, w in (cube_weights or {}).items() if int(w) < MAX_WEIGHT})

    def __len__(self) -> int:
        return len(self._table)

    def lookup(self, cubes: np.ndarray) -> np.ndarray:
        """Existing maxWeight per cube string (int64), `MAX_WEIGHT + 1` where the cube is not inner."""
        return self._table.lookup(cubes, MAX_WEIGHT + 1)[0]


@dataclass(frozen=True)
class _Level:
    """The local cubes of one depth: strings, parent index (into the previous level), count, nw."""

    cubes: np.ndarray
    parent: np.ndarray
    count: np.ndarray
    normalized_weight: np.ndarray


def _level_codes(symbols: np.ndarray, depth: int, spl: int) -> np.ndarray:
    """One int64 code per row for its child step at `depth` (the level's symbol bytes packed)."""
    cols = symbols[:, depth * spl : (depth + 1) * spl].astype(np.int64)
    code = np.zeros(symbols.shape[0], dtype=np.int64)
    for k in range(cols.shape[1]):
        code = code * 256 + cols[:, k]
    return code


def _regroup(parent_gid: np.ndarray, codes: np.ndarray, num_parents: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense child group ids from (parent group, level code): `(gid, parent_of_group, first_row)`."""
    if num_parents < (1 << 62) // (1 << 24) and codes.max(initial=0) < (1 << 24):
        key = parent_gid.astype(np.int64) * (1 << 24) + codes
        uniq, first, gid = np.unique(key, return_index=True, return_inverse=True)
        return gid.reshape(-1), (uniq >> 24).astype(np.int64), first
    # Very wide levels (more than 24 dimensions): fall back to a row-wise unique.
    stacked = np.stack([parent_gid.astype(np.int64), codes], axis=1)
    uniq, first, gid = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
    return gid.reshape(-1), uniq[:, 0].astype(np.int64), first


def _local_tree(points: np.ndarray, weights: np.ndarray, existing: ExistingInnerCubes, limit: int) -> list[_Level]:
    """Fill one local OTree (one buffer of rows) level by level; see the module docstring."""
    n, d = points.shape
    spl = symbols_per_level(d)
    max_depth = _INITIAL_DEPTH
    # Rows in ascending weight order once (ties keep their input order): every level then only
    # needs a stable sort by group, and the rows a level passes down stay in weight order.
    by_weight = np.argsort(weights, kind="stable")
    rows_pts = points[by_weight]
    rows_w = weights[by_weight].astype(np.int64)
    symbols: np.ndarray = container_symbols(rows_pts, max_depth)  # a CubeSymbols, and so is each slice of it
    gid = np.zeros(n, dtype=np.int64)
    level_cubes = np.zeros(1, dtype="S1")
    level_parent = np.full(1, -1, dtype=np.int64)
    levels: list[_Level] = []
    depth = 0
    while True:
        num_groups = level_cubes.shape[0]
        ew = existing.lookup(level_cubes)  # per group; MAX_WEIGHT + 1 = no constraint
        eligible = rows_w < ew[gid]
        order = np.argsort(gid, kind="stable") if num_groups > 1 else np.arange(gid.shape[0])
        s_gid = gid[order]
        s_elig = eligible[order]
        starts = np.ones(s_gid.shape[0], dtype=bool)
        starts[1:] = s_gid[1:] != s_gid[:-1]
        start_pos = np.maximum.accumulate(np.where(starts, np.arange(s_gid.shape[0]), 0))
        cum = np.cumsum(s_elig)
        before: np.ndarray = cum[start_pos] - s_elig[start_pos]
        rank = cum - before - 1  # rank among the eligible rows of the group, weights ascending
        s_taken = s_elig & (rank < limit)
        taken = np.empty_like(s_taken)
        taken[order] = s_taken

        count = np.bincount(gid[taken], minlength=num_groups).astype(np.int64)
        last = np.full(num_groups, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(last, gid[taken], rows_w[taken])
        full = count >= limit
        is_inner = ew <= MAX_WEIGHT
        nw = np.where(count > 0, limit / np.maximum(count, 1), np.inf).astype(np.float64)
        if np.any(full):
            nw[full] = fraction(last[full])
        # An existing inner cube stays inner: if it did not fill up, every row it could accept
        # (weight < its maxWeight) is in it, so its children see the weights above that maxWeight.
        inner_not_full = is_inner & ~full
        if np.any(inner_not_full):
            nw[inner_not_full] = fraction(ew[inner_not_full])
        levels.append(_Level(level_cubes, level_parent, count, nw))

        rest = ~taken
        if not np.any(rest):
            return levels
        rows_w = rows_w[rest]
        rows_pts = rows_pts[rest]
        symbols = symbols[rest]
        parent_gid = gid[rest]
        if depth + 1 > max_depth:
            # Rows still unplaced below the computed depth (dense or duplicated points): recompute
            # their symbols deeper. Rare, and only for the remaining rows.
            max_depth *= 2
            symbols = container_symbols(rows_pts, max_depth)
        codes = _level_codes(symbols, depth, spl)
        gid, level_parent, first = _regroup(parent_gid, codes, num_groups)
        depth += 1
        level_cubes = cube_strings_at_depth(symbols[first], depth)


def _domains_of(levels: list[_Level]) -> CubeDomains:
    """Bottom-up tree sizes, then `domain = treeSize / (1 - nw(parent))`; the root's is its tree size."""
    tree = [lvl.count.astype(np.float64) for lvl in levels]
    out_cubes: list[np.ndarray] = []
    out_domains: list[np.ndarray] = []
    for k in range(len(levels) - 1, 0, -1):
        lvl = levels[k]
        parent_nw = levels[k - 1].normalized_weight[lvl.parent]
        remaining = np.maximum(1.0 - parent_nw, _MIN_REMAINING_FRACTION)
        out_cubes.append(lvl.cubes)
        out_domains.append(tree[k] / remaining)
        tree[k - 1] = tree[k - 1] + np.bincount(lvl.parent, weights=tree[k], minlength=tree[k - 1].shape[0])
    out_cubes.append(levels[0].cubes)
    out_domains.append(tree[0])
    return CubeDomains.concat(CubeDomains(c, dm) for c, dm in zip(out_cubes, out_domains, strict=False))


def estimate_domains(
    points: np.ndarray,
    weights: np.ndarray,
    *,
    group_cube_size: int,
    existing: ExistingInnerCubes | None = None,
    buffer_capacity: int = DEFAULT_BUFFER_CAPACITY,
) -> CubeDomains:
    """Cube domains of one partition's rows (`points` (n, d) in [0,1], `weights` int32 row hashes).

    Rows are processed in buffers of `buffer_capacity`, each its own local tree, like upstream's
    flushes; the result is summed per cube.
    """
    pts = np.asarray(points, dtype=np.float64)
    w = np.asarray(weights)
    if pts.ndim != 2 or pts.shape[0] != w.shape[0]:
        raise InvalidArgumentError(f"points must be (n, d) and weights (n,), got shapes {pts.shape} and {w.shape}")
    if group_cube_size < 1:
        raise InvalidArgumentError(f"group_cube_size must be a positive int, got {group_cube_size}")
    if buffer_capacity < 1:
        raise InvalidArgumentError(f"buffer_capacity must be a positive int, got {buffer_capacity}")
    existing = existing or ExistingInnerCubes()
    parts = []
    for start in range(0, pts.shape[0], buffer_capacity):
        stop = start + buffer_capacity
        parts.append(_domains_of(_local_tree(pts[start:stop], w[start:stop], existing, group_cube_size)))
    return CubeDomains.concat(parts).aggregate()
