"""SELECT on Delta and Qbeast tables through the session catalog: the latest snapshot at query time,
pruning shown by EXPLAIN, TABLESAMPLE as the Qbeast sample, time travel."""

from __future__ import annotations

import json
import re
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

    when = dt.datetime.fromtimestamp(stamp / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
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
    assert sorted(r.x for r in loaded.sample(0.2).collect()) == sorted(
        r.x for r in QbeastTable.for_path(spark, path).read(sample=0.2).collect()
    )


def test_nan_and_negative_zero_rows_are_not_skipped_by_parquet_footers(spark, db) -> None:
    """Parquet footers by pyarrow leave NaN out of min/max, and the dictionary check compares with
    Double.equals (-0.0 is not 0.0): Spark's reader skipped the row groups holding the NaN for
    `d > 1` / `d = NaN` and the one holding -0.0 for `d = 0.0`. In Spark SQL NaN = NaN, NaN is
    above every number and -0.0 = 0.0; USE's scan (SQL and the Python reader) keeps those rows,
    on Delta and Qbeast tables, before and after OPTIMIZE."""
    from use import QbeastTable

    spark.sql("CREATE TABLE dn (id INT, d DOUBLE, f FLOAT, s STRING) USING delta")
    spark.sql("CREATE TABLE qn (id INT, d DOUBLE, f FLOAT, s STRING) USING qbeast OPTIONS ('columnsToIndex'='s')")
    values = "(1, 0.5, 0.5, 'a'), (2, double('NaN'), float('NaN'), 'b'), (3, 0.7, 0.7, 'c')"
    for t in ("dn", "qn"):
        spark.sql(f"INSERT INTO {t} VALUES {values}")
        # a file whose dictionary holds -0.0 and 1.0 only
        spark.sql(
            f"INSERT INTO {t} VALUES (4, -0.0, float(-0.0), 'd'), (5, 1.0, 1.0, 'e'), (6, 1.0, 1.0, 'f'), (7, 1.0, 1.0, 'g')"
        )
    cases = {
        "d = double('NaN')": [(2,)],
        "d > 1": [(2,)],
        "d >= double('NaN')": [(2,)],
        "d = 0.0": [(4,)],
        "f > 1": [(2,)],
        "f = 0.0": [(4,)],
        "isnan(d)": [(2,)],
        "d < 0.6": [(1,), (4,)],
    }

    def check() -> None:
        for t in ("dn", "qn"):
            for where, want in cases.items():
                assert rows(spark, f"SELECT id FROM {t} WHERE {where}") == want, (t, where)
        qt = QbeastTable.for_path(spark, location(spark, "qn"))
        assert sorted(r[0] for r in qt.read().where("d > 1 OR d = 0.0").collect()) == [2, 4]

    check()
    # the files themselves, read by Spark's own parquet reader as another engine would: no footer
    # bound of a float column holding NaN hides the row
    assert sorted(r[0] for r in spark.read.parquet(location(spark, "dn")).where("d > 1 OR f > 1").collect()) == [2]
    spark.sql("OPTIMIZE dn")
    spark.sql("CALL use_catalog.system.optimize(table => 'qn')")
    check()


def test_timestamp_partitions_are_instants_in_any_session_time_zone(spark, db) -> None:
    """A TIMESTAMP partition value names an instant: written and read in a non-UTC session it comes
    back as inserted, filters find it and prune by it, the log holds it in Delta's UTC ISO form (which
    delta-rs reads as the same instant), and rows rewritten by REPLACE WHERE keep it; a TIMESTAMP_NTZ
    partition value is wall clock in the log and everywhere."""
    import datetime as dt

    import deltalake

    from use.delta import DeltaLog
    from use.runtime.conf import session_conf

    with session_conf(spark, {"spark.sql.session.timeZone": "America/Los_Angeles"}):
        spark.sql("CREATE TABLE t (v INT, pts TIMESTAMP, nts TIMESTAMP_NTZ) USING delta PARTITIONED BY (pts, nts)")
        spark.sql(
            "INSERT INTO t VALUES (1, TIMESTAMP'2024-03-10 01:30:00', TIMESTAMP_NTZ'2024-03-10 01:30:00'), "
            "(2, TIMESTAMP'2024-03-10 03:30:00.5', TIMESTAMP_NTZ'2024-03-10 03:30:00.5'), "
            "(3, TIMESTAMP'2024-03-10 03:30:00.5', TIMESTAMP_NTZ'2024-03-10 03:30:00.5')"
        )
        expected = [
            (1, "2024-03-10 01:30:00", "2024-03-10 01:30:00"),
            (2, "2024-03-10 03:30:00.5", "2024-03-10 03:30:00.5"),
            (3, "2024-03-10 03:30:00.5", "2024-03-10 03:30:00.5"),
        ]
        assert rows(spark, "SELECT v, CAST(pts AS STRING), CAST(nts AS STRING) FROM t") == expected
        assert rows(spark, "SELECT v FROM t WHERE pts = TIMESTAMP'2024-03-10 01:30:00'") == [(1,)]
        assert rows(spark, "SELECT v FROM t WHERE nts = TIMESTAMP_NTZ'2024-03-10 03:30:00.5'") == [(2,), (3,)]
        plan = _explain(spark, "SELECT * FROM t WHERE pts = TIMESTAMP'2024-03-10 01:30:00'")
        assert re.search(r": 1 of [2-9] files", plan), plan  # the other partition's files pruned
        # the rows a REPLACE WHERE keeps are read by the Python scan and written again in their partition
        spark.sql(
            "INSERT INTO t REPLACE WHERE v >= 3 VALUES (4, TIMESTAMP'2024-03-10 03:30:00.5', TIMESTAMP_NTZ'2024-03-10 03:30:00.5')"
        )
        expected[2] = (4, "2024-03-10 03:30:00.5", "2024-03-10 03:30:00.5")
        assert rows(spark, "SELECT v, CAST(pts AS STRING), CAST(nts AS STRING) FROM t") == expected
        # a static partition overwrite replaces the partition its value names, and only it
        spark.sql(
            "INSERT OVERWRITE t PARTITION (pts = TIMESTAMP'2024-03-10 01:30:00', nts = TIMESTAMP_NTZ'2024-03-10 01:30:00') SELECT 1"
        )
        assert rows(spark, "SELECT v, CAST(pts AS STRING), CAST(nts AS STRING) FROM t") == expected
    root = location(spark, "t")
    logged = {
        (dict(p)["pts"], dict(p)["nts"]) for p in DeltaLog.for_path(root).snapshot().files.column("partition_values").to_pylist()
    }
    assert logged == {
        ("2024-03-10T09:30:00.000000Z", "2024-03-10 01:30:00"),
        ("2024-03-10T10:30:00.500000Z", "2024-03-10 03:30:00.500000"),
    }
    utc = dt.UTC
    read = pa.table(deltalake.DeltaTable(root).to_pyarrow_table()).sort_by("v").to_pylist()
    assert [(r["v"], r["pts"], r["nts"]) for r in read] == [
        (1, dt.datetime(2024, 3, 10, 9, 30, tzinfo=utc), dt.datetime(2024, 3, 10, 1, 30)),
        (2, dt.datetime(2024, 3, 10, 10, 30, 0, 500000, tzinfo=utc), dt.datetime(2024, 3, 10, 3, 30, 0, 500000)),
        (4, dt.datetime(2024, 3, 10, 10, 30, 0, 500000, tzinfo=utc), dt.datetime(2024, 3, 10, 3, 30, 0, 500000)),
    ]
    assert rows(spark, "SELECT v, CAST(pts AS STRING) FROM t WHERE v = 1") == [(1, "2024-03-10 09:30:00")]  # UTC session


def test_zone_less_timestamp_partition_values_are_utc(spark, db, tmp_path) -> None:
    """A zone-less timestamp partition value (`2024-03-10 09:30:00.000000`, as delta-rs writes and USE
    wrote before) is UTC in every session; a partition spelled both ways (USE writes the ISO form now)
    is one partition to filters, OPTIMIZE ... WHERE and a dynamic partition overwrite."""
    import datetime as dt

    import deltalake

    root = str(tmp_path / "r")
    at = dt.datetime(2024, 3, 10, 9, 30, tzinfo=dt.UTC)
    for v in (1, 2):
        data = pa.table({"v": pa.array([v], pa.int32()), "pts": pa.array([at], pa.timestamp("us", "UTC"))})
        deltalake.write_deltalake(root, data, partition_by=["pts"], mode="append")
    spark.sql(f"CREATE TABLE r USING delta LOCATION '{root}'")
    assert rows(spark, "SELECT v, CAST(pts AS STRING) FROM r") == [(1, "2024-03-10 09:30:00"), (2, "2024-03-10 09:30:00")]
    from use.runtime.conf import session_conf

    with session_conf(spark, {"spark.sql.session.timeZone": "America/Los_Angeles"}):
        assert rows(spark, "SELECT v, CAST(pts AS STRING) FROM r") == [(1, "2024-03-10 01:30:00"), (2, "2024-03-10 01:30:00")]
        assert rows(spark, "SELECT v FROM r WHERE pts = TIMESTAMP'2024-03-10 01:30:00'") == [(1,), (2,)]
        spark.sql("INSERT INTO r VALUES (3, TIMESTAMP'2024-03-10 01:30:00')")  # the ISO form, beside the zone-less one
        assert rows(spark, "SELECT v FROM r WHERE pts >= TIMESTAMP'2024-03-10 01:30:00'") == [(1,), (2,), (3,)]
        (row,) = spark.sql("OPTIMIZE r WHERE pts = TIMESTAMP'2024-03-10 01:30:00'").collect()
        assert (row["files_in"], row["files_out"]) == (3, 1)  # one partition, however its files spell it
        assert rows(spark, "SELECT v, CAST(pts AS STRING) FROM r") == [(v, "2024-03-10 01:30:00") for v in (1, 2, 3)]
        with session_conf(spark, {"spark.sql.sources.partitionOverwriteMode": "dynamic"}):
            spark.sql("INSERT OVERWRITE r VALUES (9, TIMESTAMP'2024-03-10 01:30:00')")
        assert rows(spark, "SELECT v, CAST(pts AS STRING) FROM r") == [(9, "2024-03-10 01:30:00")]


def test_timestamps_and_dates_at_the_ends_of_their_range(spark, db) -> None:
    """The first and last timestamps and dates are written (the max stat of a value in the last
    millisecond is left out: no millisecond above it exists) and filters on them near either end,
    in sessions west and east of UTC (where such a literal is in year 10000 or year 0 in UTC),
    return what the filter says, whatever pruning can use."""
    from use.delta import DeltaLog
    from use.runtime.conf import session_conf

    spark.sql("CREATE TABLE e (id INT, ts TIMESTAMP, ntz TIMESTAMP_NTZ, d DATE) USING delta")
    with session_conf(spark, {"spark.sql.session.timeZone": "UTC"}):
        spark.sql(
            "INSERT INTO e VALUES (1, TIMESTAMP'0001-01-01 00:00:00', TIMESTAMP_NTZ'0001-01-01 00:00:00', DATE'0001-01-01'), "
            "(2, TIMESTAMP'2024-01-01 00:00:00', TIMESTAMP_NTZ'2024-01-01 00:00:00', DATE'2024-01-01')"
        )
        spark.sql(
            "INSERT INTO e VALUES (3, TIMESTAMP'9999-12-31 23:59:59.999999', TIMESTAMP_NTZ'9999-12-31 23:59:59.999999', DATE'9999-12-31')"
        )
    stats = [json.loads(s) for s in DeltaLog.for_path(location(spark, "e")).snapshot().files.column("stats").to_pylist()]
    (last,) = [s for s in stats if s["minValues"]["id"] == 3]
    assert last["minValues"]["ts"] == "9999-12-31T23:59:59.999Z" and "ts" not in last["maxValues"]
    assert last["maxValues"]["ntz"] == "9999-12-31T23:59:59.999999" and last["maxValues"]["d"] == "9999-12-31"
    (first,) = [s for s in stats if s["minValues"]["id"] == 1]
    assert (first["minValues"]["ts"], first["minValues"]["d"]) == ("0001-01-01T00:00:00.000Z", "0001-01-01")
    cases = {  # (west: America/Los_Angeles, east: +14:00); LA before 1883 is its local mean time, -07:52:58
        "ts < TIMESTAMP'9999-12-31 23:00:00'": ([1, 2, 3], [1, 2]),
        "ts > TIMESTAMP'9999-12-31 23:00:00'": ([], [3]),
        "ts >= TIMESTAMP'0001-01-01 00:00:00'": ([2, 3], [1, 2, 3]),
        "ts IN (TIMESTAMP'0001-01-01 00:00:00', TIMESTAMP'9999-12-31 23:59:00')": ([], []),
        "ntz >= TIMESTAMP_NTZ'9999-12-31 23:59:59.999999' OR d <= DATE'0001-01-01'": ([1, 3], [1, 3]),
        "d > DATE'9999-12-30' AND ts > TIMESTAMP'2024-01-01 00:00:00'": ([3], [3]),
    }
    for i, zone in enumerate(("America/Los_Angeles", "+14:00")):
        with session_conf(spark, {"spark.sql.session.timeZone": zone}):
            for condition, expected in cases.items():
                assert [r[0] for r in rows(spark, f"SELECT id FROM e WHERE {condition}")] == expected[i], (zone, condition)


def test_time_travel_to_a_time_after_the_last_commit_is_refused(spark, db, tmp_path) -> None:
    """As Delta's time travel: a time after the latest commit is an error naming that commit's time
    (a read "as of" a time not reached yet would change as commits arrive), in SQL and through the
    reader option, for a table named in the metastore and by its path; a time at the latest commit
    reads it. TIMESTAMP AS OF takes an expression on a path table as on a named one."""
    import datetime as dt

    from use.delta import DeltaLog

    path = str(tmp_path / "tt")
    spark.sql(f"CREATE TABLE delta.`{path}` (a INT) USING delta")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1)")
    spark.sql(f"CREATE TABLE tt USING delta LOCATION '{path}'")
    stamps = {h.version: h.timestamp for h in DeltaLog.for_path(path).history()}
    last = dt.datetime.fromtimestamp(stamps[1] / 1000, dt.UTC).isoformat(timespec="milliseconds")
    after = (
        rf"the timestamp 2999-01-01T00:00:00.000\+00:00 is after the latest version of {re.escape(path)} \(version 1, "
        rf"committed at {re.escape(last)}\); use a timestamp at or before {re.escape(last)}, or read without a timestamp"
    )
    for name in ("tt", f"delta.`{path}`"):
        with refused(after):
            spark.sql(f"SELECT * FROM {name} TIMESTAMP AS OF '2999-01-01 00:00:00'").collect()
        with refused("USE_VERSION_NOT_FOUND_ERROR.*is after the latest version"):
            spark.sql(f"SELECT * FROM {name} TIMESTAMP AS OF current_timestamp()").collect()
        assert rows(spark, f"SELECT * FROM {name} TIMESTAMP AS OF timestamp_millis({stamps[1]})") == [(1,)]
        assert rows(spark, f"SELECT * FROM {name} TIMESTAMP AS OF timestamp_millis({stamps[0]}) + INTERVAL 0 SECONDS") == []
    with refused(after):
        spark.read.format("delta").option("timestampAsOf", "2999-01-01 00:00:00").load(path).collect()
    with refused(after):
        spark.read.option("timestampAsOf", "2999-01-01 00:00:00").table("tt").collect()
    assert spark.read.format("delta").option("timestampAsOf", last.replace("+00:00", "")).load(path).count() == 1


def test_filters_on_38_digit_decimals_at_their_extremes_before_and_after_optimize(spark, db) -> None:
    """DECIMAL(38,18) holds 20 integer digits and 18 decimals: a literal on that grid has up to 38
    digits, more than Python's default decimal context (28), so stats skipping, which puts it on
    the column's grid, must compute with enough digits (it failed with InvalidOperation)."""
    extremes = [
        "99999999999999999999.999999999999999999", "-99999999999999999999.999999999999999999",
        "12345678901.5", "10000000000", "0.000000000000000001", "-0.000000000000000001", "0", "1.5",
    ]  # fmt: skip
    spark.sql("CREATE TABLE dec (id INT, amount DECIMAL(38,18)) USING delta")
    spark.sql(
        "CREATE TABLE qdec (id INT, amount DECIMAL(38,18)) USING qbeast OPTIONS ('columnsToIndex'='amount', 'cubeSize'='2')"
    )
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
