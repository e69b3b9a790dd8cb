"""Structured Streaming reads of Delta and Qbeast tables (`readStream.format("delta").load(path)`,
`readStream.table(t)`): a stream sees the table as of its start, then each append once; the
optimizer's rewrites (dataChange=false) never reach it; a commit that removes rows stops it unless
Delta's options say how to treat it. Every batch is awaited (`processAllAvailable`), never slept on."""

from __future__ import annotations

import pytest

from sql_support import refused, rows


def _drain(spark, stream, name: str):
    query = stream.writeStream.format("memory").queryName(name).start()
    query.processAllAvailable()
    return query


def test_a_path_stream_reads_the_table_then_each_append_and_never_a_rewrite(spark, tmp_path) -> None:
    from pyspark.errors import StreamingQueryException

    from use import DeltaTable

    path = str(tmp_path / "t")

    def append(ids: range, p: str | None = None) -> None:
        part = f"'{p}'" if p else "CAST(id % 2 AS STRING)"
        spark.range(ids.start, ids.stop).selectExpr("id", f"{part} AS p").write.format("delta").mode("append").partitionBy(
            "p"
        ).save(path)

    append(range(5))
    query = _drain(spark, spark.readStream.format("delta").load(path), "stream_a")
    assert rows(spark, "SELECT id, p FROM stream_a") == [(0, "0"), (1, "1"), (2, "0"), (3, "1"), (4, "0")]
    append(range(10, 13))
    DeltaTable.for_path(spark, path).optimize(progress=False)  # rewrites every file: dataChange=false
    append(range(20, 21), "x")
    query.processAllAvailable()
    assert rows(spark, "SELECT count(*), sum(id) FROM stream_a") == [(9, 63)]  # each row once
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 20")
    with pytest.raises(StreamingQueryException, match=r"found version 5 \(DELETE\), which removes rows: .*skipChangeCommits"):
        query.processAllAvailable()
    assert not query.isActive

    # Delta's options: skip the commits that remove rows, or only those that delete; a starting version
    skip = _drain(
        spark,
        spark.readStream.format("delta").option("skipChangeCommits", "true").option("startingVersion", 1).load(path),
        "stream_b",
    )
    assert rows(spark, "SELECT id FROM stream_b") == [(10,), (11,), (12,), (20,)]  # versions 1 and 4; 3 is OPTIMIZE
    skip.stop()
    deletes = _drain(spark, spark.readStream.format("delta").option("ignoreDeletes", "true").load(path), "stream_c")
    append(range(30, 31), "y")
    deletes.processAllAvailable()
    assert rows(spark, "SELECT count(*), max(id) FROM stream_c") == [(9, 30)]  # the table at its start, then the append
    deletes.stop()
    # startingTimestamp: from the first version committed at or after it (version 6, the append of 30)
    import datetime as dt

    from use.delta import DeltaLog

    committed = DeltaLog.for_path(path).history()[0].timestamp  # the newest commit's time, ms
    when = dt.datetime.fromtimestamp(committed / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    with_time = _drain(spark, spark.readStream.format("delta").option("startingTimestamp", when).load(path), "stream_d")
    assert rows(spark, "SELECT id FROM stream_d") == [(30,)]
    with_time.stop()
    for reader, message in [
        (
            spark.readStream.format("delta").option("startingTimestamp", "2999-01-01"),
            "startingTimestamp 2999-01-01 .* is after the latest commit",
        ),
        (spark.readStream.format("delta").option("startingTimestamp", "soon"), "startingTimestamp takes a time"),
        (
            spark.readStream.format("delta").option("startingTimestamp", "2020-01-01").option("startingVersion", 1),
            "startingVersion or startingTimestamp, not both",
        ),
        (spark.readStream.format("delta").option("startingVersion", "-1"), "startingVersion takes a table version"),
        (spark.readStream.format("delta").option("skipChangeCommits", "maybe"), "skipchangecommits takes true or false"),
    ]:
        bad = reader.load(path).writeStream.format("memory").queryName("stream_bad").start()
        with pytest.raises(StreamingQueryException, match=message):
            bad.processAllAvailable()
    with refused(
        r"readStream.format\(\"delta\"\) reads the table's schema \(struct<id:bigint,p:string>\), not struct<id:bigint>: drop .schema"
    ):
        spark.readStream.schema("id LONG").format("delta").load(path)
    spark.readStream.schema("id LONG NOT NULL, p STRING").format("delta").load(path)  # the table's own: taken
    with refused(r"USE_TABLE_NOT_FOUND_ERROR"):
        spark.readStream.format("delta").load(str(tmp_path / "nothing"))


def test_a_table_stream_restarts_from_its_checkpoint_with_each_row_once(spark, db, tmp_path) -> None:
    """A Qbeast table streamed into a Delta path (exactly once both ways), optimized between two
    runs of the stream: the sink holds the table's rows, none twice."""
    spark.sql("CREATE TABLE src (x DOUBLE, y DOUBLE) USING qbeast TBLPROPERTIES ('columnsToIndex'='x,y', 'cubeSize'='100')")
    spark.sql("INSERT INTO src SELECT rand(1), rand(2) FROM range(300)")
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "ck")

    def run() -> None:
        query = spark.readStream.table("src").where("x < 0.5").writeStream.format("delta").option(
            "checkpointLocation", checkpoint).start(out)  # fmt: skip
        query.processAllAvailable()
        query.stop()

    run()
    spark.sql("INSERT INTO src SELECT rand(3), rand(4) FROM range(200)")
    spark.sql("CALL use_catalog.system.optimize(table => 'src')").collect()
    spark.sql("INSERT INTO src SELECT rand(5), rand(6) FROM range(100)")
    run()
    expected = rows(spark, "SELECT count(*), round(sum(x), 9) FROM src WHERE x < 0.5")
    assert rows(spark, f"SELECT count(*), round(sum(x), 9) FROM delta.`{out}`") == expected and expected[0][0] > 250


