"""`DeltaTable.write`: plain Delta tables from Spark DataFrames, one commit per write, read back by
delta-rs; every bad input is a typed error that leaves the table (or the missing path) as it was."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from optimize_support import commit_actions, directory_state
from use import DeltaTable
from use.errors import (
    ConfigError,
    InvalidArgumentError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableConstraintError,
    UnsupportedFeatureError,
)


def _df(spark, start: int = 0, n: int = 30):
    return spark.range(start, start + n, numPartitions=2).selectExpr(
        "id",
        "cast(id * 0.5 as double) as amount",
        "concat('c', cast(id % 3 as string)) as city",
        "date_add(date'2024-01-01', cast(id % 2 as int)) as day",
    )


def _deltars(path: str) -> list[tuple]:
    from deltalake import DeltaTable as RsTable

    t = RsTable(path).to_pyarrow_table()
    return sorted(zip(*(t.column(c).to_pylist() for c in ("id", "amount", "city", "day")), strict=False))


def _expected(start: int, n: int) -> list[tuple]:
    return sorted((i, i * 0.5, f"c{i % 3}", dt.date(2024, 1, 1) + dt.timedelta(days=i % 2)) for i in range(start, start + n))


def test_create_partitioned_in_one_commit_then_append_and_overwrite(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    res = DeltaTable.write(_df(spark), path, partition_by=["city", "day"])
    assert res.version == 0 and res.num_rows == 30 and res.num_files >= 6
    actions = commit_actions(path, 0)
    kinds = [next(iter(a)) for a in actions]
    assert kinds[:3] == ["commitInfo", "protocol", "metaData"] and kinds.count("add") == res.num_files
    adds = [a["add"] for a in actions if "add" in a]
    for add in adds:
        pv = add["partitionValues"]
        assert set(pv) == {"city", "day"} and pv["day"] in ("2024-01-01", "2024-01-02")
        assert add["path"].startswith(f"city={pv['city']}/day={pv['day']}/part-")
        stats = json.loads(add["stats"])  # from the parquet footer
        assert stats["numRecords"] > 0 and "id" in stats["minValues"] and "city" not in stats["minValues"]
    assert actions[2]["metaData"]["partitionColumns"] == ["city", "day"]
    assert _deltars(path) == _expected(0, 30)

    res = DeltaTable.write(_df(spark, 30, 10), path)  # append (the default) keeps the partitioning
    assert res.version == 1 and _deltars(path) == _expected(0, 40)
    assert DeltaTable.for_path(spark, path).history(1).first().operationParameters["mode"] == "Append"

    live = DeltaTable.for_path(spark, path).snapshot().files.num_rows
    res = DeltaTable.write(_df(spark, 100, 5), path, mode="overwrite")
    assert res.version == 2 and _deltars(path) == _expected(100, 5)
    assert len([a for a in commit_actions(path, 2) if "remove" in a]) == live  # every earlier file
    assert DeltaTable.for_path(spark, path).snapshot().metadata.partition_columns == ("city", "day")


def test_overwrite_may_change_schema_and_partitioning_and_modes_error_and_ignore(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    DeltaTable.write(_df(spark), path, mode="error")
    before = directory_state(path)
    with pytest.raises(TableAlreadyExistsError, match="mode='append' or 'overwrite'"):
        DeltaTable.write(_df(spark), path, mode="errorifexists")
    assert DeltaTable.write(_df(spark), path, mode="ignore").version is None
    assert directory_state(path) == before

    other = spark.range(4).selectExpr("id", "cast(id % 2 as string) as half")
    res = DeltaTable.write(other, path, mode="overwrite", partition_by="half")
    snap = DeltaTable.for_path(spark, path).snapshot()
    assert res.version == 1 and snap.schema.names == ["id", "half"] and snap.metadata.partition_columns == ("half",)
    from deltalake import DeltaTable as RsTable

    assert sorted(RsTable(path).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 3]


def test_unpartitioned_write_of_an_empty_frame_and_new_table_properties(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    res = DeltaTable.write(
        _df(spark).limit(0), path, properties={"delta.appendOnly": True, "use.optimization.bytes-per-iter": 5000}
    )
    table = DeltaTable.for_path(spark, path)
    assert res.version == 0 and res.num_files == 0 and table.snapshot().files.num_rows == 0
    assert table.properties() == {"delta.appendOnly": "true", "use.optimization.bytes-per-iter": "5000"}
    DeltaTable.write(_df(spark), path)
    before = directory_state(path)
    with pytest.raises(TableConstraintError, match="append-only"):  # refused at commit: its files are deleted
        DeltaTable.write(_df(spark), path, mode="overwrite")
    assert directory_state(path) == before and table.snapshot().version == 1


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"mode": "replace"}, InvalidArgumentError, "mode must be one of"),
        ({"partition_by": ["nope"]}, InvalidArgumentError, "partition column 'nope'"),
        ({"partition_by": ["id", "id"]}, InvalidArgumentError, "names a column twice"),
        ({"properties": {"use.optimization.bytes-per-iter": "lots"}}, ConfigError, "bytes-per-iter"),
        ({"properties": {"delta.enableDeletionVectors": "true"}}, UnsupportedFeatureError, "deletionVectors"),
        ({"properties": {"qbeast.revision.1": "{}"}}, ConfigError, "Qbeast index metadata"),
    ],
)
def test_bad_new_table_writes_create_nothing(spark, tmp_path, kwargs, error, message) -> None:
    path = tmp_path / "t"
    with pytest.raises(error, match=message):
        DeltaTable.write(_df(spark), str(path), **kwargs)
    assert not path.exists()


def test_bad_appends_change_nothing(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    DeltaTable.write(_df(spark), path, partition_by="city")
    before = directory_state(path)
    with pytest.raises(InvalidArgumentError, match=r"partition_by=\['day'\] differs from the partitioning \['city'\]"):
        DeltaTable.write(_df(spark), path, partition_by="day")
    with pytest.raises(SchemaMismatchError, match="columns not in the table: extra"):
        DeltaTable.write(_df(spark).selectExpr("*", "1 as extra"), path)
    with pytest.raises(InvalidArgumentError, match="new table only"):
        DeltaTable.write(_df(spark), path, properties={"delta.appendOnly": "true"})
    assert directory_state(path) == before


def test_a_qbeast_table_is_not_written_as_plain_delta(spark, tmp_path) -> None:
    from optimize_support import fragmented_qbeast, rows_df

    path = fragmented_qbeast(spark, str(tmp_path / "q"), appends=1)
    before = directory_state(path)
    with pytest.raises(InvalidArgumentError, match="QbeastTable.write"):
        DeltaTable.write(rows_df(spark, 0, 10), path)
    assert directory_state(path) == before


def test_history_is_a_dataframe_with_timestamps(spark, tmp_path) -> None:
    from pyspark.sql.types import MapType, TimestampType

    path = str(tmp_path / "t")
    DeltaTable.write(_df(spark), path)
    DeltaTable.write(_df(spark, 30), path)
    history = DeltaTable.for_path(spark, path).history()
    assert isinstance(history.schema["timestamp"].dataType, TimestampType)
    assert isinstance(history.schema["operationParameters"].dataType, MapType)
    rows = history.collect()
    assert [r.version for r in rows] == [1, 0] and rows[0].operation == "WRITE"
    assert rows[0].timestamp.year >= 2024 and rows[0].operationMetrics["numOutputRows"] == "30"
    assert os.path.isdir(path)


def test_a_new_or_replaced_tables_columns_are_nullable_as_delta_stores_them(spark, tmp_path) -> None:
    """Spark calls `id` of `range()` NOT NULL; a table created from it must still take NULL ids
    later (Delta stores a new table's schema as nullable), from any writer."""
    from deltalake import DeltaTable as RsTable

    path = str(tmp_path / "t")
    DeltaTable.write(_df(spark, n=4), path)
    assert all(f.nullable for f in RsTable(path).schema().fields)
    DeltaTable.write(
        spark.sql("SELECT CAST(NULL AS BIGINT) AS id, CAST(1 AS DOUBLE) AS amount, 'c9' AS city, DATE'2024-01-01' AS day"), path
    )
    assert sorted(RsTable(path).to_pyarrow_table().column("id").to_pylist(), key=lambda v: -1 if v is None else v) == [
        None,
        0,
        1,
        2,
        3,
    ]
    DeltaTable.write(_df(spark, n=2), path, mode="overwrite")
    assert all(f.nullable for f in RsTable(path).schema().fields)


def test_txn_app_id_and_version_make_a_write_idempotent(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    first = DeltaTable.write(_df(spark, n=4), path, txn_app_id="job", txn_version=7)
    again = DeltaTable.write(_df(spark, n=4), path, txn_app_id="job", txn_version=7)  # a retry: nothing
    older = DeltaTable.write(_df(spark, n=4), path, mode="overwrite", txn_app_id="job", txn_version=3)
    assert (first.version, again.version, older.version) == (0, None, None) and len(_deltars(path)) == 4
    assert DeltaTable.write(_df(spark, 4, 2), path, txn_app_id="job", txn_version=8).version == 1
    assert [a["txn"]["version"] for a in commit_actions(path, 1) if "txn" in a] == [8]
    before = directory_state(path)
    for kwargs, message in [
        ({"txn_app_id": "job"}, "txn_app_id and txn_version go together"),
        ({"txn_app_id": "", "txn_version": 1}, "txn_app_id must be a non-empty string"),
        ({"txn_app_id": "job", "txn_version": -1}, "txn_version must be a non-negative int"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            DeltaTable.write(_df(spark, n=1), path, **kwargs)
        assert directory_state(path) == before
