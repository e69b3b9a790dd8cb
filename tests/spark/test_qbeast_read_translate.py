"""Filter translation: Spark filters (SQL strings and Columns) -> the typed predicate language."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from use.delta.predicates import And, Comparison, InList, IsNotNull, IsNull, Not, Or, Unknown
from use.errors import InvalidArgumentError

SCHEMA = "a int, b string, d date, t timestamp, x double, m decimal(10,2), l long"


@pytest.fixture(scope="module")
def schema(spark):
    return spark.createDataFrame([], SCHEMA).schema


def tr(spark, schema, f):
    from use.qbeast.reader import translate_filter

    return translate_filter(spark, schema, f)


def test_sql_strings(spark, schema):
    assert tr(spark, schema, "a > 5 and (b = 'x' or b in ('y', 'z'))") == And(
        Comparison("a", ">", 5), Or(Comparison("b", "=", "x"), InList("b", ("y", "z")))
    )
    # the analyzer's casts are evaluated: string -> date, literals -> decimal
    assert tr(spark, schema, "d >= '2024-01-01'") == Comparison("d", ">=", dt.date(2024, 1, 1))
    assert tr(spark, schema, "m = 3.5") == Comparison("m", "=", decimal.Decimal("3.50"))
    assert tr(spark, schema, "t < timestamp'2024-01-01 10:00:00'") == Comparison(
        "t", "<", dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC)
    )
    assert tr(spark, schema, "not (a is null)") == Not(IsNull("a"))
    assert tr(spark, schema, "b is not null") == IsNotNull("b")
    assert tr(spark, schema, "l <=> 4") == Comparison("l", "=", 4)
    assert tr(spark, schema, "x in (1, 2.5)") == InList("x", (1.0, 2.5))
    # literal on the left is flipped
    assert tr(spark, schema, "5 < a") == Comparison("a", ">", 5)
    # a widening cast of the column keeps the column usable
    assert tr(spark, schema, "a > 2.5") == Comparison("a", ">", 2)


def test_untranslatable_parts_become_unknown(spark, schema):
    assert isinstance(tr(spark, schema, "a + 1 > 3"), Unknown)
    assert isinstance(tr(spark, schema, "hash(a, b) < 5"), Unknown)
    p = tr(spark, schema, "a > 1 and upper(b) = 'X'")
    assert isinstance(p, And) and p.left == Comparison("a", ">", 1) and isinstance(p.right, Unknown)


def test_columns(spark, schema):
    from pyspark.sql import functions as F

    p = tr(spark, schema, (F.col("d") > F.lit(dt.date(2024, 1, 2))) & F.col("b").isin("q", "r"))
    assert p == And(Comparison("d", ">", dt.date(2024, 1, 2)), InList("b", ("q", "r")))
    assert tr(spark, schema, None) is None


def test_bad_filters(spark, schema):
    with pytest.raises(InvalidArgumentError, match="nope"):
        tr(spark, schema, "nope > 1")
    with pytest.raises(InvalidArgumentError):
        tr(spark, schema, "a >")
    with pytest.raises(InvalidArgumentError):
        tr(spark, schema, 42)
    with pytest.raises(InvalidArgumentError):
        tr(spark, schema, "  ")
