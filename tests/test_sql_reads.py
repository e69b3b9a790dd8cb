"""SELECT on Delta and Qbeast tables through the session catalog: the latest snapshot at query time,
pruning shown by EXPLAIN, TABLESAMPLE as the Qbeast sample, time travel."""

from __future__ import annotations

import threading

import pyarrow as pa

from sql_support import location, refused, rows


def _explain(spark, query: str) -> str:
    return spark.sql(f"EXPLAIN {query}").collect()[0][0]


def test_stats_and_partition_pruning_show_in_explain(spark, db) -> None:
    spark.sql("CREATE TABLE t (id BIGINT, p INT) USING delta PARTITIONED BY (p)")
    for lo in range(0, 400, 100):  # four appends: four files per partition, disjoint id ranges
        spark.sql(f"INSERT INTO t SELECT id, CAST(id % 2 AS INT) FROM range({lo}, {lo + 100}, 1, 1)")
    assert rows(spark, "SELECT count(*) FROM t WHERE id >= 100 AND id < 150") == [(50,)]
    plan = _explain(spark, "SELECT * FROM t WHERE id >= 100 AND id < 150")
    assert "2 of 8 files" in plan, plan  # stats skipping: one append's two partition files
    plan = _explain(spark, "SELECT * FROM t WHERE p = 1")
    assert "4 of 8 files" in plan, plan  # partition pruning
    assert rows(spark, "SELECT count(*) FROM t WHERE p = 1 AND id < 100") == [(50,)]


def test_qbeast_cube_pruning_and_tablesample_equal_the_python_api(spark, db) -> None:
    from use import QbeastTable

    spark.sql("CREATE TABLE q (x BIGINT, y BIGINT) USING qbeast OPTIONS ('columnsToIndex'='x,y', 'cubeSize'='200')")
    spark.sql("INSERT INTO q SELECT id, (id * 7) % 1000 FROM range(4000)")
    qt = QbeastTable.for_path(spark, location(spark, "q"))
    total = qt.snapshot().files.num_rows
    assert total > 4

    sampled = rows(spark, "SELECT * FROM q TABLESAMPLE (10 PERCENT)")
    assert sampled == sorted(tuple(r) for r in qt.read(sample=0.1).collect())
    assert 0 < len(sampled) < 4000
    assert sorted(tuple(r) for r in spark.table("q").sample(0.1).collect()) == sampled  # df.sample too
    plan = _explain(spark, "SELECT * FROM q TABLESAMPLE (10 PERCENT)")
    kept = int(plan.split("version ")[1].split(": ")[1].split(" of ")[0])
    assert kept < total and "sample 0.1" in plan, plan
    # a filter on the sample: rows of the sample that pass it
    assert rows(spark, "SELECT * FROM q TABLESAMPLE (10 PERCENT) WHERE x < 2000") == [r for r in sampled if r[0] < 2000]

    plan = _explain(spark, "SELECT * FROM q WHERE x >= 100 AND x < 130")
    assert f"of {total} files" in plan and f" {total} of {total} files" not in plan, plan
    assert rows(spark, "SELECT count(*) FROM q WHERE x >= 100 AND x < 130") == [(30,)]


