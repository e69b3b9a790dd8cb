"""Transformations: JSON as qbeast-spark writes it (§4, §7.1), superseding/merging, vectorized transforms."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

from use.errors import CorruptIndexMetadataError, IndexColumnError, InvalidArgumentError, UnsupportedTypeError
from use.qbeast.java_values import java_double_str
from use.qbeast.transform import (
    EmptyTransformation,
    HashTransformation,
    IdentityToZeroTransformation,
    IdentityTransformation,
    LinearTransformation,
    NullToZeroTransformation,
    qdatatype_of,
)
from use.qbeast.transform_quantiles import (
    DEFAULT_STRING_HISTOGRAM,
    CDFNumericQuantilesTransformation,
    CDFStringQuantilesTransformation,
    StringHistogramTransformation,
)
from use.qbeast.transformers import (
    LinearTransformer,
    make_transformer,
    transformation_from_json_obj,
    transformer_from_json_obj,
)
from use.qbeast.weight import scala_murmur_bytes

P = "io.qbeast.core.transform."


def test_java_double_text():
    cases = {
        1.0: "1.0",
        1e10: "1.0E10",
        1.5e-5: "1.5E-5",
        0.001: "0.001",
        1234567.0: "1234567.0",
        12345678.0: "1.2345678E7",
        -0.5: "-0.5",
        1e7: "1.0E7",
        9.999e-4: "9.999E-4",
        0.0: "0.0",
    }
    for x, text in cases.items():
        assert java_double_str(x) == text
    assert java_double_str(-0.0) == "-0.0"
    assert java_double_str(0.1, float32=True) == "0.1"


@pytest.mark.parametrize(
    "obj",
    [
        {
            "className": P + "LinearTransformation",
            "minNumber": -10,
            "maxNumber": 10,
            "nullValue": 0,
            "orderedDataType": "IntegerDataType",
        },
        {
            "className": P + "LinearTransformation",
            "minNumber": 0.5,
            "maxNumber": 1.0e10,
            "nullValue": 3.25,
            "orderedDataType": "DoubleDataType",
        },
        {"className": P + "IdentityTransformation", "identityValue": 0, "orderedDataType": "IntegerDataType"},
        {"className": P + "IdentityTransformation", "identityValue": None, "orderedDataType": "IntegerDataType"},
        {"className": P + "HashTransformation", "nullValue": -1628776639},
        {"className": P + "CDFNumericQuantilesTransformation", "quantiles": [0.0, 1.5, 3.0], "dataType": "DoubleDataType"},
        {"className": P + "CDFStringQuantilesTransformation", "quantiles": ["a", "m", "z"]},
        {"className": P + "StringHistogramTransformation", "histogram": ["a", "b"]},
        {"className": P + "EmptyTransformation"},
        {"className": P + "IdentityToZeroTransformation", "identityValue": 7},
        {"className": P + "NullToZeroTransformation"},
    ],
)
def test_transformation_json_round_trip(obj):
    t = transformation_from_json_obj(obj)
    assert json.loads(t.to_json()) == obj
    assert transformation_from_json_obj(json.loads(t.to_json())) == t


def test_double_json_uses_java_text():
    t = LinearTransformation(0.5, 1e10, 3.25, "DoubleDataType")
    assert '"maxNumber":1.0E10' in t.to_json()
    assert t.to_json().startswith('{"className":"io.qbeast.core.transform.LinearTransformation","minNumber":0.5')


def test_scala_object_class_name_is_accepted():
    assert transformation_from_json_obj({"className": P + "NullToZeroTransformation$"}) == NullToZeroTransformation()


def test_missing_null_value_is_regenerated_deterministically():
    obj = {"className": P + "LinearTransformation", "minNumber": 0, "maxNumber": 10000, "orderedDataType": "IntegerDataType"}
    a = transformation_from_json_obj(obj)
    b = transformation_from_json_obj(dict(obj))
    assert a == b and 0 <= a.null_value <= 10000


@pytest.mark.parametrize(
    "obj,fragment",
    [
        ({"minNumber": 1}, "className"),
        ({"className": P + "Nope"}, "unknown className"),
        ({"className": P + "LinearTransformation", "maxNumber": 1, "orderedDataType": "IntegerDataType"}, "minNumber"),
        # a null bound, with no nullValue to keep (one is drawn between the bounds) or with one
        (
            {"className": P + "LinearTransformation", "minNumber": None, "maxNumber": 1, "orderedDataType": "IntegerDataType"},
            "minNumber=null",
        ),
        (
            {"className": P + "LinearTransformation", "minNumber": 1, "maxNumber": None, "orderedDataType": "LongDataType"},
            "maxNumber=null",
        ),
        (
            {
                "className": P + "LinearTransformation",
                "minNumber": None,
                "maxNumber": 1.0,
                "nullValue": 0.5,
                "orderedDataType": "DoubleDataType",
            },
            "minNumber=null",
        ),
        (
            {"className": P + "LinearTransformation", "minNumber": 5, "maxNumber": 1, "orderedDataType": "IntegerDataType"},
            "max > min",
        ),
        (
            {"className": P + "LinearTransformation", "minNumber": 1.5, "maxNumber": 3, "orderedDataType": "IntegerDataType"},
            "integers",
        ),
        (
            {"className": P + "LinearTransformation", "minNumber": 1, "maxNumber": 3, "orderedDataType": "BoolDataType"},
            "orderedDataType",
        ),
        ({"className": P + "HashTransformation"}, "nullValue"),
        ({"className": P + "CDFNumericQuantilesTransformation", "quantiles": [1.0], "dataType": "DoubleDataType"}, "at least 2"),
        (
            {"className": P + "CDFNumericQuantilesTransformation", "quantiles": ["x", "y"], "dataType": "DoubleDataType"},
            "numbers",
        ),
        ("nope", "JSON object"),
    ],
)
def test_bad_transformation_json(obj, fragment):
    with pytest.raises(CorruptIndexMetadataError, match=fragment):
        transformation_from_json_obj(obj)


@pytest.mark.parametrize("bounds", [(None, 5), (1, None), (None, None)])
def test_linear_transformation_needs_both_bounds(bounds):
    with pytest.raises(InvalidArgumentError, match="needs finite bounds"):
        LinearTransformation.create(*bounds, "IntegerDataType")


def test_transformer_json():
    for obj in (
        {"className": P + "LinearTransformer", "columnName": "id", "dataType": "IntegerDataType"},
        {"className": P + "HashTransformer", "columnName": "name", "dataType": "StringDataType"},
        {"className": P + "CDFNumericQuantilesTransformer", "columnName": "x", "orderedDataType": "DoubleDataType"},
        {"className": P + "CDFStringQuantilesTransformer", "columnName": "s"},
        {"className": P + "EmptyTransformer", "columnName": "e"},
        {"className": P + "StringHistogramTransformer", "columnName": "h", "dataType": "StringDataType"},
    ):
        t = transformer_from_json_obj(obj)
        assert json.loads(t.to_json()) == obj
    with pytest.raises(CorruptIndexMetadataError, match="columnName"):
        transformer_from_json_obj({"className": P + "LinearTransformer", "dataType": "IntegerDataType"})
    with pytest.raises(CorruptIndexMetadataError):
        transformer_from_json_obj({"className": P + "LinearTransformer", "columnName": "s", "dataType": "StringDataType"})


def test_linear_supersede_and_merge():
    lt = LinearTransformation(-10, 10, 0, "IntegerDataType")
    assert not lt.is_superseded_by(LinearTransformation(-10, 10, 0, "IntegerDataType"))
    assert lt.is_superseded_by(LinearTransformation(-20, 10, 0, "IntegerDataType"))
    assert lt.is_superseded_by(LinearTransformation(-10, 20, 0, "IntegerDataType"))
    assert not lt.is_superseded_by(IdentityTransformation(None, "IntegerDataType"))
    assert not lt.is_superseded_by(IdentityTransformation(0, "IntegerDataType"))
    assert lt.is_superseded_by(IdentityTransformation(20, "IntegerDataType"))
    assert not lt.is_superseded_by(EmptyTransformation())
    assert lt.is_superseded_by(HashTransformation(1))
    m = lt.merge(LinearTransformation(-20, 0, 0, "IntegerDataType"))
    assert (m.min_number, m.max_number) == (-20, 10) and -20 <= m.null_value <= 10
    m = lt.merge(IdentityTransformation(30, "IntegerDataType"))
    assert (m.min_number, m.max_number) == (-10, 30)
    assert lt.merge(EmptyTransformation()) is lt


def test_identity_rules():
    null_id, zero, one = (IdentityTransformation(v, "IntegerDataType") for v in (None, 0, 1))
    assert null_id.is_superseded_by(zero) and not zero.is_superseded_by(null_id)
    assert not null_id.is_superseded_by(null_id) and zero.is_superseded_by(one)
    merged = zero.merge(one)
    assert isinstance(merged, LinearTransformation) and (merged.min_number, merged.max_number) == (0, 1)
    inside = LinearTransformation(-5, 5, 0, "IntegerDataType")
    assert zero.merge(inside) is inside
    assert zero.transform(pa.array([1, 2, None])).tolist() == [0.0, 0.0, 0.0]


def test_hash_never_superseded():
    h = HashTransformation(5)
    assert not h.is_superseded_by(HashTransformation(7))
    assert not h.is_superseded_by(EmptyTransformation())
    assert h.is_superseded_by(LinearTransformation(0, 1, 0, "IntegerDataType"))
    assert EmptyTransformation().is_superseded_by(h) and EmptyTransformation().merge(h) is h


def test_linear_transform_vectorized():
    lt = LinearTransformation(1, 4000000, 2836883, "IntegerDataType")
    got = lt.transform(pa.array([1, None, 4000000, 5000000, -3], pa.int32()))
    assert got.tolist() == [0.0, (2836883 - 1) / 3999999, 1.0, 1.0, 0.0]
    assert lt.transform_value(2000000) == pytest.approx((2000000 - 1) / 3999999)
    assert lt.transform_value(-100, clamp=False) < 0
    dbl = LinearTransformation(0.0, 2.0, 1.0, "DoubleDataType")
    assert dbl.transform(pa.chunked_array([[0.5], [1.5, None]])).tolist() == [0.25, 0.75, 0.5]
    dec = LinearTransformation(0.0, 10.0, 5.0, "DecimalDataType")
    assert dec.transform(pa.array([decimal.Decimal("2.50")], pa.decimal128(5, 2))).tolist() == [0.25]


def test_dates_and_timestamps_are_utc_millis():
    d0, d1 = dt.date(2020, 1, 1), dt.date(2020, 1, 11)
    lt = LinearTransformation.create(d0, d1, "DateDataType")
    assert lt.min_number == 1577836800000 and lt.max_number == 1577836800000 + 10 * 86_400_000
    assert lt.transform(pa.array([dt.date(2020, 1, 6)], pa.date32())).tolist() == [0.5]
    assert lt.transform_value(dt.date(2020, 1, 6)) == 0.5
    t0 = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    t1 = dt.datetime(2020, 1, 1, 0, 0, 10, tzinfo=dt.UTC)
    tt = LinearTransformation.create(t0, t1, "TimestampDataType")
    arr = pa.array([dt.datetime(2020, 1, 1, 0, 0, 5, 999)], pa.timestamp("us", tz="UTC"))
    assert tt.transform(arr).tolist() == [0.5]  # 999 µs floor to the millisecond
    assert tt.transform(arr.cast(pa.timestamp("ns", tz="UTC"))).tolist() == [0.5]


def test_hash_transform_matches_scalar_scala_murmur():
    h = HashTransformation(-1628776639)
    null_frac = (scala_murmur_bytes(b"-1628776639") & 0x7FFFFFFF) / 2147483647
    got = h.transform(pa.array(["a", None, "héllo"]))
    assert got.tolist() == [
        (scala_murmur_bytes(b"a") & 0x7FFFFFFF) / 2147483647,
        null_frac,
        (scala_murmur_bytes("héllo".encode()) & 0x7FFFFFFF) / 2147483647,
    ]
    assert h.transform(pa.array([123, None], pa.int64())).tolist() == [
        (scala_murmur_bytes(b"123") & 0x7FFFFFFF) / 2147483647,
        null_frac,
    ]
    assert h.transform(pa.array([1e10, 2.5])).tolist() == [h.transform_value(1e10), h.transform_value(2.5)]
    assert h.transform_value(1e10) == (scala_murmur_bytes(b"1.0E10") & 0x7FFFFFFF) / 2147483647
    assert h.transform_value(None) == null_frac
    with pytest.raises(UnsupportedTypeError):
        h.transform(pa.array([dt.date(2020, 1, 1)]))


def test_quantile_transforms():
    q = CDFNumericQuantilesTransformation((0.0, 10.0, 20.0, 30.0), "DoubleDataType")
    got = q.transform(pa.array([-1.0, 0.0, 5.0, 10.0, 25.0, 30.0, 40.0, None]))
    assert got.tolist() == [0.0, 0.0, 0.5 / 3, 1 / 3, 2.5 / 3, 1.0, 1.0, 0.0]
    assert q.transform_value(5.0) == pytest.approx(0.5 / 3)
    s = CDFStringQuantilesTransformation(("b", "d", "f"))
    assert s.transform(pa.array(["a", "b", "c", "d", "e", "f", "g", None])).tolist() == [0, 0, 0, 0.5, 0.5, 1, 1, 0]
    assert q.is_superseded_by(CDFNumericQuantilesTransformation((0.0, 1.0), "DoubleDataType"))
    assert not q.is_superseded_by(CDFNumericQuantilesTransformation((0.0, 10.0, 20.0, 30.0), "DoubleDataType"))
    hist = StringHistogramTransformation(DEFAULT_STRING_HISTOGRAM)
    assert hist.transform(pa.array(["a", "z", None])).tolist() == [0.0, 1.0, (DEFAULT_STRING_HISTOGRAM.index("n") + 0) / 25]
    assert IdentityToZeroTransformation(3).transform(pa.array([3])).tolist() == [0.0]


def test_types_and_transformer_factory():
    assert qdatatype_of(pa.int32()) == "IntegerDataType" and qdatatype_of(pa.int64()) == "LongDataType"
    assert qdatatype_of(pa.timestamp("us", tz="UTC")) == "TimestampDataType" and qdatatype_of(pa.date32()) == "DateDataType"
    assert qdatatype_of(pa.decimal128(10, 2)) == "DecimalDataType" and qdatatype_of(pa.large_string()) == "StringDataType"
    with pytest.raises(UnsupportedTypeError, match="'b'.*cast"):
        qdatatype_of(pa.int16(), "b")
    with pytest.raises(UnsupportedTypeError):
        qdatatype_of(pa.bool_())
    assert make_transformer(None, "x", pa.float64()) == LinearTransformer("x", "DoubleDataType")
    assert make_transformer(None, "s", pa.string()).type_name == "hashing"
    assert make_transformer("quantiles", "s", pa.string()).class_name.endswith("CDFStringQuantilesTransformer")
    with pytest.raises(UnsupportedTypeError, match="s:hashing"):
        make_transformer("linear", "s", pa.string())
    with pytest.raises(IndexColumnError, match="deprecated"):
        make_transformer("histogram", "s", pa.string())
    with pytest.raises(IndexColumnError, match="linear, hashing, quantiles"):
        make_transformer("zorder", "s", pa.string())


def test_linear_transformer_make_transformation():
    lt = LinearTransformer("x", "DoubleDataType")
    t = lt.make_transformation({"x_min": 1.0, "x_max": 3.0})
    assert isinstance(t, LinearTransformation) and (t.min_number, t.max_number) == (1.0, 3.0)
    assert lt.make_transformation({"x_min": 2.0, "x_max": 2.0}) == IdentityTransformation(2.0, "DoubleDataType")
    assert lt.make_transformation({"x_min": None, "x_max": None}) == IdentityTransformation(None, "DoubleDataType")
    with pytest.raises(InvalidArgumentError, match="finite"):
        lt.make_transformation({"x_min": 1.0, "x_max": float("nan")})
    with pytest.raises(InvalidArgumentError):
        LinearTransformation(3, 3, 3, "IntegerDataType")
