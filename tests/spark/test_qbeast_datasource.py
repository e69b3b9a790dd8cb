"""`format("qbeast")` on paths: the shim's provider in sessions with the SQL extension (indexed
writes, per-query planned reads and exact samples), and the Python fallback source of sessions
without it (full reads, staging writes)."""

from __future__ import annotations

import os

import pytest

from optimize_support import directory_state, plain_delta


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_format_qbeast_writes_indexed_tables_that_every_query_reads_whole(spark, tmp_path):
    """qbeast-spark's write: `columnsToIndex` creates an indexed table, appends extend the index.
    Reads plan every query's files afresh: a DataFrame filtered once and then read unfiltered
    returns every row (Spark 4.1's Python sources kept the filtered query's files for the next
    query of the same DataFrame: 570 of 1,000 rows), a sample is the Qbeast sample."""
    from pyspark.sql import functions as F

    from use import QbeastTable

    path = str(tmp_path / "q")
    df = spark.range(0, 1_000, numPartitions=2).select(F.col("id").alias("x"), (F.col("id") % 7).alias("y"))
    df.write.format("qbeast").option("columnsToIndex", "x,y").option("cubeSize", "100").save(path)
    spark.range(1_000, 1_300).selectExpr("id as x", "id % 7 as y").write.format("qbeast").mode("append").save(path)
    qt = QbeastTable.for_path(spark, path)
    assert qt.indexed_columns() == ["x", "y"] and qt.revision(qt.snapshot().latest_revision_id).desired_cube_size == 100
    assert qt.snapshot().staging_files().num_rows == 0  # indexed by the OTree write, not staged
    assert [h["operation"] for h in qt.history().collect()] == ["WRITE", "WRITE"]

    loaded = spark.read.format("qbeast").load(path)
    assert loaded.where("x >= 900").count() == 400
    assert loaded.count() == 1_300 and loaded.where("x < 10").count() == 10 and loaded.count() == 1_300
    assert _rows(loaded.filter("x in (5, 650, 1250)")) == [(5, 5), (650, 6), (1250, 4)]
    sample = loaded.sample(0.1)
    plan = sample._jdf.queryExecution().executedPlan().toString()
    assert "sample 0.1" in plan and "USE qbeast" in plan
    assert _rows(sample) == _rows(qt.read(sample=0.1))
    assert spark.read.format("qbeast").option("versionAsOf", 0).load(path).count() == 1_000


def test_format_qbeast_overwrite_replaces_data_schema_and_index_in_one_commit(spark, tmp_path):
    from use import QbeastTable

    path = str(tmp_path / "t")
    QbeastTable.write(spark.range(300).selectExpr("id as a", "id % 7 as b"), path, ["a", "b"], cube_size=100)
    version = QbeastTable.for_path(spark, path).snapshot().version
    new = spark.range(40).selectExpr("cast(id as string) as k", "id as v")
    new.write.format("qbeast").mode("overwrite").option("columnsToIndex", "v").option("cubeSize", "10").save(path)
    qt = QbeastTable.for_path(spark, path)
    snap = qt.snapshot()
    assert snap.version == version + 1 and snap.schema.names == ["k", "v"]
    assert qt.indexed_columns() == ["v"] and qt.revision(snap.latest_revision_id).desired_cube_size == 10
    assert snap.staging_files().num_rows == 0 and sorted(r.v for r in qt.read().collect()) == list(range(40))
    # without columnsToIndex an overwrite keeps the table's index columns and cube size
    spark.range(5).selectExpr("cast(id as string) as k", "id as v").write.format("qbeast").mode("overwrite").save(path)
    snap = qt.snapshot()
    assert qt.indexed_columns() == ["v"] and qt.revision(snap.latest_revision_id).desired_cube_size == 10
    assert qt.read().count() == 5


