"""SQL and DataFrame writes into Delta and Qbeast tables of the session catalog: one commit each,
the OTree write for Qbeast tables (the same index as `QbeastTable.write`)."""

from __future__ import annotations

import os

from sql_support import commit_actions, location, refused, rows, state


def _versions(root: str) -> int:
    return len(state(root)[0])


def test_insert_into_and_overwrite_a_delta_table(spark, db) -> None:
    from use.delta import DeltaLog

    spark.sql("CREATE TABLE t (id BIGINT, p STRING) USING delta PARTITIONED BY (p)")
    root = location(spark, "t")
    spark.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'a')")
    assert _versions(root) == 2 and rows(spark, "SELECT * FROM t") == [(1, "a"), (2, "b"), (3, "a")]
    add = next(a["add"] for a in commit_actions(root, 1) if "add" in a)
    assert '"numRecords"' in add["stats"] and add["partitionValues"]["p"] in ("a", "b")

    spark.sql("INSERT OVERWRITE t PARTITION (p = 'a') SELECT 10")  # a static partition
    assert rows(spark, "SELECT * FROM t") == [(2, "b"), (10, "a")]
    spark.sql("INSERT OVERWRITE t SELECT 7, 'c'")  # the whole table
    assert rows(spark, "SELECT * FROM t") == [(7, "c")]
    assert _versions(root) == 4
    assert DeltaLog.for_path(root).history(1)[0].operation == "WRITE"


def test_writeto_append_overwrite_partitions_and_save_as_table(spark, db) -> None:
    spark.sql("CREATE TABLE t (id BIGINT, p INT) USING delta PARTITIONED BY (p)")
    spark.createDataFrame([(1, 1), (2, 2)], "id BIGINT, p INT").writeTo("t").append()
    spark.createDataFrame([(20, 2), (30, 3)], "id BIGINT, p INT").writeTo("t").overwritePartitions()
    assert rows(spark, "SELECT * FROM t") == [(1, 1), (20, 2), (30, 3)]  # partition 1 kept

    df = spark.range(5).selectExpr("id", "CAST(id % 2 AS INT) AS p")
    df.write.format("delta").partitionBy("p").saveAsTable("s")
    assert _versions(location(spark, "s")) == 1
    df.write.format("delta").mode("append").saveAsTable("s")
    assert rows(spark, "SELECT count(*) FROM s") == [(10,)]
    df.write.format("qbeast").option("columnsToIndex", "id").saveAsTable("qs")
    assert rows(spark, "SELECT count(*) FROM qs") == [(5,)]


def test_dynamic_partition_overwrite_by_setting(spark, db) -> None:
    spark.sql("CREATE TABLE t (id BIGINT, p INT) USING delta PARTITIONED BY (p)")
    spark.sql("INSERT INTO t VALUES (1, 1), (2, 2)")
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        spark.sql("INSERT OVERWRITE t SELECT 5, 2")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    assert rows(spark, "SELECT * FROM t") == [(1, 1), (5, 2)]


def _index(root: str) -> list[tuple]:
    from use.qbeast.reader import load_snapshot

    qsnap = load_snapshot(root)
    blocks = qsnap.blocks
    return sorted(
        zip(
            blocks.column("revision_id").to_pylist(),
            blocks.column("cube_id").to_pylist(),
            blocks.column("element_count").to_pylist(),
            blocks.column("min_weight").to_pylist(),
            blocks.column("max_weight").to_pylist(),
            strict=False,
        )
    )


def test_ctas_and_insert_into_qbeast_give_the_index_of_qbeast_table_write(spark, db, tmp_path) -> None:
    from use import QbeastTable

    df = spark.range(0, 3000, numPartitions=2).selectExpr("id AS x", "(id * 13) % 997 AS y")
    df.createOrReplaceTempView("src")
    reference = str(tmp_path / "reference")
    QbeastTable.write(df, reference, ["x", "y"], cube_size=300)

    spark.sql("CREATE TABLE c USING qbeast OPTIONS ('columnsToIndex'='x,y', 'cubeSize'='300') AS SELECT * FROM src")
    assert _index(location(spark, "c")) == _index(reference)

    spark.sql("CREATE TABLE i (x BIGINT, y BIGINT) USING qbeast OPTIONS ('columnsToIndex'='x,y', 'cubeSize'='300')")
    spark.sql("INSERT INTO i SELECT * FROM src")
    assert _index(location(spark, "i")) == _index(reference)
    assert rows(spark, "SELECT * FROM i") == sorted(tuple(r) for r in df.collect())

    spark.sql("INSERT OVERWRITE i SELECT * FROM src WHERE x < 10")
    spark.catalog.dropTempView("src")  # temp views are listed by every database's SHOW TABLES
    assert rows(spark, "SELECT count(*) FROM i") == [(10,)]
    assert QbeastTable.for_path(spark, location(spark, "i")).indexed_columns() == ["x", "y"]


