"""Transformers and transformations: how a column value becomes a coordinate in [0,1] (spec §4).

A *transformer* is the per-column recipe stored in a revision (`LinearTransformer{columnName,
dataType}` ...); a *transformation* is the recipe applied to data with the statistics it was built
from (`LinearTransformation{minNumber,maxNumber,nullValue,orderedDataType}` ...). Both are written
to the Delta log as Jackson JSON with a fully qualified `className`, so the classes here carry the
exact Scala names and field order, and the JSON numbers use Java's `Double.toString` text.

`transform(array)` is the per-row hot path of the writer (it runs in executors over Arrow batches)
and is numpy-vectorized; `transform_value(v)` is the scalar form for query literals.

Value conventions (the Scala code's, made explicit):
* Date and Timestamp values are epoch **milliseconds**. A date is taken at **UTC** midnight (Scala
  uses the JVM's local midnight; the engine's sessions run in UTC, so both agree there). Timestamps
  are floored to the millisecond, like `java.sql.Timestamp.getTime`.
* Decimals are doubles.
* Hashing hashes the UTF-8 bytes of strings, and numbers through their Java `toString` text. Integer
  text is exact; doubles use Python's shortest round-trip digits in Java's layout (`1.0E10`), which
  is what Java 19+ prints and what Java 17 prints for all but a few rare values.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
import random as _random
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.errors import PYTHON, CorruptIndexMetadataError, InvalidArgumentError, UnsupportedTypeError
from use.qbeast.weight import SCALA_ARRAY_SEED, scala_murmur_bytes, scala_murmur_strings

PACKAGE = "io.qbeast.core.transform."

# --- QDataType -----------------------------------------------------------------------------------

INTEGER = "IntegerDataType"
LONG = "LongDataType"
DOUBLE = "DoubleDataType"
FLOAT = "FloatDataType"
DECIMAL = "DecimalDataType"
TIMESTAMP = "TimestampDataType"
DATE = "DateDataType"
STRING = "StringDataType"
ORDERED_TYPES: frozenset[str] = frozenset({INTEGER, LONG, DOUBLE, FLOAT, DECIMAL, TIMESTAMP, DATE})
ALL_TYPES: frozenset[str] = ORDERED_TYPES | {STRING}
_INTEGRAL_TYPES = frozenset({INTEGER, LONG, TIMESTAMP, DATE})  # JSON values are integers

TRANSFORMER_TYPES: tuple[str, ...] = ("linear", "hashing", "quantiles")
"""The transformer names a column spec may use (`col:linear`); `histogram` is read-only (deprecated)."""


def qdatatype_of(arrow_type: pa.DataType, column: str = "?") -> str:
    """The qbeast-spark QDataType name of an Arrow type (only the types qbeast-spark can index).

    Spark's byte/short/boolean/binary columns have no QDataType upstream; indexing them here would
    make a table qbeast-spark cannot append to, so they are refused with a hint to cast.
    """
    t = arrow_type
    if pa.types.is_int32(t):
        return INTEGER
    if pa.types.is_int64(t):
        return LONG
    if pa.types.is_float64(t):
        return DOUBLE
    if pa.types.is_float32(t):
        return FLOAT
    if pa.types.is_decimal(t):
        return DECIMAL
    if pa.types.is_timestamp(t):
        return TIMESTAMP
    if pa.types.is_date(t):
        return DATE
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return STRING
    raise UnsupportedTypeError(
        f"column {column!r} has type {t}, which cannot be indexed; indexable types are int, bigint, "
        f"double, float, decimal, date, timestamp and string (cast byte/short to int first)"
    )


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


class _JavaFloat(float):
    """A float that the JSON writer prints with Java's `Float.toString`."""


