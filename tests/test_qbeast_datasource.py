"""`format("qbeast")`: pruning reads through the Python Data Source, staging appends, errors."""

from __future__ import annotations

import os

import pytest



@pytest.fixture(scope="module")
def registered(spark):
    from use.qbeast.datasource import register

    register(spark)
    return spark


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_append_creates_a_staging_table_then_reads(registered, tmp_path):
    from pyspark.sql import functions as F

    from use import QbeastTable

    spark = registered
    path = str(tmp_path / "ds")
    df = spark.range(0, 500, numPartitions=2).select(F.col("id").alias("x"), (F.col("id") % 7).alias("y"))
    df.write.format("qbeast").mode("append").option("columnsToIndex", "x,y").option("cubeSize", "100").save(path)
    df2 = spark.range(500, 800, numPartitions=1).select(F.col("id").alias("x"), (F.col("id") % 7).alias("y"))
    df2.write.format("qbeast").mode("append").save(path)

    qt = QbeastTable.for_path(spark, path)
    assert qt.revision_ids() == [0] and qt.revision(0).desired_cube_size == 100
    snap = qt.snapshot()
    assert snap.files.num_rows == 3  # one untagged staging file per non-empty task
    assert all(t is None or "revision" not in dict(t) for t in snap.files.column("tags").to_pylist())

    loaded = spark.read.format("qbeast").load(path)
    assert loaded.count() == 800
    assert _rows(loaded.filter("x >= 600 and y = 3")) == _rows(qt.read(filter="x >= 600 and y = 3"))

    # an indexed write afterwards makes revision 1; the data source reads both kinds of files
    QbeastTable.write(spark.range(800, 1000).selectExpr("id as x", "id % 7 as y"), path, ["x", "y"], cube_size=100)
    loaded = spark.read.format("qbeast").load(path)
    assert loaded.count() == 1000
    assert _rows(loaded.filter("x in (5, 650, 950)")) == [(5, 5), (650, 6), (950, 5)]


def test_pushed_filters_prune_files(registered, tmp_path):
    from use.qbeast.datasource import QbeastReader
    from pyspark.sql.datasource import GreaterThanOrEqual, LessThan
    from use.qbeast.reader import spark_schema, load_snapshot

    spark = registered
    path = str(tmp_path / "pruned")
    for lo in (0, 1000, 2000):
        spark.range(lo, lo + 100, numPartitions=1).selectExpr("id as x").write.format("qbeast").mode("append").save(path)
    reader = QbeastReader(os.path.abspath(path), spark_schema(load_snapshot(path)))
    kept = list(reader.pushFilters([GreaterThanOrEqual(("x",), 1000), LessThan(("x",), 1050)]))
    assert len(kept) == 2  # every filter is still re-checked by Spark
    parts = reader.partitions()
    assert sum(len(p.value[0]) for p in parts) == 1  # (paths, column mapping) per partition
    assert spark.read.format("qbeast").load(path).filter("x >= 1000 and x < 1050").count() == 50


def test_bad_writes_and_reads(registered, tmp_path):
    spark = registered
    path = str(tmp_path / "bad")
    df = spark.range(10).selectExpr("id as x")
    with pytest.raises(Exception, match="columnsToIndex|nope"):
        df.write.format("qbeast").mode("append").option("columnsToIndex", "nope").save(path)
    assert not os.path.exists(os.path.join(path, "_delta_log"))
    with pytest.raises(Exception, match="cubeSize"):
        df.write.format("qbeast").mode("append").option("columnsToIndex", "x").option("cubeSize", "-1").save(path)
    df.write.format("qbeast").mode("append").save(path)
    with pytest.raises(Exception, match="only appends|overwrite"):
        df.write.format("qbeast").mode("overwrite").save(path)
    with pytest.raises(Exception, match="schema"):
        spark.range(3).selectExpr("cast(id as string) as x").write.format("qbeast").mode("append").save(path)
    assert spark.read.format("qbeast").load(path).count() == 10
    with pytest.raises(Exception, match="no table"):
        spark.read.format("qbeast").load(str(tmp_path / "missing")).count()
