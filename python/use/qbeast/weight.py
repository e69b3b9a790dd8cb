"""Row weights and the two Murmur3 variants the Qbeast format depends on (spec §2, §4).

* A row's weight is Spark SQL's `hash()` of the indexed columns (Murmur3_x86_32, seed 42, chained,
  with Spark's non-standard tail). The write and read paths let Spark compute it (`F.hash`), so the
  scalar port here exists to check vectors in tests and to reason about samples in pure code.
* The hashing transformation uses *Scala's* `MurmurHash3.bytesHash` (standard Murmur3_x86_32, seed
  `0x3c074a61`). It runs once per row of every write, so it is numpy-vectorized over Arrow buffers.
* `Weight(fraction)` reproduces the JVM double->int conversion (truncate toward zero, saturate),
  because cube maxWeights written by qbeast-spark were produced that way.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import struct
from collections.abc import Sequence
from typing import Any, overload

import numpy as np
import pyarrow as pa

from use.errors import InvalidArgumentError, UnsupportedTypeError
from use.qbeast.java_values import jvm_double_to_int

MIN_WEIGHT: int = -(2**31)
MAX_WEIGHT: int = 2**31 - 1
WEIGHT_RANGE: float = float(MAX_WEIGHT) - float(MIN_WEIGHT)  # 4294967295.0
SPARK_HASH_SEED: int = 42
SCALA_ARRAY_SEED: int = 0x3C074A61

_M32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593


# --- Weight / NormalizedWeight ------------------------------------------------------------------


@overload
def weight_from_fraction(f: float) -> int: ...
@overload
def weight_from_fraction(f: np.ndarray) -> np.ndarray: ...
def weight_from_fraction(f: float | np.ndarray) -> int | np.ndarray:
    """`Weight(f)`: the weight below which a fraction `f` of uniformly hashed rows falls."""
    if isinstance(f, np.ndarray):
        v = f.astype(np.float64) * WEIGHT_RANGE - 2.0**31
        v = np.where(np.isnan(v), 0.0, np.clip(v, MIN_WEIGHT, MAX_WEIGHT))
        return np.trunc(v).astype(np.int32)
    return jvm_double_to_int(float(f) * WEIGHT_RANGE - 2.0**31)


@overload
def fraction(w: int) -> float: ...
@overload
def fraction(w: np.ndarray) -> np.ndarray: ...
def fraction(w: int | np.ndarray) -> float | np.ndarray:
    """The fraction of the weight space at or below `w`, in [0,1]."""
    if isinstance(w, np.ndarray):
        return (w.astype(np.float64) + 2.0**31) / WEIGHT_RANGE
    return (float(w) + 2.0**31) / WEIGHT_RANGE


def normalized_weight_to_weight(nw: float) -> int:
    """A normalized weight >= 1 means "leaf, takes everything" and maps to `MAX_WEIGHT`."""
    return weight_from_fraction(nw) if nw < 1.0 else MAX_WEIGHT


def normalized_weight(max_weight: int, element_count: int, desired_cube_size: int) -> float:
    """A cube's normalized weight (§2.2): its maxWeight fraction when full, else how far it is from
    full (`desiredCubeSize / count`, >= 1 for a leaf)."""
    if max_weight < MAX_WEIGHT:
        return fraction(max_weight)
    if element_count <= 0:
        return math.inf
    return desired_cube_size / element_count


# --- Murmur3 building blocks (32-bit wrap-around) -----------------------------------------------


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix_k1(k: int) -> int:
    k = (k * _C1) & _M32
    k = _rotl(k, 15)
    return (k * _C2) & _M32


def _mix_h1(h: int, k: int) -> int:
    h = _rotl(h ^ k, 13)
    return (h * 5 + 0xE6546B64) & _M32


def _fmix(h: int, length: int) -> int:
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h


def _signed32(h: int) -> int:
    h &= _M32
    return h - (1 << 32) if h & 0x80000000 else h


def _hash_int(i: int, seed: int) -> int:
    return _fmix(_mix_h1(seed & _M32, _mix_k1(i & _M32)), 4)


def _hash_long(v: int, seed: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    h = _mix_h1(seed & _M32, _mix_k1(v & _M32))
    h = _mix_h1(h, _mix_k1(v >> 32))
    return _fmix(h, 8)


def _hash_unsafe_bytes(data: bytes, seed: int) -> int:
    """Spark's legacy `hashUnsafeBytes`: every tail byte is mixed on its own, sign-extended."""
    n = len(data)
    aligned = n - n % 4
    h = seed & _M32
    for (word,) in struct.iter_unpack("<I", data[:aligned]):
        h = _mix_h1(h, _mix_k1(word))
    for b in data[aligned:]:
        signed = b - 256 if b >= 128 else b
        h = _mix_h1(h, _mix_k1(signed & _M32))
    return _fmix(h, n)