def jackson_dumps(obj: Any) -> str:
    """Compact JSON as Jackson writes it: insertion-ordered keys, raw UTF-8, Java number text."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, _JavaFloat):
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


def _scala_string_hash(s: str, seed: int = 0xF7CA7FD2) -> int:
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


class _JavaRandom:
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


def _random_between(lo: Any, hi: Any, data_type: str, r: float) -> Any:
    """`LinearTransformation.generateRandomNumber`: integral types truncate like `.toLong/.toInt`."""
    if data_type in _INTEGRAL_TYPES:
        return int(lo) + int(r * (int(hi) - int(lo)))
    return float(lo) + r * (float(hi) - float(lo))


# --- value conversion ----------------------------------------------------------------------------

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def to_number(value: Any, data_type: str) -> int | float | None:
    """A Python value (from Spark `collect`, a literal or JSON) in the transformation's number space.

    Dates become UTC-midnight epoch millis; datetimes epoch millis (a naive datetime is read as the
    process's local time, which is what PySpark hands back from `collect`); decimals floats.
    """
    if value is None:
        return None
    if data_type in (TIMESTAMP, DATE):
        if isinstance(value, _dt.datetime):
            if value.tzinfo is None:
                micros = round(value.timestamp() * 1_000_000)
            else:
                delta = value - _EPOCH
                micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
            return micros // 1000
        if isinstance(value, _dt.date):
            return (value - _EPOCH.date()).days * 86_400_000
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
        if hasattr(value, "value") and hasattr(value, "tz_localize"):  # pandas Timestamp: ns
            return int(value.value) // 1_000_000
        raise InvalidArgumentError(f"{value!r} is not a {data_type} value (expected a date/datetime or epoch millis)")
    if data_type in (INTEGER, LONG):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, decimal.Decimal)):
            raise InvalidArgumentError(f"{value!r} is not a {data_type} value")
        if isinstance(value, (float, decimal.Decimal)) and value != int(value):
            raise InvalidArgumentError(f"{value!r} is not an integral {data_type} value")
        return int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating, decimal.Decimal)):
        raise InvalidArgumentError(f"{value!r} is not a {data_type} value")
    return float(value)


def _array_to_float64(arr: pa.Array | pa.ChunkedArray, data_type: str) -> tuple[np.ndarray, np.ndarray]:
    """Values as float64 in the transformation's number space, plus the null mask."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    nulls = np.asarray(arr.is_null(), dtype=bool) if arr.null_count else np.zeros(len(arr), dtype=bool)
    if pa.types.is_date32(t):
        values = arr.cast(pa.int32()).to_numpy(zero_copy_only=False).astype(np.float64) * 86_400_000.0
    elif pa.types.is_date64(t):
        values = arr.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.float64)
    elif pa.types.is_timestamp(t):
        per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[t.unit]
        raw = arr.cast(pa.int64()).to_numpy(zero_copy_only=False)
        ms = raw * 1000 if per_ms is None else np.floor_divide(raw, per_ms)
        values = ms.astype(np.float64)
    elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        values = pc.cast(arr, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    else:
        raise UnsupportedTypeError(f"a {data_type} transformation cannot transform an Arrow {t} column")
    values = np.asarray(values, dtype=np.float64)
    if nulls.any():
        values = np.where(nulls, 0.0, values)
    return values, nulls


# --- transformations -----------------------------------------------------------------------------


class Transformation:
    """Maps values of one column to [0,1]; merged and compared to decide new revisions (§3.1)."""

    class_name: ClassVar[str]

    def transform(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        raise NotImplementedError

    def transform_value(self, value: Any, *, clamp: bool = True) -> float:
        """Scalar transform for a query literal. With `clamp=False` the raw position is returned, so a
        query builder can tell a range that lies entirely outside the revision's space."""
        raise NotImplementedError

    def is_superseded_by(self, other: Transformation) -> bool:
        raise NotImplementedError

    def merge(self, other: Transformation) -> Transformation:
        raise NotImplementedError

    def to_json_obj(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self) -> str:
        return jackson_dumps(self.to_json_obj())


def _clamped(x: np.ndarray) -> np.ndarray:
    return np.clip(np.nan_to_num(x, nan=0.0), 0.0, 1.0)


def _clamp1(x: float, clamp: bool) -> float:
    if not clamp:
        return x
    if math.isnan(x):
        return 0.0
    return min(1.0, max(0.0, x))


@dataclass(frozen=True)
class LinearTransformation(Transformation):
    """`(v - min) / (max - min)`; nulls take `null_value`, a random point of the range fixed at
    creation so nulls spread like one more value instead of piling onto a bound."""

    min_number: int | float
    max_number: int | float
    null_value: int | float
    ordered_data_type: str

    class_name: ClassVar[str] = PACKAGE + "LinearTransformation"

    def __post_init__(self) -> None:
        if self.ordered_data_type not in ORDERED_TYPES:
            raise InvalidArgumentError(
                f"a linear transformation needs an ordered data type ({sorted(ORDERED_TYPES)}), got {self.ordered_data_type!r}"
            )
        for name in ("min_number", "max_number"):
            v = getattr(self, name)
            if v is None or (isinstance(v, float) and not math.isfinite(v)):
                raise InvalidArgumentError(f"a linear transformation needs finite bounds, got {name}={v!r}")
        if not float(self.max_number) > float(self.min_number):
            raise InvalidArgumentError(
                f"a linear transformation needs max > min, got min={self.min_number!r} max={self.max_number!r}"
            )

    @classmethod
    def create(
        cls, min_number: Any, max_number: Any, ordered_data_type: str, *, rng: _random.Random | None = None
    ) -> LinearTransformation:
        """A new transformation over [min, max] with a fresh random null value."""
        lo = to_number(min_number, ordered_data_type)
        hi = to_number(max_number, ordered_data_type)
        r = (rng or _random).random()
        return cls(lo, hi, _random_between(lo, hi, ordered_data_type, r), ordered_data_type)  # type: ignore[arg-type]

    @property
    def _scale(self) -> float:
        return 1.0 / (float(self.max_number) - float(self.min_number))

    def transform(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        values, nulls = _array_to_float64(array, self.ordered_data_type)
        if nulls.any():
            values = np.where(nulls, float(self.null_value), values)
        return _clamped((values - float(self.min_number)) * self._scale)

    def transform_value(self, value: Any, *, clamp: bool = True) -> float:
        v = self.null_value if value is None else to_number(value, self.ordered_data_type)
        return _clamp1((float(v) - float(self.min_number)) * self._scale, clamp)  # type: ignore[arg-type]

    def is_superseded_by(self, other: Transformation) -> bool:
        if isinstance(other, LinearTransformation) and other.ordered_data_type == self.ordered_data_type:
            return other.min_number < self.min_number or other.max_number > self.max_number
        if isinstance(other, IdentityTransformation) and other.ordered_data_type == self.ordered_data_type:
            v = other.identity_value
            return v is not None and (v < self.min_number or v > self.max_number)
        if isinstance(other, EmptyTransformation):
            return False
        return True

    def merge(self, other: Transformation) -> Transformation:
        if isinstance(other, LinearTransformation) and other.ordered_data_type == self.ordered_data_type:
            return LinearTransformation.create(
                min(self.min_number, other.min_number), max(self.max_number, other.max_number), self.ordered_data_type
            )
        if isinstance(other, IdentityTransformation) and other.ordered_data_type == self.ordered_data_type:
            if other.identity_value is None:
                return self
            return LinearTransformation.create(
                min(self.min_number, other.identity_value),
                max(self.max_number, other.identity_value),
                self.ordered_data_type,
            )
        if isinstance(other, EmptyTransformation):
            return self
        return other

    def _json_number(self, v: Any) -> Any:
        if self.ordered_data_type in _INTEGRAL_TYPES:
            return int(v)
        if self.ordered_data_type == FLOAT:
            return _JavaFloat(v)
        return float(v)

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "className": self.class_name,
            "minNumber": self._json_number(self.min_number),
            "maxNumber": self._json_number(self.max_number),
            "nullValue": self._json_number(self.null_value),
            "orderedDataType": self.ordered_data_type,
        }


@dataclass(frozen=True)
class IdentityTransformation(Transformation):
    """All the data seen so far had one value (or none): every value maps to 0."""

    identity_value: int | float | None
    ordered_data_type: str

    class_name: ClassVar[str] = PACKAGE + "IdentityTransformation"

    def transform(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        return np.zeros(len(array), dtype=np.float64)

    def transform_value(self, value: Any, *, clamp: bool = True) -> float:
        return 0.0

    def is_superseded_by(self, other: Transformation) -> bool:
        if isinstance(other, IdentityTransformation) and other.ordered_data_type == self.ordered_data_type:
            if other.identity_value is None:
                return False
            if self.identity_value is None:
                return True
            return other.identity_value != self.identity_value
        if isinstance(other, EmptyTransformation):
            return False
        return True

    def merge(self, other: Transformation) -> Transformation:
        if isinstance(other, LinearTransformation) and other.ordered_data_type == self.ordered_data_type:
            v = self.identity_value
            if v is None or (other.min_number <= v <= other.max_number):
                return other
            return LinearTransformation.create(
                min(other.min_number, v), max(other.max_number, v), self.ordered_data_type
            )
        if isinstance(other, IdentityTransformation) and other.ordered_data_type == self.ordered_data_type:
            if other.identity_value is None:
                return self
            if self.identity_value is None:
                return other
            if self.identity_value == other.identity_value:
                return self
            lo, hi = sorted((self.identity_value, other.identity_value))
            return LinearTransformation.create(lo, hi, self.ordered_data_type)
        if isinstance(other, EmptyTransformation):
            return self
        return other

    def to_json_obj(self) -> dict[str, Any]:
        v = self.identity_value
        if v is not None:
            v = int(v) if self.ordered_data_type in _INTEGRAL_TYPES else (
                _JavaFloat(v) if self.ordered_data_type == FLOAT else float(v)
            )
        return {"className": self.class_name, "identityValue": v, "orderedDataType": self.ordered_data_type}


def _hash_text_of_number(v: Any) -> str:
    """Java `Number.toString` of a value the hashing transformation meets."""
    if isinstance(v, bool):
        raise UnsupportedTypeError("the hashing transformation cannot hash booleans")
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, np.float32):
        return java_double_str(float(v), float32=True)
    if isinstance(v, (float, np.floating)):
        return java_double_str(float(v))
    if isinstance(v, decimal.Decimal):
        return str(v)
    raise UnsupportedTypeError(f"the hashing transformation cannot hash {type(v).__name__} values ({v!r})")


def _hash_fraction(h: np.ndarray) -> np.ndarray:
    return (h.astype(np.int64) & 0x7FFFFFFF).astype(np.float64) / 2147483647.0


@dataclass(frozen=True)
class HashTransformation(Transformation):
    """Scala `MurmurHash3.bytesHash` of the value's bytes, scaled to [0,1]; never superseded except by
    a different transformation type, so a hashed column never forces a new revision."""

    null_value: Any

    class_name: ClassVar[str] = PACKAGE + "HashTransformation"

    @classmethod
    def create(cls, *, rng: _random.Random | None = None) -> HashTransformation:
        return cls((rng or _random).randint(-(2**31), 2**31 - 1))

    def _null_hash(self) -> int:
        v = self.null_value
        text = v if isinstance(v, str) else _hash_text_of_number(v)
        return scala_murmur_bytes(text.encode("utf-8"), SCALA_ARRAY_SEED)

    def transform(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
        t = array.type
        if pa.types.is_string_view(t):
            array = array.cast(pa.string())
            t = array.type
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
            hashes = scala_murmur_strings(array)
        elif pa.types.is_integer(t):
            hashes = scala_murmur_strings(pc.cast(array, pa.string()))
        elif pa.types.is_floating(t) or pa.types.is_decimal(t):
            # Java's double text is not an Arrow cast; format each distinct value once.
            f32 = pa.types.is_float32(t)
            values = array.to_numpy(zero_copy_only=False) if not pa.types.is_decimal(t) else np.asarray(array.to_pylist(), dtype=object)
            valid = ~np.asarray(array.is_null(), dtype=bool)
            uniq, inverse = np.unique(values[valid], return_inverse=True) if valid.any() else (values[:0], np.zeros(0, dtype=np.int64))
            texts = [
                (java_double_str(float(u), float32=f32) if not isinstance(u, decimal.Decimal) else str(u)) for u in uniq
            ]
            uh = scala_murmur_strings(pa.array(texts, pa.string())) if texts else np.zeros(0, dtype=np.int32)
            hashes = np.zeros(len(array), dtype=np.int32)
            hashes[valid] = uh[inverse]
        else:
            raise UnsupportedTypeError(
                f"the hashing transformation cannot hash an Arrow {t} column; it takes strings, binary and numbers"
            )
        if array.null_count:
            hashes = np.where(np.asarray(array.is_null(), dtype=bool), np.int32(self._null_hash()), hashes)
        return _hash_fraction(hashes)

    def transform_value(self, value: Any, *, clamp: bool = True) -> float:
        if value is None:
            h = self._null_hash()
        elif isinstance(value, (bytes, bytearray)):
            h = scala_murmur_bytes(bytes(value))
        elif isinstance(value, str):
            h = scala_murmur_bytes(value.encode("utf-8"))
        else:
            h = scala_murmur_bytes(_hash_text_of_number(value).encode("utf-8"))
        return float((h & 0x7FFFFFFF) / 2147483647.0)

    def is_superseded_by(self, other: Transformation) -> bool:
        return not isinstance(other, (HashTransformation, EmptyTransformation))

    def merge(self, other: Transformation) -> Transformation:
        return self if isinstance(other, EmptyTransformation) else other

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name, "nullValue": self.null_value}


def _scala_search(values: np.ndarray, sorted_seq: np.ndarray, nan_greatest: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Scala's `IndexedSeq.search` (binary search), vectorized: `(found, index)` per value.

    Emulated step by step rather than with `np.searchsorted` so that, with duplicate entries, the
    `Found` index is the very one Scala returns.
    """
    n = values.shape[0]
    lo = np.zeros(n, dtype=np.int64)
    hi = np.full(n, sorted_seq.shape[0], dtype=np.int64)
    found = np.zeros(n, dtype=bool)
    result = np.zeros(n, dtype=np.int64)
    active = lo < hi
    while active.any():
        idx = lo + (hi - lo - 1) // 2
        pivot = sorted_seq[np.where(active, idx, 0)]
        lt = values < pivot
        gt = values > pivot
        if nan_greatest:
            v_nan = np.isnan(values)
            lt = lt & ~v_nan
            gt = gt | v_nan
        eq = active & ~lt & ~gt
        found |= eq
        result = np.where(eq, idx, result)
        hi = np.where(active & lt, idx, hi)
        lo = np.where(active & gt, idx + 1, lo)
        active = active & ~eq & (lo < hi)
    result = np.where(found, result, lo)
    return found, result


def _cdf_positions(found: np.ndarray, index: np.ndarray, n: int) -> np.ndarray:
    out = np.where(found, index / (n - 1), np.where(index == 0, 0.0, np.where(index >= n, 1.0, (index - 1) / (n - 1))))
    return out.astype(np.float64)


def _check_quantiles(quantiles: Sequence[Any], what: str) -> None:
    if len(quantiles) < 2:
        raise InvalidArgumentError(f"{what} need at least 2 values, got {len(quantiles)}")


@dataclass(frozen=True)
class CDFNumericQuantilesTransformation(Transformation):
    """Position in an empirical CDF given by quantiles, linearly interpolated inside a bin."""

    quantiles: tuple[float, ...]
    data_type: str

    class_name: ClassVar[str] = PACKAGE + "CDFNumericQuantilesTransformation"

    def __post_init__(self) -> None:
        _check_quantiles(self.quantiles, "numeric quantiles")
        object.__setattr__(self, "quantiles", tuple(float(q) for q in self.quantiles))
        if self.data_type not in ORDERED_TYPES:
            raise InvalidArgumentError(f"numeric quantiles need an ordered data type, got {self.data_type!r}")

    def _positions(self, values: np.ndarray) -> np.ndarray:
        q = np.asarray(self.quantiles, dtype=np.float64)
        n = q.shape[0]
        found, index = _scala_search(values, q, nan_greatest=True)
        inside = ~found & (index > 0) & (index < n)
        lower = np.clip(index - 1, 0, n - 1)
        upper = np.clip(index, 0, n - 1)
        lo_v = q[lower]
        hi_v = q[upper]
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = (values - lo_v) / (hi_v - lo_v)
        interp = (lower + frac) / (n - 1)
        return np.where(inside, interp, _cdf_positions(found, index, n))

    def transform(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        values, nulls = _array_to_float64(array, self.data_type)
        out = self._positions(values)
        return _clamped(np.where(nulls, 0.0, out))

    def transform_value(self, value: Any, *, clamp: bool = True) -> float:
        if value is None:
            return 0.0
        v = to_number(value, self.data_type)
        return _clamp1(float(self._positions(np.array([float(v)]))[0]), clamp)  # type: ignore[arg-type]

    def is_superseded_by(self, other: Transformation) -> bool:
        if isinstance(other, CDFNumericQuantilesTransformation):
            return bool(other.quantiles) and other.quantiles != self.quantiles
        return not isinstance(other, EmptyTransformation)

    def merge(self, other: Transformation) -> Transformation:
        return self if isinstance(other, EmptyTransformation) else other

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name, "quantiles": [float(q) for q in self.quantiles], "dataType": self.data_type}


def _string_positions(array: pa.Array | pa.ChunkedArray, seq: tuple[str, ...], null_text: str | None) -> np.ndarray:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or pa.types.is_string_view(array.type)):
        array = pc.cast(array, pa.string())
    nulls = np.asarray(array.is_null(), dtype=bool)
    filled = pc.fill_null(array, null_text if null_text is not None else "")
    # Deduplicate first: quantile lookups then run once per distinct value.
    encoded = pc.dictionary_encode(filled)
    dictionary = np.asarray(encoded.dictionary.to_pylist(), dtype=object)
    q = np.asarray(seq, dtype=object)
    found, index = _scala_search(dictionary.astype(str), q.astype(str))
    pos = _cdf_positions(found, index, len(seq))
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    out = pos[codes] if len(codes) else np.zeros(0, dtype=np.float64)
    if null_text is None:
        out = np.where(nulls, 0.0, out)
    return _clamped(out)


@dataclass(frozen=True)
class CDFStringQuantilesTransformation(Transformation):
    """Bin of a string among sorted quantile boundaries (no interpolation between strings)."""

    quantiles: tuple[str, ...]

    class_name: ClassVar[str] = PACKAGE + "CDFStringQuantilesTransformation"

    def __post_init__(self) -> None:
        _check_quantiles(self.quantiles, "string quantiles")
        object.__setattr__(self, "quantiles", tuple(str(q) for q in self.quantiles))

    def transform(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        return _string_positions(array, self.quantiles, None)

    def transform_value(self, value: Any, *, clamp: bool = True) -> float:
        if value is None:
            return 0.0
        return float(_string_positions(pa.array([str(value)]), self.quantiles, None)[0])

    def is_superseded_by(self, other: Transformation) -> bool:
        if isinstance(other, CDFStringQuantilesTransformation):
            return bool(other.quantiles) and other.quantiles != self.quantiles
        return not isinstance(other, EmptyTransformation)

    def merge(self, other: Transformation) -> Transformation:
        return self if isinstance(other, EmptyTransformation) else other

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name, "quantiles": list(self.quantiles)}


DEFAULT_STRING_HISTOGRAM: tuple[str, ...] = tuple(chr(c) for c in range(97, 123))


@dataclass(frozen=True)
class StringHistogramTransformation(Transformation):
    """Deprecated (0.7) string histogram; read and applied for old tables, never created."""

    histogram: tuple[str, ...]

    class_name: ClassVar[str] = PACKAGE + "StringHistogramTransformation"

    def __post_init__(self) -> None:
        _check_quantiles(self.histogram, "string histograms")
        object.__setattr__(self, "histogram", tuple(str(h) for h in self.histogram))

    @property
    def is_default(self) -> bool:
        return self.histogram == DEFAULT_STRING_HISTOGRAM

    def transform(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        return _string_positions(array, self.histogram, "null")

    def transform_value(self, value: Any, *, clamp: bool = True) -> float:
        return float(_string_positions(pa.array(["null" if value is None else str(value)]), self.histogram, "null")[0])

    def is_superseded_by(self, other: Transformation) -> bool:
        if isinstance(other, StringHistogramTransformation):
            if self.is_default:
                return not other.is_default
            if other.is_default:
                return False
            return self.histogram != other.histogram
        return not isinstance(other, EmptyTransformation)

    def merge(self, other: Transformation) -> Transformation:
        return self if isinstance(other, EmptyTransformation) else other

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name, "histogram": list(self.histogram)}


class _ZeroTransformation(Transformation):
    def transform(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        return np.zeros(len(array), dtype=np.float64)

    def transform_value(self, value: Any, *, clamp: bool = True) -> float:
        return 0.0


@dataclass(frozen=True)
class EmptyTransformation(_ZeroTransformation):
    """The staging revision's placeholder: no statistics yet; superseded by anything real."""

    class_name: ClassVar[str] = PACKAGE + "EmptyTransformation"

    def is_superseded_by(self, other: Transformation) -> bool:
        return not isinstance(other, EmptyTransformation)

    def merge(self, other: Transformation) -> Transformation:
        return other

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name}


@dataclass(frozen=True)
class IdentityToZeroTransformation(_ZeroTransformation):
    """Deprecated (0.6/0.7) single-value transformation; read-only."""

    identity_value: Any

    class_name: ClassVar[str] = PACKAGE + "IdentityToZeroTransformation"

    def is_superseded_by(self, other: Transformation) -> bool:
        if isinstance(other, IdentityToZeroTransformation):
            return other.identity_value != self.identity_value
        return not isinstance(other, EmptyTransformation)

    def merge(self, other: Transformation) -> Transformation:
        return self if isinstance(other, EmptyTransformation) else other

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name, "identityValue": self.identity_value}


@dataclass(frozen=True)
class NullToZeroTransformation(_ZeroTransformation):
    """Deprecated (0.6/0.7) all-null transformation; read-only. Scala writes it as an `object`, whose
    class name ends in `$`; both spellings are read."""

    class_name: ClassVar[str] = PACKAGE + "NullToZeroTransformation"

    def is_superseded_by(self, other: Transformation) -> bool:
        return not isinstance(other, (NullToZeroTransformation, EmptyTransformation))

    def merge(self, other: Transformation) -> Transformation:
        return self if isinstance(other, EmptyTransformation) else other

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name}