def test_read_limits_bound_each_batch_and_available_now_reads_everything(spark, tmp_path) -> None:
    """`maxFilesPerTrigger` / `maxBytesPerTrigger` (Delta's admission control: the initial table and
    then the new commits in bounded batches, each file once, across a restart); `Trigger.AvailableNow`
    stops once everything there was at its start is read."""
    from pyspark.errors import StreamingQueryException

    path, checkpoint = str(tmp_path / "t"), str(tmp_path / "ck")

    def append(lo: int) -> None:  # one file of two rows
        spark.range(lo, lo + 2).coalesce(1).write.format("delta").mode("append").save(path)

    for lo in range(0, 10, 2):
        append(lo)
    sizes: list[int] = []

    def run(**options: int) -> None:
        reader = spark.readStream.format("delta")
        for key, value in options.items():
            reader = reader.option(key, value)
        query = reader.load(path).writeStream.option("checkpointLocation", checkpoint).foreachBatch(
            lambda df, _: sizes.append(df.count())).trigger(availableNow=True).start()  # fmt: skip
        query.awaitTermination()

    run(maxFilesPerTrigger=2)
    assert sizes == [4, 4, 2]  # the table's five files, two per batch
    for lo in range(10, 16, 2):
        append(lo)
    sizes.clear()
    run(maxBytesPerTrigger=1)  # at least one file per batch
    assert sizes == [2, 2, 2]
    sizes.clear()
    run()  # nothing new: no batch with rows
    assert sum(sizes) == 0
    bad = (
        spark.readStream.format("delta")
        .option("maxFilesPerTrigger", 0)
        .load(path)
        .writeStream.format("memory")
        .queryName("stream_limit")
        .start()
    )
    with pytest.raises(StreamingQueryException, match="maxFilesPerTrigger takes a positive number, got '0'"):
        bad.processAllAvailable()


def test_write_stream_to_table_uses_the_exactly_once_sink(spark, db, tmp_path) -> None:
    """`df.writeStream.format("delta"|"qbeast").toTable(t)`: the table's stream sink on its location
    (Spark's V1 path for catalog tables, as Delta's), each micro-batch one WRITE, each row once."""
    import json

    incoming, checkpoint = tmp_path / "in", str(tmp_path / "ck")
    incoming.mkdir()
    (incoming / "a.json").write_text("\n".join(json.dumps({"id": i, "k": str(i % 2)}) for i in range(6)))
    spark.sql("CREATE TABLE sink (id BIGINT, k STRING) USING delta PARTITIONED BY (k)")

    def run(target: str, fmt: str) -> None:
        query = spark.readStream.schema("id BIGINT, k STRING").json(str(incoming)).writeStream.format(fmt).option(
            "checkpointLocation", f"{checkpoint}_{target}").trigger(availableNow=True).toTable(target)  # fmt: skip
        query.awaitTermination()

    run("sink", "delta")
    (incoming / "b.json").write_text(json.dumps({"id": 10, "k": "0"}))
    run("sink", "delta")
    assert rows(spark, "SELECT id, k FROM sink") == [(0, "0"), (1, "1"), (2, "0"), (3, "1"), (4, "0"), (5, "1"), (10, "0")]
    assert [r.operation for r in spark.sql("DESCRIBE HISTORY sink").collect()] == ["WRITE", "WRITE", "CREATE TABLE"]
    spark.sql("CREATE TABLE qsink (id BIGINT, k STRING) USING qbeast TBLPROPERTIES ('columnsToIndex'='id')")
    run("qsink", "qbeast")
    assert rows(spark, "SELECT count(*) FROM qsink") == [(7,)]
    with refused(r"The input source\(parquet\) is different from the table .*provider\(delta\)"):  # Spark's rule, as for Delta
        spark.readStream.schema("id BIGINT, k STRING").json(str(incoming)).writeStream.option(
            "checkpointLocation", checkpoint
        ).toTable("sink")
