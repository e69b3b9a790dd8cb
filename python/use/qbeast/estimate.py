"""Driver-side cube weight estimation (qbeast-format spec §3.3).

The partitions report `(cube, domain)` pairs (`use.qbeast.domains`); here they are summed, merged
with the domains of the index being appended to, and turned top-down into one maxWeight per cube:
a cube whose domain holds more rows than `desiredCubeSize` keeps the fraction
`desiredCubeSize / domain` of its region on top of what its parent keeps, everything else is a leaf.
The estimated block sizes feed the rollup (`use.qbeast.rollup`), and `assign_cubes` places every
row in its cube with the estimated weights (§3.4), vectorized over a batch.

Cubes are few (about rows / desiredCubeSize), so plain dicts keyed by cube string are the right
shape; no per-row work happens here.

Appends re-estimate the cubes of the existing index from their grown domains, as upstream does, so
a cube keeps holding about `desiredCubeSize` rows however much data arrives: its new maxWeight is
`min(existing, estimate)`. It never rises, so the rows already written in the cube's older blocks
stay valid; those with a weight above the lowered maxWeight become offsets that the optimizer's
compaction moves down to the children (the index status takes the minimum over a cube's blocks).
Keeping existing weights fixed instead would make the root and every inner cube grow with each
append and leave the optimizer nothing it could repair. Where the append writes no row into a cube
whose weight it lowered, its commit records the weight with a block holding no row
(`use.qbeast.weight_records`), or a reader walking the tree would stop at the cube above the rows
the append sent below it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from use.errors import InvalidArgumentError
from use.qbeast.cube import container_symbols, cube_strings_at_depth, symbols_per_level
from use.qbeast.domains import KEY_SYMBOLS, JointLookup
from use.qbeast.weight import MAX_WEIGHT, MIN_WEIGHT, fraction, normalized_weight_to_weight


def parent_string(cube: str, spl: int) -> str | None:
    """Parent of a cube string (`None` for the root), given the symbols per level."""
    return cube[:-spl] if cube else None


@dataclass(frozen=True)
class WeightEstimate:
    """Result of the driver merge: estimated maxWeight per cube and estimated rows per new block."""

    cube_weights: Mapping[str, int] = field(default_factory=dict)
    block_sizes: Mapping[str, int] = field(default_factory=dict)


def merge_domains(input_domains: Mapping[str, float], existing_domains: Mapping[str, float] | None) -> dict[str, float]:
    """`existingDomain + inputDomain` per cube (a new revision or an empty index passes `None`)."""
    merged = {c: float(d) for c, d in (existing_domains or {}).items()}
    for c, d in input_domains.items():
        merged[c] = merged.get(c, 0.0) + float(d)
    return merged


def estimate_cube_weights(
    domains: Mapping[str, float],
    desired_cube_size: int,
    dimensions: int,
    fixed_weights: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Top-down maxWeight per cube: `nw = nw(parent) + desired / domain`, or a leaf when the domain
    fits in one cube. Children of leaves and of cubes without a weight get no weight (rows stop
    above them). `fixed_weights` are the existing inner cubes: their weight may only go down, and
    one with no domain to re-estimate from keeps its weight.
    """
    if desired_cube_size < 1:
        raise InvalidArgumentError(f"desired_cube_size must be a positive int, got {desired_cube_size}")
    spl = symbols_per_level(dimensions)
    fixed = {c: int(w) for c, w in (fixed_weights or {}).items() if int(w) < MAX_WEIGHT}
    by_depth: dict[int, list[str]] = {}
    for c in set(domains) | set(fixed):
        by_depth.setdefault(len(c) // spl, []).append(c)
    nws: dict[str, float] = {}
    for depth in sorted(by_depth):
        for cube in sorted(by_depth[depth]):
            if cube in fixed and cube not in domains:
                nws[cube] = fraction(fixed[cube])
                continue
            parent = parent_string(cube, spl)
            if parent is None:
                pw = 0.0
            else:
                if parent not in nws or nws[parent] >= 1.0:
                    continue
                pw = nws[parent]
            domain = float(domains[cube])
            # Upstream computes treeSize = domain * max(1 - pw, 1), which is always the domain.
            if domain <= desired_cube_size:
                nws[cube] = 1.0
            else:
                nws[cube] = pw + desired_cube_size / float(int(domain))
            if cube in fixed:
                nws[cube] = min(nws[cube], fraction(fixed[cube]))
    weights = {c: normalized_weight_to_weight(nw) for c, nw in nws.items()}
    return {c: (min(w, fixed[c]) if c in fixed else w) for c, w in weights.items()}


def estimate_block_sizes(input_domains: Mapping[str, float], cube_weights: Mapping[str, int], dimensions: int) -> dict[str, int]:
    """Rows each cube is expected to receive from this write: its weight slice times its domain.

    `int((fraction(w(c)) - fraction(w(parent))) * inputDomain(c))`, with `MIN_WEIGHT` above the root
    and `MAX_WEIGHT` for a cube without an estimate; clamped at 0.
    """
    spl = symbols_per_level(dimensions)
    out: dict[str, int] = {}
    for cube, domain in input_domains.items():
        parent = parent_string(cube, spl)
        lo = MIN_WEIGHT if parent is None else cube_weights.get(parent, MAX_WEIGHT)
        hi = cube_weights.get(cube, MAX_WEIGHT)
        out[cube] = max(0, int((fraction(hi) - fraction(lo)) * float(domain)))
    return out


def estimate(
    input_domains: Mapping[str, float],
    desired_cube_size: int,
    dimensions: int,
    *,
    existing_weights: Mapping[str, int] | None = None,
    existing_domains: Mapping[str, float] | None = None,
) -> WeightEstimate:
    """The whole driver step: merge, estimate weights, estimate block sizes.

    For a new revision, an overwrite or an empty index pass neither `existing_*` argument: the
    index starts from scratch.
    """
    merged = merge_domains(input_domains, existing_domains)
    weights = estimate_cube_weights(merged, desired_cube_size, dimensions, existing_weights)
    return WeightEstimate(weights, estimate_block_sizes(input_domains, weights, dimensions))


# --- pass 2: rows -> cubes (§3.4) ---------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    """Per row: its cube (Arrow string array), the cube's maxWeight and the file index (int32)."""

    cubes: pa.Array
    max_weights: np.ndarray
    files: np.ndarray


def _strings_from_symbols(symbols: np.ndarray, depths: np.ndarray, spl: int) -> pa.Array:
    """Arrow strings of each row's cube prefix (`depths[r] * spl` symbols), built from buffers."""
    n = symbols.shape[0]
    lengths = depths.astype(np.int64) * spl
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    if symbols.shape[1]:
        keep = np.arange(symbols.shape[1])[None, :] < lengths[:, None]
        data = np.ascontiguousarray(np.asarray(symbols, dtype=np.uint8)[keep])
    else:
        data = np.zeros(0, dtype=np.uint8)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data.tobytes()))