# --- transformers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatAggregation:
    """One aggregate the writer computes over the input in its single stats pass."""

    alias: str
    func: str  # "min" | "max"
    column: str


class Transformer:
    """Per-column recipe stored in a revision; builds transformations from statistics."""

    class_name: ClassVar[str]
    type_name: ClassVar[str]
    column_name: str

    @property
    def spec(self) -> str:
        return f"{self.column_name}:{self.type_name}"

    @property
    def data_type_name(self) -> str | None:
        return None

    def stats(self) -> list[StatAggregation]:
        return []

    def stats_names(self) -> list[str]:
        """Names this transformer reads from the stats row (aggregates or `columnStats` keys)."""
        return [s.alias for s in self.stats()]

    def make_transformation(self, stats: Mapping[str, Any]) -> Transformation:
        raise NotImplementedError

    def to_json_obj(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self) -> str:
        return jackson_dumps(self.to_json_obj())


@dataclass(frozen=True)
class LinearTransformer(Transformer):
    column_name: str
    data_type: str

    class_name: ClassVar[str] = PACKAGE + "LinearTransformer"
    type_name: ClassVar[str] = "linear"

    def __post_init__(self) -> None:
        if self.data_type not in ORDERED_TYPES:
            raise UnsupportedTypeError(
                f"column {self.column_name!r} has type {self.data_type}, which the linear transformer cannot "
                f"index; use {self.column_name}:hashing, or {self.column_name}:quantiles with its quantiles given "
                f"as {self.column_name}_quantiles",
                hints={PYTHON: quantiles_hint(self.column_name)},
            )

    @property
    def data_type_name(self) -> str:
        return self.data_type

    def stats(self) -> list[StatAggregation]:
        c = self.column_name
        return [StatAggregation(f"{c}_min", "min", c), StatAggregation(f"{c}_max", "max", c)]

    def make_transformation(self, stats: Mapping[str, Any]) -> Transformation:
        c = self.column_name
        lo = to_number(stats.get(f"{c}_min"), self.data_type)
        hi = to_number(stats.get(f"{c}_max"), self.data_type)
        for name, v in (("min", lo), ("max", hi)):
            if isinstance(v, float) and not math.isfinite(v):
                raise InvalidArgumentError(
                    f"column {c!r} has a {name} of {v}; a linear index needs finite values (filter NaN/infinite "
                    f"rows, or index the column with {c}:quantiles, its quantiles given as {c}_quantiles)",
                    hints={PYTHON: quantiles_hint(c)},
                )
        if lo is None or hi is None or lo == hi:
            return IdentityTransformation(hi if lo is None else lo, self.data_type)
        if lo > hi:
            raise InvalidArgumentError(f"column {c!r}: min {lo!r} is greater than max {hi!r}")
        return LinearTransformation.create(lo, hi, self.data_type)

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name, "columnName": self.column_name, "dataType": self.data_type}


