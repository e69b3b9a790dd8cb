"""Transformations: how a column value becomes a coordinate in [0,1] (spec §4).

A *transformation* is a column's map into [0,1] with the statistics it was built from
(`LinearTransformation{minNumber,maxNumber,nullValue,orderedDataType}` ...); the per-column recipe
that builds it, the *transformer*, is in `use.qbeast.transformers`, the quantile transformations in
`use.qbeast.transform_quantiles`. Transformations are written to the Delta log as Jackson JSON with
a fully qualified `className`, so the classes here carry the exact Scala names and field order, and
the JSON numbers use Java's `Double.toString` text (`use.qbeast.java_values`).

`transform(array)` is the per-row hot path of the writer (it runs in executors over Arrow batches)
and is numpy-vectorized; `transform_value(v)` is the scalar form for query literals.

Value conventions (the Scala code's, made explicit):
* Date and Timestamp values are epoch **milliseconds**. A date is taken at **UTC** midnight (Scala
  uses the JVM's local midnight, so a table written by qbeast-spark on a JVM outside UTC has its
  date bounds shifted by the zone's offset; the query side widens date and timestamp literals by
  the largest offset a JVM zone can have, see `use.qbeast.query`). Timestamps are floored to the
  millisecond, like `java.sql.Timestamp.getTime`.
* Float bounds are float32 values (Scala keeps them as `Float`), decimals are doubles (correctly
  rounded, as `java.math.BigDecimal.doubleValue`).
* Hashing hashes the UTF-8 bytes of strings, and numbers through their Java `toString` text. Integer
  text is exact; doubles use Python's shortest round-trip digits in Java's layout (`1.0E10`), which
  is what Java 19+ prints and what Java 17 prints for all but a few rare values.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import random as _random
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.errors import InvalidArgumentError, UnsupportedTypeError
from use.qbeast.java_values import JavaFloat, float32, jackson_dumps, java_double_str, jvm_double_to_int, wrap_int
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
INTEGRAL_TYPES = frozenset({INTEGER, LONG, TIMESTAMP, DATE})  # JSON values are integers
#: The bounds a linear range of an integral type may take (Java Int and Long; timestamps and dates
#: are Long epoch millis).
INTEGRAL_BOUNDS: dict[str, tuple[int, int]] = {
    INTEGER: (-(2**31), 2**31 - 1),
    LONG: (-(2**63), 2**63 - 1),
    TIMESTAMP: (-(2**63), 2**63 - 1),
    DATE: (-(2**63), 2**63 - 1),
}

TRANSFORMER_TYPES: tuple[str, ...] = ("linear", "hashing", "quantiles")
"""The transformer names a column spec may use (`col:linear`); `histogram` is read-only (deprecated)."""


def qdatatype_of(arrow_type: pa.DataType, column: str = "?") -> str:
    """The qbeast-spark QDataType name of an Arrow type (only the types qbeast-spark can index).

    Spark's byte/short/boolean/binary and timestamp_ntz columns have no QDataType upstream
    (`SparkToQTypesUtils`); indexing them here would make a table qbeast-spark cannot append to, so
    they are refused with a hint to cast.
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
        if t.tz is None:
            raise UnsupportedTypeError(
                f"column {column!r} is a TIMESTAMP_NTZ (timestamp without time zone), which cannot be indexed: "
                f"qbeast-spark maps only TIMESTAMP to its TimestampDataType, so it could not append to or "
                f"optimize such an index; index CAST({column} AS TIMESTAMP) (a column of that type) instead"
            )
        return TIMESTAMP
    if pa.types.is_date(t):
        return DATE
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return STRING
    raise UnsupportedTypeError(
        f"column {column!r} has type {t}, which cannot be indexed; indexable types are int, bigint, "
        f"double, float, decimal, date, timestamp and string (cast byte/short to int first)"
    )


def random_between(lo: Any, hi: Any, data_type: str, r: float) -> Any:
    """`LinearTransformation.generateRandomNumber(min, max)` for a random double `r` in [0, 1), in
    the JVM arithmetic of the bounds' Scala type: Int (`IntegerDataType`) and Long (long, date and
    timestamp millis) subtract with wrap-around and truncate `r * range` with `.toInt`/`.toLong`;
    Float computes in float32; Double (double and decimal) in double."""
    if data_type == INTEGER:
        return wrap_int(int(lo) + jvm_double_to_int(r * wrap_int(int(hi) - int(lo))))
    if data_type in INTEGRAL_TYPES:
        return wrap_int(int(lo) + jvm_double_to_int(r * wrap_int(int(hi) - int(lo), 64), 64), 64)
    if data_type == FLOAT:
        span = float(np.float32(hi) - np.float32(lo))  # Float - Float, widened for `r * span`
        return float(np.float32(lo) + np.float32(r * span))
    return float(lo) + r * (float(hi) - float(lo))


