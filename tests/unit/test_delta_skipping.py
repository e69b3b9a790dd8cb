"""Data skipping over parsed stats and partition values: exact cases and a random property test."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math

import numpy as np
import pyarrow as pa
import pytest

from use.delta.datafile import write_data_file
from use.delta.predicates import And, Comparison, InList, IsNotNull, IsNull, Not, Or, Unknown
from use.delta.skipping import files_matching, typed_partition_values, utc_timestamp_texts
from use.delta.stats_parse import parse_stats
from use.errors import InvalidArgumentError

UTC = dt.UTC
SCHEMA = pa.schema(
    [
        ("a", pa.int64()),
        ("s", pa.string()),
        ("f", pa.float64()),
        ("ts", pa.timestamp("us", "UTC")),
        ("dec", pa.decimal128(6, 2)),
        ("d", pa.date32()),
        ("b", pa.bool_()),
        ("st", pa.struct([("x", pa.int32())])),
        ("p", pa.int32()),
    ]
)


def _files(stats: list[dict | None], parts: list[str | None] | None = None) -> pa.Table:
    parts = parts if parts is not None else ["1"] * len(stats)
    return pa.table(
        {
            "path": [f"f{i}" for i in range(len(stats))],
            "stats": pa.array([json.dumps(s) if s is not None else None for s in stats], pa.string()),
            "partition_values": pa.array([[("p", v)] for v in parts], pa.map_(pa.string(), pa.string())),
        }
    )


def _keep(files, pred):
    return files_matching(files, pred, SCHEMA).to_pylist()


def test_ints_ranges_nulls_and_missing_stats():
    files = _files(
        [
            {"numRecords": 10, "minValues": {"a": 1}, "maxValues": {"a": 5}, "nullCount": {"a": 0}},
            {"numRecords": 10, "minValues": {"a": 6}, "maxValues": {"a": 9}, "nullCount": {"a": 3}},
            {"numRecords": 4, "minValues": {}, "maxValues": {}, "nullCount": {"a": 4}},
            None,
            {"numRecords": 0},
        ]
    )
    assert _keep(files, Comparison("a", "=", 3)) == [True, False, False, True, False]
    assert _keep(files, Comparison("a", ">", 5)) == [False, True, False, True, False]
    assert _keep(files, Comparison("a", ">=", 5)) == [True, True, False, True, False]
    assert _keep(files, Comparison("a", "<", 6)) == [True, False, False, True, False]
    assert _keep(files, Comparison("a", "!=", 3)) == [True, True, False, True, False]
    assert _keep(files, IsNull("a")) == [False, True, True, True, False]
    assert _keep(files, IsNotNull("a")) == [True, True, False, True, False]
    assert _keep(files, Not(Comparison("a", "<=", 5))) == [False, True, False, True, False]
    assert _keep(files, InList("a", (0, 7))) == [False, True, False, True, False]
    assert _keep(files, InList("a", ())) == [False] * 5
    assert _keep(files, InList("a", tuple(range(100, 1000)))) == [False, False, False, True, False]
    assert _keep(files, Not(InList("a", (1, 2)))) == [True, True, False, True, False]
    assert _keep(files, Or(Comparison("a", "=", 3), Comparison("a", "=", 8))) == [True, True, False, True, False]
    assert _keep(files, And(Comparison("a", ">", 2), Comparison("a", "<", 4))) == [True, False, False, True, False]
    assert _keep(files, Unknown("udf(a)")) == [True] * 5  # no column used: stats are not even parsed
    assert _keep(files, Not(Unknown())) == [True] * 5
    # Mixed numeric literals compare as Spark compares them.
    assert _keep(files, Comparison("a", "=", 5.0)) == [True, False, False, True, False]
    assert _keep(files, Comparison("a", "=", 5.5)) == [False, False, False, True, False]
    assert _keep(files, Comparison("a", ">", 5.5)) == [False, True, False, True, False]
    assert _keep(files, Comparison("a", "=", decimal.Decimal("5.5"))) == [False, False, False, False, False]
    assert _keep(files, Comparison("a", "<", decimal.Decimal("5.5"))) == [True, False, False, True, False]
    assert _keep(files, Comparison("a", "<", 2**70)) == [True, True, False, True, False]
    assert _keep(files, Comparison("a", ">", 2**70)) == [False] * 5
    assert _keep(files, Comparison("a", "=", "3")) == [True, True, False, True, False]  # unusable literal: keep


def test_truncated_string_max_never_prunes_wrongly():
    prefix = "m" * 32
    files = _files(
        [
            # Delta: truncated max with a tie-breaker
            {"numRecords": 2, "minValues": {"s": "a"}, "maxValues": {"s": prefix + "\u007f"}, "nullCount": {"s": 0}},
            # a writer that simply cut the max (no tie-breaker)
            {"numRecords": 2, "minValues": {"s": "a"}, "maxValues": {"s": prefix}, "nullCount": {"s": 0}},
            {"numRecords": 2, "minValues": {"s": "a"}, "maxValues": {"s": "b"}, "nullCount": {"s": 0}},
        ]
    )
    longer = prefix + "zzzz"
    assert _keep(files, Comparison("s", "=", longer)) == [True, True, False]
    assert _keep(files, Comparison("s", ">", longer)) == [True, True, False]
    assert _keep(files, Comparison("s", ">=", prefix + "a")) == [True, True, False]
    assert _keep(files, Comparison("s", ">", "n")) == [False, False, False]
    assert _keep(files, Comparison("s", "<", "a")) == [False, False, False]
    assert _keep(files, Comparison("s", "<=", "a")) == [True, True, True]
    assert _keep(files, Comparison("s", "!=", "a")) == [True, True, True]
    one = _files([{"numRecords": 2, "minValues": {"s": "a"}, "maxValues": {"s": "a"}, "nullCount": {"s": 0}}])
    assert _keep(one, Comparison("s", "!=", "a")) == [False]


def test_timestamp_max_is_widened_by_a_millisecond():
    files = _files(
        [
            {
                "numRecords": 1,
                "minValues": {"ts": "2021-01-01T00:00:00.000Z"},
                "maxValues": {"ts": "2021-01-01T00:00:00.001Z"},
                "nullCount": {"ts": 0},
            }
        ]
    )
    t = dt.datetime(2021, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)
    assert _keep(files, Comparison("ts", "=", t)) == [True]
    assert _keep(files, Comparison("ts", ">", t)) == [True]
    assert _keep(files, Comparison("ts", ">", t + dt.timedelta(milliseconds=1))) == [False]
    assert _keep(files, Comparison("ts", "<", dt.datetime(2021, 1, 1, tzinfo=UTC))) == [False]
    assert _keep(files, Comparison("ts", "<", dt.datetime(2021, 1, 1))) == [False]  # naive = UTC
    assert _keep(files, Comparison("ts", "=", dt.date(2021, 1, 1))) == [True]  # date literal: not used


def test_floats_nan_and_missing_max():
    files = _files(
        [
            {"numRecords": 3, "minValues": {"f": 1.0}, "maxValues": {"f": 2.0}, "nullCount": {"f": 0}},
            {"numRecords": 3, "minValues": {"f": 1.0}, "maxValues": {}, "nullCount": {"f": 0}},  # has NaN
            {"numRecords": 3, "minValues": {"f": 1.0}, "maxValues": {"f": "NaN"}, "nullCount": {"f": 0}},  # Spark
            {"numRecords": 3, "minValues": {"f": 1.0}, "maxValues": {"f": 1.0}, "nullCount": {"f": 0}},
        ]
    )
    assert _keep(files, Comparison("f", ">", 5.0)) == [False, True, True, False]
    assert _keep(files, Comparison("f", "<", 0.5)) == [False, False, False, False]
    assert _keep(files, Comparison("f", "=", float("nan"))) == [True] * 4
    assert _keep(files, Comparison("f", "!=", 1.0)) == [True] * 4  # NaN != 1.0 may hide behind a max of 1.0
    assert _keep(files, Comparison("f", "=", 1)) == [True, True, True, True]


def test_decimals_dates_booleans_and_nested():
    files = _files(
        [
            {
                "numRecords": 3,
                "minValues": {"dec": 1.10, "d": "2021-01-01", "st": {"x": 5}},
                "maxValues": {"dec": 2.50, "d": "2021-01-31", "st": {"x": 7}},
                "nullCount": {"dec": 0, "d": 0, "b": 0, "st": {"x": 0}},
            },
            {
                "numRecords": 3,
                "minValues": {"dec": 3.00, "d": "2022-01-01", "b": True, "st": {"x": 8}},
                "maxValues": {"dec": 3.00, "d": "2022-01-01", "b": True, "st": {"x": 9}},
                "nullCount": {"dec": 0, "d": 0, "b": 0, "st": {"x": 0}},
            },
        ]
    )
    assert _keep(files, Comparison("dec", "=", decimal.Decimal("2.5"))) == [True, False]
    assert _keep(files, Comparison("dec", "=", decimal.Decimal("2.505"))) == [False, False]
    assert _keep(files, Comparison("dec", ">", decimal.Decimal("2.505"))) == [False, True]
    assert _keep(files, Comparison("dec", "<", 1.1)) == [False, False]
    assert _keep(files, Comparison("dec", "!=", 3)) == [True, False]
    assert _keep(files, Comparison("d", ">", dt.date(2021, 6, 1))) == [False, True]
    assert _keep(files, Comparison("d", "=", "2021-01-15")) == [True, False]
    assert _keep(files, Comparison("b", "=", False)) == [True, False]
    assert _keep(files, Comparison("st.x", ">", 7)) == [False, True]
    assert _keep(files, Comparison("ST.X", "<", 6)) == [True, False]  # case-insensitive like Spark
    with pytest.raises(InvalidArgumentError, match="nope"):
        files_matching(files, Comparison("nope", "=", 1), SCHEMA)
    with pytest.raises(InvalidArgumentError, match="parsed stats"):
        files_matching(files, Comparison("a", "=", 1), SCHEMA, parsed_stats=parse_stats(files.slice(0, 1), SCHEMA))
    with pytest.raises(InvalidArgumentError, match="IsNull"):
        files_matching(files, Comparison("a", "=", None), SCHEMA)  # type: ignore[arg-type]


def test_decimal_literals_of_38_digits_are_put_on_the_columns_grid_exactly():
    """A DECIMAL(38,18) literal at the column's scale has up to 38 digits (Python's default decimal
    context holds 28): skipping must neither fail nor round it."""
    schema = pa.schema([("dec", pa.decimal128(38, 18))])
    top = "99999999999999999999.999999999999999999"
    files = _files(
        [
            {"numRecords": 2, "minValues": {"dec": "-" + top}, "maxValues": {"dec": "1.5"}, "nullCount": {"dec": 0}},
            {"numRecords": 2, "minValues": {"dec": "12345678901.5"}, "maxValues": {"dec": top}, "nullCount": {"dec": 0}},
        ]
    )

    def keep(op: str, text: str) -> list[bool]:
        return files_matching(files, Comparison("dec", op, decimal.Decimal(text)), schema).to_pylist()

    assert keep(">", "10000000000") == [False, True]
    assert keep("=", "12345678901.5") == [False, True]
    assert keep("=", "12345678901.5000000000000000001") == [False, False]  # off the grid: no value equals it
    assert keep(">=", top) == [False, True]
    assert keep(">", top) == [False, False]
    assert keep("<", "-" + top) == [False, False]
    assert keep("<=", "-" + top) == [True, False]
    assert keep("<", "1e400") == [True, True]  # beyond any DECIMAL(38,18): no error, nothing pruned wrongly
    # the same literals against DECIMAL(38,18) partition values
    parts = pa.schema([("p", pa.decimal128(38, 18)), ("x", pa.int32())])
    by_part = pa.table({
        "path": ["a", "b", "c"], "stats": pa.array([None] * 3, pa.string()),
        "partition_values": pa.array([[("p", top)], [("p", "12345678901.5")], [("p", "-" + top)]], pa.map_(pa.string(), pa.string())),
    })  # fmt: skip

    def keep_part(op: str, text: str) -> list[bool]:
        return files_matching(by_part, Comparison("p", op, decimal.Decimal(text)), parts, partition_columns=("p",)).to_pylist()

    assert keep_part(">", "10000000000") == [True, True, False]
    assert keep_part("=", "12345678901.5") == [False, True, False]
    assert keep_part(">=", top) == [True, False, False]
    assert keep_part("<", "-99999999999999999999.99999999999999999") == [False, False, True]


def test_partition_pruning_is_exact():
    files = _files([None] * 4, parts=["1", "2", None, "10"])
    assert _keep(files, Comparison("p", "=", 1)) == [True, False, False, False]
    assert _keep(files, Comparison("p", ">", 1)) == [False, True, False, True]
    assert _keep(files, Comparison("p", "!=", 2)) == [True, False, False, True]
    assert _keep(files, IsNull("p")) == [False, False, True, False]
    assert _keep(files, Not(IsNull("p"))) == [True, True, False, True]
    assert _keep(files, InList("p", (2, 10))) == [False, True, False, True]
    assert _keep(files, Or(Comparison("p", "=", 1), Comparison("a", "=", 3))) == [True, True, True, True]
    assert _keep(files, And(Comparison("p", "=", 1), Comparison("a", "=", 3))) == [True, False, False, False]
    typed = typed_partition_values(
        pa.table(
            {
                "partition_values": pa.array(
                    [[("t", "2021-01-01 10:00:00")], [("t", "2021-01-01T10:00:00.000001Z")]], pa.map_(pa.string(), pa.string())
                )
            }
        ),
        "t",
        pa.timestamp("us", "UTC"),
    )
    assert typed.to_pylist() == [dt.datetime(2021, 1, 1, 10, tzinfo=UTC), dt.datetime(2021, 1, 1, 10, 0, 0, 1, tzinfo=UTC)]


@pytest.mark.parametrize("type_", [pa.string(), pa.large_string(), pa.int32(), pa.date32(), pa.binary()])
def test_empty_partition_value_is_null_for_every_type(type_):
    # The protocol: an empty string as a partition value means null, whatever the column's type.
    schema = pa.schema([("a", pa.int64()), ("p", type_)])
    files = pa.table(
        {
            "stats": pa.array([None, None, None], pa.string()),
            "partition_values": pa.array(
                [[("p", "")], [("p", None)], [("p", "7" if not pa.types.is_date(type_) else "2024-01-02")]],
                pa.map_(pa.string(), pa.string()),
            ),
        }
    )
    assert typed_partition_values(files, "p", type_).is_null().to_pylist() == [True, True, False]
    assert files_matching(files, IsNull("p"), schema).to_pylist() == [True, True, False]
    assert files_matching(files, IsNotNull("p"), schema).to_pylist() == [False, False, True]


def test_timestamp_partitions_without_zone_are_utc():
    schema = pa.schema([("a", pa.int64()), ("t", pa.timestamp("us", "UTC"))])
    files = pa.table(
        {
            "stats": pa.array([None, None, None], pa.string()),
            "partition_values": pa.array(
                [[("t", "2021-01-01 10:00:00")], [("t", "2021-01-01T10:00:00.000000Z")], [("t", "2021-01-01T15:00:00.000000Z")]],
                pa.map_(pa.string(), pa.string()),
            ),
        }
    )
    # A zone-less value is UTC, as every USE reader (the shim's scan too) types it: pruned exactly.
    at = dt.datetime(2021, 1, 1, 15, tzinfo=UTC)
    assert files_matching(files, Comparison("t", "=", at), schema).to_pylist() == [False, False, True]
    assert files_matching(files, Comparison("t", "=", dt.datetime(2021, 1, 1, 10, tzinfo=UTC)), schema).to_pylist() == [
        True,
        True,
        False,
    ]
    # one spelling per instant: Delta's UTC ISO form, or Hive's (directory names)
    raw = pa.array(["2021-01-01 10:00:00", "2021-01-01T10:00:00.000000Z", "2021-01-01T11:00:00.5+01:00", "", None, "bad"])
    assert utc_timestamp_texts(raw).to_pylist() == [
        "2021-01-01T10:00:00.000000Z", "2021-01-01T10:00:00.000000Z", "2021-01-01T10:00:00.500000Z", "", None, "bad"]  # fmt: skip
    assert utc_timestamp_texts(raw, hive=True).to_pylist()[:3] == [
        "2021-01-01 10:00:00",
        "2021-01-01 10:00:00",
        "2021-01-01 10:00:00.500000",
    ]


def test_zoned_timestamp_literals_past_year_9999_in_utc():
    """9999-12-31 23:00 in Los Angeles is a valid literal whose UTC datetime Python cannot hold: it
    prunes as the instant it is (by stats written by USE: the last one has no max)."""
    import zoneinfo

    schema = pa.schema([("t", pa.timestamp("us", "UTC"))])
    files = pa.table({"stats": pa.array([
        '{"numRecords":1,"minValues":{"t":"2024-01-01T00:00:00.000Z"},"maxValues":{"t":"2024-01-01T00:00:00.000Z"},"nullCount":{"t":0}}',
        '{"numRecords":1,"minValues":{"t":"9999-12-31T23:59:59.999Z"},"maxValues":{},"nullCount":{"t":0}}',
    ])})  # fmt: skip
    late = dt.datetime(9999, 12, 31, 23, tzinfo=zoneinfo.ZoneInfo("America/Los_Angeles"))
    assert files_matching(files, Comparison("t", "<", late), schema).to_pylist() == [True, True]
    assert files_matching(files, Comparison("t", ">=", late), schema).to_pylist() == [False, True]  # no max: no bound


# --- property test: no file holding a matching row is ever dropped -------------------------------


def _spark_cmp(x, op, v):
    """Spark's comparison of non-null x with literal v (NaN above all numbers, equal to itself)."""
    if isinstance(x, float) or isinstance(v, float):

        def key(z):
            z = float(z)
            return (1, 0.0) if math.isnan(z) else (0, z)

        x, v = key(x), key(v)
    return {"=": x == v, "!=": x != v, "<": x < v, "<=": x <= v, ">": x > v, ">=": x >= v}[op]


