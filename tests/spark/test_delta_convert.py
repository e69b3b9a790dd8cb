"""CONVERT TO DELTA: a directory of parquet files (Hive-partitioned too) becomes a Delta table in
place, one CONVERT commit, no data file rewritten; from Python (`use.delta.convert`) and SQL
(`CONVERT TO DELTA ...`, `CALL use_catalog.system.convert_to_delta`). Held against delta-rs."""

from __future__ import annotations

import os

import deltalake
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from sql_support import refused, rows
from use.delta.convert import convert_to_delta
from use.errors import InvalidArgumentError, SchemaMismatchError, TableNotFoundError, UnsupportedFeatureError


def _files(root: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def _partitioned(root: str) -> pa.Table:
    data = pa.table({
        "id": list(range(6)), "v": [0.5 * i for i in range(6)],
        "d": ["2024-01-01", "2024-01-01", "2024-01-02", "2024-01-02", None, "2024-01-01"],
        "k": ["a b", "a b", "x/y", "x/y", "z", "z"],
    })  # fmt: skip
    ds.write_dataset(data, root, format="parquet", partitioning=["d", "k"], partitioning_flavor="hive")
    open(os.path.join(root, "_SUCCESS"), "w").close()
    return data


def test_a_partitioned_parquet_directory_becomes_a_delta_table_in_one_commit(tmp_path) -> None:
    root = str(tmp_path / "p")
    data = _partitioned(root)
    before = _files(root)
    parts = pa.schema([("d", pa.date32()), ("k", pa.string())])
    for partitioning, error, message in [
        (None, InvalidArgumentError, r"d=2024-01-01 is a partition directory the declared partitioning \(none\) does not have"),
        (pa.schema([("k", pa.string()), ("d", pa.date32())]), InvalidArgumentError, r"is not a partition directory k=<value>"),
        (pa.schema([("d", pa.int32()), ("k", pa.string())]), InvalidArgumentError, r"the value '2024-01-0\d' of partition column d is not of type int32"),
        (pa.schema([("d", pa.date32()), ("D", pa.string())]), InvalidArgumentError, r"name a column twice"),
    ]:  # fmt: skip
        with pytest.raises(error, match=message):
            convert_to_delta(root, partitioning)
        assert _files(root) == before, message  # nothing written
    result = convert_to_delta(root, parts)
    assert (result.version, result.num_files, result.partition_columns, result.converted) == (0, 4, ("d", "k"), True)
    table = deltalake.DeltaTable(root)
    assert table.metadata().partition_columns == ["d", "k"]
    assert table.schema().to_arrow().names == ["id", "v", "d", "k"]
    got = table.to_pyarrow_table().sort_by("id")
    assert got.column("id").to_pylist() == data.column("id").to_pylist()
    assert got.column("k").to_pylist() == data.column("k").to_pylist()  # escaped directory names unescaped
    assert [None if d is None else d.isoformat() for d in got.column("d").to_pylist()] == data.column("d").to_pylist()
    adds = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    assert all(n > 0 for n in adds["num_records"])  # statistics from the footers
    again = convert_to_delta(root)  # already a Delta table: left as it is
    assert (again.version, again.converted) == (0, False)
    with pytest.raises(UnsupportedFeatureError, match=r"already a Delta table partitioned by \(d, k\), not by \(k\)"):
        convert_to_delta(root, pa.schema([("k", pa.string())]))


def test_conversion_refusals_leave_the_directory_as_it_was(tmp_path) -> None:
    import pyarrow.parquet as pq

    flat = tmp_path / "flat"
    flat.mkdir()
    pq.write_table(pa.table({"a": [1, 2]}), str(flat / "one.parquet"))
    pq.write_table(pa.table({"a": ["x"]}), str(flat / "two.parquet"))
    with pytest.raises(SchemaMismatchError, match="incompatible schemas"):
        convert_to_delta(str(flat))
    (flat / "two.parquet").write_bytes(b"not parquet")
    with pytest.raises(SchemaMismatchError, match="two.parquet' is not a readable parquet file"):
        convert_to_delta(str(flat))
    os.remove(flat / "two.parquet")
    (flat / "nested").mkdir()
    pq.write_table(pa.table({"a": [3]}), str(flat / "nested" / "three.parquet"))
    with pytest.raises(InvalidArgumentError, match="nested is a subdirectory the declared partitioning"):
        convert_to_delta(str(flat))
    assert not (flat / "_delta_log").exists()
    os.remove(flat / "nested" / "three.parquet")
    os.rmdir(flat / "nested")
    clash = tmp_path / "clash"
    (clash / "a=1").mkdir(parents=True)
    pq.write_table(pa.table({"a": [1]}), str(clash / "a=1" / "f.parquet"))
    with pytest.raises(SchemaMismatchError, match="hold the partition column\\(s\\) a too"):
        convert_to_delta(str(clash), pa.schema([("a", pa.int64())]))
    (tmp_path / "empty").mkdir()
    with pytest.raises(TableNotFoundError, match="holds no data files"):
        convert_to_delta(str(tmp_path / "empty"))
    with pytest.raises(TableNotFoundError, match="no such directory"):
        convert_to_delta(str(tmp_path / "nowhere"))
    assert not any(p.name == "_delta_log" for p in tmp_path.rglob("*"))
    result = convert_to_delta(str(flat), collect_stats=False)  # Delta's NO STATISTICS
    assert result.num_files == 1
    assert deltalake.DeltaTable(str(flat)).to_pyarrow_table().column("a").to_pylist() == [1, 2]


def test_convert_to_delta_in_sql_by_path_and_of_a_parquet_table(spark, db, tmp_path) -> None:
    path = str(tmp_path / "events")
    spark.range(10).selectExpr("id", "CAST(id % 3 AS STRING) AS k", "date_add(DATE'2024-01-01', CAST(id % 2 AS INT)) AS d").write.partitionBy(
        "d", "k").parquet(path)  # fmt: skip
    with refused(r"is a partition directory the declared partitioning \(none\) does not have"):
        spark.sql(f"CONVERT TO DELTA parquet.`{path}`")
    assert not os.path.exists(os.path.join(path, "_delta_log"))
    (row,) = spark.sql(f"CONVERT TO DELTA parquet.`{path}` PARTITIONED BY (d DATE, k STRING)").collect()
    assert (row.version, row.num_files, row.partition_columns, row.converted) == (0, 10, ["d", "k"], True)
    assert rows(spark, f"SELECT count(*), sum(id) FROM delta.`{path}` WHERE d = DATE'2024-01-02'") == [(5, 25)]
    assert spark.sql(f"CONVERT TO DELTA '{path}'").collect()[0].converted is False
    with refused(r"partitioned_by takes the partition columns with their types, e.g. 'day DATE, kind STRING', got 'd'"):
        spark.sql(f"CONVERT TO DELTA '{tmp_path}/x' PARTITIONED BY (d)")

    # a parquet table of the catalog: converted at its location, then served as a Delta table
    where = str(tmp_path / "pq")
    spark.range(6).selectExpr("id", "CAST(id % 2 AS INT) AS b").write.format("parquet").partitionBy("b").option(
        "path", where
    ).saveAsTable("pq")
    (row,) = spark.sql("CONVERT TO DELTA pq NO STATISTICS").collect()
    assert (row.partition_columns, row.converted) == (["b"], True)
    (detail,) = spark.sql("DESCRIBE DETAIL pq").collect()
    assert (detail.format, detail.partitionColumns, detail.numFiles) == ("delta", ["b"], row.num_files)
    spark.sql("INSERT INTO pq VALUES (100, 1)")
    assert rows(spark, "SELECT count(*), sum(id) FROM pq") == [(7, 115)]
    assert [r.operation for r in spark.sql("DESCRIBE HISTORY pq").collect()] == ["WRITE", "CONVERT"]
    assert deltalake.DeltaTable(where).to_pyarrow_table().num_rows == 7


def test_timestamp_partition_directories_are_the_converting_sessions_wall_clock(spark, tmp_path) -> None:
    """Spark names a timestamp partition's directory by its session's wall clock; converted in such a
    session the value is the instant Spark's own parquet reader sees there, kept in the log in UTC
    (Delta's ISO form), so every reader in any zone (delta-rs too) reads that instant."""
    import datetime as dt

    from use.runtime.conf import session_conf

    path = str(tmp_path / "ts")
    with session_conf(spark, {"spark.sql.session.timeZone": "America/Los_Angeles"}):
        spark.sql("SELECT 1 AS id, TIMESTAMP'2024-03-10 01:30:00' AS pts").write.partitionBy("pts").parquet(path)
        assert os.listdir(path) != [] and "pts=2024-03-10 01%3A30%3A00" in os.listdir(path)
        spark.sql(f"CONVERT TO DELTA parquet.`{path}` PARTITIONED BY (pts TIMESTAMP)").collect()
        assert rows(spark, f"SELECT id, CAST(pts AS STRING) FROM delta.`{path}`") == [(1, "2024-03-10 01:30:00")]
    read = pa.table(deltalake.DeltaTable(path).to_pyarrow_table()).to_pylist()
    assert read == [{"id": 1, "pts": dt.datetime(2024, 3, 10, 9, 30, tzinfo=dt.UTC)}]
