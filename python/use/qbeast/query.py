"""Which cubes and files a query must read (qbeast-format spec §1.7, §2.4, §5.2). Pure: no Spark, no I/O.

A filter is first turned into a *query space* per revision: the literals are mapped into the
revision's [0,1]^d with each column's own transformation, so a predicate on raw values becomes a box
of the OTree. The box is then tested against every cube of the revision at once (numpy over the
distinct cube strings), the sample's weight range cuts the descent below cubes whose weight already
covers the sample, and a file survives when one of its blocks does. Staging files (revision 0) have
no tree, so only the Delta min/max statistics can prune them.

Pruning here is always conservative: a file is dropped only when no row in it can satisfy the
filter and fall in the weight range. Bounds are widened by a hair (`_SLACK`) so that a literal that
rounds differently in the writer's vectorized transform than in our scalar one can never lose a
row; the cost is at most a neighbouring cube.

Date and timestamp literals are widened much more (`_ZONE_SLACK_MS`, both ways). qbeast-spark
transforms a date as `java.sql.Date.getTime`, the local midnight of the writing JVM's time zone,
so the rows of a table written on a JVM outside UTC sit up to that zone's offset away from where
a UTC-midnight literal lands (a UTC+1 writer: one hour), and Spark's conversion of values to Java
dates and timestamps follows the JVM zone's historical rules too. Widening by the largest offset a
JVM zone can have (18 hours) keeps every row, whatever zone wrote it, for a neighbouring cube or
two of extra reads; literals before the Gregorian calendar (where Spark's Julian rebasing moves
values by days) do not prune at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.delta.predicates import (
    And,
    Comparison,
    InList,
    IsNotNull,
    IsNull,
    Not,
    Or,
    Predicate,
    Unknown,
)
from use.delta.skipping import snapshot_files_matching
from use.errors import InvalidArgumentError
from use.qbeast.cube import CubeId, intersects, string_bounds
from use.qbeast.transform import DATE, TIMESTAMP, EmptyTransformation, HashTransformation, to_number
from use.qbeast.weight import MIN_WEIGHT

# The spec's epsilon turning `x <= t` into the half-open `x < t + eps` (§1.7).
EPSILON: float = 1.1103e-16
# Extra widening of every transformed bound; see the module docstring.
_SLACK: float = 1e-9
# Widening of date and timestamp literals, in epoch milliseconds: java.time.ZoneOffset.MAX (18 h).
_ZONE_SLACK_MS: int = 18 * 3_600_000
# Date/timestamp literals before this (1583-01-01 UTC, after the Gregorian switch) do not prune.
_EARLIEST_PRUNING_MS: int = -12_212_553_600_000
_TEMPORAL_TYPES = frozenset({DATE, TIMESTAMP})
# Above this many boxes a disjunction stops being split (the space becomes coarser, never wrong).
_MAX_BOXES: int = 64


# --- query spaces -----------------------------------------------------------------------------


@dataclass(frozen=True)
class AllSpace:
    """The whole [0,1]^d: every cube intersects."""

    def intersects(self, cube: CubeId) -> bool:
        return True


@dataclass(frozen=True)
class EmptySpace:
    """No point can match: no cube intersects."""

    def intersects(self, cube: CubeId) -> bool:
        return False


@dataclass(frozen=True)
class QuerySpaceFromTo:
    """A box of already-transformed bounds; `None` means 0.0 (from) or 1.0 (to), per §1.7."""

    from_: tuple[float | None, ...]
    to: tuple[float | None, ...]

    @property
    def dimensions(self) -> int:
        return len(self.from_)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        f = np.array([0.0 if x is None else x for x in self.from_], dtype=np.float64)
        t = np.array([1.0 if x is None else x for x in self.to], dtype=np.float64)
        return f, t

    def intersects(self, cube: CubeId) -> bool:
        lo, hi = cube.bounds()
        f, t = self.bounds()
        return bool(intersects(np.array([lo]), np.array([hi]), f, t)[0])

    def intersects_many(self, cube_from: np.ndarray, cube_to: np.ndarray) -> np.ndarray:
        f, t = self.bounds()
        return intersects(cube_from, cube_to, f, t)


QuerySpace = AllSpace | EmptySpace | QuerySpaceFromTo


def space_intersects_many(spaces: Sequence[QuerySpace], cube_from: np.ndarray, cube_to: np.ndarray) -> np.ndarray:
    """Cubes (given by bound arrays) that intersect any of a union of spaces."""
    out = np.zeros(cube_from.shape[0], dtype=bool)
    for space in spaces:
        if isinstance(space, AllSpace):
            return np.ones(cube_from.shape[0], dtype=bool)
        if isinstance(space, QuerySpaceFromTo):
            out |= space.intersects_many(cube_from, cube_to)
    return out


# --- predicate -> boxes -----------------------------------------------------------------------


def _is_hash(transformation: Any) -> bool:
    """Hash transformations only support point searches (their order is meaningless)."""
    return isinstance(transformation, HashTransformation)


def _is_empty_transformation(transformation: Any) -> bool:
    return isinstance(transformation, EmptyTransformation)


def _temporal_type(transformation: Any) -> str | None:
    """DATE or TIMESTAMP when the transformation orders dates or timestamps (linear, identity,
    numeric quantiles), else None."""
    t = getattr(transformation, "ordered_data_type", None) or getattr(transformation, "data_type", None)
    return t if t in _TEMPORAL_TYPES else None


@dataclass(frozen=True)
class _Box:
    """Per dimension an inclusive [lo, hi] interval in transformed space (`hi` widened later)."""

    lo: tuple[float, ...]
    hi: tuple[float, ...]

    def meet(self, other: _Box) -> _Box | None:
        lo = tuple(max(a, b) for a, b in zip(self.lo, other.lo, strict=False))
        hi = tuple(min(a, b) for a, b in zip(self.hi, other.hi, strict=False))
        if any(a > b for a, b in zip(lo, hi, strict=False)):
            return None
        return _Box(lo, hi)


# `None` = the whole space (no usable constraint); a list = a union of boxes ([] = nothing).
_Boxes = list[_Box] | None


def _push_not(p: Predicate, negate: bool) -> Predicate:
    """Push NOT down to the leaves with SQL semantics (NOT(x<5) holds exactly when x>=5 holds)."""
    if isinstance(p, Not):
        return _push_not(p.child, not negate)
    if isinstance(p, And):
        left, right = _push_not(p.left, negate), _push_not(p.right, negate)
        return Or(left, right) if negate else And(left, right)
    if isinstance(p, Or):
        left, right = _push_not(p.left, negate), _push_not(p.right, negate)
        return And(left, right) if negate else Or(left, right)
    if not negate:
        return p
    if isinstance(p, Comparison):
        return p.negated()
    if isinstance(p, IsNull):
        return IsNotNull(p.column)
    if isinstance(p, IsNotNull):
        return IsNull(p.column)
    return Unknown(f"NOT {p}")


class _SpaceBuilder:
    """Maps predicates on one revision's indexed columns to boxes of its transformed space."""

    def __init__(self, columns: Sequence[str], transformations: Sequence[Any]) -> None:
        self.columns = list(columns)
        self.transformations = list(transformations)
        self.d = len(self.columns)
        self._dim: dict[str, int] = {}
        for i, name in enumerate(self.columns):
            self._dim.setdefault(name, i)
            self._dim.setdefault(name.lower(), i)
        self.full = _Box((0.0,) * self.d, (1.0,) * self.d)

    def dim_of(self, column: str) -> int | None:
        i = self._dim.get(column)
        return self._dim.get(column.lower()) if i is None else i

    def _transform(self, dim: int, value: Any) -> tuple[float, float] | None:
        """The coordinates rows equal to the literal may have, as a `(lo, hi)` interval (a point
        but for dates and timestamps, widened by `_ZONE_SLACK_MS`), or None when the transformation
        cannot take the literal."""
        if value is None:
            return None
        transformation = self.transformations[dim]
        temporal = _temporal_type(transformation)
        try:
            # Unclamped, so a bound beyond the revision's range is seen as such (an empty space).
            if temporal is None:
                lo = hi = float(transformation.transform_value(value, clamp=False))
            else:
                ms = to_number(value, temporal)
                if ms is None or ms < _EARLIEST_PRUNING_MS:
                    return None
                lo = float(transformation.transform_value(int(ms) - _ZONE_SLACK_MS, clamp=False))
                hi = float(transformation.transform_value(int(ms) + _ZONE_SLACK_MS, clamp=False))
        except Exception:  # noqa: BLE001 - a literal of another type than the column: no pruning on it
            return None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return None
        return (lo, hi) if lo <= hi else (hi, lo)

    def _interval(self, dim: int, lo: float | None, hi: float | None) -> _Boxes:
        """A one-dimension box; lo/hi are transformed bounds (None = open), already inclusive."""
        lo_v = 0.0 if lo is None else lo - _SLACK
        hi_v = 1.0 if hi is None else hi + _SLACK
        if lo_v > 1.0 or hi_v < 0.0 or lo_v > hi_v:
            return []
        lo_t = list(self.full.lo)
        hi_t = list(self.full.hi)
        lo_t[dim] = max(0.0, lo_v)
        hi_t[dim] = min(1.0, hi_v)
        return [_Box(tuple(lo_t), tuple(hi_t))]

    def _point(self, dim: int, value: Any) -> _Boxes:
        x = self._transform(dim, value)
        if x is None:
            return None
        return self._interval(dim, x[0], x[1])

    def boxes(self, p: Predicate) -> _Boxes:
        if isinstance(p, And):
            return self._meet(self.boxes(p.left), self.boxes(p.right))
        if isinstance(p, Or):
            left, right = self.boxes(p.left), self.boxes(p.right)
            if left is None or right is None:
                return None
            union = left + right
            return union if len(union) <= _MAX_BOXES else None
        if isinstance(p, Comparison):
            return self._comparison(p)
        if isinstance(p, InList):
            dim = self.dim_of(p.column)
            values = [v for v in p.values if v is not None]
            if dim is None:
                return None
            if not values:
                return []  # `x IN (NULL, ...)` is never true
            if len(values) <= _MAX_BOXES:
                out: list[_Box] = []
                for v in values:
                    b = self._point(dim, v)
                    if b is None:
                        return None
                    out.extend(b)
                return out
            if _is_hash(self.transformations[dim]):
                return None
            xs = [self._transform(dim, v) for v in values]
            spans = [x for x in xs if x is not None]
            if len(spans) < len(xs):
                return None
            return self._interval(dim, min(x[0] for x in spans), max(x[1] for x in spans))
        # IsNull/IsNotNull/Unknown (and anything else): nulls sit at the column's nullValue, which
        # pruning does not track; keep the whole space.
        return None

    def _comparison(self, p: Comparison) -> _Boxes:
        dim = self.dim_of(p.column)
        if dim is None or p.value is None:
            return None if p.value is not None else []
        if p.op == "=":
            return self._point(dim, p.value)
        if p.op == "!=" or _is_hash(self.transformations[dim]):
            return None
        x = self._transform(dim, p.value)
        if x is None:
            return None
        # Strict and non-strict bounds are both taken inclusively: coarser by one boundary value,
        # and immune to a strict bound rounding onto the row's own coordinate.
        if p.op in ("<", "<="):
            return self._interval(dim, None, x[1] + EPSILON)
        return self._interval(dim, x[0], None)

    def _meet(self, a: _Boxes, b: _Boxes) -> _Boxes:
        if a is None:
            return b
        if b is None:
            return a
        if len(a) * len(b) > _MAX_BOXES:
            return a if len(a) <= len(b) else b  # either side alone is a superset of the meet
        out = []
        for x in a:
            for y in b:
                m = x.meet(y)
                if m is not None:
                    out.append(m)
        return out