def scala_murmur_bytes(data: bytes, seed: int = SCALA_ARRAY_SEED) -> int:
    """Scala's `MurmurHash3.bytesHash` (standard MurmurHash3_x86_32), as a signed int32."""
    n = len(data)
    aligned = n - n % 4
    h = seed & _M32
    for (word,) in struct.iter_unpack("<I", data[:aligned]):
        h = _mix_h1(h, _mix_k1(word))
    tail = data[aligned:]
    if tail:
        k = 0
        for i, b in enumerate(tail):
            k |= b << (8 * i)
        h ^= _mix_k1(k)
    return _signed32(_fmix(h, n))


# --- Spark's hash() -----------------------------------------------------------------------------

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_TS = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)

_TYPE_ALIASES = {
    "boolean": "boolean",
    "bool": "boolean",
    "byte": "int",
    "tinyint": "int",
    "short": "int",
    "smallint": "int",
    "int": "int",
    "integer": "int",
    "long": "long",
    "bigint": "long",
    "float": "float",
    "real": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp",
}


def _type_name(t: Any) -> str:
    """Normalize a Spark type name, a pyarrow type or a pyspark DataType to one of our hash kinds."""
    if isinstance(t, pa.DataType):
        if pa.types.is_boolean(t):
            return "boolean"
        if pa.types.is_int64(t):
            return "long"
        if pa.types.is_integer(t):
            return "int"
        if pa.types.is_float32(t):
            return "float"
        if pa.types.is_float64(t):
            return "double"
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return "string"
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return "binary"
        if pa.types.is_date(t):
            return "date"
        if pa.types.is_timestamp(t):
            return "timestamp"
        if pa.types.is_decimal(t):
            return f"decimal({t.precision},{t.scale})"
        raise UnsupportedTypeError(f"Spark hash of arrow type {t} is not implemented")
    name = t if isinstance(t, str) else getattr(t, "simpleString", lambda: str(t))()
    name = name.strip().lower()
    if name.startswith("decimal"):
        return name.replace(" ", "")
    if name not in _TYPE_ALIASES:
        raise UnsupportedTypeError(
            f"Spark hash of type {name!r} is not implemented; supported: {sorted(set(_TYPE_ALIASES))} and decimal(p,s)"
        )
    return _TYPE_ALIASES[name]


