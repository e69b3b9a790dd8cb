"""Moving a superseded revision's files into the latest revision without rewriting them.

Data that drifts (timestamps, ids) keeps passing the latest revision's range, and every new
revision used to make the optimizer re-index the whole table into it (`SupersededRevisionsSelection`):
each row was rewritten about 1.4 times over the table's life just for the index to follow the
drift (issue 14: 1.64x of the appended bytes in the trade-off benchmark's drift, a third of its
rewriting). When a linear range grows upward by a power of two from the same minimum
(`aligned_growth`, the revision policy of `use.qbeast.revision_change.widened` for data that keeps
drifting upward), every row's transformed coordinate is the old one times 2^-k exactly in IEEE
arithmetic: `(x - min) * (1 / (2^k * span))` is `(x - min) * (1 / span)` scaled by a power of two.
So a cube of the old revision lies inside one cube of the new revision at the same depth (its
coordinate bits along that column shifted down by k levels, the upper k bits 0), and the old
file's rows are already where the new revision puts them: only the file's `tags` change (the
revision id and its blocks' cube ids), one `add` action per file re-adding the same path.

What that gives up: 2^k old cubes along the grown column (siblings and cousins) become one new
cube, so their blocks share a cube (the cube's status maxWeight is the minimum of its blocks', so
sampling and pruning stay exact: a row sits in a block whose weight range holds it, and any cube
a sample must descend below has a status weight under the sample's, §3.0), and their rows are in a
cube holding up to 2^k cubes' worth of rows. Compactions of the new revision place rows by its
status weights, so such a cube's rows above the status weight move down when it is next merged.

Exactness: rows whose value equals the old maximum sit in the old last cube (a coordinate of 1.0
is closed into it) but fall on a cube boundary of the new revision (2^-k), where they belong to
the cube above: files that may hold such a row (their stats' maximum reaches the old maximum, or
they have none) are re-indexed, not relabelled (`edge_predicate`). Only Double, Integer, Long,
Timestamp and Date columns (exact float64 coordinates within 2^53; timestamps and dates are epoch
millis) with the same null value qualify; any other change of the revision is a re-index.

Pure: revisions and cube strings in, cube strings and block tags out.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from use.delta.actions import AddFile, add_actions
from use.delta.predicates import Comparison, InList, Or, Predicate
from use.errors import InvalidArgumentError
from use.qbeast.blocks import BLOCKS_TAG, REVISION_TAG, Block, blocks_json, revision_ids
from use.qbeast.cube import CubeId
from use.qbeast.revision import Revision
from use.qbeast.transform import INTEGRAL_BOUNDS, LinearTransformation, Transformation

#: Column types whose linear coordinates stay exact under an aligned growth (float64 arithmetic):
#: timestamps and dates are integral epoch millis in the transformation, the commonest drift.
ALIGNED_TYPES = ("DoubleDataType", "IntegerDataType", "LongDataType", "TimestampDataType", "DateDataType")
_EXACT = 2**53
#: The largest growth (2^k) whose cubes move by their tags: a new cube then holds up to 2^k old
#: cubes' rows along the column, twice or four times its size. A range that jumps further (a
#: one-off outlier, ids from a new range) is re-indexed into a space where the old rows get cubes
#: of their own size, and widens by the margin rules rather than to a power it would not use.
MAX_SHIFT = 2


@dataclass(frozen=True)
class Alignment:
    """How an older revision's cubes map into a newer one: `shifts[i]` is k when column i's range
    grew 2^k times from the same minimum (0: unchanged)."""

    old: Revision
    new: Revision
    shifts: tuple[int, ...]

    def relabel(self, cube: str) -> str:
        """The newer revision's cube holding the older revision's cube `cube` (module docstring)."""
        d = len(self.shifts)
        c = CubeId.from_string(d, cube)
        bits = 0
        for level in range(c.depth):
            for dim, k in enumerate(self.shifts):
                src = level - k
                if src >= 0 and c.bits >> (src * d + dim) & 1:
                    bits |= 1 << (level * d + dim)
        return CubeId(d, c.depth, bits).to_string()

    def edge_predicate(self) -> Predicate:
        """Rows a relabel would misplace: a grown column at exactly its old maximum (or above,
        which no row of the old revision has)."""
        preds = [
            _at_or_above(col, _stats_value(self.old.transformations[i]))
            for i, col in enumerate(self.old.columns)
            if self.shifts[i]
        ]
        out: Predicate = preds[0]
        for p in preds[1:]:
            out = Or(out, p)
        return out


def _stats_value(t: Any) -> Any:
    """A linear range's maximum as a value Delta stats compare with: timestamps and dates are epoch
    millis in the transformation, a datetime (UTC) and the date holding it in the stats; None for a
    maximum past the last one (year 9999: a range widened by its margins may end there)."""
    try:
        if t.ordered_data_type == "TimestampDataType":
            return _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(milliseconds=int(t.max_number))
        if t.ordered_data_type == "DateDataType":
            return _dt.date(1970, 1, 1) + _dt.timedelta(days=int(t.max_number) // 86_400_000)
    except OverflowError:
        if int(t.max_number) < 0:  # before year 1: no range of Spark's values ends there
            raise
        return None
    return t.max_number


def _at_or_above(column: str, value: Any) -> Predicate:
    """`column >= value`; no row at all when the value is past the last date or timestamp."""
    return InList(column, ()) if value is None else Comparison(column, ">=", value)


def _exact(t: Any) -> bool:
    return t.ordered_data_type in ALIGNED_TYPES and all(
        abs(float(v)) < _EXACT for v in (t.min_number, t.max_number, t.null_value)
    )


def growth_shift(old: Any, new: Any) -> int | None:
    """k when linear range `new` is `old` grown 2^k times upward from the same minimum with the
    same null value, exactly in float64 (0 when they are equal); None otherwise."""
    if old == new:
        return 0
    if not (isinstance(old, LinearTransformation) and isinstance(new, LinearTransformation)):
        return None
    if old.ordered_data_type != new.ordered_data_type or not (_exact(old) and _exact(new)):
        return None
    if old.min_number != new.min_number or old.null_value != new.null_value:
        return None
    span_old = float(old.max_number) - float(old.min_number)
    span_new = float(new.max_number) - float(new.min_number)
    ratio = span_new / span_old
    k = int(round(ratio)).bit_length() - 1
    if k < 1 or span_new != span_old * 2.0**k:
        return None
    return k


def alignment(old: Revision, new: Revision) -> Alignment | None:
    """The `Alignment` from `old` into `new`, or None when `old`'s files must be re-indexed."""
    if (
        old.columns != new.columns
        or old.column_transformers != new.column_transformers
        or old.desired_cube_size != new.desired_cube_size
        or len(old.transformations) != len(new.transformations)
        or not old.transformations
    ):
        return None
    shifts = []
    for o, n in zip(old.transformations, new.transformations, strict=False):
        k = growth_shift(o, n)
        if k is None or k > MAX_SHIFT:
            return None
        shifts.append(k)
    if not any(shifts):
        return None
    return Alignment(old, new, tuple(shifts))


