"""How a write changes a table's revision (§3.1): the new data's statistics against the latest
revision give the revision the write must use, a new one when the data leaves its space; and the
`revisionMargin` policy (`widened`), which widens a new revision's linear ranges past the data so
data that drifts, or samples of a fixed domain, do not open a revision (and a re-indexing of the
table) on every append.

Pure: revisions and transformations in, a revision out; the writer (`use.qbeast.writer`) runs the
statistics on Spark and commits."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from use.errors import PYTHON, ConfigError, IndexColumnError, InvalidArgumentError
from use.qbeast.relabel import aligned_growth
from use.qbeast.revision import COUNT_ALIAS, Revision, check_cube_size, first_revision
from use.qbeast.transform import INTEGRAL_BOUNDS, INTEGRAL_TYPES, EmptyTransformation, LinearTransformation, Transformation
from use.qbeast.transformers import LinearTransformer, Transformer, quantiles_hint


def parse_column_stats(column_stats: Mapping[str, Any] | str | None, transformers: Sequence[Transformer]) -> dict[str, Any]:
    """The `columnStats` option (JSON text or a mapping) checked against the indexed columns."""
    if column_stats is None or (isinstance(column_stats, str) and not column_stats.strip()):
        return {}
    if isinstance(column_stats, str):
        try:
            parsed = json.loads(column_stats)
        except ValueError as e:
            raise InvalidArgumentError(
                f'columnStats is not valid JSON ({e}); expected e.g. \'{{"x_min": 0, "x_max": 100}}\''
            ) from None
    else:
        parsed = column_stats
    if not isinstance(parsed, Mapping):
        raise InvalidArgumentError(f"columnStats must be a JSON object of <column>_min/_max/_quantiles, got {parsed!r}")
    accepted: set[str] = set()
    for t in transformers:
        c = t.column_name
        if isinstance(t, LinearTransformer):
            accepted |= {f"{c}_min", f"{c}_max"}
        accepted |= set(t.stats_names())
    unknown = sorted(set(parsed) - accepted)
    if unknown:
        raise InvalidArgumentError(
            f"columnStats has keys {unknown} that match no indexed column's statistics; accepted keys: "
            f"{sorted(accepted) or 'none (hashed columns take no statistics)'}"
        )
    return dict(parsed)


def compute_revision_change(
    existing: Revision | None,
    transformers: Sequence[Transformer],
    stats: Mapping[str, Any],
    cube_size: int,
    column_stats: Mapping[str, Any] | str | None,
    table_id: str,
    now_ms: int,
    margin: float = 0.0,
    origin: Revision | None = None,
) -> tuple[Revision, bool]:
    """The revision a write must use, and whether it is new (§3.1).

    `margin` (the writer's `revisionMargin`, see `widened`): when data reaches past a linear
    column's range, the new range is the union widened by `margin` times its span on the side(s)
    that grew, so data that drifts a little past the range does not open a revision on every append;
    the new revision also widens every linear range (not declared in `column_stats`) on the edges
    the data reached without passing them. `origin` (`widening_origin`: the oldest revision of the
    table that `existing` contains) lets a side widen by as much as the data has moved past the
    origin's edge, when that is more than the margin (see `widened`).

    `existing` is the table's latest revision (None for a new table or an overwrite);
    `transformers` come from `parse_column_specs(..., existing=existing)`; `stats` is the row of
    `stats_aggregations` (alias -> value, with `count`). A write of zero rows (count 0) changes
    nothing: the existing revision (or, for a new table, the unwritten first revision) comes back with
    `False`, and the writer must write nothing.
    """
    size = check_cube_size(cube_size, "cubeSize")
    transformers = tuple(transformers)
    if not transformers:
        raise IndexColumnError("no columns to index")
    base = existing if existing is not None else first_revision(table_id, size, transformers)
    if base.columns != tuple(t.column_name for t in transformers):
        raise IndexColumnError(
            f"columnsToIndex {', '.join(t.column_name for t in transformers)} differ from the table's indexed "
            f"columns {', '.join(base.columns)}; the indexed columns of a table cannot change (overwrite the "
            f"table to index other columns)"
        )
    cstats = parse_column_stats(column_stats, transformers)
    count = stats.get(COUNT_ALIAS)
    if count is not None and int(count) == 0:
        return base, False

    transformer_changed = tuple(t != o for t, o in zip(transformers, base.column_transformers, strict=False))
    origins: list[Transformation | None] = [None] * len(transformers)
    if origin is not None and existing is not None and origin.column_transformers == base.column_transformers:
        origins = list(origin.transformations) or origins
    from_data = [t.make_transformation(stats) for t in transformers]
    from_options = [t.make_transformation(cstats) if _has_stats(t, cstats) else None for t in transformers]
    new_transformations = [d.merge(o) if o is not None else d for d, o in zip(from_data, from_options, strict=False)]

    if not base.transformations:
        changes: list[Transformation | None] = list(new_transformations)
    else:
        changes = []
        for i, (old, new) in enumerate(zip(base.transformations, new_transformations, strict=False)):
            if transformer_changed[i]:
                changes.append(new)  # a new transformer type starts from the new data's space
            elif old.is_superseded_by(new):
                changes.append(widened(old, old.merge(new), margin, reached=from_data[i], origin=origins[i]))
            else:
                changes.append(None)
        if margin > 0 and any(c is not None and not transformer_changed[i] for i, c in enumerate(changes)):
            # The data passed a range, so the revision changes anyway: the ranges the data reached
            # without passing widen now too, or each of them opens a revision of its own later
            # (uniform appends without columnStats made 5 revisions, each re-indexing the table).
            # A range declared in columnStats is the user's domain and stays.
            for i, (old, c) in enumerate(zip(base.transformations, changes, strict=False)):
                if c is None and from_options[i] is None and reaches_edge(old, from_data[i], margin):
                    changes[i] = widened(old, old, margin, reached=from_data[i], origin=origins[i])
    for t, ch in zip(transformers, changes, strict=False):
        if isinstance(ch, EmptyTransformation) or (ch is None and isinstance(_current(base, t), EmptyTransformation)):
            if t.type_name == "quantiles":
                raise InvalidArgumentError(
                    f"column {t.column_name!r} is indexed as {t.column_name}:quantiles, which needs its quantiles "
                    f"given as {t.column_name}_quantiles (the columnStats option)",
                    hints={PYTHON: quantiles_hint(t.column_name)},
                )
            raise InvalidArgumentError(f"column {t.column_name!r} has no statistics to build its transformation")

    cube_changed = size != base.desired_cube_size
    if not (cube_changed or any(transformer_changed) or any(c is not None for c in changes)):
        return base, False
    if base.transformations:
        final = tuple(c if c is not None else old for c, old in zip(changes, base.transformations, strict=False))
    else:  # the first transformations: every one is new
        final = tuple(new_transformations)
    revised = replace(
        base,
        revision_id=base.revision_id + 1,
        timestamp=int(now_ms),
        desired_cube_size=size,
        column_transformers=transformers,
        transformations=final,
    )
    return revised, True


#: Default `revisionMargin`: a widened range grows by 10% of its span on the side the data passed.
DEFAULT_REVISION_MARGIN = 0.1
#: The table property a table's `revisionMargin` is set by (the Spark conf `spark.qbeast.index.revisionMargin` wins).
REVISION_MARGIN_PROPERTY = "use.qbeast.revisionMargin"


def parse_revision_margin(raw: Any, source: str) -> float:
    """A `revisionMargin` value (from `source`: a Spark conf or table property key): a fraction of
    the indexed range from 0 to 10. Checked where it is set (ALTER TABLE) and where it is used (a
    write), so a bad value is refused before it can make every append fail."""
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 10.0:
        raise ConfigError(f"{source} must be a number from 0 to 10 (a fraction of the indexed range, e.g. 0.1), got {raw!r}")
    return value


#: How near an edge (a fraction of the margin, of the old span) the data must come to widen it: 1%
#: of the span at the default margin. Rows drawn uniformly come within span/n of each edge, so any
#: append of a hundred rows or more of a fixed range reaches all of them.
EDGE_REACH = 0.1


def _near_edges(old: Transformation, data: Transformation | None, margin: float) -> tuple[bool, bool]:
    """Whether the written data's range comes within `margin * EDGE_REACH` of `old`'s span of its
    low and high edge (or passes it)."""
    if margin <= 0 or not isinstance(old, LinearTransformation) or not isinstance(data, LinearTransformation):
        return False, False
    lo, hi = float(old.min_number), float(old.max_number)
    reach = (hi - lo) * float(margin) * EDGE_REACH
    return float(data.min_number) <= lo + reach, float(data.max_number) >= hi - reach


def reaches_edge(old: Transformation, data: Transformation | None, margin: float) -> bool:
    """Whether data of range `data` reaches an edge of the linear range `old` (see `widened`)."""
    return any(_near_edges(old, data, margin))


def widened(
    old: Transformation,
    merged: Transformation,
    margin: float,
    reached: Transformation | None = None,
    origin: Transformation | None = None,
) -> Transformation:
    """`merged` (the union of `old` and the new data's range) widened on each side where it passed
    `old`, or where the new data's own range `reached` came within `margin * EDGE_REACH` of `old`'s
    span of the edge: by `margin` times its span, or by how far that side of `merged` lies past the
    same side of `origin` (the range the table's space grew from), whichever is more. Only linear
    ranges widen (a hash or quantiles space has no range). Integral bounds are rounded outwards and
    kept within the type (Int and Long bounds are Java numbers in the log); a margin of 0 returns
    `merged` unchanged.

    Why: appends of data that drifts (timestamps, ids) or of random samples of a fixed range reach
    a little past the range again and again; with the exact union each such append opens a revision
    (issue 14 §1: 20 appends, 7 revisions), whose files the optimizer must then re-index. A margin
    makes the range grow geometrically, so drifting data opens O(log) revisions, at the cost of up
    to `margin` of the space staying empty at the edge (cubes there hold fewer rows). The edges the
    data reached without passing widen too: a first write's range is a sample's, short of the
    domain on every side alike, and samples of a fixed range passed its four edges (two columns)
    one append at a time, a revision (and a re-indexing of the table) each. Drifting data reaches
    only the edge it drifts towards, so the far edge stays.

    Why the growth since `origin`: a margin of the span alone grows the range by a constant factor
    while drifting data grows it by a constant amount per append, so a table that drifts for long
    re-indexes each row about 1/margin times (every widening makes the optimizer re-index the older
    revisions' files: `SupersededRevisionsSelection`): 10x at the default 0.1, measured as 8
    revisions in 200 appends of the trade-off benchmark. Widening by the distance already drifted
    doubles it each time (a dynamic array's growth): O(log) revisions in the drift, each row
    re-indexed about twice over the table's life, and at most half of what the range has grown
    on that side stays empty. A range that only reached its edges (samples of a fixed domain) has
    not moved past its origin, so it widens by the margin as before.

    Why powers of two from the second widening upward on: a range that grows upward again (the
    data drifts: `origin` is an older revision, and only the high side moves) takes the smallest
    `old.min + 2^k * span` past the target above (`use.qbeast.relabel.aligned_growth`, when the
    column's type keeps it exact). Then the old revision's rows are already in the new revision's
    cubes, and the optimizer moves its files by their tags instead of re-indexing the table
    (`use.qbeast.relabel`): the re-indexing was a third of the drifting benchmark's rewriting. The
    cost is the space: up to half of the new range is empty until the data gets there (the
    doubling of the drift alone left up to half of the growth empty).
    """
    if margin <= 0 or not isinstance(old, LinearTransformation) or not isinstance(merged, LinearTransformation):
        return merged
    lo, hi = float(merged.min_number), float(merged.max_number)
    span = (hi - lo) * float(margin)
    near_lo, near_hi = _near_edges(old, reached, margin)
    moved_lo = moved_hi = 0.0
    if isinstance(origin, LinearTransformation):
        moved_lo = max(0.0, float(origin.min_number) - float(merged.min_number))
        moved_hi = max(0.0, float(merged.max_number) - float(origin.max_number))
    grow_lo = float(merged.min_number) < float(old.min_number) or near_lo
    grow_hi = float(merged.max_number) > float(old.max_number) or near_hi
    if grow_lo:
        lo -= max(span, moved_lo)
    if grow_hi:
        hi += max(span, moved_hi)
    if grow_hi and not grow_lo and isinstance(origin, LinearTransformation) and origin != old:
        # the range grows upward again: a power of two from the same minimum, so the optimizer
        # moves the older revision's files by their tags instead of re-indexing them (`relabel`)

        aligned = aligned_growth(old, hi)
        if aligned is not None:
            return aligned
    dtype = merged.ordered_data_type
    if dtype in INTEGRAL_TYPES:
        a, b = INTEGRAL_BOUNDS[dtype]
        new_lo = max(a, min(int(merged.min_number), int(np.floor(lo))))
        new_hi = min(b, max(int(merged.max_number), int(np.ceil(hi))))
        return LinearTransformation.create(new_lo, new_hi, dtype)
    if dtype == "DecimalDataType":
        return merged  # exact decimal bounds: left as the union
    return LinearTransformation.create(lo, hi, dtype)


def widening_origin(revisions: Iterable[Revision], latest: Revision) -> Revision:
    """The oldest indexed revision `latest` contains (`Revision.contains`): where the chain of
    widenings that made `latest`'s space started, or `latest` itself. `widened` measures from it how
    far the data has moved."""
    for r in sorted(revisions, key=lambda r: r.revision_id):
        if r.revision_id < latest.revision_id and latest.contains(r):
            return r
    return latest


def _has_stats(t: Transformer, cstats: Mapping[str, Any]) -> bool:
    return any(k in cstats for k in t.stats_names())


def _current(base: Revision, t: Transformer) -> Transformation | None:
    if not base.transformations:
        return None
    return base.transformations[base.columns.index(t.column_name)]