def query_spaces(predicate: Predicate | None, columns: Sequence[str], transformations: Sequence[Any]) -> list[QuerySpace]:
    """The union of spaces a predicate covers in one revision (§1.7, with OR split as in §5.2).

    Only predicates on the revision's indexed columns constrain the space; anything else leaves it
    whole. An `EmptyTransformation` (a staging or converted revision) has no space at all.
    """
    if len(columns) != len(transformations) or not columns:
        raise InvalidArgumentError(
            f"a revision needs one transformation per indexed column, got {len(columns)} columns and "
            f"{len(transformations)} transformations"
        )
    if any(_is_empty_transformation(t) for t in transformations):
        return [EmptySpace()]
    if predicate is None:
        return [AllSpace()]
    builder = _SpaceBuilder(columns, transformations)
    boxes = builder.boxes(_push_not(predicate, False))
    if boxes is None:
        return [AllSpace()]
    if not boxes:
        return [EmptySpace()]
    spaces: list[QuerySpace] = []
    for box in boxes:
        if all(lo <= 0.0 and hi >= 1.0 for lo, hi in zip(box.lo, box.hi, strict=False)):
            return [AllSpace()]
        spaces.append(
            QuerySpaceFromTo(
                tuple(None if lo <= 0.0 else lo for lo in box.lo),
                tuple(None if hi >= 1.0 else hi for hi in box.hi),
            )
        )
    return spaces