def aligned_growth(old: Transformation, needed_max: float) -> LinearTransformation | None:
    """`old` (a linear transformation) grown upward 2^k times from its minimum, for the smallest
    k >= 1 reaching `needed_max`, keeping its null value; None when its type or bounds cannot grow
    exactly (`growth_shift` must recognise the result) or k would pass `MAX_SHIFT`."""
    if not isinstance(old, LinearTransformation) or not _exact(old):
        return None
    lo, span = old.min_number, old.max_number - old.min_number
    k = 1
    while float(lo) + float(span) * 2**k < needed_max:
        k += 1
        if k > MAX_SHIFT:
            return None
    hi = lo + span * 2**k
    if abs(float(hi)) >= _EXACT:
        return None
    if isinstance(hi, int):
        least, most = INTEGRAL_BOUNDS[old.ordered_data_type]  # an Integer column cannot hold 2^31
        if not least <= hi <= most:
            return None
    grown = replace(old, max_number=hi)
    return grown if growth_shift(old, grown) == k else None


def relabelled_cubes(alignment: Alignment, cubes: Sequence[str]) -> list[str]:
    """`Alignment.relabel` of each cube, computed once per distinct cube."""
    memo: dict[str, str] = {}
    out = []
    for c in cubes:
        r = memo.get(c)
        if r is None:
            r = memo[c] = alignment.relabel(c)
        out.append(r)
    return out


def relabelled_adds(files: Any, blocks: Any, alignments: Mapping[int, Alignment]) -> list[AddFile]:
    """The `add` actions re-adding `files` (rows of a snapshot's files, all of revisions in
    `alignments`) to the newer revision: same path, size, stats and partition values, with the
    revision tag of the newer revision and each block's cube relabelled (`dataChange=false`: no row
    changes). `blocks` are their block-table rows, `file_index` counting positions in `files`.
    A file may then hold two blocks of one cube (siblings the growth folds together): both keep
    their own weight ranges, which is what exact sampling needs (module docstring)."""
    n = files.num_rows
    rids = revision_ids(files).to_numpy(zero_copy_only=False).astype(np.int64)
    fi = blocks.column("file_index").to_numpy(zero_copy_only=False).astype(np.int64)
    cubes = blocks.column("cube_id").to_pylist()
    lo = blocks.column("min_weight").to_numpy(zero_copy_only=False)
    hi = blocks.column("max_weight").to_numpy(zero_copy_only=False)
    cnt = blocks.column("element_count").to_numpy(zero_copy_only=False)
    per_file: list[list[Block]] = [[] for _ in range(n)]
    for rid in np.unique(rids).tolist():
        if rid not in alignments:
            raise InvalidArgumentError(f"revision {rid} has no alignment into the newer revision; its files must be re-indexed")
        rows = np.flatnonzero(rids[fi] == rid)
        for i, cube in zip(rows.tolist(), relabelled_cubes(alignments[rid], [cubes[i] for i in rows]), strict=False):
            per_file[int(fi[i])].append(Block(cube, int(lo[i]), int(hi[i]), int(cnt[i])))
    old_tags = files.column("tags").to_pylist()
    tags = []
    for j in range(n):
        t = dict(old_tags[j] or [])
        t[REVISION_TAG] = str(int(alignments[int(rids[j])].new.revision_id))
        t[BLOCKS_TAG] = blocks_json(per_file[j])
        tags.append(t)
    return add_actions(files, data_change=False, tags=tags)
