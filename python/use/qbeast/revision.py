"""Revisions: the index space of one OTree, its JSON in the Delta log, and how writes change it (§3.1, §7.1).

A revision fixes the indexed columns, one transformer + transformation per column and the desired
cube size. It is stored as a JSON string under `qbeast.revision.<id>` in the table properties,
written exactly as qbeast-spark's Jackson does (field order, compact, Java number text), so tables
stay readable and appendable by qbeast-spark.

The write path is: `parse_column_specs` (user spec -> transformers), `stats_aggregations` (what to
aggregate over the input in one pass), `compute_revision_change` (stats -> maybe a new revision),
`configuration_with_revision` (the new table properties).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from use.errors import PYTHON, CorruptIndexMetadataError, IndexColumnError, InvalidArgumentError
from use.qbeast.java_values import jackson_dumps
from use.qbeast.transform import TRANSFORMER_TYPES, EmptyTransformation, Transformation
from use.qbeast.transformers import (
    EmptyTransformer,
    LinearTransformer,
    Transformer,
    make_transformer,
    quantiles_hint,
    transformation_from_json_obj,
    transformer_from_json_obj,
)

REVISION_PREFIX = "qbeast.revision."
LAST_REVISION_KEY = "qbeast.lastRevisionID"
STAGING_ID = 0
COUNT_ALIAS = "count"
DEFAULT_CUBE_SIZE = 5_000_000
# 0.8 parity keys written with every metadata rewrite (§7.1).
COLUMNS_TO_INDEX_KEY = "columnsToIndex"
CUBE_SIZE_KEY = "cubeSize"
TABLE_FORMAT_KEY = "tableFormat"
COLUMN_STATS_KEY = "columnStats"

_SPEC_RE = re.compile(r"([^:]+):([A-Za-z]+)")


@dataclass(frozen=True)
class Revision:
    """One index space. `transformations` is empty only for the not-yet-written first revision."""

    revision_id: int
    timestamp: int
    table_id: str
    desired_cube_size: int
    column_transformers: tuple[Transformer, ...]
    transformations: tuple[Transformation, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "column_transformers", tuple(self.column_transformers))
        object.__setattr__(self, "transformations", tuple(self.transformations))
        if self.transformations and len(self.transformations) != len(self.column_transformers):
            raise InvalidArgumentError(
                f"revision {self.revision_id} has {len(self.column_transformers)} column transformers but "
                f"{len(self.transformations)} transformations"
            )

    # --- shape ---------------------------------------------------------------------------------

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(t.column_name for t in self.column_transformers)

    @property
    def dimension_count(self) -> int:
        return len(self.column_transformers)

    def contains(self, other: "Revision") -> bool:
        """Does this revision's space hold every row `other` indexed, under the same transformers?

        Then `other`'s rows can be re-indexed into this revision without widening it (no new
        revision): the optimizer's SupersededRevisionsSelection only folds revisions it contains.
        A revision made by `compute_revision_change` for a widened range contains its predecessors
        (it merges the old and the new range); one made for a changed transformer or cube size
        starts from the new data's space and may not.
        """
        if not self.transformations or not other.transformations:
            return False
        if self.column_transformers != other.column_transformers:
            return False
        return not any(mine.is_superseded_by(theirs) for mine, theirs in zip(self.transformations, other.transformations))

    @property
    def is_staging(self) -> bool:
        return self.revision_id == STAGING_ID

    @property
    def column_specs(self) -> tuple[str, ...]:
        return tuple(t.spec for t in self.column_transformers)

    def transform(self, batch: pa.RecordBatch | pa.Table) -> np.ndarray:
        """The `(n, d)` float64 points of a batch's rows in this revision's space."""
        n = batch.num_rows
        if not self.transformations:
            raise InvalidArgumentError(
                f"revision {self.revision_id} has no transformations yet; compute the revision change first"
            )
        out = np.empty((n, self.dimension_count), dtype=np.float64)
        names = batch.schema.names
        for i, (t, tr) in enumerate(zip(self.column_transformers, self.transformations)):
            if t.column_name not in names:
                raise IndexColumnError(
                    f"indexed column {t.column_name!r} of revision {self.revision_id} is missing from the data "
                    f"(columns: {', '.join(names)})"
                )
            out[:, i] = tr.transform(batch.column(t.column_name))
        return out

    # --- JSON ----------------------------------------------------------------------------------

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "revisionID": self.revision_id,
            "timestamp": self.timestamp,
            "tableID": self.table_id,
            "desiredCubeSize": self.desired_cube_size,
            "columnTransformers": [t.to_json_obj() for t in self.column_transformers],
            "transformations": [t.to_json_obj() for t in self.transformations],
        }

    def to_json(self) -> str:
        return jackson_dumps(self.to_json_obj())

    @classmethod
    def from_json(cls, text: str, *, key: str = "revision") -> Revision:
        """Parse a revision JSON; `key` (e.g. the table property name) is named in errors."""
        try:
            obj = json.loads(text)
        except (TypeError, ValueError) as e:
            raise CorruptIndexMetadataError(f"{key} is not valid JSON ({e}): {str(text)[:200]!r}") from None
        return cls.from_json_obj(obj, key=key)

    @classmethod
    def from_json_obj(cls, obj: Any, *, key: str = "revision") -> Revision:
        if not isinstance(obj, dict):
            raise CorruptIndexMetadataError(f"{key} must be a JSON object, got {obj!r}")

        def need(name: str, kind: type | tuple[type, ...]) -> Any:
            if name not in obj:
                raise CorruptIndexMetadataError(f"{key} lacks the field {name!r}")
            v = obj[name]
            if isinstance(v, bool) or not isinstance(v, kind):
                raise CorruptIndexMetadataError(f"{key} field {name!r} has the wrong type: {v!r}")
            return v

        rid = need("revisionID", int)
        ts = need("timestamp", int)
        table_id = need("tableID", str)
        cube_size = need("desiredCubeSize", int)
        cts = need("columnTransformers", list)
        trs = need("transformations", list)
        transformers = tuple(
            transformer_from_json_obj(t, f"{key} columnTransformers[{i}]") for i, t in enumerate(cts)
        )
        transformations = tuple(
            transformation_from_json_obj(t, f"{key} transformations[{i}]") for i, t in enumerate(trs)
        )
        if not transformers:
            raise CorruptIndexMetadataError(f"{key} has no columnTransformers")
        if transformations and len(transformations) != len(transformers):
            raise CorruptIndexMetadataError(
                f"{key} has {len(transformers)} columnTransformers but {len(transformations)} transformations"
            )
        if cube_size <= 0:
            raise CorruptIndexMetadataError(f"{key} has desiredCubeSize={cube_size}; it must be positive")
        return cls(rid, ts, table_id, cube_size, transformers, transformations)


def first_revision(table_id: str, cube_size: int, transformers: Sequence[Transformer], timestamp: int = 0) -> Revision:
    """qbeast-spark's `Revision.firstRevision`: id 0, real transformers, no transformations yet, so
    the first write always produces revision 1."""
    return Revision(STAGING_ID, timestamp, table_id, cube_size, tuple(transformers), ())


def staging_revision(table_id: str, column_names: Sequence[str], cube_size: int, timestamp: int) -> Revision:
    """Revision 0 as qbeast-spark writes it: EmptyTransformer/EmptyTransformation per column."""
    _check_cube_size(cube_size)
    if not column_names:
        raise IndexColumnError("the staging revision needs at least one column to index")
    return Revision(
        STAGING_ID,
        timestamp,
        table_id,
        cube_size,
        tuple(EmptyTransformer(c) for c in column_names),
        tuple(EmptyTransformation() for _ in column_names),
    )


# --- column specs ------------------------------------------------------------------------------


def split_column_specs(specs: Sequence[str] | str) -> list[tuple[str, str | None]]:
    """`"a,b:hashing"` or `["a", "b:hashing"]` -> `[("a", None), ("b", "hashing")]` (no schema needed)."""
    if isinstance(specs, str):
        items = [s for s in specs.split(",")]
    else:
        items = list(specs)
    if not items or all(not str(s).strip() for s in items):
        raise IndexColumnError("no columns to index were given; pass e.g. columnsToIndex='x,y' or ['x', 'y:hashing']")
    out: list[tuple[str, str | None]] = []
    for raw in items:
        if not isinstance(raw, str):
            raise IndexColumnError(f"a column spec must be a string like 'x' or 'x:hashing', got {raw!r}")
        s = raw.strip()
        if not s:
            raise IndexColumnError(f"empty column spec in {specs!r}; remove the extra comma")
        if ":" in s:
            m = _SPEC_RE.fullmatch(s)
            if not m or not m.group(1).strip():
                raise IndexColumnError(
                    f"malformed column spec {raw!r}; write 'column' or 'column:type' with type one of "
                    f"{', '.join(TRANSFORMER_TYPES)}"
                )
            out.append((m.group(1).strip(), m.group(2)))
        else:
            out.append((s, None))
    seen: set[str] = set()
    for name, _ in out:
        if name in seen:
            raise IndexColumnError(f"column {name!r} appears twice in the columns to index {specs!r}")
        seen.add(name)
    return out


def columns_to_index_text(specs: Sequence[str] | str) -> str:
    """The `columnsToIndex` table property for the columns a user asked for: their own specs, joined
    with commas (qbeast-spark keeps the option text it was given, `x,y:hashing`, not the typed specs
    it derived), each item without the surrounding blanks this parser ignores."""
    items = specs.split(",") if isinstance(specs, str) else list(specs)
    return ",".join(str(s).strip() for s in items if str(s).strip())


def parse_column_specs(
    specs: Sequence[str] | str, schema: pa.Schema, *, existing: Revision | None = None
) -> tuple[Transformer, ...]:
    """Transformers for a column spec list, with the §4 defaults (numbers/dates -> linear, strings ->
    hashing).

    With `existing`, a column written without a type keeps the existing revision's transformer (and
    a staging EmptyTransformer gets the real default), as qbeast-spark does; an explicit different
    type replaces it (which makes a new revision).
    """
    parsed = split_column_specs(specs)
    existing_by_name: dict[str, Transformer] = {}
    if existing is not None:
        existing_by_name = {t.column_name: t for t in existing.column_transformers}
    out: list[Transformer] = []
    for name, type_name in parsed:
        if name not in schema.names:
            raise IndexColumnError(
                f"column {name!r} to index is not in the data; available columns: {', '.join(schema.names)}"
            )
        if schema.names.count(name) > 1:
            raise IndexColumnError(f"column {name!r} is ambiguous: the data has it more than once")
        old = existing_by_name.get(name)
        if type_name is None and old is not None and not isinstance(old, EmptyTransformer):
            out.append(old)
            continue
        out.append(make_transformer(type_name, name, schema.field(name).type))
    return tuple(out)


def stats_aggregations(transformers: Sequence[Transformer]) -> list[tuple[str, str, str]]:
    """`(alias, func, column)` aggregates for the writer's single stats pass over the input:
    `min`/`max` per linear column, nothing for hashing/quantiles, and `("count", "count", "*")`."""
    out = [(s.alias, s.func, s.column) for t in transformers for s in t.stats()]
    out.append((COUNT_ALIAS, "count", "*"))
    return out


# --- revision changes ---------------------------------------------------------------------------


def _check_cube_size(cube_size: Any) -> int:
    if isinstance(cube_size, bool) or not isinstance(cube_size, (int, np.integer)) or cube_size <= 0:
        raise InvalidArgumentError(f"cubeSize must be a positive integer, got {cube_size!r}")
    return int(cube_size)


def parse_column_stats(column_stats: Mapping[str, Any] | str | None, transformers: Sequence[Transformer]) -> dict[str, Any]:
    """The `columnStats` option (JSON text or a mapping) checked against the indexed columns."""
    if column_stats is None or (isinstance(column_stats, str) and not column_stats.strip()):
        return {}
    if isinstance(column_stats, str):
        try:
            parsed = json.loads(column_stats)
        except ValueError as e:
            raise InvalidArgumentError(
                f"columnStats is not valid JSON ({e}); expected e.g. '{{\"x_min\": 0, \"x_max\": 100}}'"
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
    size = _check_cube_size(cube_size)
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

    transformer_changed = tuple(t != o for t, o in zip(transformers, base.column_transformers))
    origins: list[Transformation | None] = [None] * len(transformers)
    if origin is not None and existing is not None and origin.column_transformers == base.column_transformers:
        origins = list(origin.transformations) or origins
    from_data = [t.make_transformation(stats) for t in transformers]
    from_options = [t.make_transformation(cstats) if _has_stats(t, cstats) else None for t in transformers]
    new_transformations = [d.merge(o) if o is not None else d for d, o in zip(from_data, from_options)]

    if not base.transformations:
        changes: list[Transformation | None] = list(new_transformations)
    else:
        changes = []
        for i, (old, new) in enumerate(zip(base.transformations, new_transformations)):
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
            for i, (old, c) in enumerate(zip(base.transformations, changes)):
                if c is None and from_options[i] is None and reaches_edge(old, from_data[i], margin):
                    changes[i] = widened(old, old, margin, reached=from_data[i], origin=origins[i])
    for t, ch in zip(transformers, changes):
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
    final = tuple(
        c if c is not None else old for c, old in zip(changes, base.transformations or [None] * len(changes))  # type: ignore[misc]
    )
    new = replace(
        base,
        revision_id=base.revision_id + 1,
        timestamp=int(now_ms),
        desired_cube_size=size,
        column_transformers=transformers,
        transformations=final,
    )
    return new, True


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
        from use.errors import ConfigError

        raise ConfigError(f"{source} must be a number from 0 to 10 (a fraction of the indexed range, e.g. 0.1), got {raw!r}")
    return value
#: How near an edge (a fraction of the margin, of the old span) the data must come to widen it: 1%
#: of the span at the default margin. Rows drawn uniformly come within span/n of each edge, so any
#: append of a hundred rows or more of a fixed range reaches all of them.
EDGE_REACH = 0.1

_INT_BOUNDS = {"IntegerDataType": (-(2**31), 2**31 - 1), "LongDataType": (-(2**63), 2**63 - 1)}


def _near_edges(old: Transformation, data: Transformation | None, margin: float) -> tuple[bool, bool]:
    """Whether the written data's range comes within `margin * EDGE_REACH` of `old`'s span of its
    low and high edge (or passes it)."""
    from use.qbeast.transform import LinearTransformation

    if margin <= 0 or not isinstance(old, LinearTransformation) or not isinstance(data, LinearTransformation):
        return False, False
    lo, hi = float(old.min_number), float(old.max_number)
    reach = (hi - lo) * float(margin) * EDGE_REACH
    return float(data.min_number) <= lo + reach, float(data.max_number) >= hi - reach


def reaches_edge(old: Transformation, data: Transformation | None, margin: float) -> bool:
    """Whether data of range `data` reaches an edge of the linear range `old` (see `widened`)."""
    return any(_near_edges(old, data, margin))


def widened(
    old: Transformation, merged: Transformation, margin: float, reached: Transformation | None = None,
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
    """
    from use.qbeast.transform import INTEGRAL_TYPES, LinearTransformation

    if margin <= 0 or not isinstance(old, LinearTransformation) or not isinstance(merged, LinearTransformation):
        return merged
    lo, hi = float(merged.min_number), float(merged.max_number)
    span = (hi - lo) * float(margin)
    near_lo, near_hi = _near_edges(old, reached, margin)
    moved_lo = moved_hi = 0.0
    if isinstance(origin, LinearTransformation):
        moved_lo = max(0.0, float(origin.min_number) - float(merged.min_number))
        moved_hi = max(0.0, float(merged.max_number) - float(origin.max_number))
    if float(merged.min_number) < float(old.min_number) or near_lo:
        lo -= max(span, moved_lo)
    if float(merged.max_number) > float(old.max_number) or near_hi:
        hi += max(span, moved_hi)
    dtype = merged.ordered_data_type
    if dtype in INTEGRAL_TYPES:
        a, b = _INT_BOUNDS.get(dtype, (-(2**63), 2**63 - 1))
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


