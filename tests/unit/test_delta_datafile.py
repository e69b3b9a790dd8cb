"""write_data_file: atomic parquet files with Delta stats, as a Delta table references them."""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from use.delta import AddFile, DeltaLog
from use.delta.datafile import escape_partition_value, partition_directory, write_data_file
from use.errors import InvalidArgumentError, SchemaMismatchError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us", "UTC"))])


def _data(n: int = 5) -> pa.Table:
    return pa.table(
        {
            "id": list(range(n)),
            "name": [f"n{i}" for i in range(n)],
            "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC)] * n, pa.timestamp("us", "UTC")),
        }
    )


def _visible(root) -> list[str]:
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(out)


def test_writes_file_and_describes_it(tmp_path):
    add = write_data_file(str(tmp_path), _data(), tags={"revision": "1"}, data_change=False)
    assert isinstance(add, AddFile)
    assert add.path.endswith(".parquet") and "/" not in add.path
    full = tmp_path / add.path
    st = os.stat(full)
    assert add.size == st.st_size and add.modification_time == st.st_mtime_ns // 1_000_000
    assert add.tags == {"revision": "1"} and add.data_change is False
    assert pq.read_table(full).equals(_data())
    md = pq.ParquetFile(full).metadata
    assert md.row_group(0).column(0).compression == "SNAPPY"
    stats = json.loads(add.stats)
    assert stats["numRecords"] == 5
    assert stats["minValues"] == {"id": 0, "name": "n0", "ts": "2024-01-01T00:00:00.000Z"}
    assert stats["maxValues"]["id"] == 4 and stats["nullCount"] == {"id": 0, "name": 0, "ts": 0}
    assert _visible(tmp_path) == [add.path]  # no temporary file left behind


def test_batches_schema_cast_and_stats_columns(tmp_path):
    target = pa.schema([("id", pa.int64()), ("name", pa.string())])
    batches = (pa.record_batch({"name": ["a", "b"], "id": pa.array([1, 2], pa.int32())}) for _ in range(3))
    add = write_data_file(str(tmp_path), batches, schema=target, stats_columns=1, file_name="sub/x.parquet")
    assert add.path == "sub/x.parquet"
    t = pq.read_table(tmp_path / "sub" / "x.parquet")
    assert t.schema.names == ["id", "name"] and t.num_rows == 6
    assert json.loads(add.stats)["minValues"] == {"id": 1}
    empty = write_data_file(str(tmp_path), iter(()), schema=target)
    assert json.loads(empty.stats)["numRecords"] == 0 and pq.read_table(tmp_path / empty.path).num_rows == 0
    named = write_data_file(str(tmp_path), _data(), stats_column_names=["name"])
    assert json.loads(named.stats)["minValues"] == {"name": "n0"}


def test_partitioned_file_goes_to_hive_directory(tmp_path):
    data = _data().append_column("part", pa.array(["a b:c"] * 5))
    add = write_data_file(str(tmp_path), data, partition_values={"part": "a b:c"})
    assert add.partition_values == {"part": "a b:c"}
    assert add.path.startswith("part=a%20b%253Ac/")
    files = _visible(tmp_path)
    assert files[0].startswith("part=a b%3Ac/")
    assert pq.ParquetFile(os.path.join(tmp_path, files[0])).schema_arrow.names == ["id", "name", "ts"]
    assert escape_partition_value(None) == "__HIVE_DEFAULT_PARTITION__"
    assert partition_directory({"a": "x/y", "b": None}) == "a=x%2Fy/b=__HIVE_DEFAULT_PARTITION__"


def test_bad_input_is_refused_and_leaves_nothing(tmp_path):
    root = str(tmp_path)
    first = write_data_file(root, _data(), file_name="fixed.parquet")
    before = _visible(tmp_path)
    with pytest.raises(InvalidArgumentError, match="already exists"):
        write_data_file(root, _data(1), file_name="fixed.parquet")
    assert pq.read_table(tmp_path / first.path).num_rows == 5  # never overwritten
    for bad in ("../escape.parquet", "/abs.parquet", "_delta_log/x.parquet", ".hidden.parquet", "a/../b.parquet"):
        with pytest.raises(InvalidArgumentError, match="relative path"):
            write_data_file(root, _data(), file_name=bad)
    with pytest.raises(SchemaMismatchError, match="missing|no column"):
        write_data_file(root, _data(), schema=pa.schema([("other", pa.int64())]))
    with pytest.raises(SchemaMismatchError, match="not in the table schema"):
        write_data_file(root, _data(), schema=pa.schema([("id", pa.int64())]))
    with pytest.raises(SchemaMismatchError, match="name"):
        write_data_file(root, _data(), schema=pa.schema([("name", pa.int64())]))
    ns = pa.table({"t": pa.array([1_000_000_001], pa.timestamp("ns"))})
    with pytest.raises(SchemaMismatchError, match="nanosecond"):
        write_data_file(root, ns)
    with pytest.raises(InvalidArgumentError, match="schema="):
        write_data_file(root, iter(()))
    with pytest.raises(InvalidArgumentError, match="not an existing directory"):
        write_data_file(str(tmp_path / "missing"), _data())
    with pytest.raises(InvalidArgumentError, match="stats_columns"):
        write_data_file(root, _data(), stats_columns=-5)
    assert _visible(tmp_path) == before


