"""Type widening (Delta protocol, "Type Widening"): reading a column whose type was widened.

A table with the `typeWidening` reader feature may hold files written before a column's type was
widened (int -> long, float -> double, date -> timestamp_ntz, decimal precision/scale up, ...). The
schema records each change in the field metadata `delta.typeChanges`. Readers must read old files
as the new type (Spark's parquet reader does so for every widening the protocol allows) and must
refuse a table whose history holds a change they do not know.

Stats need one care: an old file's min/max were written as JSON text of the old type. Read as the
new type they stay exact bounds for every allowed change but one: a float's shortest decimal text
("3.4") read as a double is not the float widened to double (3.4000000953674316), so the max may
fall below the widened values. Min/max of such columns are not used for skipping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from use.delta.actions import Protocol
from use.errors import UnsupportedFeatureError

TYPE_CHANGES_KEY = "delta.typeChanges"
FEATURES = ("typeWidening", "typeWidening-preview")

_INTS = ("byte", "short", "integer", "long")
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def _decimal(t: str) -> tuple[int, int] | None:
    m = _DECIMAL.match(t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def is_supported_change(from_type: str, to_type: str) -> bool:
    """Whether the protocol allows widening `from_type` to `to_type` (Delta type names)."""
    if from_type in _INTS and to_type in _INTS:
        return _INTS.index(from_type) < _INTS.index(to_type)
    if to_type == "double" and from_type in ("float", "byte", "short", "integer"):
        return True
    if (from_type, to_type) == ("date", "timestamp_ntz"):
        return True
    to_dec = _decimal(to_type)
    if to_dec is None:
        return False
    p, s = to_dec
    from_dec = _decimal(from_type)
    if from_dec is not None:
        k1, k2 = p - from_dec[0], s - from_dec[1]
    elif from_type in ("byte", "short", "integer"):
        k1, k2 = p - 10, s
    elif from_type == "long":
        k1, k2 = p - 20, s
    else:
        return False
    return k1 >= k2 >= 0


def _type_changes(f: pa.Field) -> list[Any]:
    raw = (f.metadata or {}).get(TYPE_CHANGES_KEY.encode())
    if raw is None:
        return []
    try:
        changes = json.loads(raw)
    except ValueError:
        changes = None
    if not isinstance(changes, list):
        raise UnsupportedFeatureError(
            f"column {f.name} has a {TYPE_CHANGES_KEY} that is not a JSON list ({raw[:200]!r}); USE cannot tell how its "
            "type was widened",
            feature="typeWidening",
        )
    return changes


def _fields(schema: pa.Schema | pa.DataType, prefix: str = "") -> Iterator[tuple[str, pa.Field]]:
    """Every struct field with its dotted path, through structs, lists and maps."""
    if isinstance(schema, pa.Schema):
        children = list(schema)
    elif pa.types.is_struct(schema):
        children = [schema.field(i) for i in range(schema.num_fields)]
    elif pa.types.is_list(schema) or pa.types.is_large_list(schema):
        yield from _fields(schema.value_type, f"{prefix}.element" if prefix else "element")
        return
    elif pa.types.is_map(schema):
        yield from _fields(schema.key_type, f"{prefix}.key" if prefix else "key")
        yield from _fields(schema.item_type, f"{prefix}.value" if prefix else "value")
        return
    else:
        return
    for f in children:
        path = f"{prefix}.{f.name}" if prefix else f.name
        yield path, f
        yield from _fields(f.type, path)


def check_type_changes(protocol: Protocol, schema: pa.Schema, table: str) -> None:
    """UnsupportedFeatureError unless every recorded type change is one the protocol allows."""
    if protocol.min_reader_version < 3 or not any(f in (protocol.reader_features or ()) for f in FEATURES):
        return
    for path, f in _fields(schema):
        for change in _type_changes(f):
            frm = change.get("fromType") if isinstance(change, dict) else None
            to = change.get("toType") if isinstance(change, dict) else None
            if not (isinstance(frm, str) and isinstance(to, str) and is_supported_change(frm.strip(), to.strip())):
                where = path + (f".{change['fieldPath']}" if isinstance(change, dict) and change.get("fieldPath") else "")
                raise UnsupportedFeatureError(
                    f"table {table} widened column {where} from {frm!r} to {to!r}, a type change USE cannot read "
                    "(feature 'typeWidening' allows integer, float->double, date->timestamp_ntz and decimal widening)",
                    feature="typeWidening",
                )


def inexact_stat_leaves(schema: pa.Schema) -> frozenset[tuple[str, ...]]:
    """Struct-leaf paths whose min/max stats may not bound the widened values (a float -> double change)."""
    out: set[tuple[str, ...]] = set()

    def walk(fields: list[pa.Field], prefix: tuple[str, ...]) -> None:
        for f in fields:
            path = prefix + (f.name,)
            if pa.types.is_struct(f.type):
                walk([f.type.field(i) for i in range(f.type.num_fields)], path)
            elif f.metadata and TYPE_CHANGES_KEY.encode() in f.metadata:
                for change in _type_changes(f):
                    if (
                        isinstance(change, dict)
                        and not change.get("fieldPath")
                        and str(change.get("fromType", "")).strip() == "float"
                    ):
                        out.add(path)

    walk(list(schema), ())
    return frozenset(out)