def test_bad_format_qbeast_writes_and_reads_are_refused_and_change_nothing(spark, tmp_path):
    """Each refusal names what is wrong and how to fix it, and leaves the path as it was."""
    path = str(tmp_path / "t")
    df = spark.range(100).selectExpr("cast(id as double) as x", "cast(id * 2 as double) as y")
    with pytest.raises(Exception, match=r"needs its index columns: add \.option\(\"columnsToIndex\""):
        df.write.format("qbeast").mode("append").save(path)
    with pytest.raises(Exception, match="nope"):
        df.write.format("qbeast").option("columnsToIndex", "nope").save(path)
    with pytest.raises(Exception, match="option cubeSize must be a positive integer"):
        df.write.format("qbeast").option("columnsToIndex", "x").option("cubeSize", "-1").save(path)
    with pytest.raises(Exception, match="Qbeast tables are not partitioned"):
        df.write.format("qbeast").option("columnsToIndex", "x").partitionBy("y").save(path)
    assert not os.path.exists(os.path.join(path, "_delta_log"))

    df.write.format("qbeast").option("columnsToIndex", "x,y").option("cubeSize", "50").save(path)
    before = directory_state(path)
    with pytest.raises(Exception, match="already exists"):
        df.write.format("qbeast").save(path)  # errorifexists, Spark's default
    df.write.format("qbeast").mode("ignore").save(path)
    with pytest.raises(Exception, match="differ from the indexed columns x, y"):
        df.write.format("qbeast").mode("append").option("columnsToIndex", "x").save(path)
    with pytest.raises(Exception, match="schema"):
        spark.range(3).selectExpr("cast(id as string) as x").write.format("qbeast").mode("append").save(path)
    assert directory_state(path) == before

    plain = plain_delta(str(tmp_path / "plain"), appends=1)
    before = directory_state(plain)
    with pytest.raises(Exception, match="a Delta table without Qbeast metadata; convert it with CALL"):
        spark.range(3).selectExpr("id").write.format("qbeast").mode("append").save(plain)
    assert directory_state(plain) == before
    with pytest.raises(Exception, match="no Delta table"):
        spark.read.format("qbeast").load(str(tmp_path / "missing")).count()


@pytest.fixture(scope="module")
def fallback(spark):
    """The fallback source as a session without the shim gets it, under a name of its own (here
    `qbeast` is the shim's provider)."""
    from use.qbeast.datasource import QbeastDataSource

    class Fallback(QbeastDataSource):
        @classmethod
        def name(cls) -> str:
            return "qbeast_fallback"

    spark.dataSource.register(Fallback)
    return spark


def test_the_fallback_source_stages_writes_and_reads_every_file_for_every_query(fallback, tmp_path):
    from pyspark.sql import functions as F

    from use import QbeastTable

    spark = fallback
    path = str(tmp_path / "ds")
    df = spark.range(0, 500, numPartitions=2).select(F.col("id").alias("x"), (F.col("id") % 7).alias("y"))
    df.write.format("qbeast_fallback").mode("append").option("columnsToIndex", "x,y").option("cubeSize", "100").save(path)
    spark.range(500, 800, numPartitions=1).selectExpr("id as x", "id % 7 as y").write.format("qbeast_fallback").mode(
        "append"
    ).save(path)
    qt = QbeastTable.for_path(spark, path)
    assert qt.revision_ids() == [0] and qt.revision(0).desired_cube_size == 100
    assert qt.snapshot().files.num_rows == 3  # one untagged staging file per non-empty task

    loaded = spark.read.format("qbeast_fallback").load(path)
    assert loaded.where("x >= 600").count() == 200 and loaded.count() == 800  # no filter leaks into the next query
    assert _rows(loaded.filter("x >= 600 and y = 3")) == _rows(qt.read(filter="x >= 600 and y = 3"))
    with pytest.raises(Exception, match="cubeSize 70 differs"):
        df.write.format("qbeast_fallback").mode("append").option("cubeSize", "70").save(path)
    with pytest.raises(Exception, match='"Append" or "Overwrite"'):
        df.write.format("qbeast_fallback").option("columnsToIndex", "x").save(str(tmp_path / "other"))
    assert not (tmp_path / "other").exists()


def test_write_stream_format_qbeast_indexes_each_batch_exactly_once(spark, tmp_path):
    """`writeStream.format("qbeast")` with `columnsToIndex`: each micro-batch an indexed, idempotent
    append (a batch replayed after a crash before the checkpoint's commit writes nothing)."""
    from use import QbeastTable

    incoming, ckpt, path = tmp_path / "in", str(tmp_path / "ckpt"), str(tmp_path / "q")
    incoming.mkdir()
    source = spark.readStream.schema("x BIGINT, y BIGINT").json(str(incoming))

    def run() -> None:
        q = source.writeStream.format("qbeast").option("columnsToIndex", "x,y").option("cubeSize", "50")
        q = q.option("checkpointLocation", ckpt).trigger(availableNow=True).start(path)
        q.awaitTermination()
        assert q.exception() is None

    (incoming / "a.json").write_text("".join(f'{{"x": {i}, "y": {i % 5}}}\n' for i in range(200)))
    run()
    last = max(int(f.name) for f in (tmp_path / "ckpt" / "commits").iterdir() if f.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (tmp_path / "ckpt" / "commits" / name).unlink(missing_ok=True)
    version = QbeastTable.for_path(spark, path).snapshot().version
    run()
    (incoming / "b.json").write_text("".join(f'{{"x": {i}, "y": {i % 5}}}\n' for i in range(200, 300)))
    run()
    qt = QbeastTable.for_path(spark, path)
    assert qt.snapshot().version == version + 1 and qt.indexed_columns() == ["x", "y"]
    assert qt.snapshot().staging_files().num_rows == 0
    assert spark.read.format("qbeast").load(path).selectExpr("count(*)", "sum(x)").collect()[0][:] == (300, sum(range(300)))