@dataclass(frozen=True)
class HashTransformer(Transformer):
    column_name: str
    data_type: str

    class_name: ClassVar[str] = PACKAGE + "HashTransformer"
    type_name: ClassVar[str] = "hashing"

    @property
    def data_type_name(self) -> str:
        return self.data_type

    def make_transformation(self, stats: Mapping[str, Any]) -> Transformation:
        return HashTransformation.create()

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name, "columnName": self.column_name, "dataType": self.data_type}


def quantiles_hint(column: str) -> str:
    """How a Python caller gives a quantiles column its boundaries (the one wording every message uses)."""
    return (
        f"pass column_stats={{'{column}_quantiles': QbeastTable.compute_quantiles(df, '{column}')}} to "
        "QbeastTable.write"
    )


def _quantiles_from(stats: Mapping[str, Any], key: str, column: str) -> Sequence[Any] | None:
    q = stats.get(key)
    if q is None:
        return None
    if isinstance(q, (str, bytes)) or not isinstance(q, Iterable):
        raise InvalidArgumentError(f"{key} for column {column!r} must be a list of values, got {q!r}")
    return list(q)


@dataclass(frozen=True)
class CDFNumericQuantilesTransformer(Transformer):
    column_name: str
    ordered_data_type: str

    class_name: ClassVar[str] = PACKAGE + "CDFNumericQuantilesTransformer"
    type_name: ClassVar[str] = "quantiles"

    @property
    def data_type_name(self) -> str:
        return self.ordered_data_type

    def stats_names(self) -> list[str]:
        return [f"{self.column_name}_quantiles"]

    def make_transformation(self, stats: Mapping[str, Any]) -> Transformation:
        q = _quantiles_from(stats, f"{self.column_name}_quantiles", self.column_name)
        if q is None:
            return EmptyTransformation()
        try:
            values = [float(v) for v in q]
        except (TypeError, ValueError):
            raise InvalidArgumentError(
                f"{self.column_name}_quantiles must be numbers (doubles) for column {self.column_name!r}, got {q!r}"
            ) from None
        return CDFNumericQuantilesTransformation(tuple(sorted(values)), self.ordered_data_type)

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name, "columnName": self.column_name, "orderedDataType": self.ordered_data_type}