def test_time_travel_by_version_and_timestamp(spark, db) -> None:
    from use.delta import DeltaLog

    spark.sql("CREATE TABLE t (a INT) USING delta")
    spark.sql("INSERT INTO t VALUES (1)")
    spark.sql("INSERT INTO t VALUES (2)")
    assert rows(spark, "SELECT * FROM t VERSION AS OF 1") == [(1,)]
    assert rows(spark, "SELECT * FROM t VERSION AS OF 2") == [(1,), (2,)]
    history = DeltaLog.for_path(location(spark, "t")).history()
    stamp = next(h.timestamp for h in history if h.version == 1)
    import datetime as dt

    when = dt.datetime.fromtimestamp(stamp / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    assert rows(spark, f"SELECT * FROM t TIMESTAMP AS OF '{when}'") == [(1,)]
    with refused("USE_VERSION_NOT_FOUND_ERROR"):
        spark.sql("SELECT * FROM t VERSION AS OF 9").collect()


def test_every_query_sees_the_latest_snapshot_without_refresh(spark, db) -> None:
    import deltalake

    spark.sql("CREATE TABLE t (a INT, b STRING) USING delta")
    held = spark.table("t")
    assert held.count() == 0
    deltalake.write_deltalake(location(spark, "t"), pa.table({"a": pa.array([1, 2], pa.int32()), "b": ["x", "y"]}), mode="append")
    assert rows(spark, "SELECT * FROM t") == [(1, "x"), (2, "y")]  # another writer's commit, no REFRESH
    assert held.count() == 2  # a DataFrame plans its files each time it runs


def test_a_concurrent_optimize_never_makes_a_select_read_a_removed_file(spark, db) -> None:
    from use import DeltaTable

    spark.sql("CREATE TABLE t (id BIGINT) USING delta")
    for lo in range(0, 1200, 60):  # 20 small files
        spark.sql(f"INSERT INTO t SELECT id FROM range({lo}, {lo + 60})")
    root = location(spark, "t")
    table = DeltaTable.for_path(spark, root)
    first = table.snapshot().version
    errors: list[BaseException] = []

    def optimize() -> None:
        try:
            table.optimize(bytes_per_iter=2500, min_file_size=10_000_000)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    worker = threading.Thread(target=optimize)
    worker.start()
    seen = []
    while worker.is_alive() or not seen:
        seen.append(spark.sql("SELECT count(*), sum(id) FROM t").collect()[0])
    worker.join()
    assert not errors, errors
    assert table.snapshot().version >= first + 2 and table.snapshot().files.num_rows < 20  # it did rewrite
    assert set(map(tuple, seen)) == {(1200, sum(range(1200)))}  # no file read twice, none missed


def test_a_planned_query_reads_its_snapshot_and_the_next_one_the_new_files(spark, db) -> None:
    from use import DeltaTable

    spark.sql("CREATE TABLE t (id BIGINT) USING delta")
    for lo in range(0, 300, 30):
        spark.sql(f"INSERT INTO t SELECT id FROM range({lo}, {lo + 30}, 1, 1)")
    table = DeltaTable.for_path(spark, location(spark, "t"))
    planned = spark.sql("SELECT count(*), sum(id) FROM t")
    planned._jdf.queryExecution().executedPlan()  # the files are chosen now
    table.optimize()  # removes every file the planned query chose
    live = {f.rsplit("/", 1)[-1] for f in table.snapshot().files.column("path").to_pylist()}
    assert len(live) == 1
    assert tuple(planned.collect()[0]) == (300, sum(range(300)))  # its version, read whole
    read = {r[0].rsplit("/", 1)[-1] for r in spark.sql("SELECT DISTINCT input_file_name() FROM t").collect()}
    assert read == live  # a new query reads only the live files


def test_format_qbeast_reaches_sessions_made_after_install(spark, tmp_path) -> None:
    """A new session (as each JDBC session is) reads `format("qbeast")` as the installed one does:
    the shim's provider, which plans each query (pruned files, the exact Qbeast sample)."""
    from use import QbeastTable

    path = str(tmp_path / "q")
    QbeastTable.write(spark.range(200).selectExpr("id AS x", "id * 2 AS y"), path, ["x"], cube_size=50)
    other = spark.newSession()
    loaded = other.read.format("qbeast").load(path)
    assert loaded.where("x < 10").count() == 10 and loaded.count() == 200
    assert sorted(r.x for r in loaded.sample(0.2).collect()) == sorted(r.x for r in QbeastTable.for_path(spark, path).read(sample=0.2).collect())


def test_filters_on_38_digit_decimals_at_their_extremes_before_and_after_optimize(spark, db) -> None:
    """DECIMAL(38,18) holds 20 integer digits and 18 decimals: a literal on that grid has up to 38
    digits, more than Python's default decimal context (28), so stats skipping, which puts it on
    the column's grid, must compute with enough digits (it failed with InvalidOperation)."""
    extremes = [
        "99999999999999999999.999999999999999999", "-99999999999999999999.999999999999999999",
        "12345678901.5", "10000000000", "0.000000000000000001", "-0.000000000000000001", "0", "1.5",
    ]  # fmt: skip
    spark.sql("CREATE TABLE dec (id INT, amount DECIMAL(38,18)) USING delta")
    spark.sql("CREATE TABLE qdec (id INT, amount DECIMAL(38,18)) USING qbeast OPTIONS ('columnsToIndex'='amount', 'cubeSize'='2')")
    for table in ("dec", "qdec"):
        for i, v in enumerate(extremes):  # one file each: stats skipping decides per file
            spark.sql(f"INSERT INTO {table} VALUES ({i}, {v}BD), ({i + 100}, NULL)")
    conditions = [
        "amount > 10000000000", "amount = 12345678901.5", "amount >= 99999999999999999999.999999999999999999",
        "amount < -99999999999999999999.99999999999999999", "amount = 0.000000000000000001",
        "amount > 0.0000000000000000005", "amount <= -0.0000000000000000005", "amount != 12345678901.5",
        "amount > 12345678901234567890123.5", "amount < 99999999999999999999.99999999999999999",
        "amount IN (1.5, 12345678901.5, 7)", "amount BETWEEN -10000000000.5 AND 12345678901.49",
    ]  # fmt: skip
    import decimal

    values = {i: decimal.Decimal(v) for i, v in enumerate(extremes)}

    def expected(condition: str) -> list[tuple[int]]:
        # the same condition computed by Spark over the unfiltered rows (no skipping can apply)
        everything = spark.sql("SELECT id, amount FROM dec").collect()
        spark.createDataFrame(everything, "id INT, amount DECIMAL(38,18)").createOrReplaceTempView("dec_all")
        return rows(spark, f"SELECT id FROM dec_all WHERE {condition}")

    for stage in ("written", "optimized"):
        for table in ("dec", "qdec"):
            assert dict(rows(spark, f"SELECT id, amount FROM {table} WHERE id < 100")) == values, (stage, table)
            for condition in conditions:
                assert rows(spark, f"SELECT id FROM {table} WHERE {condition}") == expected(condition), (stage, table, condition)
        spark.sql("OPTIMIZE dec")
        spark.sql("OPTIMIZE qdec")