# --- table properties ---------------------------------------------------------------------------


def is_qbeast(configuration: Mapping[str, str]) -> bool:
    """A table is a Qbeast table when its properties hold a revision (`qbeast.revision.<id>`)."""
    return any(k.startswith(REVISION_PREFIX) for k in configuration)


def revisions_from_configuration(config: Mapping[str, str]) -> dict[int, Revision]:
    """Every `qbeast.revision.<id>` of the table properties, by id (empty for a plain Delta table)."""
    out: dict[int, Revision] = {}
    for key, value in config.items():
        if not key.startswith(REVISION_PREFIX):
            continue
        suffix = key[len(REVISION_PREFIX) :]
        if not suffix.isdigit():
            raise CorruptIndexMetadataError(f"table property {key!r} does not end in a revision number")
        rev = Revision.from_json(value, key=key)
        if rev.revision_id != int(suffix):
            raise CorruptIndexMetadataError(
                f"table property {key!r} holds revisionID {rev.revision_id}; the key and the JSON must agree"
            )
        out[rev.revision_id] = rev
    last = config.get(LAST_REVISION_KEY)
    if last is not None:
        if not str(last).strip().lstrip("-").isdigit():
            raise CorruptIndexMetadataError(f"table property {LAST_REVISION_KEY}={last!r} is not a number")
        if int(last) not in out and (out or int(last) != 0):
            raise CorruptIndexMetadataError(
                f"table property {LAST_REVISION_KEY}={last} names a revision that has no {REVISION_PREFIX}{last} key"
            )
    return out


