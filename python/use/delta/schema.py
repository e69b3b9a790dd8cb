"""Delta schema JSON (`metaData.schemaString`) <-> pyarrow schema.

Delta types map to the Arrow types delta-rs uses (timestamps are microseconds, `timestamp` in UTC),
so files written by either engine line up. Field metadata: Delta allows any JSON value, Arrow only
strings; string values pass through, other values are carried as their JSON text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from use.delta.typewidening import is_supported_change
from use.errors import CorruptLogError, InvalidArgumentError, SchemaMismatchError

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
        if t == VOID:  # the protocol's void type (delta-spark's mergeSchema of an all-NULL column): read as NULLs
            return pa.null()
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
    if pa.types.is_null(t):
        return VOID
    if pa.types.is_dictionary(t):
        return _type_to_delta(t.value_type, where)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_boolean(t):
        return "boolean"
    simple = {
        pa.int8(): "byte",
        pa.int16(): "short",
        pa.int32(): "integer",
        pa.int64(): "long",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.date32(): "date",
    }
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
        return {
            "type": "array",
            "elementType": _type_to_delta(t.value_type, f"{where}.element"),
            "containsNull": t.value_field.nullable,
        }
    if pa.types.is_map(t):
        return {
            "type": "map",
            "keyType": _type_to_delta(t.key_type, f"{where}.key"),
            "valueType": _type_to_delta(t.item_type, f"{where}.value"),
            "valueContainsNull": t.item_field.nullable,
        }
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
    """The `schemaString` of an Arrow schema (SchemaMismatchError for types Delta cannot hold, and
    for NULL-typed columns: `check_no_void`)."""
    names = [f.name for f in schema]
    dupes = sorted(
        {n for n in names if names.count(n) > 1 or names.count(n.lower()) > 1}
        | {n for n in names if sum(1 for m in names if m.lower() == n.lower()) > 1}
    )
    if dupes:
        raise SchemaMismatchError(f"duplicate column names (Delta names are case-insensitive): {dupes}")
    fields = [_field_to_delta(f) for f in schema]
    check_no_void(fields, "the table")
    doc = {"type": "struct", "fields": fields}
    return json.dumps(doc, separators=(",", ":"))


#: Spark's and the protocol's name of the NULL type (Spark's `NullType`, what `lit(None)` has).
VOID = "void"

#: Delta type names that Spark SQL spells otherwise (`DataType.simpleString`).
_SQL_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def type_sql(t: Any, *, nullability: bool = False) -> str:
    """A Delta type (schemaString JSON) as Spark SQL writes it (`bigint`, `struct<a:int>`), for
    messages; with `nullability`, `NOT NULL` marks each non-nullable field, element and value, for
    two types that differ only there."""

    def nn(nullable: Any) -> str:
        return " NOT NULL" if nullability and nullable is False else ""

    if isinstance(t, str):
        return _SQL_NAMES.get(t, t)
    kind = t.get("type") if isinstance(t, dict) else None
    if kind == "struct":
        inner = ",".join(
            f"{f['name']}:{type_sql(f['type'], nullability=nullability)}{nn(f.get('nullable'))}" for f in t["fields"]
        )
        return f"struct<{inner}>"
    if kind == "array":
        return f"array<{type_sql(t['elementType'], nullability=nullability)}{nn(t.get('containsNull'))}>"
    if kind == "map":
        key, value = type_sql(t["keyType"], nullability=nullability), type_sql(t["valueType"], nullability=nullability)
        return f"map<{key},{value}{nn(t.get('valueContainsNull'))}>"
    return json.dumps(t)


def _shown(data: Any, table: Any) -> tuple[str, str]:
    """The two types as messages show them: with NOT NULL marks when they would print alike."""
    a, b = type_sql(data), type_sql(table)
    return (type_sql(data, nullability=True), type_sql(table, nullability=True)) if a == b else (a, b)


def nullable_type(t: Any) -> Any:
    """The Delta type with every nested field, array element and map value nullable, as Delta
    stores a column a write adds (Spark's `asNullable`): that the rows of that write had no NULL
    inside must not refuse NULLs in later ones. Map keys stay required (they cannot be NULL)."""
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "struct":
            return {**t, "fields": [{**f, "type": nullable_type(f["type"]), "nullable": True} for f in t["fields"]]}
        if kind == "array":
            return {**t, "elementType": nullable_type(t["elementType"]), "containsNull": True}
        if kind == "map":
            return {
                **t,
                "keyType": nullable_type(t["keyType"]),
                "valueType": nullable_type(t["valueType"]),
                "valueContainsNull": True,
            }
    return t


def write_type_problem(data: Any, table: Any, where: str) -> str | None:
    """Why values of the Delta type `data` cannot be written into the column `where` of the Delta
    type `table` (None: they can). The one rule of DataFrame writes into an existing table
    (`df.write.format("delta").save(path)` in every mode and option, `DeltaTable.write`,
    `QbeastTable.write`), Delta's (`SchemaMergingUtils.mergeSchemas`, which Delta's DataFrame writer
    applies): NULLs aside (the data's nullability is not trusted; a NOT NULL column is checked row
    by row as the rows are written), the type must be the table's, or one the table's holds without
    loss (an int into a bigint, a float into a double, a decimal(10,2) into a decimal(12,2): the
    protocol's widenings, `use.delta.typewidening.is_supported_change`; Delta itself takes only the
    tinyint/smallint/int ones, as a cast they are exact), nested types field by field (by name, any
    case, any order), and an all-NULL (void) value fits any column. Anything else, narrowing
    (bigint into int, double into float) or converting (string into int), is refused rather than
    cast: a cast could change or lose the values ("Failed to merge incompatible data types", Delta
    says)."""
    if data == VOID:
        return None
    if isinstance(data, str) and isinstance(table, str):
        if data == table or is_supported_change(data, table):
            return None
    elif isinstance(data, dict) and isinstance(table, dict) and data.get("type") == table.get("type"):
        kind = table.get("type")
        if kind == "struct":
            have = {f["name"].lower(): f for f in data["fields"]}
            want = {f["name"].lower(): f for f in table["fields"]}
            extra = [f["name"] for f in data["fields"] if f["name"].lower() not in want]
            missing = [f["name"] for f in table["fields"] if f["name"].lower() not in have]
            if not extra and not missing:
                for f in table["fields"]:
                    problem = write_type_problem(have[f["name"].lower()]["type"], f["type"], f"{where}.{f['name']}")
                    if problem:
                        return problem
                return None
            a, b = _shown(data, table)
            why = "; ".join(
                ([f"fields not in the table: {', '.join(extra)}"] if extra else [])
                + ([f"fields missing from the data: {', '.join(missing)}"] if missing else [])
            )
            return f"{where} is {a} in the data and {b} in the table ({why})"
        if kind == "array":
            return write_type_problem(data["elementType"], table["elementType"], f"{where}.element")
        if kind == "map":
            return write_type_problem(data["keyType"], table["keyType"], f"{where}.key") or write_type_problem(
                data["valueType"], table["valueType"], f"{where}.value"
            )
    a, b = _shown(data, table)
    return f"{where} is {a} in the data and {b} in the table"


def void_columns(fields: list[dict[str, Any]], parent: str = "") -> list[str]:
    """The (nested) columns of these schemaString fields whose type is NULL (void), by path."""

    def walk(t: Any, where: str) -> list[str]:
        if t == VOID:
            return [where]
        if isinstance(t, dict):
            if t.get("type") == "struct":
                return [p for f in t["fields"] for p in walk(f["type"], f"{where}.{f['name']}")]
            if t.get("type") == "array":
                return walk(t["elementType"], f"{where}.element")
            if t.get("type") == "map":
                return walk(t["keyType"], f"{where}.key") + walk(t["valueType"], f"{where}.value")
        return []

    return [p for f in fields for p in walk(f["type"], f"{parent}{f['name']}")]


def check_no_void(fields: list[dict[str, Any]], target: str) -> None:
    """SchemaMismatchError naming the columns of these schemaString fields that have no type (all
    NULL, e.g. `lit(None)`: Spark's NullType, `void`), which a write cannot add to `target`. Delta
    stores such a column as `void` and leaves it out of every data file, a column that can never
    hold a value; USE refuses it instead, so the mistake shows where it is made: the column needs
    the type its values will have."""
    voids = void_columns(fields)
    if voids:
        raise SchemaMismatchError(
            f"column {', '.join(voids)} of the data has no type (it is all NULL, e.g. lit(None): Spark's NullType, "
            f"'void'), which a write cannot add to {target}; cast it to the type its values will have, e.g. "
            f'lit(None).cast("string") in Python or CAST(NULL AS STRING) in SQL'
        )


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


def check_partition_types(schema: pa.Schema, partition_columns: Sequence[str], where: str) -> None:
    """Partition columns must be primitive, non-binary columns of the data (Delta's rule)."""
    for c in partition_columns:
        if c not in schema.names:
            raise InvalidArgumentError(f"partition column {c!r} is not a column of {where} (columns: {schema.names})")
        t = schema.field(c).type
        if pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
            raise InvalidArgumentError(
                f"partition column {c!r} has type {t}, which cannot be a partition value; partition by a string, "
                "number, boolean, date or timestamp column"
            )


def check_append_schema(data: pa.Schema, table: pa.Schema, path: str) -> None:
    """Appends must bring exactly the table's columns (order may differ), each of a type the
    table's column takes (`write_type_problem`: the same, NULLs aside, or one it widens without
    loss; the write casts it); a SchemaMismatchError naming every difference otherwise."""
    extra = [n for n in data.names if n not in table.names]
    missing = [n for n in table.names if n not in data.names]
    differing = [
        problem
        for f in table
        if f.name in data.names
        and (
            problem := write_type_problem(_type_to_delta(data.field(f.name).type, f.name), _type_to_delta(f.type, f.name), f.name)
        )
    ]
    if extra or missing or differing:
        parts = []
        if extra:
            parts.append(f"columns not in the table: {', '.join(extra)}")
        if missing:
            parts.append(f"table columns missing from the data: {', '.join(missing)}")
        if differing:
            parts.append(
                f"columns of a type the table's cannot take without a cast that could change values: {'; '.join(differing)}"
            )
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