@dataclass(frozen=True)
class CDFStringQuantilesTransformer(Transformer):
    column_name: str

    class_name: ClassVar[str] = PACKAGE + "CDFStringQuantilesTransformer"
    type_name: ClassVar[str] = "quantiles"

    @property
    def data_type_name(self) -> str:
        return STRING

    def stats_names(self) -> list[str]:
        return [f"{self.column_name}_quantiles"]

    def make_transformation(self, stats: Mapping[str, Any]) -> Transformation:
        q = _quantiles_from(stats, f"{self.column_name}_quantiles", self.column_name)
        if q is None:
            return EmptyTransformation()
        return CDFStringQuantilesTransformation(tuple(sorted(str(v) for v in q)))

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name, "columnName": self.column_name}


@dataclass(frozen=True)
class EmptyTransformer(Transformer):
    """The staging revision's transformer: names the column, knows nothing about it yet."""

    column_name: str

    class_name: ClassVar[str] = PACKAGE + "EmptyTransformer"
    type_name: ClassVar[str] = "empty"

    def make_transformation(self, stats: Mapping[str, Any]) -> Transformation:
        return EmptyTransformation()

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name, "columnName": self.column_name}


@dataclass(frozen=True)
class StringHistogramTransformer(Transformer):
    """Deprecated (0.7) transformer; read-only."""

    column_name: str
    data_type: str = STRING

    class_name: ClassVar[str] = PACKAGE + "StringHistogramTransformer"
    type_name: ClassVar[str] = "histogram"

    @property
    def data_type_name(self) -> str:
        return self.data_type

    def stats_names(self) -> list[str]:
        return [f"{self.column_name}_histogram"]

    def make_transformation(self, stats: Mapping[str, Any]) -> Transformation:
        h = _quantiles_from(stats, f"{self.column_name}_histogram", self.column_name)
        return StringHistogramTransformation(tuple(str(v) for v in h) if h else DEFAULT_STRING_HISTOGRAM)

    def to_json_obj(self) -> dict[str, Any]:
        return {"className": self.class_name, "columnName": self.column_name, "dataType": self.data_type}


