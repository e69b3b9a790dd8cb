"""Revisions: the index space of one OTree, its JSON in the Delta log, and how writes change it (§3.1, §7.1).

A revision fixes the indexed columns, one transformer + transformation per column and the desired
cube size. It is stored as a JSON string under `qbeast.revision.<id>` in the table properties,
written exactly as qbeast-spark's Jackson does (field order, compact, Java number text), so tables
stay readable and appendable by qbeast-spark.

The write path is: `parse_column_specs` (user spec -> transformers), `stats_aggregations` (what to
aggregate over the input in one pass), `use.qbeast.revision_change.compute_revision_change` (stats
-> maybe a new revision, widened by the `revisionMargin` policy), `configuration_with_revision` (the
new table properties).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from use.errors import CorruptIndexMetadataError, IndexColumnError, InvalidArgumentError
from use.qbeast.java_values import jackson_dumps
from use.qbeast.transform import TRANSFORMER_TYPES, EmptyTransformation, Transformation
from use.qbeast.transformers import (
    EmptyTransformer,
    Transformer,
    make_transformer,
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

    def contains(self, other: Revision) -> bool:
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
        return not any(
            mine.is_superseded_by(theirs) for mine, theirs in zip(self.transformations, other.transformations, strict=False)
        )

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
        for i, (t, tr) in enumerate(zip(self.column_transformers, self.transformations, strict=False)):
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
        transformers = tuple(transformer_from_json_obj(t, f"{key} columnTransformers[{i}]") for i, t in enumerate(cts))
        transformations = tuple(transformation_from_json_obj(t, f"{key} transformations[{i}]") for i, t in enumerate(trs))
        if not transformers:
            raise CorruptIndexMetadataError(f"{key} has no columnTransformers")
        if transformations and len(transformations) != len(transformers):
            raise CorruptIndexMetadataError(
                f"{key} has {len(transformers)} columnTransformers but {len(transformations)} transformations"
            )
        if cube_size <= 0:
            raise CorruptIndexMetadataError(f"{key} has desiredCubeSize={cube_size}; it must be positive")
        return cls(rid, ts, table_id, cube_size, transformers, transformations)


def check_cube_size(cube_size: Any, name: str = "cube_size") -> int:
    """A cube size as given by a caller (`name`: the argument or option it came in): a positive
    integer (rows per cube), or an InvalidArgumentError that says so."""
    if isinstance(cube_size, bool) or not isinstance(cube_size, (int, np.integer)) or int(cube_size) <= 0:
        raise InvalidArgumentError(f"{name} must be a positive integer (rows per cube, e.g. 5000000), got {cube_size!r}")
    return int(cube_size)


def cube_size_option(value: Any, default: int | None) -> int | None:
    """The `cubeSize` option as a writer or a CREATE gives it (text): `default` when absent or
    blank, else a positive integer, or an InvalidArgumentError naming the option."""
    if value is None or not str(value).strip():
        return default
    try:
        size = int(str(value).strip())
    except ValueError:
        size = 0
    if size < 1:
        raise InvalidArgumentError(f"option cubeSize must be a positive integer (rows per cube), got {value!r}")
    return size


def first_revision(table_id: str, cube_size: int, transformers: Sequence[Transformer], timestamp: int = 0) -> Revision:
    """qbeast-spark's `Revision.firstRevision`: id 0, real transformers, no transformations yet, so
    the first write always produces revision 1."""
    return Revision(STAGING_ID, timestamp, table_id, cube_size, tuple(transformers), ())


def staging_revision(table_id: str, column_names: Sequence[str], cube_size: int, timestamp: int) -> Revision:
    """Revision 0 as qbeast-spark writes it: EmptyTransformer/EmptyTransformation per column."""
    check_cube_size(cube_size)
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
            raise IndexColumnError(f"column {name!r} to index is not in the data; available columns: {', '.join(schema.names)}")
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


#: Keys the Qbeast writer rewrites with each revision it adds (the 0.8 options and the last id).
_REVISION_BOOKKEEPING = frozenset({LAST_REVISION_KEY, COLUMNS_TO_INDEX_KEY, CUBE_SIZE_KEY, COLUMN_STATS_KEY, TABLE_FORMAT_KEY})


def adds_revisions_only(read: Any, winner: Any) -> bool:
    """Whether the table metadata `winner` (a concurrent commit's) differs from `read` (what a
    write or a row-level statement read) only by new index revisions: the same schema,
    partitioning and properties, every revision `read` had unchanged, new `qbeast.revision.N` keys
    and the writer's bookkeeping keys. Files written for a revision `read` had stay valid then (a
    revision is never redefined, a newer one is added beside it), so the transaction need not fail
    on it (`Transaction.tolerate_metadata_change`); the service's index tasks add such revisions."""
    if (read.schema_string, tuple(read.partition_columns)) != (winner.schema_string, tuple(winner.partition_columns)):
        return False
    old, new = dict(read.configuration), dict(winner.configuration)
    for key in set(old) | set(new):
        if key in _REVISION_BOOKKEEPING or old.get(key) == new.get(key):
            continue
        if key.startswith(REVISION_PREFIX) and key not in old:
            continue
        return False
    return True


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
    out = {k: v for k, v in config.items() if not (overwrite and (k.startswith(REVISION_PREFIX) or k == LAST_REVISION_KEY))}
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
