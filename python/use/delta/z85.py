"""Z85, the base-85 text form the Delta protocol gives deletion vectors in the log: a `u` vector's
UUID (20 characters) and an inline `i` vector's bytes.

Z85 (ZeroMQ RFC 32) and the standard library's base85 (`base64.b85encode`, RFC 1924's alphabet) are
the same code, big-endian 4-byte blocks as 5 digits of base 85, and differ only in the characters
used for the digits; so this codec translates the alphabet and leaves the arithmetic to `base64`
(Python 3.13's `base64.z85decode` does the same). Delta pads bytes to a multiple of 4 with zeros
and drops the padding on decode by the known size (`sizeInBytes`), as here.
"""

from __future__ import annotations

import base64
import binascii
import uuid

__all__ = ["Z85Error", "decode", "decode_uuid", "encode", "encode_uuid"]

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_B85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
_TO_B85 = str.maketrans(_Z85, _B85)
_TO_Z85 = str.maketrans(_B85, _Z85)
_NOT_Z85 = str.maketrans("", "", _Z85)

#: the length of an encoded UUID (16 bytes, 4 blocks)
UUID_LENGTH = 20


class Z85Error(ValueError):
    """Text that is not Z85 (a character outside its alphabet, a length not a multiple of 5, a
    block above 2^32 - 1); the caller says whose text it was."""


def encode(data: bytes) -> str:
    """`data` as Z85 text, zero-padded to a multiple of 4 bytes first (as Delta encodes inline vectors)."""
    return base64.b85encode(bytes(data), pad=True).decode("ascii").translate(_TO_Z85)


def decode(text: str, size: int | None = None) -> bytes:
    """The bytes of Z85 `text`; with `size`, the first `size` of them (padding dropped). Z85Error when
    the text is not Z85 or holds fewer than `size` bytes."""
    if not isinstance(text, str):
        raise Z85Error(f"Z85 text must be a string, got {type(text).__name__}")
    if len(text) % 5:
        raise Z85Error(f"Z85 text has {len(text)} characters, not a multiple of 5")
    stray = text.translate(_NOT_Z85)
    if stray:
        raise Z85Error(f"{stray[0]!r} is not a Z85 character")
    try:
        data = base64.b85decode(text.translate(_TO_B85))
    except (ValueError, binascii.Error) as exc:  # a block above 2^32 - 1
        raise Z85Error(f"Z85 text is malformed ({exc})") from None
    if size is None:
        return data
    if size < 0 or size > len(data):
        raise Z85Error(f"Z85 text holds {len(data)} bytes, not the {size} expected")
    return data[:size]


def encode_uuid(value: uuid.UUID) -> str:
    """A UUID as Delta writes it in a `u` deletion vector's path: its 16 bytes, big-endian, as Z85."""
    return encode(value.bytes)


def decode_uuid(text: str) -> uuid.UUID:
    """The UUID of a `u` deletion vector's 20 Z85 characters."""
    if len(text) != UUID_LENGTH:
        raise Z85Error(f"an encoded UUID has {UUID_LENGTH} characters, got {len(text)}")
    return uuid.UUID(bytes=decode(text))
