"""Delta per-file stats: footer -> JSON (as Delta renders it) and vectorized parsing back."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from use.delta.stats import StatsConfig, collect_stats, file_stats_json, stats_leaves, truncate_max_string, truncate_min_string
from use.delta.stats_parse import parse_stats, stat_column
from use.errors import ConfigError, InvalidArgumentError

UTC = dt.UTC


def _write(tmp_path, table: pa.Table, name: str = "f.parquet", **kw) -> pq.FileMetaData:
    path = tmp_path / name
    pq.write_table(table, path, **kw)
    return pq.read_metadata(path)


def _sample_table() -> pa.Table:
    rng = np.random.default_rng(7)
    n = 1000
    ints = rng.integers(-(10**12), 10**12, n)
    return pa.table(
        {
            "i": pa.array(ints, pa.int64()),
            "i8": pa.array(rng.integers(-100, 100, n), pa.int8()),
            "f": pa.array(rng.normal(size=n), pa.float64()),
            "f32": pa.array(rng.normal(size=n).astype(np.float32), pa.float32()),
            "s": pa.array([f"name-{v}" for v in rng.integers(0, 10**6, n)]),
            "d": pa.array([dt.date(2000, 1, 1) + dt.timedelta(days=int(v)) for v in rng.integers(0, 9000, n)]),
            "ts": pa.array(rng.integers(0, 2 * 10**15, n), pa.timestamp("us", "UTC")),
            "dec": pa.array([decimal.Decimal(int(v)).scaleb(-3) for v in rng.integers(-(10**9), 10**9, n)], pa.decimal128(12, 3)),
            "b": pa.array(rng.integers(0, 2, n).astype(bool)),
            "bin": pa.array([bytes([int(v)]) for v in rng.integers(0, 255, n)]),
            "st": pa.array([{"x": int(v), "y": {"z": f"z{v}"}} for v in rng.integers(0, 100, n)]),
            "n": pa.array([None if v % 3 == 0 else int(v) for v in range(n)], pa.int32()),
        }
    )


def test_stats_match_footer_values_across_row_groups(tmp_path):
    table = _sample_table()
    md = _write(tmp_path, table, row_group_size=128)
    assert md.num_row_groups > 1
    stats = json.loads(file_stats_json(md, table.schema))
    assert stats["numRecords"] == table.num_rows
    mins, maxs, nulls = stats["minValues"], stats["maxValues"], stats["nullCount"]

    def mm(col):
        r = pc.min_max(col)
        return r["min"].as_py(), r["max"].as_py()

    for name in ("i", "i8"):
        assert (mins[name], maxs[name]) == mm(table[name])
    lo, hi = mm(table["f"])
    assert mins["f"] == lo and maxs["f"] == hi
    lo, hi = mm(table["f32"])
    assert mins["f32"] == pytest.approx(lo) and np.float32(maxs["f32"]) == np.float32(hi)
    assert (mins["s"], maxs["s"]) == mm(table["s"])
    lo, hi = mm(table["d"])
    assert (mins["d"], maxs["d"]) == (lo.isoformat(), hi.isoformat())
    lo, hi = mm(table["dec"])
    assert decimal.Decimal(str(mins["dec"])) == lo and decimal.Decimal(str(maxs["dec"])) == hi
    # Decimals keep every digit in the JSON text (no float rounding).
    assert f'"dec":{lo}' in file_stats_json(md, table.schema)
    lo, hi = mm(table["ts"])
    assert mins["ts"].endswith("Z") and len(mins["ts"]) == len("2000-01-01T00:00:00.000Z")
    ts_min = dt.datetime.fromisoformat(mins["ts"].replace("Z", "+00:00"))
    ts_max = dt.datetime.fromisoformat(maxs["ts"].replace("Z", "+00:00"))
    assert ts_min <= lo and lo - ts_min < dt.timedelta(milliseconds=1)
    assert ts_max >= hi and ts_max - hi < dt.timedelta(milliseconds=1)
    # Booleans and binary: null counts only, as Delta does.
    assert "b" not in mins and "bin" not in maxs and nulls["b"] == 0 and nulls["bin"] == 0
    assert mins["st"] == {
        "x": mm(table["st"].combine_chunks().field("x"))[0],
        "y": {"z": mm(pc.struct_field(table["st"], ["y", "z"]))[0]},
    }
    assert nulls["st"] == {"x": 0, "y": {"z": 0}}
    assert nulls["n"] == table["n"].null_count and (mins["n"], maxs["n"]) == mm(table["n"])


def test_all_null_and_nan_columns(tmp_path):
    table = pa.table(
        {
            "allnull": pa.array([None, None], pa.int64()),
            "f": pa.array([1.5, float("nan")]),
            "nan": pa.array([float("nan"), float("nan")]),
            "inf": pa.array([float("-inf"), float("inf")]),
        }
    )
    md = _write(tmp_path, table)
    stats = collect_stats(md, nan_columns={"f", "nan"})
    assert stats["nullCount"] == {"allnull": 2, "f": 0, "nan": 0, "inf": 0}
    assert stats["minValues"] == {"f": 1.5}
    assert stats["maxValues"] == {}  # NaN present: no max (Spark would say NaN); infinities left out


def test_timestamp_ntz_and_units(tmp_path):
    table = pa.table(
        {
            "ntz": pa.array([dt.datetime(2021, 5, 6, 7, 8, 9, 123456)], pa.timestamp("us")),
            "ms": pa.array([dt.datetime(2021, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)], pa.timestamp("ms", "UTC")),
            "ns": pa.array([1_600_000_000_123_456_789], pa.timestamp("ns", "UTC")),
        }
    )
    md = _write(tmp_path, table, version="2.6")
    stats = collect_stats(md)
    assert stats["minValues"]["ntz"] == "2021-05-06T07:08:09.123456"
    assert stats["minValues"]["ms"] == stats["maxValues"]["ms"] == "2021-05-06T07:08:09.123Z"
    assert stats["minValues"]["ns"] == "2020-09-13T12:26:40.123Z"
    assert stats["maxValues"]["ns"] == "2020-09-13T12:26:40.124Z"


def test_bounds_at_the_ends_of_the_timestamp_and_date_range(tmp_path):
    """The first and last instants (0001-01-01, 9999-12-31T23:59:59.999999) and dates write true
    bounds in Delta's text, years before 1000 with their leading zeros; a max in the last
    millisecond cannot be rounded up to a millisecond, so it is left out (no bound) rather than
    written below the values."""
    first, last = dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    table = pa.table(
        {
            "ts": pa.array([first, last], pa.timestamp("us", "UTC")),
            "ts_ms": pa.array(
                [first + dt.timedelta(microseconds=500), last.replace(microsecond=999000)], pa.timestamp("us", "UTC")
            ),
            "ntz": pa.array([first.replace(tzinfo=None), last.replace(tzinfo=None)], pa.timestamp("us")),
            "d": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32()),
            "early": pa.array([dt.datetime(999, 3, 4, 5, 6, 7, 800900, tzinfo=UTC)] * 2, pa.timestamp("us", "UTC")),
        }
    )
    stats = collect_stats(_write(tmp_path, table))
    mins, maxs = stats["minValues"], stats["maxValues"]
    assert mins == {
        "ts": "0001-01-01T00:00:00.000Z", "ts_ms": "0001-01-01T00:00:00.000Z", "ntz": "0001-01-01T00:00:00.000000",
        "d": "0001-01-01", "early": "0999-03-04T05:06:07.800Z",
    }  # fmt: skip
    assert maxs == {
        "ts_ms": "9999-12-31T23:59:59.999Z",
        "ntz": "9999-12-31T23:59:59.999999",
        "d": "9999-12-31",
        "early": "0999-03-04T05:06:07.801Z",
    }
    parsed = parse_stats(pa.table({"stats": [json.dumps(stats)]}), table.schema)
    assert parsed.column(stat_column("min", ("ts",)))[0].as_py() == first
    assert parsed.column(stat_column("max", ("ts",)))[0].as_py() is None
    assert parsed.column(stat_column("max", ("ntz",)))[0].as_py() == last.replace(tzinfo=None)


def test_string_truncation_rules():
    assert truncate_min_string("a" * 32) == "a" * 32
    assert truncate_min_string("a" * 40) == "a" * 32
    assert truncate_max_string("a" * 32) == "a" * 32
    # A truncated max gets a tie-breaker above every continuation.
    assert truncate_max_string("a" * 40) == "a" * 32 + "\u007f"
    assert truncate_max_string("a" * 32 + "\u00e9" * 8) == "a" * 32 + chr(0x10FFFF)
    assert truncate_max_string("a" * 32 + "\u007f" + "b") == "a" * 32 + chr(0x10FFFF)
    # U+10FFFF cannot be topped: the prefix is extended past it.
    s = "a" * 32 + chr(0x10FFFF) + "b" * 10
    assert truncate_max_string(s) == "a" * 32 + chr(0x10FFFF) + "\u007f"
    # Java counts UTF-16 units: a surrogate pair is never split.
    astral = "\U0001f600"
    s = "a" * 31 + astral + "zzz"
    assert truncate_min_string(s) == "a" * 31 + astral
    for s in ["x" * 100, "ab" * 30 + "\u00ff", "é" * 50, "a" * 31 + astral * 3]:
        t = truncate_max_string(s)
        assert t is None or t.encode() >= s.encode()
        m = truncate_min_string(s)
        assert m is not None and s.startswith(m)
    assert truncate_max_string(chr(0x10FFFF) * 70) is None


def test_long_strings_in_file_stats(tmp_path):
    long = "k" * 50
    table = pa.table({"s": [long, "b"], "u": ["é" * 40, "a"]})
    stats = collect_stats(_write(tmp_path, table))
    assert stats["minValues"] == {"s": "b", "u": "a"}
    assert stats["maxValues"] == {"s": "k" * 32 + "\u007f", "u": "é" * 32 + chr(0x10FFFF)}


def test_num_indexed_cols_counts_struct_leaves(tmp_path):
    table = pa.table({"a": [1], "st": pa.array([{"x": 1, "y": 2}]), "c": [3], "p": ["x"]})
    md = _write(tmp_path, table)
    s = collect_stats(md, table.schema, num_indexed_cols=2)
    assert s["minValues"] == {"a": 1, "st": {"x": 1}}
    s = collect_stats(md, table.schema, num_indexed_cols=0)
    assert s == {"numRecords": 1, "minValues": {}, "maxValues": {}, "nullCount": {}}
    s = collect_stats(md, table.schema, num_indexed_cols=-1, partition_columns=["p"])
    assert s["nullCount"] == {"a": 0, "st": {"x": 0, "y": 0}, "c": 0}
    s = collect_stats(md, table.schema, columns=["c", "st.y"])
    assert s["minValues"] == {"st": {"y": 2}, "c": 3}
    with pytest.raises(ConfigError, match="nope"):
        collect_stats(md, table.schema, columns=["nope"])


def test_stats_config_from_table_properties():
    assert StatsConfig.from_configuration({}) == StatsConfig(32, None)
    c = StatsConfig.from_configuration(
        {"delta.dataSkippingNumIndexedCols": "5", "delta.dataSkippingStatsColumns": "a, `b.c`,d.e"}
    )
    assert c == StatsConfig(5, ("a", "b.c", "d.e"))
    with pytest.raises(ConfigError, match="dataSkippingNumIndexedCols"):
        StatsConfig.from_configuration({"delta.dataSkippingNumIndexedCols": "many"})
    with pytest.raises(ConfigError, match="backtick"):
        StatsConfig.from_configuration({"delta.dataSkippingStatsColumns": "`a"})
    schema = pa.schema([("a", pa.int64()), ("b", pa.int64())])
    assert [l.name for l in stats_leaves(schema, num_indexed_cols=1)] == ["a"]


def test_parse_stats_roundtrip_and_types(tmp_path):
    table = _sample_table()
    tables = [table.slice(0, 400), table.slice(400, 600)]
    jsons = [file_stats_json(_write(tmp_path, t, f"{i}.parquet"), t.schema) for i, t in enumerate(tables)]
    files = pa.table({"stats": pa.array(jsons + [None, ""])})
    parsed = parse_stats(files, table.schema)
    assert parsed.num_rows == 4
    assert parsed["num_records"].to_pylist() == [400, 600, None, None]
    for name in ("i", "i8", "f", "s", "d", "dec", "n"):
        assert parsed[stat_column("min", name)].type == table.schema.field(name).type
        for row, t in enumerate(tables):
            assert parsed[stat_column("min", name)][row].as_py() == pc.min(t[name]).as_py()
            assert parsed[stat_column("max", name)][row].as_py() == pc.max(t[name]).as_py()
            assert parsed[stat_column("null_count", name)][row].as_py() == t[name].null_count
    assert parsed[stat_column("min", "ts")].type == pa.timestamp("us", "UTC")
    assert parsed[stat_column("min", "st.y.z")][0].as_py() == pc.min(pc.struct_field(tables[0]["st"], ["y", "z"])).as_py()
    assert stat_column("max", "b") in parsed.column_names  # read when present (delta-rs writes them)
    assert stat_column("min", "bin") not in parsed.column_names
    only = parse_stats(files, table.schema, ["st", "i"])
    assert only.column_names == [
        "num_records",
        "min.st.x",
        "max.st.x",
        "null_count.st.x",
        "min.st.y.z",
        "max.st.y.z",
        "null_count.st.y.z",
        "min.i",
        "max.i",
        "null_count.i",
    ]


def test_parse_stats_tolerates_what_other_writers_write():
    schema = pa.schema(
        [
            ("f", pa.float64()),
            ("ts", pa.timestamp("us", "UTC")),
            ("ntz", pa.timestamp("us")),
            ("i", pa.int32()),
            ("d", pa.date32()),
        ]
    )
    rows = [
        # Spark: non-finite doubles quoted; timestamps with an offset; ntz without zone.
        '{"numRecords":3,"minValues":{"f":"-Infinity","ts":"2021-01-01T01:00:00.000+01:00","ntz":"2021-01-01T00:00:00.5"},"maxValues":{"f":"NaN"},"nullCount":{"f":1}}',
        # delta-rs style: microseconds and Z
        '{"numRecords":2,"minValues":{"f":1.5,"ts":"2021-01-01T00:00:00.123456Z","i":7,"d":"2020-02-03"},"maxValues":{"f":2,"i":9},"nullCount":{}}',
    ]
    parsed = parse_stats(pa.table({"stats": rows}), schema)
    assert parsed["min.f"].to_pylist() == [None, 1.5]
    assert parsed["max.f"].to_pylist() == [None, 2.0]
    assert parsed["min.ts"].to_pylist() == [
        dt.datetime(2021, 1, 1, tzinfo=UTC),
        dt.datetime(2021, 1, 1, 0, 0, 0, 123456, tzinfo=UTC),
    ]
    assert parsed["min.ntz"].to_pylist()[0] == dt.datetime(2021, 1, 1, 0, 0, 0, 500000)
    assert parsed["min.d"].to_pylist() == [None, dt.date(2020, 2, 3)]
    # Malformed stats in one file: the others still parse, that file has no stats.
    bad = rows + ['{"numRecords":1,"minValues":{"i":"oops"}}', "{not json", '{"numRecords":4,"minValues":{"i":1.5}}']
    parsed = parse_stats(pa.table({"stats": bad}), schema)
    assert parsed["num_records"].to_pylist() == [3, 2, 1, None, 4]
    assert parsed["min.i"].to_pylist() == [None, 7, None, None, None]


def test_parse_stats_rejects_unknown_columns():
    files = pa.table({"stats": ['{"numRecords":1}']})
    with pytest.raises(InvalidArgumentError, match="nope"):
        parse_stats(files, pa.schema([("a", pa.int64())]), ["nope"])
    with pytest.raises(InvalidArgumentError, match="stats"):
        parse_stats(pa.table({"path": ["x"]}), pa.schema([("a", pa.int64())]))


def test_parse_stats_many_files_is_vectorized():
    n = 50_000
    rng = np.random.default_rng(1)
    lo = rng.integers(0, 1000, n)
    stats = pa.array(
        [f'{{"numRecords":10,"minValues":{{"a":{a},"s":"v{a}"}},"maxValues":{{"a":{a + 5}}},"nullCount":{{"a":0}}}}' for a in lo]
    )
    parsed = parse_stats(pa.table({"stats": stats}), pa.schema([("a", pa.int64()), ("s", pa.string())]))
    assert parsed.num_rows == n
    assert np.array_equal(parsed["min.a"].to_numpy(), lo)
    assert parsed["min.s"][123].as_py() == f"v{lo[123]}"


def test_parse_stats_one_bad_file_among_many_keeps_every_other_files_bounds():
    """A corrupt stats string used to send the whole snapshot through the per-file path, which read
    every double bound as null (skipping on doubles was off for the whole table) and raised
    OverflowError on an integer past int64; now only the bad file has no stats."""
    n = 1_000
    good = [
        f'{{"numRecords":10,"minValues":{{"i":{k},"x":{k}.25}},"maxValues":{{"i":{k + 9},"x":{k}.75}},"nullCount":{{"i":0,"x":0}}}}'
        for k in range(n)
    ]
    schema = pa.schema([("i", pa.int64()), ("x", pa.float64()), ("u", pa.uint8())])
    for bad in (
        "{not json",
        '{"numRecords":1,"minValues":{"i":99999999999999999999,"x":1.5}}',
        '{"numRecords":1,"minValues":{"x":"abc"}}',
    ):
        stats = good[:500] + [bad] + good[501:]
        parsed = parse_stats(pa.table({"stats": stats}), schema)
        assert parsed.num_rows == n
        min_x, min_i = parsed["min.x"].to_pylist(), parsed["min.i"].to_pylist()
        assert [min_x[k] for k in range(n) if k != 500] == [k + 0.25 for k in range(n) if k != 500]
        assert [min_i[k] for k in range(n) if k != 500] == [k for k in range(n) if k != 500]
        assert min_i[500] is None
    # the per-file path itself: exact doubles, integers outside the column's type are no bound
    few = ['{"numRecords":2,"minValues":{"i":-5,"x":0.1,"u":300},"maxValues":{"i":99999999999999999999,"x":2,"u":7}}', "{broken"]
    parsed = parse_stats(pa.table({"stats": few}), schema)
    assert parsed["min.x"].to_pylist() == [0.1, None]
    assert parsed["max.x"].to_pylist() == [2.0, None]
    assert parsed["min.i"].to_pylist() == [-5, None]
    assert parsed["max.i"].to_pylist() == [None, None]
    assert parsed["min.u"].to_pylist() == [None, None]
    assert parsed["max.u"].to_pylist() == [7, None]


def test_decimals_stored_as_integers_as_sparks_writer_stores_them(tmp_path):
    """Spark's parquet writer stores a decimal of up to 9 digits as INT32 and up to 18 as INT64 (the
    unscaled value); pyarrow cannot convert those statistics (ArrowNotImplementedError), which failed
    every Qbeast write on the JVM path of a table with such a column. They are decoded from the raw
    values with the column's scale."""
    table = pa.table(
        {
            "small": pa.array([decimal.Decimal("-3.25"), decimal.Decimal("1.50"), None], pa.decimal128(5, 2)),
            "money": pa.array(
                [decimal.Decimal("12345678.90"), decimal.Decimal("-0.01"), decimal.Decimal("7")], pa.decimal128(10, 2)
            ),
            "wide": pa.array([decimal.Decimal("123456789012345.678"), decimal.Decimal("0.001"), None], pa.decimal128(18, 3)),
        }
    )
    md = _write(tmp_path, table, store_decimal_as_integer=True)
    assert [md.row_group(0).column(i).physical_type for i in range(3)] == ["INT32", "INT64", "INT64"]
    # the same stats as the same values stored as fixed-length bytes (pyarrow's default)
    assert file_stats_json(md) == file_stats_json(_write(tmp_path, table, "bytes.parquet"))
    text = file_stats_json(md)
    assert '"minValues":{"small":-3.25,"money":-0.01,"wide":0.001}' in text
    assert '"maxValues":{"small":1.50,"money":12345678.90,"wide":123456789012345.678}' in text