def _hash_one(v: Any, kind: str, seed: int) -> int:
    if kind == "boolean":
        return _hash_int(1 if v else 0, seed)
    if kind == "int":
        return _hash_int(int(v), seed)
    if kind == "long":
        return _hash_long(int(v), seed)
    if kind == "float":
        f = float(v)
        if f == 0.0:
            return _hash_int(0, seed)  # -0.0f hashes as 0
        if math.isnan(f):
            return _hash_int(0x7FC00000, seed)  # canonical floatToIntBits NaN
        return _hash_int(struct.unpack("<i", struct.pack("<f", f))[0], seed)
    if kind == "double":
        f = float(v)
        if f == 0.0:
            return _hash_long(0, seed)
        if math.isnan(f):
            return _hash_long(0x7FF8000000000000, seed)
        return _hash_long(struct.unpack("<q", struct.pack("<d", f))[0], seed)
    if kind == "string":
        return _hash_unsafe_bytes(str(v).encode("utf-8"), seed)
    if kind == "binary":
        return _hash_unsafe_bytes(bytes(v), seed)
    if kind == "date":
        days = v if isinstance(v, int) else (v - _EPOCH_DATE).days
        return _hash_int(days, seed)
    if kind == "timestamp":
        if isinstance(v, int):
            micros = v
        else:
            ts = v if v.tzinfo is not None else v.replace(tzinfo=_dt.UTC)
            delta = ts - _EPOCH_TS
            micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return _hash_long(micros, seed)
    if kind.startswith("decimal"):
        precision, scale = _decimal_params(kind)
        d = decimal.Decimal(v)
        # exact at any precision (a DECIMAL(38,18) value has 38 digits; Python's default context rounds to 28)
        exact = decimal.Context(prec=len(d.as_tuple().digits) + scale + 1, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
        unscaled = int(d.scaleb(scale, context=exact).to_integral_value(context=exact))
        if precision <= 18:
            return _hash_long(unscaled, seed)
        length = max(1, (unscaled.bit_length() + 8) // 8)  # BigInteger.toByteArray: minimal two's complement
        return _hash_unsafe_bytes(unscaled.to_bytes(length, "big", signed=True), seed)
    raise UnsupportedTypeError(f"Spark hash of type {kind!r} is not implemented")


def _decimal_params(kind: str) -> tuple[int, int]:
    inner = kind[len("decimal") :].strip("()")
    if not inner:
        return 10, 0
    p, _, s = inner.partition(",")
    return int(p), int(s or 0)


def spark_hash(values: Sequence[Any], types: Sequence[Any]) -> int:
    """Spark SQL `hash(v1, v2, ...)` for scalar values of the given types (signed int32).

    `types` are Spark type names (`"int"`, `"bigint"`, `"string"`, `"decimal(10,2)"` ...), pyarrow
    types or pyspark DataTypes. Dates may be `datetime.date` or days since epoch; timestamps a
    `datetime` (naive = UTC) or microseconds since epoch. Nulls (None) leave the hash unchanged.
    """
    if len(values) != len(types):
        raise InvalidArgumentError(f"spark_hash got {len(values)} values but {len(types)} types")
    h = SPARK_HASH_SEED
    for v, t in zip(values, types, strict=False):
        if v is None:
            continue
        h = _hash_one(v, _type_name(t), h)
    return _signed32(h)


# --- vectorized Scala murmur over Arrow string/binary arrays ------------------------------------

_U = np.uint32


def _np_rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U(r)) | (x >> _U(32 - r))


def _np_mix_k1(k: np.ndarray) -> np.ndarray:
    return _np_rotl(k * _U(_C1), 15) * _U(_C2)


def _np_mix_h1(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    return _np_rotl(h ^ k, 13) * _U(5) + _U(0xE6546B64)


def _np_fmix(h: np.ndarray, length: np.ndarray) -> np.ndarray:
    h = h ^ length
    h = h ^ (h >> _U(16))
    h = h * _U(0x85EBCA6B)
    h = h ^ (h >> _U(13))
    h = h * _U(0xC2B2AE35)
    h = h ^ (h >> _U(16))
    return h


def _offsets_and_data(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Row start offsets (n+1, int64) into a zero-padded uint8 data buffer of a string/binary array."""
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_binary(t):
        off_dtype: type = np.int32
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        off_dtype = np.int64
    else:
        raise UnsupportedTypeError(f"Scala murmur hashing needs a string or binary array, got {t}")
    buffers = arr.buffers()
    n = len(arr)
    if buffers[1] is None:
        offsets = np.zeros(n + 1, dtype=np.int64)
    else:
        offsets = np.frombuffer(buffers[1], dtype=off_dtype)[arr.offset : arr.offset + n + 1].astype(np.int64)
    if buffers[2] is None or n == 0:
        data = np.zeros(8, dtype=np.uint8)
    else:
        raw = np.frombuffer(buffers[2], dtype=np.uint8)
        data = np.zeros(int(offsets[-1]) + 8, dtype=np.uint8)  # padding lets every gather read 4 bytes
        data[: int(offsets[-1]) - int(offsets[0])] = raw[int(offsets[0]) : int(offsets[-1])]
        offsets = offsets - offsets[0]
    return offsets, data


def scala_murmur_strings(arr: pa.Array | pa.ChunkedArray, seed: int = SCALA_ARRAY_SEED) -> np.ndarray:
    """`MurmurHash3.bytesHash` of every value (UTF-8 bytes for strings) as int32; nulls hash as "".

    Rows are processed 4-byte block by block with all rows at once; rows are ordered by length so
    the rows still active at block `j` are a prefix, which keeps the total work ~ the data size.
    """
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 0:
            return np.zeros(0, dtype=np.int32)
        return np.concatenate([scala_murmur_strings(c, seed) for c in arr.chunks])
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    offsets, data = _offsets_and_data(arr)
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    if arr.null_count:
        valid = np.asarray(arr.is_valid(), dtype=bool)
        lengths = np.where(valid, lengths, 0)
    order = np.argsort(-lengths, kind="stable")
    s_starts = starts[order]
    s_lengths = lengths[order]
    blocks = s_lengths // 4
    h = np.full(n, seed & _M32, dtype=np.uint32)
    max_blocks = int(blocks[0]) if n else 0
    # active[j] = number of rows with more than j full blocks: a prefix, as blocks are descending.
    active = np.searchsorted(-blocks, -np.arange(max_blocks), side="left")
    for j in range(max_blocks):
        m = int(active[j])
        pos = s_starts[:m] + 4 * j
        k = (
            data[pos].astype(np.uint32)
            | (data[pos + 1].astype(np.uint32) << _U(8))
            | (data[pos + 2].astype(np.uint32) << _U(16))
            | (data[pos + 3].astype(np.uint32) << _U(24))
        )
        h[:m] = _np_mix_h1(h[:m], _np_mix_k1(k))
    tail_len = s_lengths % 4
    has_tail = tail_len > 0
    if np.any(has_tail):
        base = s_starts + 4 * blocks
        k = np.zeros(n, dtype=np.uint32)
        for i in range(3):
            byte = data[base + i].astype(np.uint32)
            k |= np.where(tail_len > i, byte, _U(0)) << _U(8 * i)
        h = np.where(has_tail, h ^ _np_mix_k1(k), h)
    h = _np_fmix(h, s_lengths.astype(np.uint32))
    out = np.empty(n, dtype=np.uint32)
    out[order] = h
    return out.view(np.int32)
