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
        writer = spark.range(lo, lo + 100, numPartitions=1).selectExpr("id as x").write.format("qbeast").mode("append")
        writer.option("columnsToIndex", "x").save(path)
    reader = QbeastReader(os.path.abspath(path), spark_schema(load_snapshot(path)))
    kept = list(reader.pushFilters([GreaterThanOrEqual(("x",), 1000), LessThan(("x",), 1050)]))
    assert len(kept) == 2  # every filter is still re-checked by Spark
    parts = reader.partitions()
    assert sum(len(p.value[0]) for p in parts) == 1  # (paths, column mapping) per partition
    assert spark.read.format("qbeast").load(path).filter("x >= 1000 and x < 1050").count() == 50


def test_bad_writes_and_reads(registered, tmp_path):
    from optimize_support import directory_state

    spark = registered
    path = str(tmp_path / "bad")
    df = spark.range(10).selectExpr("id as x")
    with pytest.raises(Exception, match="columnsToIndex|nope"):
        df.write.format("qbeast").mode("append").option("columnsToIndex", "nope").save(path)
    assert not os.path.exists(os.path.join(path, "_delta_log"))
    with pytest.raises(Exception, match="cubeSize"):
        df.write.format("qbeast").mode("append").option("columnsToIndex", "x").option("cubeSize", "-1").save(path)
    df.write.format("qbeast").mode("append").option("columnsToIndex", "x").save(path)
    before = directory_state(path)
    with pytest.raises(Exception, match="schema"):
        spark.range(3).selectExpr("cast(id as string) as x").write.format("qbeast").mode("append").save(path)
    assert directory_state(path) == before
    assert spark.read.format("qbeast").load(path).count() == 10
    with pytest.raises(Exception, match="no table"):
        spark.read.format("qbeast").load(str(tmp_path / "missing")).count()


def test_writes_follow_qbeast_table_write_rules(registered, tmp_path):
    """New tables need columnsToIndex, appends keep the index columns, plain Delta tables are
    refused; each refusal is USE's typed error and leaves everything as it was."""
    from optimize_support import directory_state, plain_delta

    spark = registered
    df = spark.range(100).selectExpr("cast(id as double) as x", "cast(id * 2 as double) as y")
    path = str(tmp_path / "t")
    with pytest.raises(Exception, match=r"IndexColumnError: .*needs its index columns: add \.option\(\"columnsToIndex\""):
        df.write.format("qbeast").mode("append").save(path)
    assert not os.path.exists(path)

    df.write.format("qbeast").mode("append").option("columnsToIndex", "x,y").option("cubeSize", "50").save(path)
    before = directory_state(path)
    with pytest.raises(Exception, match="columnsToIndex x differs from the indexed columns x,y"):
        df.write.format("qbeast").mode("append").option("columnsToIndex", "x").save(path)
    with pytest.raises(Exception, match="cubeSize 70 differs"):
        df.write.format("qbeast").mode("append").option("cubeSize", "70").save(path)
    assert directory_state(path) == before
    df.write.format("qbeast").mode("append").option("columnsToIndex", "x,y").save(path)  # the same columns: fine

    plain = plain_delta(str(tmp_path / "plain"), appends=1)
    before = directory_state(plain)
    with pytest.raises(Exception, match="NotAQbeastTableError: .*convert it with QbeastTable.convert"):
        spark.range(3).selectExpr("id").write.format("qbeast").mode("append").save(plain)
    assert directory_state(plain) == before


def test_default_save_mode_is_refused_by_spark_naming_the_modes(registered, tmp_path):
    spark = registered
    path = tmp_path / "t"
    with pytest.raises(Exception, match='"Append" or "Overwrite"'):
        spark.range(3).selectExpr("id as x").write.format("qbeast").option("columnsToIndex", "x").save(str(path))
    assert not path.exists()


def test_overwrite_replaces_data_schema_and_revisions_in_one_commit(registered, tmp_path):
    from use import QbeastTable

    spark = registered
    path = str(tmp_path / "t")
    QbeastTable.write(spark.range(300).selectExpr("id as a", "id % 7 as b"), path, ["a", "b"], cube_size=100)
    version = QbeastTable.for_path(spark, path).snapshot().version
    new = spark.range(40).selectExpr("cast(id as string) as k", "id as v")
    new.write.format("qbeast").mode("overwrite").option("columnsToIndex", "v").option("cubeSize", "10").save(path)
    qt = QbeastTable.for_path(spark, path)
    snap = qt.snapshot()
    assert snap.version == version + 1 and snap.schema.names == ["k", "v"]
    assert qt.revision_ids() == [0] and qt.revision(0).columns == ("v",) and qt.revision(0).desired_cube_size == 10
    assert sorted(r.v for r in qt.read().collect()) == list(range(40))
    # the overwritten rows are staging rows: the optimizer indexes them into a new revision 1
    qt.optimize(progress=False)
    assert qt.revision_ids() == [0, 1] and qt.indexed_columns() == ["v"] and qt.read().count() == 40
    # without columnsToIndex an overwrite keeps the table's index columns
    spark.range(5).selectExpr("cast(id as string) as k", "id as v").write.format("qbeast").mode("overwrite").save(path)
    assert qt.revision_ids() == [0] and qt.revision(0).columns == ("v",) and qt.read().count() == 5
