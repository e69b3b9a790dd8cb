"""The one JSON codec of the shim protocol: frozen dataclasses to JSON objects and back.

Field names are camelCase on the wire (`partition_columns` <-> `partitionColumns`), as the shim's
case classes name them (`jvm-shim/src/main/scala/use/sql/Protocol.scala`). Every field is written,
`None` as null, so both sides always see the whole message; a field missing from a message read is
its default when the dataclass has one, else a `ProtocolError`, and so is a field the dataclass does
not have: the shim and the Python package then differ, which must never pass silently. `bytes` (Arrow
IPC streams) travel as base64 text, tuples as arrays, mappings as objects.

Rows cross as Arrow IPC streams (`arrow_stream`), which the shim reads and writes with Spark's own
Arrow converters, each value in its Spark type.
"""

from __future__ import annotations

import base64
import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import pyarrow as pa

__all__ = ["ProtocolError", "arrow_stream", "camel", "decode", "encode", "read_arrow_stream", "wire_fields"]

T = TypeVar("T")

#: A JSON scalar (a partition filter's value): written and read as it is.
Scalar = str | int | float | bool | None


class ProtocolError(Exception):
    """A message the other side cannot have sent (a missing or unknown field, a wrong type): the shim
    and the Python package are of different versions. Not a `UseError`: reported as an internal error."""


def camel(name: str) -> str:
    """`timestamp_ms` -> `timestampMs`: a dataclass field's name on the wire."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_FIELDS: dict[type, tuple[tuple[str, str, Any, bool], ...]] = {}


def _fields(cls: type) -> tuple[tuple[str, str, Any, bool], ...]:
    """(attribute, wire name, type, has a default) of each field of a message class (read once)."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _FIELDS[cls] = tuple(
            (
                f.name,
                camel(f.name),
                hints[f.name],
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
        )
    return found


def wire_fields(cls: type) -> tuple[str, ...]:
    """A message class's field names as the wire (and the shim's case class) spells them."""
    return tuple(wire for _, wire, _, _ in _fields(cls))


def encode(message: Any) -> dict[str, Any]:
    """A message as its JSON object (every field present)."""
    return {wire: _encode(getattr(message, name)) for name, wire, _, _ in _fields(type(message))}


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


def decode(cls: type[T], data: Any) -> T:
    """The message `cls` of a JSON object; ProtocolError naming the field when it is not one."""
    if not isinstance(data, Mapping):
        raise ProtocolError(f"{cls.__name__} must be a JSON object, got {type(data).__name__}")
    known = _fields(cls)
    unknown = sorted(set(data) - {wire for _, wire, _, _ in known})
    if unknown:
        raise ProtocolError(f"{cls.__name__} has no field {', '.join(unknown)}: the shim and the Python package differ")
    values = {}
    for name, wire, tp, has_default in known:
        if wire in data:
            values[name] = _decode(tp, data[wire], f"{cls.__name__}.{wire}")
        elif not has_default:
            raise ProtocolError(f"{cls.__name__} lacks its field {wire}: the shim and the Python package differ")
    return cls(**values)


def _decode(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        members = typing.get_args(tp)
        if value is None and type(None) in members:
            return None
        others = [m for m in members if m is not type(None)]
        if len(others) == 1:
            return _decode(others[0], value, where)
        for member in others:  # a union of scalars (`Scalar`)
            if _is_scalar(member, value):
                return value
        raise ProtocolError(f"{where} must be one of {tp}, got {value!r}")
    if origin is tuple:
        if not isinstance(value, list):
            raise ProtocolError(f"{where} must be a JSON array, got {value!r}")
        (item, _) = typing.get_args(tp)
        return tuple(_decode(item, v, f"{where}[]") for v in value)
    if origin in (Mapping, dict):
        if not isinstance(value, Mapping):
            raise ProtocolError(f"{where} must be a JSON object, got {value!r}")
        item = typing.get_args(tp)[1]
        return {str(k): _decode(item, v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return decode(tp, value)
    if tp is bytes:
        if not isinstance(value, str):
            raise ProtocolError(f"{where} must be base64 text, got {type(value).__name__}")
        return base64.b64decode(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not _is_scalar(tp, value):
        raise ProtocolError(f"{where} must be {getattr(tp, '__name__', tp)}, got {value!r}")
    return value


def _is_scalar(tp: Any, value: Any) -> bool:
    if tp is bool or isinstance(value, bool):
        return tp is bool and isinstance(value, bool)
    if tp is int:
        return isinstance(value, int)
    if tp is float:
        return isinstance(value, (int, float))
    if tp is str:
        return isinstance(value, str)
    return False


def arrow_stream(table: pa.Table) -> bytes:
    """A table as one Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def read_arrow_stream(data: bytes) -> pa.Table:
    """The table an Arrow IPC stream holds."""
    with pa.ipc.open_stream(data) as reader:
        return reader.read_all()
