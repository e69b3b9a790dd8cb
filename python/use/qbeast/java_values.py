"""How the JVM writes, reads and computes the values the Qbeast format stores (qbeast-spark is Scala on
Jackson): Java's number text, Jackson's compact JSON, Scala's `MurmurHash3.stringHash`,
`java.util.Random`, and Java's numeric conversions (float32 rounding, saturating double->int/long,
wrapping int/long arithmetic). Matching them bit for bit is what lets a revision written here be
read, hashed and extended by qbeast-spark and the other way round.
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from use.errors import InvalidArgumentError

__all__ = [
    "JavaFloat",
    "JavaRandom",
    "float32",
    "jackson_dumps",
    "java_double_str",
    "jvm_double_to_int",
    "scala_string_hash",
    "wrap_int",
]


# --- Java number text and JSON -------------------------------------------------------------------


def _java_digits_text(digits: str, exp10: int, negative: bool) -> str:
    """Java's Double/Float.toString layout for the significant `digits` (value = 0.digits * 10^exp10)."""
    sign = "-" if negative else ""
    # scientific exponent: value = d.ddd * 10^(exp10-1)
    sci = exp10 - 1
    if -3 <= sci < 7:
        if exp10 <= 0:
            return f"{sign}0.{'0' * (-exp10)}{digits}"
        if exp10 >= len(digits):
            return f"{sign}{digits}{'0' * (exp10 - len(digits))}.0"
        return f"{sign}{digits[:exp10]}.{digits[exp10:]}"
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{sci}"


def java_double_str(x: float, *, float32: bool = False) -> str:
    """`Double.toString(x)` (or `Float.toString` with `float32=True`)."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    # shortest digits that round-trip at the value's precision (float32 for Float.toString)
    text = np.format_float_scientific(np.float32(x), unique=True) if float32 else repr(x)
    d = decimal.Decimal(text)
    sign, digit_tuple, exponent = d.as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    exp10 = len(digit_tuple) + int(exponent)
    return _java_digits_text(digits, exp10, bool(sign))


class JavaFloat(float):
    """A float that the JSON writer prints with Java's `Float.toString`."""


def jackson_dumps(obj: Any) -> str:
    """Compact JSON as Jackson writes it: insertion-ordered keys, raw UTF-8, Java number text."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, JavaFloat):
        return java_double_str(obj, float32=True)
    if isinstance(obj, float):
        return java_double_str(obj)
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, str):
        return json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, Mapping):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{jackson_dumps(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(jackson_dumps(v) for v in obj) + "]"
    raise InvalidArgumentError(f"cannot write {type(obj).__name__} value {obj!r} to qbeast JSON")


# --- JVM-compatible randomness (nullValue regeneration) -----------------------------------------


def scala_string_hash(s: str, seed: int = 0xF7CA7FD2) -> int:
    """Scala's `MurmurHash3.stringHash`: UTF-16 code units mixed two at a time."""
    units = s.encode("utf-16-le")
    chars = [units[i] | (units[i + 1] << 8) for i in range(0, len(units), 2)]
    m = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & m

    def mix_last(h: int, k: int) -> int:
        k = (k * 0xCC9E2D51) & m
        k = rotl(k, 15)
        k = (k * 0x1B873593) & m
        return h ^ k

    def mix(h: int, k: int) -> int:
        h = mix_last(h, k)
        h = rotl(h, 13)
        return (h * 5 + 0xE6546B64) & m

    h = seed & m
    i = 0
    while i + 1 < len(chars):
        h = mix(h, ((chars[i] << 16) + chars[i + 1]) & m)
        i += 2
    if i < len(chars):
        h = mix_last(h, chars[i])
    h ^= len(chars)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & m
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & m
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


class JavaRandom:
    """`java.util.Random`, enough for `nextDouble` (the LinearTransformation null value seed)."""

    _MULT = 0x5DEECE66D
    _MASK = (1 << 48) - 1

    def __init__(self, seed: int) -> None:
        self._seed = (seed ^ self._MULT) & self._MASK

    def _next(self, bits: int) -> int:
        self._seed = (self._seed * self._MULT + 0xB) & self._MASK
        return self._seed >> (48 - bits)

    def next_double(self) -> float:
        return ((self._next(26) << 27) + self._next(27)) * 2.0**-53


# --- Java numeric conversions --------------------------------------------------------------------


def float32(x: float) -> float:
    """The value of Java's `(float) x` (round to nearest float32), as a Python float."""
    return float(np.float32(x))


def jvm_double_to_int(x: float, bits: int = 32) -> int:
    """Java's `(int) x` / `(long) x` (`bits` 32 or 64): NaN -> 0, truncate toward zero, saturate."""
    if math.isnan(x):
        return 0
    hi = (1 << (bits - 1)) - 1
    lo = -(1 << (bits - 1))
    if x >= hi:
        return hi
    if x <= lo:
        return lo
    return int(x)  # int() truncates toward zero


def wrap_int(x: int, bits: int = 32) -> int:
    """Java's wrap-around int (`bits=32`) or long (`bits=64`) arithmetic result for `x`."""
    m = 1 << bits
    x %= m
    return x - m if x >= m >> 1 else x