def query_space(predicate: Predicate | None, revision: Any) -> list[QuerySpace]:
    """`query_spaces` for a `Revision` (uses its `columns` and `transformations`)."""
    return query_spaces(predicate, list(revision.columns), list(revision.transformations))


# --- cube selection ---------------------------------------------------------------------------


def _as_bytes_array(strings: pa.Array | pa.ChunkedArray | Sequence[str]) -> np.ndarray:
    values = strings.to_pylist() if isinstance(strings, (pa.Array, pa.ChunkedArray)) else list(strings)
    if not values:
        return np.zeros(0, dtype="S1")
    return np.array([v.encode("ascii") for v in values], dtype="S")


def select_cubes(
    cube_ids: Sequence[str] | pa.Array | np.ndarray,
    dimensions: int,
    spaces: Sequence[QuerySpace],
) -> np.ndarray:
    """Which of a revision's cubes a query's space reaches (§5.2's traversal without a sample),
    vectorized over the distinct cubes: a cube is read when its region intersects the space.

    A sample's weight range is applied per block by `select_blocks`, not by this walk: the spec's
    traversal also stops below a cube whose status maxWeight (the minimum of its blocks') is at
    least the sample's weight, trusting that deeper blocks then hold only heavier rows. That holds
    only while every weight an append routed rows by is the maxWeight of some block: an append
    lowers a cube's maxWeight (`use.qbeast.estimate`) and, when it writes no row into that cube,
    records the lower weight nowhere, so the rows it sent down to the children stayed out of
    every sample that stopped at the cube (2 appends of 200 and 500 rows, cube size 10: a
    sample(0.1) returned 67 of its 73 rows). A block's minWeight is its exact lightest row
    (§3.6), so selecting blocks by their own weight range is exact, and on a table where that
    invariant holds it selects the same blocks as the spec's walk.
    """
    cubes = cube_ids if isinstance(cube_ids, np.ndarray) and cube_ids.dtype.kind == "S" else _as_bytes_array(cube_ids)
    n = cubes.shape[0]
    if n == 0:
        return np.zeros(0, dtype=bool)
    if all(isinstance(s, EmptySpace) for s in spaces):
        return np.zeros(n, dtype=bool)
    lo, hi = string_bounds(cubes, dimensions)
    return space_intersects_many(spaces, lo, hi)