def _row_matches(row, pred) -> bool | None:
    """SQL three-valued evaluation of a predicate on one row (None = unknown)."""
    if isinstance(pred, And):
        l, r = _row_matches(row, pred.left), _row_matches(row, pred.right)
        if l is False or r is False:
            return False
        return None if l is None or r is None else True
    if isinstance(pred, Or):
        l, r = _row_matches(row, pred.left), _row_matches(row, pred.right)
        if l is True or r is True:
            return True
        return None if l is None or r is None else False
    if isinstance(pred, Not):
        c = _row_matches(row, pred.child)
        return None if c is None else not c
    if isinstance(pred, IsNull):
        return row[pred.column] is None
    if isinstance(pred, IsNotNull):
        return row[pred.column] is not None
    if isinstance(pred, Comparison):
        x = row[pred.column]
        return None if x is None else _spark_cmp(x, pred.op, pred.value)
    if isinstance(pred, InList):
        x = row[pred.column]
        if x is None:
            return None
        return any(_spark_cmp(x, "=", v) for v in pred.values)
    raise AssertionError(pred)


def test_random_filters_never_drop_a_matching_file(tmp_path):
    rng = np.random.default_rng(20240521)
    schema = pa.schema(
        [
            ("i", pa.int32()),
            ("f", pa.float64()),
            ("s", pa.string()),
            ("ts", pa.timestamp("us", "UTC")),
            ("dec", pa.decimal128(8, 2)),
            ("d", pa.date32()),
            ("b", pa.bool_()),
        ]
    )
    full = pa.schema(list(schema) + [pa.field("p", pa.string())])
    alphabet = ["a", "b", "é", "z", "\u007f", "\U0001f600"]
    base_ts = dt.datetime(2021, 1, 1, tzinfo=UTC)

    def value(col: str, row_rng):
        if row_rng.random() < 0.1:
            return None
        if col == "i":
            return int(row_rng.integers(-50, 50))
        if col == "f":
            return float("nan") if row_rng.random() < 0.05 else float(row_rng.normal() * 10)
        if col == "s":
            stem = "".join(row_rng.choice(alphabet, size=int(row_rng.integers(0, 3))))
            return "m" * int(row_rng.choice([0, 30, 31, 32, 33])) + stem
        if col == "ts":
            return base_ts + dt.timedelta(microseconds=int(row_rng.integers(0, 10_000)))
        if col == "dec":
            return decimal.Decimal(int(row_rng.integers(-5000, 5000))).scaleb(-2)
        if col == "d":
            return dt.date(2021, 1, 1) + dt.timedelta(days=int(row_rng.integers(0, 60)))
        return bool(row_rng.integers(0, 2))

    root = tmp_path / "t"
    root.mkdir()
    rows_per_file = []
    adds = []
    for k in range(30):
        n = int(rng.integers(1, 12))
        rows = [{c: value(c, rng) for c in schema.names} for _ in range(n)]
        part = [None, "x", "y"][k % 3]
        for r in rows:
            r["p"] = part
        rows_per_file.append(rows)
        data = pa.Table.from_pylist([{c: r[c] for c in schema.names} for r in rows], schema=schema)
        adds.append(write_data_file(str(root), data, partition_values={"p": part}))
    files = pa.table(
        {
            "path": [a.path for a in adds],
            "stats": [a.stats for a in adds],
            "partition_values": pa.array([list(a.partition_values.items()) for a in adds], pa.map_(pa.string(), pa.string())),
        }
    )
    all_rows = [r for rows in rows_per_file for r in rows]

    def literal(col):
        pool = [r[col] for r in all_rows if r[col] is not None]
        v = pool[int(rng.integers(0, len(pool)))]
        jitter = rng.random()
        if col == "i" and jitter < 0.3:
            return v + float(rng.choice([-0.5, 0.5]))
        if col == "i" and jitter < 0.5:
            return decimal.Decimal(v) + decimal.Decimal("0.5")
        if col == "dec" and jitter < 0.3:
            return v + decimal.Decimal("0.005")
        if col == "dec" and jitter < 0.5:
            return float(v)
        if col == "f" and jitter < 0.2:
            return int(v) if not math.isnan(v) else v
        if col == "s" and jitter < 0.5:
            return v + str(rng.choice(alphabet)) if jitter < 0.25 else v[: int(rng.integers(0, len(v) + 1))]
        if col == "ts" and jitter < 0.5:
            return v + dt.timedelta(microseconds=int(rng.integers(-1500, 1500)))
        return v

    def random_pred(depth=0):
        r = rng.random()
        if depth < 2 and r < 0.25:
            cls = [And, Or][int(rng.integers(0, 2))]
            return cls(random_pred(depth + 1), random_pred(depth + 1))
        if depth < 2 and r < 0.3:
            return Not(random_pred(depth + 1))
        col = full.names[int(rng.integers(0, len(full.names)))]
        r = rng.random()
        if r < 0.1:
            return IsNull(col)
        if r < 0.2:
            return IsNotNull(col)
        if r < 0.3:
            return InList(col, tuple(literal(col) for _ in range(int(rng.integers(1, 4)))))
        op = ["=", "!=", "<", "<=", ">", ">="][int(rng.integers(0, 6))]
        return Comparison(col, op, literal(col))

    checked = dropped = 0
    parsed = parse_stats(files, full)
    for k in range(400):
        pred = random_pred()
        keep = files_matching(files, pred, full, parsed_stats=parsed if k % 2 else None).to_pylist()
        for k, rows in enumerate(rows_per_file):
            if any(_row_matches(r, pred) is True for r in rows):
                checked += 1
                assert keep[k], f"file {k} has a row matching {pred} but was skipped: {files['stats'][k]}"
            elif not keep[k]:
                dropped += 1
    assert checked > 1000 and dropped > 1000  # the property is exercised and skipping does prune
