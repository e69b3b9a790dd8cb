"""The typed protocol between the JVM shim and the Python side: its messages (`messages`, mirrored
by the shim's `Protocol.scala`) and their one JSON codec (`codec`)."""

from __future__ import annotations

import dataclasses
import inspect

from use.sql.protocol import messages
from use.sql.protocol.codec import ProtocolError, Scalar, arrow_stream, camel, decode, encode, read_arrow_stream, wire_fields
from use.sql.protocol.messages import *  # noqa: F403 - the messages are the package's names

#: Every message class, by name (the name of its fixture, tests/protocol/<name>.json, and of its case class).
MESSAGES: dict[str, type] = {
    name: cls
    for name, cls in inspect.getmembers(messages, inspect.isclass)
    if dataclasses.is_dataclass(cls) and cls.__module__ == messages.__name__
}
#: The request class of each bridge method, by the method's name.
REQUESTS: dict[str, type] = {cls.METHOD: cls for cls in MESSAGES.values() if hasattr(cls, "METHOD")}

__all__ = [
    "MESSAGES",
    "REQUESTS",
    "ProtocolError",
    "Scalar",
    "arrow_stream",
    "camel",
    "decode",
    "encode",
    "read_arrow_stream",
    "wire_fields",
    *messages.__all__,
]