def test_rtas_replaces_a_qbeast_table_in_one_commit(spark, db) -> None:
    from use import QbeastTable

    spark.sql("CREATE TABLE q USING qbeast OPTIONS ('columnsToIndex'='a') AS SELECT id AS a, id AS b FROM range(100)")
    root = location(spark, "q")
    spark.sql(
        "CREATE OR REPLACE TABLE q USING qbeast OPTIONS ('columnsToIndex'='b', 'cubeSize'='20') "
        "TBLPROPERTIES ('use.optimization.bytes-per-iter'='5000') AS SELECT id AS b FROM range(40)"
    )
    assert _versions(root) == 2
    qt = QbeastTable.for_path(spark, root)
    assert qt.indexed_columns() == ["b"] and qt.cube_size() == 20 and qt.read().count() == 40
    props = dict((r[0], r[1]) for r in spark.sql("SHOW TBLPROPERTIES q").collect())
    assert props["use.optimization.bytes-per-iter"] == "5000"

    # replaced by no rows: the new schema, properties and indexed columns, and no data
    spark.sql(
        "CREATE OR REPLACE TABLE q USING qbeast OPTIONS ('columnsToIndex'='c') AS SELECT id AS c FROM range(5) WHERE id < 0"
    )
    assert _versions(root) == 3 and rows(spark, "SELECT count(*) FROM q") == [(0,)]
    assert qt.indexed_columns() == ["c"] and "use.optimization.bytes-per-iter" not in qt.properties()


def test_a_schema_mismatch_is_a_clean_error_and_writes_nothing(spark, db) -> None:
    spark.sql("CREATE TABLE t (id BIGINT, name STRING) USING delta")
    root = location(spark, "t")
    before = state(root)
    with refused("INSERT_COLUMN_ARITY_MISMATCH|column"):
        spark.sql("INSERT INTO t SELECT 1")
    with refused("name|column"):
        spark.createDataFrame([(1, 2)], "id BIGINT, other INT").writeTo("t").append()
    assert state(root) == before


def test_a_failed_write_leaves_no_commit_and_no_file(spark, db) -> None:
    spark.sql("CREATE TABLE t (id BIGINT, v DOUBLE) USING delta")
    root = location(spark, "t")
    before = state(root)
    # the query fails in its tasks (ANSI cast error) after some tasks may have written their files
    with refused("CAST|cast|NUMBER|number|invalid"):
        spark.sql(
            "INSERT INTO t SELECT id, CAST(CASE WHEN id = 7 THEN 'x' ELSE '1' END AS DOUBLE) FROM range(0, 20, 1, 4)"
        ).collect()
    assert state(root) == before
    assert not [f for f in state(root)[1] if os.path.basename(f).startswith(("part-", "."))]


def test_concurrent_inserts_commit_one_after_the_other(spark, db) -> None:
    """Two INSERTs racing on one table: Delta's conflict rules let blind appends both commit (the
    loser of the race retries on the next version); every row is there once."""
    import threading

    spark.sql("CREATE TABLE t (id BIGINT) USING delta")
    root = location(spark, "t")
    errors: list[BaseException] = []

    def insert(lo: int) -> None:
        try:
            spark.sql(f"INSERT INTO t SELECT id FROM range({lo}, {lo + 100})")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=insert, args=(lo,)) for lo in (0, 100)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    assert _versions(root) == 3
    assert rows(spark, "SELECT count(*), count(DISTINCT id), sum(id) FROM t") == [(200, 200, sum(range(200)))]
