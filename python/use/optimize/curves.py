"""Space-filling-curve keys for clustering rewrites (ZOrder, Hilbert), on Arrow/numpy (pure).

Delta's OPTIMIZE ZORDER BY does not interleave raw values: each column is first range-partitioned
into at most `RANGE_IDS` (1000) buckets by approximate quantiles, so every column spreads over the
whole key space whatever its type, scale or skew, and the bucket ids (one small integer per column)
are what the curve combines. We do the same:

* `range_bounds`: bucket boundaries of one column from a sample of its values (the values at evenly
  spaced ranks, deduplicated, as Spark's RangePartitioner derives them);
* `range_ids`: a value's bucket = the number of boundaries strictly below it (nulls go to bucket 0,
  with the smallest values, where Spark sorts them);
* `curve_key`: the per-column bucket ids combined into one sortable key, either the interleaved bits
  (Z-order: bit b of every column, then bit b-1, ...) or the Hilbert index (the same interleave
  applied to the Hilbert "transpose" of the point, Skilling's construction, so points adjacent on the
  curve are adjacent in space). Up to 63 key bits the key is an int64; wider keys are big-endian
  bytes, which Spark orders as unsigned lexicographic binary.

Buckets only approximate ranks (bounds come from a sample), which costs no correctness: the key only
decides where rows land, never which rows are written. Everything here runs on Arrow arrays inside
Spark's Arrow UDFs, so it must stay free of Spark and of per-row Python work.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.errors import InvalidArgumentError

#: Buckets per column (Delta's spark.databricks.io.skipping.mdc.rangeId.max).
RANGE_IDS = 1000
#: Sampled values per bucket when the bounds are estimated (Spark's rangeExchange.sampleSizePerPartition).
SAMPLE_ROWS_PER_RANGE = 100
#: Strings are bucketed by this many leading characters (Delta's stats prefix length): a prefix
#: orders like the string, and the key columns of a batch stay small however long the values are.
STRING_PREFIX = 32

ZORDER = "zorder"
HILBERT = "hilbert"
CURVES = (ZORDER, HILBERT)


def bits_per_column(num_ranges: int = RANGE_IDS) -> int:
    """Bits needed for a bucket id in [0, num_ranges) (10 for 1000, Delta's Hilbert width too)."""
    return max(1, int(num_ranges - 1).bit_length())


def key_is_long(num_columns: int, num_ranges: int = RANGE_IDS) -> bool:
    """Whether the key of `num_columns` columns fits a non-negative int64 (else it is binary)."""
    return num_columns * bits_per_column(num_ranges) <= 63


def _storage(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    t = values.type
    if pa.types.is_dictionary(t):
        values = values.dictionary_decode()
    return values


def sortable(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(comparable numpy values, validity mask) of an Arrow column, ordered as Spark orders them.

    Integers, dates and timestamps compare as int64, floats and decimals as float64 (a decimal's
    float is monotone in it, which is all bucketing needs), strings by their first `STRING_PREFIX`
    characters as fixed-width unicode (code point order = Spark's UTF-8 byte order). Null slots
    hold a placeholder and are False in the mask.
    """
    values = _storage(values)
    t = values.type
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_integer(t):
        out = np.asarray(values.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    elif pa.types.is_date(t) or pa.types.is_timestamp(t):
        ints = pc.cast(values, pa.int32() if pa.types.is_date32(t) else pa.int64())
        out = np.asarray(ints.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    elif pa.types.is_floating(t) or pa.types.is_decimal(t):
        out = np.asarray(pc.cast(values, pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        prefix = pc.utf8_slice_codeunits(values.fill_null(""), 0, STRING_PREFIX)
        out = np.asarray(prefix.to_numpy(zero_copy_only=False), dtype=str)
    else:
        raise InvalidArgumentError(f"cannot compute a clustering key over a column of type {t}")
    return out, valid


def range_bounds(sample: pa.Array | pa.ChunkedArray, num_ranges: int = RANGE_IDS) -> np.ndarray:
    """Bucket boundaries from a sample: the values at ranks len*i/num_ranges (i = 1..num_ranges-1),
    deduplicated, so a bucket never splits equal values and a column with few distinct values gets
    few buckets. Empty (one bucket) when the sample holds no non-null value."""
    values, valid = sortable(sample)
    values = np.sort(values[valid], kind="stable")
    if values.size == 0:
        return values
    ranks = (np.arange(1, num_ranges, dtype=np.int64) * values.size) // num_ranges
    return np.unique(values[ranks[ranks < values.size]])


def range_ids(values: pa.Array | pa.ChunkedArray, bounds: np.ndarray) -> np.ndarray:
    """Each value's bucket: the number of `bounds` strictly below it; nulls are bucket 0."""
    comparable, valid = sortable(values)
    if bounds.size == 0:
        return np.zeros(comparable.size, dtype=np.uint64)
    ids = np.searchsorted(bounds, comparable, side="left").astype(np.uint64)
    ids[~valid] = 0
    return ids


def hilbert_transpose(ids: Sequence[np.ndarray], bits: int) -> list[np.ndarray]:
    """The Hilbert "transpose" of points given per axis (Skilling, Programming the Hilbert curve,
    AIP 2004): interleaving its bits, most significant first, gives the point's Hilbert index.
    Vectorized over points: one numpy step per (bit, axis)."""
    x = [np.asarray(a, dtype=np.uint64).copy() for a in ids]
    n = len(x)
    q = 1 << (bits - 1)
    # Undo the excess work of the curve's recursive construction, from the top bit down.
    while q > 1:
        p = np.uint64(q - 1)
        for i in range(n):
            high = (x[i] & np.uint64(q)) != 0
            swap = np.where(high, np.uint64(0), (x[0] ^ x[i]) & p)
            x[0] ^= np.where(high, p, swap)  # high bit: invert the low bits of axis 0; else exchange
            if i:
                x[i] ^= swap
        q >>= 1
    # Gray encode.
    for i in range(1, n):
        x[i] ^= x[i - 1]
    t = np.zeros_like(x[0])
    q = 1 << (bits - 1)
    while q > 1:
        t ^= np.where((x[n - 1] & np.uint64(q)) != 0, np.uint64(q - 1), np.uint64(0))
        q >>= 1
    return [a ^ t for a in x]


def interleaved_bits(ids: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """Bit matrix (points x len(ids)*bits, uint8) of the Z-order interleave: bit `bits-1` of every
    axis in order, then bit `bits-2`, ... (Delta's interleave_bits order)."""
    n = ids[0].size if ids else 0
    out = np.empty((n, len(ids) * bits), dtype=np.uint8)
    col = 0
    for b in range(bits - 1, -1, -1):
        for a in ids:
            out[:, col] = (np.asarray(a, dtype=np.uint64) >> np.uint64(b)) & np.uint64(1)
            col += 1
    return out


def _pack(bit_matrix: np.ndarray, as_long: bool) -> pa.Array:
    rows, width = bit_matrix.shape
    total = 64 if as_long else -(-width // 8) * 8
    padded = np.zeros((rows, total), dtype=np.uint8)
    padded[:, total - width :] = bit_matrix  # right-aligned: the key is the integer the bits spell
    packed = np.packbits(padded, axis=1, bitorder="big")
    if as_long:
        return pa.array(packed.view(">u8").reshape(rows).astype(np.int64), pa.int64())
    nbytes = total // 8
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(nbytes), rows, [None, pa.py_buffer(packed.tobytes())])
    return pc.cast(fixed, pa.binary())


def curve_key(ids: Sequence[np.ndarray], curve: str, num_ranges: int = RANGE_IDS) -> pa.Array:
    """The clustering key of points given as bucket ids per column: int64 when it fits 63 bits
    (`key_is_long`), else binary. One column has no curve: its key is its bucket id (Delta too
    clusters a single column by range id, whatever the curve)."""
    if curve not in CURVES:
        raise InvalidArgumentError(f"unknown clustering curve {curve!r}; expected one of {', '.join(CURVES)}")
    if not ids:
        raise InvalidArgumentError("a clustering key needs at least one column")
    bits = bits_per_column(num_ranges)
    axes = list(ids)
    if curve == HILBERT and len(axes) > 1:
        axes = hilbert_transpose(axes, bits)
    return _pack(interleaved_bits(axes, bits), key_is_long(len(ids), num_ranges))


def key_of_columns(columns: Sequence[pa.Array], bounds: Sequence[np.ndarray], curve: str,
                   num_ranges: int = RANGE_IDS) -> pa.Array:  # fmt: skip
    """The clustering key of rows, from their key columns and each column's `range_bounds`."""
    return curve_key([range_ids(c, b) for c, b in zip(columns, bounds, strict=False)], curve, num_ranges)
