"""Delta schema JSON (`metaData.schemaString`) <-> pyarrow schema.

Delta types map to the Arrow types delta-rs uses (timestamps are microseconds, `timestamp` in UTC),
so files written by either engine line up. Field metadata: Delta allows any JSON value, Arrow only
strings; string values pass through, other values are carried as their JSON text.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa

from use.errors import CorruptLogError, SchemaMismatchError

_PRIMITIVE_TO_ARROW: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}

_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def _type_from_delta(t: Any, where: str) -> pa.DataType:
    if isinstance(t, str):
        if t in _PRIMITIVE_TO_ARROW:
            return _PRIMITIVE_TO_ARROW[t]
        m = _DECIMAL.match(t)
        if m:
            return pa.decimal128(int(m.group(1)), int(m.group(2)))
        if t == "decimal":
            return pa.decimal128(10, 0)
        raise CorruptLogError(f"unknown Delta type {t!r} for column {where} in the table schema")
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "struct":
            return pa.struct([_field_from_delta(f, where) for f in t.get("fields", [])])
        if kind == "array":
            return pa.list_(pa.field("element", _type_from_delta(t["elementType"], where), t.get("containsNull", True)))
        if kind == "map":
            return pa.map_(
                pa.field("key", _type_from_delta(t["keyType"], where), nullable=False),
                pa.field("value", _type_from_delta(t["valueType"], where), t.get("valueContainsNull", True)),
            )
    raise CorruptLogError(f"malformed Delta type {t!r} for column {where} in the table schema")


def _field_from_delta(f: dict[str, Any], parent: str = "") -> pa.Field:
    try:
        name = f["name"]
        where = f"{parent}.{name}" if parent else name
        meta = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (f.get("metadata") or {}).items()}
        return pa.field(name, _type_from_delta(f["type"], where), f.get("nullable", True), metadata=meta or None)
    except (KeyError, TypeError) as exc:
        raise CorruptLogError(f"malformed field {f!r} in the table schema ({exc!r})") from exc


def schema_from_json(schema_string: str) -> pa.Schema:
    """The Arrow schema of a `schemaString`."""
    try:
        doc = json.loads(schema_string)
    except (TypeError, ValueError) as exc:
        raise CorruptLogError(f"the table's schemaString is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("type") != "struct":
        raise CorruptLogError(f"the table's schemaString must be a struct type, got {schema_string[:200]!r}")
    return pa.schema([_field_from_delta(f) for f in doc.get("fields", [])])


def _type_to_delta(t: pa.DataType, where: str) -> Any:
    if pa.types.is_dictionary(t):
        return _type_to_delta(t.value_type, where)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_boolean(t):
        return "boolean"
    simple = {pa.int8(): "byte", pa.int16(): "short", pa.int32(): "integer", pa.int64(): "long",
              pa.float32(): "float", pa.float64(): "double", pa.date32(): "date"}
    if t in simple:
        return simple[t]
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise SchemaMismatchError(f"column {where}: decimal precision {t.precision} exceeds Delta's maximum of 38")
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [_field_to_delta(t.field(i), where) for i in range(t.num_fields)]}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_fixed_size_list(t):
        return {"type": "array", "elementType": _type_to_delta(t.value_type, f"{where}.element"),
                "containsNull": t.value_field.nullable}
    if pa.types.is_map(t):
        return {"type": "map", "keyType": _type_to_delta(t.key_type, f"{where}.key"),
                "valueType": _type_to_delta(t.item_type, f"{where}.value"),
                "valueContainsNull": t.item_field.nullable}
    raise SchemaMismatchError(
        f"column {where} has Arrow type {t}, which has no Delta equivalent; cast it (e.g. unsigned ints to a wider "
        "signed int, date64 to date32, time to string) before writing"
    )


def _field_to_delta(f: pa.Field, parent: str = "") -> dict[str, Any]:
    where = f"{parent}.{f.name}" if parent else f.name
    meta: dict[str, Any] = {}
    for k, v in (f.metadata or {}).items():
        key = k.decode() if isinstance(k, bytes) else k
        meta[key] = v.decode() if isinstance(v, bytes) else v
    return {"name": f.name, "type": _type_to_delta(f.type, where), "nullable": f.nullable, "metadata": meta}


def schema_to_json(schema: pa.Schema) -> str:
    """The `schemaString` of an Arrow schema (SchemaMismatchError for types Delta cannot hold)."""
    names = [f.name for f in schema]
    dupes = sorted({n for n in names if names.count(n) > 1 or names.count(n.lower()) > 1} |
                   {n for n in names if sum(1 for m in names if m.lower() == n.lower()) > 1})
    if dupes:
        raise SchemaMismatchError(f"duplicate column names (Delta names are case-insensitive): {dupes}")
    doc = {"type": "struct", "fields": [_field_to_delta(f) for f in schema]}
    return json.dumps(doc, separators=(",", ":"))


def uses_timestamp_ntz(schema: pa.Schema) -> bool:
    """Whether any (nested) column is a timestamp without time zone (needs the timestampNtz feature)."""

    def walk(t: pa.DataType) -> bool:
        if pa.types.is_timestamp(t):
            return t.tz is None
        if pa.types.is_struct(t):
            return any(walk(t.field(i).type) for i in range(t.num_fields))
        if pa.types.is_map(t):
            return walk(t.key_type) or walk(t.item_type)
        if hasattr(t, "value_type") and not pa.types.is_dictionary(t):
            return walk(t.value_type)
        return False

    return any(walk(f.type) for f in schema)


def is_primitive(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t))


def _normalized(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    return t


def check_append_schema(data: pa.Schema, table: pa.Schema, path: str) -> None:
    """Appends must bring exactly the table's columns with the same types (order may differ); a
    SchemaMismatchError naming every difference otherwise. Nullability is not compared: a written
    schema is stored nullable (nested fields too), as Delta stores it, and data that has no nulls
    fits it."""
    shown = data
    data, table = as_nullable(data), as_nullable(table)
    extra = [n for n in data.names if n not in table.names]
    missing = [n for n in table.names if n not in data.names]
    differing = [
        f"{f.name} ({shown.field(f.name).type} in the data, {f.type} in the table)"
        for f in table
        if f.name in data.names and _normalized(data.field(f.name).type) != _normalized(f.type)
    ]
    if extra or missing or differing:
        parts = []
        if extra:
            parts.append(f"columns not in the table: {', '.join(extra)}")
        if missing:
            parts.append(f"table columns missing from the data: {', '.join(missing)}")
        if differing:
            parts.append(f"columns with another type: {', '.join(differing)}")
        raise SchemaMismatchError(
            f"the data does not match the schema of {path} ({'; '.join(parts)}); select and cast the data to the "
            f"table's columns {table.names}, or write with mode='overwrite' to replace the table"
        )


def as_nullable(schema: pa.Schema) -> pa.Schema:
    """The schema with every column, nested field, array element and map value nullable (map keys
    stay required), as Delta stores the schema of data written to a new table (Spark's
    `StructType.asNullable`): a column that happened to have no nulls in the first write must
    not refuse them in the next one, whoever writes it."""

    def loosen(t: pa.DataType) -> pa.DataType:
        if pa.types.is_struct(t):
            return pa.struct([_loose_field(t.field(i)) for i in range(t.num_fields)])
        if pa.types.is_map(t):
            return pa.map_(t.key_field, _loose_field(t.item_field))
        if pa.types.is_large_list(t):
            return pa.large_list(_loose_field(t.value_field))
        if pa.types.is_fixed_size_list(t):
            return pa.list_(_loose_field(t.value_field), t.list_size)
        if pa.types.is_list(t):
            return pa.list_(_loose_field(t.value_field))
        return t

    def _loose_field(f: pa.Field) -> pa.Field:
        return pa.field(f.name, loosen(f.type), True, metadata=f.metadata)

    return pa.schema([_loose_field(f) for f in schema], metadata=schema.metadata)