def select_blocks(
    blocks: pa.Table, revisions: Any, predicate: Predicate | None, weight_range: tuple[int, int] | None
) -> np.ndarray:
    """Which rows of a block table (§ architecture: the Qbeast block table) a query reads.

    Staging blocks (revision 0) and blocks of revisions missing from `revisions` are all kept:
    without a tree there is nothing to prune them on here.
    """
    n = blocks.num_rows
    keep = np.ones(n, dtype=bool)
    if n == 0:
        return keep
    rev_ids = blocks.column("revision_id").to_numpy()
    min_w = blocks.column("min_weight").to_numpy().astype(np.int64)
    max_w = blocks.column("max_weight").to_numpy().astype(np.int64)
    weight_from, weight_to = weight_range if weight_range is not None else (MIN_WEIGHT, None)
    cube_col = blocks.column("cube_id")
    for rid in np.unique(rev_ids):
        rid_i = int(rid)
        if rid_i <= 0 or rid_i not in revisions:
            continue
        revision = revisions[rid_i]
        rows = np.nonzero(rev_ids == rid)[0]
        spaces = query_space(predicate, revision)
        encoded = pc.take(cube_col, pa.array(rows)).combine_chunks().dictionary_encode()
        uniq = _as_bytes_array(encoded.dictionary)  # Python strings only for the distinct cubes
        inverse = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        ok = select_cubes(uniq, len(list(revision.columns)), spaces)[inverse]
        if weight_range is not None:
            ok &= (weight_from <= max_w[rows]) & (weight_to > min_w[rows])
        keep[rows] = ok
    return keep