# --- value conversion ----------------------------------------------------------------------------

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def to_number(value: Any, data_type: str) -> int | float | None:
    """`number_of(value, data_type)`, or None for a null."""
    return None if value is None else number_of(value, data_type)


def number_of(value: Any, data_type: str) -> int | float:
    """A Python value (from Spark `collect`, a literal or JSON) in the transformation's number space.

    Dates become UTC-midnight epoch millis; datetimes epoch millis (a naive datetime is read as the
    process's local time, which is what PySpark hands back from `collect`); decimals floats; float
    values the float32 they are in Scala (a `Float` column's statistics, its `columnStats`).
    """
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
    return float32(float(value)) if data_type == FLOAT else float(value)


def array_to_float64(arr: pa.Array | pa.ChunkedArray, data_type: str) -> tuple[np.ndarray, np.ndarray]:
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
    elif pa.types.is_decimal(t):
        # Through the decimal text: Arrow's own decimal -> double cast is off by one ulp for many
        # values (it scales by an inexact power of ten), the text parse is correctly rounded, as
        # Java's `BigDecimal.doubleValue` that qbeast-spark transforms decimals with.
        values = pc.cast(pc.cast(arr, pa.string()), pa.float64()).to_numpy(zero_copy_only=False)
    elif pa.types.is_integer(t) or pa.types.is_floating(t):
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


def clamped(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.clip(np.nan_to_num(x, nan=0.0), 0.0, 1.0)
    return out


def clamp_value(x: float, clamp: bool) -> float:
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
        if self.ordered_data_type == FLOAT:
            # Scala keeps Float bounds as Float (JSON `floatValue`): the float32 of the JSON text, not
            # the double it reads as (0.10002996772527695 for "0.10002997", not 0.10002997).
            for name in ("min_number", "max_number", "null_value"):
                if getattr(self, name) is not None:
                    object.__setattr__(self, name, float32(getattr(self, name)))
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
        if lo is None or hi is None:
            raise InvalidArgumentError(f"a linear transformation needs finite bounds, got min={min_number!r} max={max_number!r}")
        r = (rng or _random).random()
        return cls(lo, hi, random_between(lo, hi, ordered_data_type, r), ordered_data_type)

    @property
    def _scale(self) -> float:
        return 1.0 / (float(self.max_number) - float(self.min_number))

    def transform(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        values, nulls = array_to_float64(array, self.ordered_data_type)
        if nulls.any():
            values = np.where(nulls, float(self.null_value), values)
        return clamped((values - float(self.min_number)) * self._scale)

    def transform_value(self, value: Any, *, clamp: bool = True) -> float:
        v = self.null_value if value is None else number_of(value, self.ordered_data_type)
        return clamp_value((float(v) - float(self.min_number)) * self._scale, clamp)

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
        if self.ordered_data_type in INTEGRAL_TYPES:
            return int(v)
        if self.ordered_data_type == FLOAT:
            return JavaFloat(v)
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

    def __post_init__(self) -> None:
        if self.ordered_data_type == FLOAT and self.identity_value is not None:
            object.__setattr__(self, "identity_value", float32(self.identity_value))  # a Scala Float

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
            return LinearTransformation.create(min(other.min_number, v), max(other.max_number, v), self.ordered_data_type)
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
            v = (
                int(v)
                if self.ordered_data_type in INTEGRAL_TYPES
                else (JavaFloat(v) if self.ordered_data_type == FLOAT else float(v))
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
            values = (
                array.to_numpy(zero_copy_only=False)
                if not pa.types.is_decimal(t)
                else np.asarray(array.to_pylist(), dtype=object)
            )
            valid = ~np.asarray(array.is_null(), dtype=bool)
            uniq, inverse = (
                np.unique(values[valid], return_inverse=True) if valid.any() else (values[:0], np.zeros(0, dtype=np.int64))
            )
            texts = [(java_double_str(float(u), float32=f32) if not isinstance(u, decimal.Decimal) else str(u)) for u in uniq]
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
            return bool(other.identity_value != self.identity_value)
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