def assign_cubes(
    points: np.ndarray,
    weights: np.ndarray,
    table: JointLookup,
) -> Assignment:
    """Walk each row down its containers and stop at the first cube whose maxWeight is at least the
    row's weight, or at the first cube with no weight (its block maxWeight is then `MAX_WEIGHT`).

    `table` joins the cube maxWeights (first) and the rollup plan's files (second), built once per
    plan: `JointLookup(CubeLookup(cube_weights), plan.file_lookup())`. The row's file is the file of
    its cube or of the nearest ancestor present in the plan (which always holds the root).
    """
    pts = np.asarray(points, dtype=np.float64)
    w = np.asarray(weights).astype(np.int64)
    n, d = pts.shape
    spl = symbols_per_level(d)
    # The walk ends at most one level below the deepest weighted cube.
    max_depth = table.first_max_depth_symbols // spl + 1
    symbols = container_symbols(pts, max_depth)
    depth_of = np.zeros(n, dtype=np.int32)
    weight_of = np.full(n, MAX_WEIGHT, dtype=np.int64)
    file_of = np.full(n, -1, dtype=np.int64)
    active = np.arange(n)
    # Cubes of up to KEY_SYMBOLS symbols are probed as integer keys grown one level at a time,
    # deeper ones as strings cut from the symbols (measured: the keyed walk ~20% faster).
    keyed = table.has_keys and max_depth * spl <= KEY_SYMBOLS
    keys = np.zeros(n, dtype=np.uint64)
    for depth in range(max_depth + 1):
        if not active.shape[0]:
            break
        if keyed:
            for k in range((depth - 1) * spl, depth * spl) if depth else ():
                keys |= symbols[active, k].astype(np.uint64) << np.uint64(8 * (KEY_SYMBOLS - 1 - k))
            cw, has_weight, fid, has_file = table.lookup_keys(keys, (MAX_WEIGHT, -1))
        else:
            strings = cube_strings_at_depth(symbols[active], depth)
            cw, has_weight, fid, has_file = table.lookup(strings, (MAX_WEIGHT, -1))
        file_of[active[has_file]] = fid[has_file]
        stop = ~has_weight | (w[active] <= cw) | (depth == max_depth)
        stopped = active[stop]
        depth_of[stopped] = depth
        weight_of[stopped] = cw[stop]
        active = active[~stop]
        keys = keys[~stop]
    if n and np.any(file_of < 0):
        raise InvalidArgumentError("the rollup plan has no file for some rows (it must hold the root cube)")
    return Assignment(
        _strings_from_symbols(symbols, depth_of, spl),
        weight_of.astype(np.int32),
        file_of.astype(np.int32),
    )
