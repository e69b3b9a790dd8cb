"""Column mapping (Delta protocol, "Column Mapping"): the names users see vs the names in storage.

With `delta.columnMapping.mode` = `name` or `id`, every struct field of the schema carries a
*physical* name (`delta.columnMapping.physicalName`) and an id (`delta.columnMapping.id`). Data
files hold the physical names (and the ids as parquet field ids); `add.stats` and
`add.partitionValues` in the log are keyed by physical names; users, filters and the schema speak
the logical (display) names. A rename changes only the logical name, so a reader that used the
logical names against the files would read nulls or, after a drop and re-add, the wrong column.

The log keeps what it reads verbatim (`Snapshot.files` holds physical keys, so checkpoints and
removes stay exact); the translation happens where names meet: skipping (stats and partition
values), and the data readers (`use.qbeast.reader` on Spark, `to_logical` on pyarrow).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from use.delta.actions import Metadata, Protocol
from use.errors import CorruptLogError, UnsupportedFeatureError

MODE_KEY = "delta.columnMapping.mode"
PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
ID_KEY = "delta.columnMapping.id"
PARQUET_FIELD_ID_KEY = "PARQUET:field_id"
"""The Arrow field-metadata key under which pyarrow reads and writes parquet field ids."""

MODES = ("none", "name", "id")


def column_mapping_mode(protocol: Protocol, metadata: Metadata) -> str:
    """The mode in force: the table property, honoured only when the protocol supports the feature.

    The protocol says the property counts only on reader version 2, or on reader version 3 with
    `columnMapping` among the reader features; elsewhere the files use the display names.
    """
    supported = protocol.min_reader_version == 2 or (
        protocol.min_reader_version >= 3 and "columnMapping" in (protocol.reader_features or ())
    )
    if not supported:
        return "none"
    mode = metadata.configuration.get(MODE_KEY, "none").strip().lower()
    if mode not in MODES:
        raise UnsupportedFeatureError(
            f"table property {MODE_KEY}={metadata.configuration.get(MODE_KEY)!r} is not a column mapping mode USE knows "
            f"(known: {', '.join(MODES)}); the table cannot be read safely",
            feature="columnMapping",
        )
    return mode


def partition_value_keys(metadata: Metadata) -> tuple[str, ...]:
    """The keys `add.partitionValues` use under this metaData: the partition columns' physical names
    when the table property asks for column mapping (`name` or `id`), else the columns themselves.

    The log replay types partition values by these keys before the protocol of the version is
    settled, so the property alone decides here; a name without a physical name stays itself.
    """
    mode = metadata.configuration.get(MODE_KEY, "none").strip().lower()
    if mode not in ("name", "id") or not metadata.partition_columns:
        return tuple(metadata.partition_columns)
    try:
        fields = json.loads(metadata.schema_string).get("fields") or []
    except (ValueError, AttributeError):
        return tuple(metadata.partition_columns)
    physical: dict[str, str] = {}
    for f in fields if isinstance(fields, list) else []:
        meta = f.get("metadata") if isinstance(f, dict) else None
        name = meta.get(PHYSICAL_NAME_KEY) if isinstance(meta, dict) else None
        if isinstance(name, str) and name:
            physical[str(f.get("name"))] = name
    return tuple(physical.get(c, c) for c in metadata.partition_columns)


def _meta(f: pa.Field, key: str) -> str | None:
    if not f.metadata:
        return None
    raw = f.metadata.get(key.encode())
    return None if raw is None else raw.decode()


def _field_id(f: pa.Field, where: str) -> int:
    raw = _meta(f, ID_KEY)
    try:
        value = json.loads(raw) if raw is not None else None
    except ValueError:
        value = None
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptLogError(
            f"column {where} has no integer {ID_KEY} in the table schema, which column mapping mode 'id' needs; "
            "the schema is corrupted"
        )
    return value


def _struct_fields(t: pa.DataType) -> list[pa.Field]:
    return [t.field(i) for i in range(t.num_fields)]


@dataclass(frozen=True, eq=False)
class ColumnMapping:
    """The mapping of one table version: its mode and its logical schema (with the mapping metadata).

    In mode `none` every method is the identity, so callers need not special-case it.
    """

    mode: str
    schema: pa.Schema
    _physical: pa.Schema | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UnsupportedFeatureError(
                f"unknown column mapping mode {self.mode!r} (known: {', '.join(MODES)})", feature="columnMapping"
            )
        if self.mode != "none":
            # Build (and so validate) the physical schema once, when the snapshot is loaded:
            # a field without a physical name or id is a corrupt schema, not a read-time surprise.
            object.__setattr__(self, "_physical", pa.schema([self._physical_field(f, f.name) for f in self.schema]))

    @classmethod
    def of(cls, protocol: Protocol, metadata: Metadata, schema: pa.Schema) -> ColumnMapping:
        return cls(column_mapping_mode(protocol, metadata), schema)

    @property
    def active(self) -> bool:
        return self.mode != "none"

    # --- names ---------------------------------------------------------------------------------------

    def _physical_name(self, f: pa.Field, where: str) -> str:
        name = _meta(f, PHYSICAL_NAME_KEY)
        if not name:
            raise CorruptLogError(
                f"column {where} has no {PHYSICAL_NAME_KEY} in the table schema, which column mapping mode "
                f"{self.mode!r} needs; the schema is corrupted"
            )
        return name

    def physical_name(self, column: str) -> str:
        """The storage name of a top-level column (partition values are keyed by it)."""
        if not self.active:
            return column
        match = next((f for f in self.schema if f.name == column), None) or next(
            (f for f in self.schema if f.name.lower() == column.lower()), None
        )
        if match is None:
            raise CorruptLogError(f"column {column!r} is not in the table schema ({', '.join(self.schema.names)})")
        return self._physical_name(match, column)

    def physical_path(self, path: Sequence[str]) -> tuple[str, ...]:
        """A logical field path (struct steps; `element`/`key`/`value` through collections) in storage names."""
        if not self.active:
            return tuple(path)
        out: list[str] = []
        fields: list[pa.Field] | None = list(self.schema)
        t: pa.DataType | None = None
        for i, part in enumerate(path):
            if fields is not None:
                match = next((f for f in fields if f.name == part), None)
                if match is None:
                    return tuple(out) + tuple(path[i:])
                out.append(self._physical_name(match, ".".join(path[: i + 1])))
                t = match.type
            else:
                out.append(part)
                if t is not None and pa.types.is_list(t) and part == "element":
                    t = t.value_type
                elif t is not None and pa.types.is_map(t) and part in ("key", "value"):
                    t = t.key_type if part == "key" else t.item_type
                else:
                    t = None
            fields = _struct_fields(t) if t is not None and pa.types.is_struct(t) else None
        return tuple(out)

    # --- schemas -------------------------------------------------------------------------------------

    @property
    def physical_schema(self) -> pa.Schema:
        """The schema as stored: physical names at every struct level, and in mode `id` each field's id
        as its parquet field id (`PARQUET:field_id`). Types and nullability are the logical ones."""
        return self._physical if self._physical is not None else self.schema

    def _physical_type(self, t: pa.DataType, where: str) -> pa.DataType:
        if pa.types.is_struct(t):
            return pa.struct([self._physical_field(f, f"{where}.{f.name}") for f in _struct_fields(t)])
        if pa.types.is_list(t):
            vf = t.value_field
            return pa.list_(vf.with_type(self._physical_type(vf.type, f"{where}.element")))
        if pa.types.is_large_list(t):
            vf = t.value_field
            return pa.large_list(vf.with_type(self._physical_type(vf.type, f"{where}.element")))
        if pa.types.is_map(t):
            kf, vf = t.key_field, t.item_field
            return pa.map_(
                kf.with_type(self._physical_type(kf.type, f"{where}.key")),
                vf.with_type(self._physical_type(vf.type, f"{where}.value")),
            )
        return t

    def _physical_field(self, f: pa.Field, where: str) -> pa.Field:
        meta: dict[str, str] = {}
        if self.mode == "id":
            meta[PARQUET_FIELD_ID_KEY] = str(_field_id(f, where))
        return pa.field(self._physical_name(f, where), self._physical_type(f.type, where), f.nullable, metadata=meta or None)

    # --- data ----------------------------------------------------------------------------------------

    def to_logical(self, data: pa.Table, schema: pa.Schema | None = None) -> pa.Table:
        """Rows of one data file (as pyarrow read it) in the logical `schema` (default: the table's).

        Top-level columns are found by field id in mode `id` (by physical name if the file has no
        ids), by physical name in mode `name`, by logical name in mode `none`; nested struct fields
        by their physical names (Delta writers write those next to the ids). A column the file does
        not have reads as nulls, and older, narrower types are cast to the table's (type widening).
        """
        target = schema if schema is not None else self.schema
        by_id: dict[int, int] = {}
        if self.mode == "id":
            for i, f in enumerate(data.schema):
                raw = _meta(f, PARQUET_FIELD_ID_KEY)
                if raw is not None and raw.lstrip("-").isdigit():
                    by_id[int(raw)] = i
        columns: list[Any] = []
        for f in target:
            if not self.active:
                stored_type, source = f.type, (data.column(f.name) if f.name in data.column_names else None)
            else:
                pf = self._physical_field(f, f.name)
                stored_type = pf.type
                index = by_id.get(_field_id(f, f.name)) if by_id else None
                if index is None and pf.name in data.column_names:
                    index = data.column_names.index(pf.name)
                source = data.column(index) if index is not None else None
            if source is None:
                columns.append(pa.nulls(data.num_rows, f.type))
                continue
            col = source.cast(stored_type) if source.type != stored_type else source
            if stored_type != f.type:
                col = pa.chunked_array([c.view(f.type) for c in col.chunks], type=f.type)
            columns.append(col)
        return pa.Table.from_arrays(columns, schema=target)
