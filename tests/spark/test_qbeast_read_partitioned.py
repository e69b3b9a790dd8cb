"""Partitioned Delta tables: partition values come from the log, not from the data files or paths."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from deltalake import write_deltalake

from use.qbeast.reader import plan_read, read


def test_partition_columns_come_from_the_log(spark, table_path) -> None:
    data = pa.table(
        {
            "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
            "part": ["a", "a", "b=x/y", "b", None],
            "day": pa.array([dt.date(2024, 1, 1)] * 2 + [dt.date(2024, 1, 2)] * 3, pa.date32()),
        }
    )
    write_deltalake(table_path, data, partition_by=["part", "day"])
    rows = sorted(tuple(r) for r in read(spark, table_path).collect())
    expected = zip(data["id"].to_pylist(), data["part"].to_pylist(), data["day"].to_pylist(), strict=False)
    assert rows == sorted(expected, key=lambda r: r[0])
    assert read(spark, table_path).columns == ["id", "part", "day"]
    # Partition pruning uses the log values too, escaped characters included.
    plan = plan_read(spark, _snap(table_path), filter="part = 'b=x/y'")
    assert plan.num_files == 1
    assert [tuple(r) for r in read(spark, table_path, filter="part = 'b=x/y'").collect()] == [(3, "b=x/y", dt.date(2024, 1, 2))]
    assert [r.id for r in read(spark, table_path, filter="part IS NULL").collect()] == [5]


def _snap(path: str):
    from use.qbeast.reader import load_snapshot

    return load_snapshot(path)
