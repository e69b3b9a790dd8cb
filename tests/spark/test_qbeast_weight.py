"""Weights (§2.2), Spark's hash (§2.1) and Scala's murmur (§4) against the spec and the real JVM."""

from __future__ import annotations

import datetime as dt
import decimal
import math

import numpy as np
import pyarrow as pa
import pytest

from use.errors import InvalidArgumentError, UnsupportedTypeError
from use.qbeast.weight import (
    MAX_WEIGHT,
    MIN_WEIGHT,
    fraction,
    normalized_weight,
    normalized_weight_to_weight,
    scala_murmur_bytes,
    scala_murmur_strings,
    spark_hash,
    weight_from_fraction,
)


def test_weight_vectors():
    assert MIN_WEIGHT == -2147483648 and MAX_WEIGHT == 2147483647
    assert weight_from_fraction(0.0) == MIN_WEIGHT
    assert weight_from_fraction(1.0) == MAX_WEIGHT
    assert weight_from_fraction(0.5) == 0
    assert weight_from_fraction(0.1) == -1717986918
    assert weight_from_fraction(2.0) == MAX_WEIGHT and weight_from_fraction(-1.0) == MIN_WEIGHT
    assert weight_from_fraction(math.nan) == 0  # JVM (int) NaN
    arr = weight_from_fraction(np.array([0.0, 1.0, 0.5, 0.1, 2.0, -3.0]))
    assert arr.dtype == np.int32
    assert list(arr) == [MIN_WEIGHT, MAX_WEIGHT, 0, -1717986918, MAX_WEIGHT, MIN_WEIGHT]


def test_fraction_and_normalized_weight():
    assert fraction(MIN_WEIGHT) == 0.0 and fraction(MAX_WEIGHT) == 1.0
    assert fraction(np.array([MIN_WEIGHT, MAX_WEIGHT], dtype=np.int32)).tolist() == [0.0, 1.0]
    for f in (0.0, 0.1, 0.25, 0.5, 0.9):
        assert abs(fraction(weight_from_fraction(f)) - f) < 1e-9
    assert normalized_weight_to_weight(0.1) == -1717986918
    assert normalized_weight_to_weight(1.0) == MAX_WEIGHT and normalized_weight_to_weight(7.5) == MAX_WEIGHT
    assert normalized_weight(0, 10, 100) == fraction(0)
    assert normalized_weight(MAX_WEIGHT, 40, 100) == 2.5


def test_spark_hash_vectors():
    assert spark_hash([1], ["int"]) == -559580957
    assert spark_hash(["Spark", 123, 2], ["string", "int", "int"]) == -1321691492
    assert spark_hash([None], ["int"]) == 42
    assert spark_hash([None, 1], ["string", "int"]) == spark_hash([1], ["int"])
    assert spark_hash([-0.0], ["double"]) == spark_hash([0.0], ["double"])
    assert spark_hash([1], [pa.int32()]) == spark_hash([1], ["integer"])


def test_spark_hash_bad_input():
    with pytest.raises(InvalidArgumentError, match="2 values but 1 types"):
        spark_hash([1, 2], ["int"])
    with pytest.raises(UnsupportedTypeError, match="array<int>"):
        spark_hash([[1]], ["array<int>"])


def test_scala_murmur_vectorized_matches_scalar():
    rng = np.random.default_rng(7)
    values = ["", "a", "ab", "abc", "abcd", "abcde", "héllo wörld ✓", None, "x" * 1000]
    values += ["".join(chr(c) for c in rng.integers(32, 500, size=int(n))) for n in rng.integers(0, 40, 300)]
    expected = [scala_murmur_bytes((v or "").encode("utf-8")) for v in values]
    for typ in (pa.string(), pa.large_string()):
        arr = pa.array(values, typ)
        assert scala_murmur_strings(arr).tolist() == expected
        assert scala_murmur_strings(arr.slice(3, 50)).tolist() == expected[3:53]
    chunked = pa.chunked_array([pa.array(values[:5]), pa.array(values[5:])])
    assert scala_murmur_strings(chunked).tolist() == expected
    blobs = [b"\x00\xff\x10", b"", b"\x80" * 9]
    assert scala_murmur_strings(pa.array(blobs, pa.binary())).tolist() == [scala_murmur_bytes(b) for b in blobs]
    assert scala_murmur_strings(pa.array([], pa.string())).tolist() == []
    with pytest.raises(UnsupportedTypeError):
        scala_murmur_strings(pa.array([1, 2]))


def test_scala_murmur_against_jvm(spark):
    murmur = getattr(getattr(spark._jvm.scala.util.hashing, "MurmurHash3$"), "MODULE$")
    for b in [b"", b"a", b"ab", b"abc", b"abcd", b"abcde", "héllo wörld".encode(), bytes(range(256))]:
        assert murmur.bytesHash(bytearray(b)) == scala_murmur_bytes(b)


def test_spark_hash_against_spark(spark):
    rows = [
        (
            1,
            2**40,
            1.5,
            "Spark",
            dt.date(2024, 2, 29),
            dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC),
            True,
            2.5,
            decimal.Decimal("12.34"),
            b"\x01\x02\x03\xff\x80",
            7,
        ),
        (
            -7,
            -(2**62),
            -0.0,
            "héllo wörld ✓",
            dt.date(1969, 12, 31),
            dt.datetime(1960, 5, 6, 7, 8, 9, tzinfo=dt.UTC),
            False,
            float("nan"),
            decimal.Decimal("-0.01"),
            b"",
            -3,
        ),
        (None, None, None, None, None, None, None, None, None, None, None),
        (
            0,
            0,
            1e300,
            "",
            dt.date(1970, 1, 1),
            dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
            True,
            -1e-30,
            decimal.Decimal("99999999.99"),
            b"abcd",
            0,
        ),
    ]
    schema = (
        "i int, l bigint, d double, s string, dt date, ts timestamp, b boolean, f float, "
        "dec decimal(10,2), bin binary, sh smallint"
    )
    df = spark.createDataFrame(rows, schema)
    cols = df.columns
    types = ["int", "bigint", "double", "string", "date", "timestamp", "boolean", "float", "decimal(10,2)", "binary", "smallint"]
    exprs = [f"hash({c}) AS h_{c}" for c in cols] + [f"hash({', '.join(cols)}) AS h_all"]
    got = df.selectExpr(*cols, *exprs).collect()
    big = spark.sql("SELECT hash(CAST('12345678901234567890.123' AS decimal(25,3))) AS h").collect()[0]["h"]
    assert big == spark_hash([decimal.Decimal("12345678901234567890.123")], ["decimal(25,3)"])
    for text in ("99999999999999999999.999999999999999999", "-12345678901234567890.123456789012345678"):
        # 38 digits: more than Python's default decimal context holds (the unscaled value was rounded)
        h = spark.sql(f"SELECT hash(CAST('{text}' AS decimal(38,18))) AS h").collect()[0]["h"]
        assert h == spark_hash([decimal.Decimal(text)], ["decimal(38,18)"]), text
    assert len(got) == len(rows)
    for row, values in zip(got, rows, strict=False):
        # expected values come from the (time-zone aware) inputs, not the collected local-time rows
        for c, v, t in zip(cols, values, types, strict=False):
            assert row[f"h_{c}"] == spark_hash([v], [t]), (c, v)
        assert row["h_all"] == spark_hash(values, types)