def select_files(
    qsnap: Any,
    predicate: Predicate | None = None,
    weight_range: tuple[int, int] | None = None,
    stats_mask: pa.BooleanArray | np.ndarray | None = None,
) -> pa.BooleanArray:
    """Which of `qsnap.files` a query with this filter and sample weight range must read.

    `weight_range=(weightFrom, weightTo)` selects rows with `weightFrom <= hash < weightTo`
    (a sample of fraction f is `(MIN_WEIGHT, weight_from_fraction(f))`); None reads all weights.
    Staging files are kept (subject only to Delta stats skipping); an indexed file is kept when it
    has a block of a selected cube whose weights overlap the range. `stats_mask` is the Delta
    data-skipping verdict for the same files; when omitted it is computed with
    `use.delta.skipping.snapshot_files_matching` for the predicate.
    """
    files: pa.Table = qsnap.files
    n = files.num_rows
    if weight_range is not None:
        lo, hi = weight_range
        if lo > hi:
            raise InvalidArgumentError(f"weight range {weight_range} is empty: weightFrom must be <= weightTo")
        if lo == hi:  # [lo, lo) holds no row (a sample of 0): not even a staging file is read
            return pa.array(np.zeros(n, dtype=bool), type=pa.bool_())
    if stats_mask is None:
        stats_mask = snapshot_files_matching(qsnap, files, predicate) if predicate is not None and n else np.ones(n, dtype=bool)
    if isinstance(stats_mask, (pa.Array, pa.ChunkedArray)):
        mask = np.asarray(stats_mask.to_numpy(zero_copy_only=False), dtype=bool)
    else:
        mask = np.asarray(stats_mask, dtype=bool)
    if mask.shape != (n,):
        raise InvalidArgumentError(f"stats mask has {mask.shape} entries for {n} files")
    if n == 0:
        return pa.array(mask, type=pa.bool_())
    blocks: pa.Table = qsnap.blocks
    block_keep = select_blocks(blocks, qsnap.revisions, predicate, weight_range)
    file_index = blocks.column("file_index").to_numpy().astype(np.int64)
    has_block = np.zeros(n, dtype=bool)
    has_block[file_index] = True
    cube_mask = np.zeros(n, dtype=bool)
    cube_mask[file_index[block_keep]] = True
    # A file with no block rows at all (should not happen) is kept rather than silently lost.
    cube_mask |= ~has_block
    return pa.array(mask & cube_mask, type=pa.bool_())
