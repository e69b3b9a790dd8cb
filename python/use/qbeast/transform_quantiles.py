"""The quantile transformations (spec §4): a value's position in an empirical CDF given by sorted
quantiles (`CDFNumericQuantilesTransformation`, `CDFStringQuantilesTransformation`, qbeast-spark 0.8,
experimental upstream) and the deprecated 0.7 `StringHistogramTransformation`, read and applied for
old tables but never created. The binary search is Scala's `IndexedSeq.search`, step for step, so a
value equal to a duplicated boundary lands exactly where qbeast-spark puts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from use.errors import InvalidArgumentError
from use.qbeast.transform import (
    ORDERED_TYPES,
    PACKAGE,
    EmptyTransformation,
    Transformation,
    array_to_float64,
    clamp_value,
    clamped,
    number_of,
)


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
        values, nulls = array_to_float64(array, self.data_type)
        out = self._positions(values)
        return clamped(np.where(nulls, 0.0, out))

    def transform_value(self, value: Any, *, clamp: bool = True) -> float:
        if value is None:
            return 0.0
        v = number_of(value, self.data_type)
        return clamp_value(float(self._positions(np.array([float(v)]))[0]), clamp)

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
    return clamped(out)


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