def make_transformer(type_name: str | None, column: str, arrow_type: pa.DataType) -> Transformer:
    """The transformer for `column:type_name` (default per type when `type_name` is None)."""
    qtype = qdatatype_of(arrow_type, column)
    if type_name is None:
        type_name = "linear" if qtype in ORDERED_TYPES else "hashing"
    name = type_name.lower()
    if name == "linear":
        return LinearTransformer(column, qtype)
    if name == "hashing":
        return HashTransformer(column, qtype)
    if name == "quantiles":
        if qtype == STRING:
            return CDFStringQuantilesTransformer(column)
        return CDFNumericQuantilesTransformer(column, qtype)
    from use.errors import IndexColumnError

    hint = " ('histogram' is deprecated: use quantiles)" if name == "histogram" else ""
    raise IndexColumnError(
        f"unknown transformer {type_name!r} for column {column!r}{hint}; choose one of {', '.join(TRANSFORMER_TYPES)}"
    )


# --- JSON reading --------------------------------------------------------------------------------


def _strip_class(obj: Any, where: str) -> str:
    if not isinstance(obj, Mapping):
        raise CorruptIndexMetadataError(f"{where} must be a JSON object, got {obj!r}")
    name = obj.get("className")
    if not isinstance(name, str):
        raise CorruptIndexMetadataError(f"{where} has no string 'className': {obj!r}")
    return name.rstrip("$")


