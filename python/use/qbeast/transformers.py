"""Transformers, the per-column recipes a revision stores (`LinearTransformer{columnName,dataType}`
...), and the JSON reading of a revision's transformers and transformations (spec §4, §7.1).

A transformer knows a column and its type and builds a *transformation* (`use.qbeast.transform`,
`use.qbeast.transform_quantiles`) from the statistics of the data: the writer's one aggregation pass
and the `columnStats` option. The JSON readers pick the class from `className` (the fully qualified
Scala name; a Scala `object`'s trailing `$` is accepted) and refuse anything else with a typed error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from use.errors import PYTHON, CorruptIndexMetadataError, IndexColumnError, InvalidArgumentError, UnsupportedTypeError
from use.qbeast.java_values import JavaRandom, jackson_dumps, scala_string_hash
from use.qbeast.transform import (
    ALL_TYPES,
    INTEGRAL_TYPES,
    ORDERED_TYPES,
    PACKAGE,
    STRING,
    TRANSFORMER_TYPES,
    EmptyTransformation,
    HashTransformation,
    IdentityToZeroTransformation,
    IdentityTransformation,
    LinearTransformation,
    NullToZeroTransformation,
    Transformation,
    qdatatype_of,
    random_between,
    to_number,
)
from use.qbeast.transform_quantiles import (
    DEFAULT_STRING_HISTOGRAM,
    CDFNumericQuantilesTransformation,
    CDFStringQuantilesTransformation,
    StringHistogramTransformation,
)

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
    return f"pass column_stats={{'{column}_quantiles': QbeastTable.compute_quantiles(df, '{column}')}} to QbeastTable.write"


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
    if data_type in INTEGRAL_TYPES:
        if isinstance(v, float):
            raise CorruptIndexMetadataError(f"{where} has {key}={v!r}, but {data_type} values are integers")
        return int(v)
    return float(v)


def _bound(obj: Mapping[str, Any], key: str, data_type: str, where: str) -> int | float:
    v = _typed_number(_require(obj, key, where), data_type, key, where)
    if v is None:
        raise CorruptIndexMetadataError(f"{where} has {key}=null; a linear transformation needs both bounds")
    return v


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
            return StringHistogramTransformer(
                column, _datatype(obj, "dataType", where, ALL_TYPES) if "dataType" in obj else STRING
            )
    except (InvalidArgumentError, UnsupportedTypeError) as e:
        raise CorruptIndexMetadataError(f"{where} is invalid: {e}") from None
    raise CorruptIndexMetadataError(f"{where} has an unknown className {obj.get('className')!r}")


def transformation_from_json_obj(obj: Any, where: str = "transformation") -> Transformation:
    name = _strip_class(obj, where)
    try:
        if name == LinearTransformation.class_name:
            dt = _datatype(obj, "orderedDataType", where, ORDERED_TYPES)
            lo = _bound(obj, "minNumber", dt, where)
            hi = _bound(obj, "maxNumber", dt, where)
            nv = _typed_number(obj.get("nullValue"), dt, "nullValue", where)
            if nv is None:
                # A pre-0.2 table: Scala regenerates the null value from a Random seeded with the
                # string hash of the JSON tree its deserializer sees. Jackson has already taken the
                # `className` type id out of that tree, so the text hashed has every field but it.
                seed = scala_string_hash(jackson_dumps({k: v for k, v in obj.items() if k != "className"}))
                nv = random_between(lo, hi, dt, JavaRandom(seed).next_double())
            return LinearTransformation(lo, hi, nv, dt)
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