def test_files_commit_and_read_back_through_the_log(tmp_path):
    root = str(tmp_path / "t")
    log = DeltaLog.for_path(root)
    log.create(SCHEMA)
    adds = [write_data_file(root, _data(3)) for _ in range(2)]
    log.start_transaction().add(*adds).commit("WRITE", {"mode": "Append"})
    snap = DeltaLog.for_path(root).snapshot()
    assert sorted(snap.files.column("path").to_pylist()) == sorted(a.path for a in adds)
    assert sorted(snap.files.column("stats").to_pylist()) == sorted(a.stats for a in adds)


def test_dictionary_encoding_only_for_columns_that_repeat(tmp_path):
    """Columns whose sampled values are nearly all distinct are written plain from the start;
    repeating ones keep the dictionary; nested schemas keep the writer's default (all)."""
    import numpy as np

    n = 30_000
    rng = np.random.default_rng(1)
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "measure": pa.array(rng.random(n)),
            "category": pa.array(rng.integers(0, 40, n).astype(np.int32)),
            "label": pa.array([f"label-{i % 7}" for i in range(n)]),
            "payload": pa.array([f"payload-{i:08d}" for i in range(n)]),
        }
    )
    add = write_data_file(str(tmp_path), table)
    meta = pq.ParquetFile(os.path.join(tmp_path, add.path)).metadata
    encodings = {meta.schema.column(i).name: set(meta.row_group(0).column(i).encodings) for i in range(meta.num_columns)}
    dictionary = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}
    assert encodings["category"] & dictionary and encodings["label"] & dictionary
    assert not (encodings["id"] & dictionary or encodings["measure"] & dictionary or encodings["payload"] & dictionary)
    assert pq.read_table(os.path.join(tmp_path, add.path)).equals(table)

    nested = pa.table({"id": pa.array(np.arange(100)), "s": pa.array([{"a": i} for i in range(100)])})
    add = write_data_file(str(tmp_path), nested)
    meta = pq.ParquetFile(os.path.join(tmp_path, add.path)).metadata
    assert set(meta.row_group(0).column(0).encodings) & dictionary


def test_compression_takes_spark_codec_names(tmp_path) -> None:
    """Spark's names for `spark.sql.parquet.compression.codec`, case-insensitive; a name pyarrow cannot
    write is a ConfigError that names the accepted ones, and no file is started."""
    from use.delta.datafile import parquet_compression
    from use.errors import ConfigError

    assert [parquet_compression(c) for c in ("SNAPPY", "uncompressed", "none", "lz4_raw", "zstd", "gzip")] == [
        "snappy",
        "none",
        "none",
        "lz4",
        "zstd",
        "gzip",
    ]
    add = write_data_file(str(tmp_path), _data(), compression="zstd")
    assert pq.ParquetFile(os.path.join(tmp_path, add.path)).metadata.row_group(0).column(0).compression == "ZSTD"
    for bad in ("lzo", "fast", None):
        with pytest.raises(ConfigError, match=r"is not a parquet codec USE can write.*; use one of brotli, gzip"):
            write_data_file(str(tmp_path), _data(), compression=bad)  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == [add.path]


def test_float_columns_holding_nan_get_no_footer_min_max(tmp_path) -> None:
    """pyarrow leaves NaN out of a footer's min/max (the parquet spec); parquet-mr readers (Spark and
    Delta Spark reading the table's files) take such bounds as covering every value and drop the NaN
    rows of `d > 1`. Chunks of columns holding NaN get no min/max, as parquet-mr writes them; the
    other columns keep theirs, the rows and row groups are unchanged, the Delta stats are as before."""
    root = str(tmp_path)
    nan = float("nan")
    data = pa.table({
        "id": pa.array(range(6), pa.int64()),
        "d": [0.5, nan, 0.7, 1.0, 2.0, 3.0],
        "f": pa.array([0.5, 1.5, 0.7, 1.0, 2.0, 3.0], pa.float32()),
        "s": pa.array([{"x": 0.5 * i if i != 4 else nan} for i in range(6)], pa.struct([("x", pa.float64())])),
    })  # fmt: skip
    add = write_data_file(root, data, row_group_size=3, stats_columns=-1)
    path = os.path.join(root, add.path)
    md = pq.read_metadata(path)
    assert md.num_row_groups == 2 and not any(f.endswith(".nan") or f.startswith(".") for f in os.listdir(root))
    for g in range(2):
        chunks = [md.row_group(g).column(i) for i in range(4)]
        has = {c.path_in_schema: c.statistics is not None and c.statistics.has_min_max for c in chunks}
        assert has == {"id": True, "d": False, "f": True, "s.x": False}
    back = pq.read_table(path)
    assert back.column("id").to_pylist() == list(range(6)) and back.column("d").to_pylist()[2:] == [0.7, 1.0, 2.0, 3.0]
    stats = json.loads(add.stats)
    assert stats["minValues"]["d"] == 0.5 and "d" not in stats["maxValues"] and stats["maxValues"]["f"] == 3.0
    # no NaN: one write, every footer bound kept
    plain = write_data_file(root, data.select(["id", "f"]))
    md = pq.read_metadata(os.path.join(root, plain.path))
    assert all(md.row_group(0).column(i).statistics.has_min_max for i in range(2))