def _require(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise CorruptIndexMetadataError(f"{where} lacks the key {key!r}: {jackson_dumps(obj)}")
    return obj[key]


def _datatype(obj: Mapping[str, Any], key: str, where: str, allowed: frozenset[str]) -> str:
    v = _require(obj, key, where)
    if v not in allowed:
        raise CorruptIndexMetadataError(f"{where} has {key}={v!r}; expected one of {sorted(allowed)}")
    return str(v)


def _typed_number(v: Any, data_type: str, key: str, where: str) -> int | float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise CorruptIndexMetadataError(f"{where} has {key}={v!r}, which is not a number")
    if data_type in _INTEGRAL_TYPES:
        if isinstance(v, float):
            raise CorruptIndexMetadataError(f"{where} has {key}={v!r}, but {data_type} values are integers")
        return int(v)
    return float(v)


def transformer_from_json_obj(obj: Any, where: str = "columnTransformer") -> Transformer:
    name = _strip_class(obj, where)
    try:
        column = _require(obj, "columnName", where)
        if not isinstance(column, str):
            raise CorruptIndexMetadataError(f"{where} has a non-string columnName {column!r}")
        if name == LinearTransformer.class_name:
            return LinearTransformer(column, _datatype(obj, "dataType", where, ORDERED_TYPES))
        if name == HashTransformer.class_name:
            return HashTransformer(column, _datatype(obj, "dataType", where, ALL_TYPES))
        if name == CDFNumericQuantilesTransformer.class_name:
            return CDFNumericQuantilesTransformer(column, _datatype(obj, "orderedDataType", where, ORDERED_TYPES))
        if name == CDFStringQuantilesTransformer.class_name:
            return CDFStringQuantilesTransformer(column)
        if name == EmptyTransformer.class_name:
            return EmptyTransformer(column)
        if name == StringHistogramTransformer.class_name:
            return StringHistogramTransformer(column, _datatype(obj, "dataType", where, ALL_TYPES) if "dataType" in obj else STRING)
    except (InvalidArgumentError, UnsupportedTypeError) as e:
        raise CorruptIndexMetadataError(f"{where} is invalid: {e}") from None
    raise CorruptIndexMetadataError(f"{where} has an unknown className {obj.get('className')!r}")


def transformation_from_json_obj(obj: Any, where: str = "transformation") -> Transformation:
    name = _strip_class(obj, where)
    try:
        if name == LinearTransformation.class_name:
            dt = _datatype(obj, "orderedDataType", where, ORDERED_TYPES)
            lo = _typed_number(_require(obj, "minNumber", where), dt, "minNumber", where)
            hi = _typed_number(_require(obj, "maxNumber", where), dt, "maxNumber", where)
            nv = _typed_number(obj.get("nullValue"), dt, "nullValue", where)
            if nv is None:
                # Scala regenerates a missing null value deterministically from the JSON text.
                seed = _scala_string_hash(jackson_dumps(obj))
                nv = _random_between(lo, hi, dt, _JavaRandom(seed).next_double())
            return LinearTransformation(lo, hi, nv, dt)  # type: ignore[arg-type]
        if name == IdentityTransformation.class_name:
            dt = _datatype(obj, "orderedDataType", where, ORDERED_TYPES)
            return IdentityTransformation(_typed_number(obj.get("identityValue"), dt, "identityValue", where), dt)
        if name == HashTransformation.class_name:
            nv = obj.get("nullValue")
            if nv is None or isinstance(nv, bool) or not isinstance(nv, (int, float, str)):
                raise CorruptIndexMetadataError(f"{where} needs a numeric or string nullValue, got {nv!r}")
            return HashTransformation(nv)
        if name == CDFNumericQuantilesTransformation.class_name:
            q = _require(obj, "quantiles", where)
            if not isinstance(q, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in q):
                raise CorruptIndexMetadataError(f"{where} quantiles must be a list of numbers, got {q!r}")
            return CDFNumericQuantilesTransformation(tuple(float(v) for v in q), _datatype(obj, "dataType", where, ORDERED_TYPES))
        if name == CDFStringQuantilesTransformation.class_name:
            q = _require(obj, "quantiles", where)
            if not isinstance(q, list):
                raise CorruptIndexMetadataError(f"{where} quantiles must be a list, got {q!r}")
            return CDFStringQuantilesTransformation(tuple(str(v) for v in q))
        if name == StringHistogramTransformation.class_name:
            h = _require(obj, "histogram", where)
            if not isinstance(h, list):
                raise CorruptIndexMetadataError(f"{where} histogram must be a list, got {h!r}")
            return StringHistogramTransformation(tuple(str(v) for v in h))
        if name == EmptyTransformation.class_name:
            return EmptyTransformation()
        if name == IdentityToZeroTransformation.class_name:
            return IdentityToZeroTransformation(obj.get("identityValue"))
        if name == NullToZeroTransformation.class_name:
            return NullToZeroTransformation()
    except InvalidArgumentError as e:
        raise CorruptIndexMetadataError(f"{where} is invalid: {e}") from None
    raise CorruptIndexMetadataError(f"{where} has an unknown className {obj.get('className')!r}")