def latest_revision_id(config: Mapping[str, str]) -> int:
    """`qbeast.lastRevisionID` (0 when absent)."""
    last = config.get(LAST_REVISION_KEY)
    try:
        return int(last) if last is not None else 0
    except ValueError:
        raise CorruptIndexMetadataError(f"table property {LAST_REVISION_KEY}={last!r} is not a number") from None


def configuration_with_revision(
    config: Mapping[str, str],
    revision: Revision,
    *,
    add_staging: bool = True,
    overwrite: bool = False,
    extra: Mapping[str, str] | None = None,
    columns_to_index: Sequence[str] | str | None = None,
) -> dict[str, str]:
    """New table properties holding `revision` (§7.1).

    `overwrite` drops every previous revision first. `add_staging` adds revision 0 (EmptyTransformers,
    timestamp - 1) when absent, as qbeast-spark does on a table's first revision. The 0.8 keys
    (`columnsToIndex`, `cubeSize`, `tableFormat`, `columnStats`) and the `extra` write options are
    written too; `extra["columnStats"]` is the columnStats option. `columnsToIndex` is the user's
    column specs (`columns_to_index`) as qbeast-spark keeps its option, or, when the write had none
    (an optimization indexing staged rows), the revision's column names, as qbeast-spark fills it in.
    """
    extra = dict(extra or {})
    out = {
        k: v
        for k, v in config.items()
        if not (overwrite and (k.startswith(REVISION_PREFIX) or k == LAST_REVISION_KEY))
    }
    out[f"{REVISION_PREFIX}{revision.revision_id}"] = revision.to_json()
    if add_staging and revision.revision_id > STAGING_ID and f"{REVISION_PREFIX}{STAGING_ID}" not in out:
        staging = staging_revision(revision.table_id, revision.columns, revision.desired_cube_size, revision.timestamp - 1)
        out[f"{REVISION_PREFIX}{STAGING_ID}"] = staging.to_json()
    previous = latest_revision_id(out) if LAST_REVISION_KEY in out else -1
    out[LAST_REVISION_KEY] = str(max(previous, revision.revision_id))
    out[COLUMNS_TO_INDEX_KEY] = (
        columns_to_index_text(columns_to_index) if columns_to_index is not None else ",".join(revision.columns)
    )
    out[CUBE_SIZE_KEY] = str(revision.desired_cube_size)
    out[TABLE_FORMAT_KEY] = "delta"
    out[COLUMN_STATS_KEY] = str(extra.pop(COLUMN_STATS_KEY, "") or "")
    for k, v in extra.items():
        if k.startswith("qbeast."):
            raise InvalidArgumentError(f"extra option {k!r} would overwrite qbeast metadata; drop it")
        out[k] = str(v)
    return out
