"""`CALL use_catalog.system.<name>(...)` and the manual trigger, in process: each procedure with
named and positional arguments, dry runs that write nothing, `plan` rows equal to a dry run's, the
manual trigger with no service running, and every bad input refused with nothing changed."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

import pytest

from sql_support import location, refused, rows, state

OPT = "use_catalog.system.optimize"


def _delta_table(spark, name: str = "t", inserts: int = 4) -> str:
    spark.sql(f"CREATE TABLE {name} (a INT, b STRING) USING delta")
    for i in range(inserts):
        spark.sql(f"INSERT INTO {name} VALUES ({i}, 'v{i}'), ({i + 10}, 'w{i}')")
    return location(spark, name)


def _qbeast_table(spark, name: str = "q") -> str:
    spark.sql(f"CREATE TABLE {name} (x INT, y INT) USING qbeast OPTIONS ('columnsToIndex'='x,y', 'cubeSize'='50')")
    for i in range(4):
        spark.sql(f"INSERT INTO {name} SELECT id * 7 % 101 + {i}, id * 13 % 97 FROM range(120)")
    return location(spark, name)


def _live_files(root: str) -> int:
    from use.delta import DeltaLog

    return DeltaLog.for_path(root).snapshot().num_files


def _nothing_selected(df) -> str:
    """The reason of the one row a CALL that selected nothing returns (its metrics all zero)."""
    (row,) = df.collect()
    assert row["kind"] == "none" and row["strategy"], row
    if "status" in df.columns:
        assert row["status"] == "nothing_selected" and row["version"] is None and row["read_version"] >= 0, row
        assert row["files_in"] == row["files_out"] == row["bytes_in"] == row["rows"] == 0, row
    else:
        assert row["task"] is None and row["num_files"] == row["bytes"] == 0, row
    assert row["reason"].startswith("nothing to optimize: "), row
    return row["reason"]


def _plan_columns(df) -> list[tuple]:
    return [
        tuple(r[c] for c in ("task", "strategy", "kind", "revision_id", "num_files", "bytes", "reason")) for r in df.collect()
    ]


# --- optimize ----------------------------------------------------------------------------------------


def test_optimize_dry_run_named_and_positional_writes_nothing(spark, db) -> None:
    root = _delta_table(spark)
    before = state(root)
    named = spark.sql(f"CALL {OPT}(table => 't', dry_run => true)")
    assert named.columns[:3] == ["task", "strategy", "kind"]
    planned = _plan_columns(named)
    assert planned and planned[0][4] == _live_files(root) > 1, planned
    positional = spark.sql(f"CALL {OPT}('t', NULL, NULL, NULL, NULL, true)")
    assert _plan_columns(positional) == planned
    assert state(root) == before


def test_optimize_runs_the_loop_and_reaches_the_fixed_point(spark, db) -> None:
    root = _delta_table(spark)
    files = _live_files(root)
    result = spark.sql(f"CALL {OPT}('{db}.t')").collect()
    assert result and all(r["status"] == "committed" and r["version"] is not None for r in result)
    assert [r["iteration"] for r in result] == list(range(1, len(result) + 1))
    assert result[0]["files_in"] == files and result[0]["files_out"] == 1
    assert _live_files(root) == 1
    assert rows(spark, "SELECT count(*) FROM t") == [(8,)]
    assert "selected no files" in _nothing_selected(spark.sql(f"CALL {OPT}(table => 'spark_catalog.{db}.t', dry_run => true)"))
    assert "selected no files" in _nothing_selected(spark.sql(f"CALL {OPT}(table => 't')"))  # converged: nothing more


def test_a_call_that_selects_nothing_returns_one_row_saying_why(spark, db) -> None:
    """As `use optimize` and `print(result)` do: a strategy that does not apply to the table, or a
    table at the strategies' fixed point, is one row with zero metrics and the planner's reason."""
    root = _delta_table(spark)
    before = state(root)
    for dry_run in ("true", "false"):
        reason = _nothing_selected(
            spark.sql(f"CALL {OPT}(table => 't', strategy => 'LeveledCompactionSelection', dry_run => {dry_run})")
        )
        assert "LeveledCompactionSelection works on the OTree index of a Qbeast table" in reason and root in reason
    assert state(root) == before
    (row,) = spark.sql(f"CALL {OPT}(table => 't', strategy => 'LeveledCompactionSelection')").collect()
    assert row["strategy"] == "LeveledCompactionSelection" and row["read_version"] == 4  # CREATE + 4 INSERTs


def test_optimize_by_path_with_settings_of_the_call(spark, db) -> None:
    root = _delta_table(spark)
    result = spark.sql(
        f"CALL {OPT}(table => '{root}', max_iterations => 1, strategy => 'BinPacking', bytes_per_iter => 100000)"
    ).collect()
    assert len(result) == 1 and result[0]["strategy"] == "BinPacking"
    planned = spark.sql(f"CALL {OPT}(table => 'delta.`{root}`', dry_run => true)").collect()
    assert planned == spark.sql(f"CALL {OPT}(table => 'file:{root}', dry_run => true)").collect()


def test_plan_rows_equal_optimize_dry_run_rows(spark, db) -> None:
    from use.insights import for_path
    from use.optimize.loop_core import session_defaults

    root = _qbeast_table(spark)
    plan = for_path(root, "plan", spark_conf=session_defaults(spark))
    assert plan.num_rows > 0
    expected = [
        tuple(r[c] for c in ("task", "strategy", "kind", "revision_id", "num_files", "bytes", "reason")) for r in plan.to_pylist()
    ]
    assert _plan_columns(spark.sql(f"CALL {OPT}(table => 'q', dry_run => true)")) == expected


def test_procedures_take_the_calling_session_s_optimization_defaults(spark, db) -> None:
    """Each JDBC connection is a session of its own: the `spark.qbeast.use.optimization.*` it SETs
    are the defaults of its CALLs and manual triggers (as `optimize()` reads its session's), and
    another session's never leak in."""
    root = _qbeast_table(spark)
    other = spark.newSession()
    other.catalog.setCurrentDatabase(db)
    sampling = f"CALL {OPT}(table => 'q', strategy => 'SamplingOverheadReduction', dry_run => true)"
    before = state(root)
    with refused(r"needs use.optimization.sampling-fraction"):
        other.sql(sampling).collect()
    other.conf.set("spark.qbeast.use.optimization.sampling-fraction", "0.1")
    assert other.sql(sampling).columns[:3] == ["task", "strategy", "kind"]  # planned with the session's 0.1
    with refused(r"needs use.optimization.sampling-fraction"):
        spark.sql(sampling).collect()  # the installed session has no such default
    other.conf.set("spark.qbeast.use.optimization.bytes-per-iter", "-5")
    bad = r"\[USE_CONFIG_ERROR\] bad value '-5' for spark.qbeast.use.optimization.bytes-per-iter"
    with refused(bad):
        other.sql(f"CALL {OPT}(table => 'q', dry_run => true)").collect()
    with refused(bad):
        other.sql(f"ALTER TABLE use_catalog.spark_catalog.{db}.q SET TBLPROPERTIES ('use.optimization.revision-rewrite'='false')")
    assert state(root) == before
    assert spark.sql(f"CALL {OPT}(table => 'q', dry_run => true)").count() > 0


def test_call_rows_and_optimization_events_report_the_revision_written_into(spark, db) -> None:
    """A task's `revision_id` is the revision its output files belong to, in the CALL's rows as in
    the `optimizations` events: re-indexed superseded revisions report the latest revision (their
    own ids are in `reason`), so the two surfaces agree commit by commit."""
    from use.qbeast.reader import load_snapshot

    spark.sql("CREATE TABLE d (id INT, x DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='id,x', 'cubeSize'='100')")
    for k in range(6):  # drifting ids: each widening opens a revision
        spark.sql(f"INSERT INTO d SELECT CAST(id AS INT), (id % 97) / 97.0 FROM range({k * 60}, {(k + 1) * 60})")
    latest = load_snapshot(location(spark, "d")).latest_revision_id
    assert latest >= 2
    rows = [r for r in spark.sql(f"CALL {OPT}(table => 'd')").collect() if r["status"] == "committed"]
    events = spark.sql(f"SELECT version, revision_id FROM use_catalog.spark_catalog.{db}.d.optimizations").collect()
    event_revision = {e["version"]: e["revision_id"] for e in events}
    superseded = [r for r in rows if r["strategy"] == "SupersededRevisionsSelection"]
    assert superseded and all("superseded revision(s)" in r["reason"] for r in superseded)
    assert [(r["version"], r["revision_id"]) for r in rows] == [(r["version"], event_revision[r["version"]]) for r in rows]
    assert {r["revision_id"] for r in superseded} == {latest}


# --- vacuum and convert ----------------------------------------------------------------------------


def test_vacuum_safety_check_dry_run_and_delete(spark, db) -> None:
    root = _delta_table(spark)
    spark.sql(f"CALL {OPT}('t')").collect()
    before = state(root)
    with refused(r"below the table's delta.deletedFileRetentionDuration of 168 hours.*force => true"):
        spark.sql("CALL use_catalog.system.vacuum(table => 't', retention_hours => 0)")
    assert state(root) == before
    listed = spark.sql("CALL use_catalog.system.vacuum('t', 0.0, true, true)").collect()
    assert len(listed) == len(before[1]) - 1 and all(not r["deleted"] and r["bytes"] > 0 for r in listed)
    assert state(root) == before
    deleted = spark.sql("CALL use_catalog.system.vacuum(table => 't', retention_hours => 0, force => true)").collect()
    assert sorted(r["path"] for r in deleted) == sorted(r["path"] for r in listed)
    assert all(r["deleted"] for r in deleted)
    assert not any(os.path.exists(os.path.join(root, r["path"])) for r in deleted)
    assert rows(spark, "SELECT count(*) FROM t") == [(8,)]
    assert spark.sql("CALL use_catalog.system.vacuum('t')").count() == 0


def test_reading_a_version_whose_files_vacuum_deleted_says_so_and_what_can_be_read(spark, db) -> None:
    """Time travel to a version whose files VACUUM deleted fails as the query is planned, naming the
    version, VACUUM and the versions still readable (it failed with the reader's FILE_NOT_EXIST
    and Spark's advice to REFRESH TABLE), by name, by path and through the DataFrame reader, as
    RESTORE to it does; the versions after the compaction still read."""
    root = _delta_table(spark)  # versions 1-4: two files each (one per row)
    spark.sql(f"CALL {OPT}('t')").collect()  # version 5: one compacted file, the four removed
    spark.sql("CALL use_catalog.system.vacuum(table => 't', retention_hours => 0, force => true)").collect()
    from use.delta import DeltaLog

    latest = DeltaLog.for_path(root).snapshot().version
    expected = rf"USE_VERSION_NOT_FOUND_ERROR\] version 2 of .* cannot be read: 4 of the data files it needs are no longer on storage \(VACUUM deleted them.*versions 5 to {latest} \(the latest\) can still be read"
    for read in (
        lambda: spark.sql("SELECT * FROM t VERSION AS OF 2").collect(),
        lambda: spark.sql(f"SELECT count(*) FROM delta.`{root}` VERSION AS OF 2").collect(),
        lambda: spark.read.format("delta").option("versionAsOf", 2).load(root).collect(),
    ):
        with refused(expected):
            read()
    # only the files the query reads are counted (a filter pruned one of the two away)
    with refused(r"version 2 of .* cannot be read: 1 of the data files"):
        spark.sql("SELECT * FROM t VERSION AS OF 2 WHERE a = 11").collect()
    with refused(r"cannot restore .* to version 2: 4 of its data files are no longer on storage \(VACUUM deleted them"):
        spark.sql("RESTORE TABLE t TO VERSION AS OF 2")
    assert rows(spark, "SELECT count(*) FROM t VERSION AS OF 5") == rows(spark, "SELECT count(*) FROM t") == [(8,)]


def test_convert_to_qbeast_of_a_delta_table_and_a_parquet_directory(spark, db, tmp_path) -> None:
    from use.qbeast.reader import load_snapshot

    root = _delta_table(spark, inserts=2)
    (row,) = spark.sql("CALL use_catalog.system.convert_to_qbeast(table => 't', columns_to_index => 'a')").collect()
    assert row["converted"] and row["source_format"] == "delta" and list(row["columns_to_index"]) == ["a"]
    assert load_snapshot(root).is_qbeast
    directory = str(tmp_path / "plain")
    spark.range(5).selectExpr("id AS x").write.parquet(directory)
    (row,) = spark.sql(f"CALL use_catalog.system.convert_to_qbeast('{directory}', 'x', 1000)").collect()
    assert row["converted"] and row["source_format"] == "parquet" and row["version"] == 0


# --- Delta's OPTIMIZE and VACUUM statements -----------------------------------------------------------


def test_delta_s_optimize_and_vacuum_statements_run_the_procedures(spark, db) -> None:
    """Delta users type OPTIMIZE and VACUUM, which Spark's grammar cannot read (an empty syntax
    error); they run the procedures, with the tables named as the procedures take them."""
    root = _delta_table(spark)
    out = spark.sql("OPTIMIZE t").collect()
    assert [r["status"] for r in out] == ["committed"] and _live_files(root) == 1
    assert rows(spark, "SELECT count(*) FROM t") == [(8,)]
    (again,) = spark.sql(f"optimize delta.`{root}` ;").collect()  # by path, converged: the one row saying why
    assert again["kind"] == "none" and again["status"] == "nothing_selected"
    z = _delta_table(spark, "z")
    out = spark.sql("OPTIMIZE z ZORDER BY (a, `b`)").collect()
    assert {r["strategy"] for r in out} == {"ZOrder"} and all(r["status"] == "committed" for r in out)
    zorder = [r for r in spark.sql("DESCRIBE HISTORY z LIMIT 1").collect()]
    assert zorder[0]["operation"] == "OPTIMIZE" and '"a","b"' in zorder[0]["operationParameters"]["zOrderBy"]
    (n,) = spark.sql(f"OPTIMIZE '{z}' ZORDER BY a, b").collect()  # a quoted path, no parentheses
    assert n["kind"] == "none"

    before = state(root)
    with refused(
        r"below the table's delta.deletedFileRetentionDuration of 168 hours.*VACUUM: RETAIN 168 HOURS.*"
        r"retentionDurationCheck.enabled = false"
    ):
        spark.sql("VACUUM t RETAIN 0 HOURS").collect()
    assert state(root) == before
    assert spark.sql("VACUUM t").collect() == []  # within the week's retention: nothing deleted (VACUUM START/END commits)
    before = state(root)
    try:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        listed = spark.sql("VACUUM t FULL RETAIN 0 HOURS DRY RUN").collect()
        assert len(listed) == len(before[1]) - 1 and not any(r["deleted"] for r in listed)
        assert state(root) == before
        deleted = spark.sql("vacuum t retain 0.0 hours").collect()
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert sorted(r["path"] for r in deleted) == sorted(r["path"] for r in listed) and all(r["deleted"] for r in deleted)
    assert rows(spark, "SELECT count(*) FROM t") == [(8,)] and _live_files(root) == 1


def test_optimize_where_rewrites_only_the_partitions_it_selects(spark, db) -> None:
    """Delta's OPTIMIZE ... WHERE on partition columns (Spark SQL semantics: dates, IS NULL, IN),
    from the statement, CALL and the Python API; a predicate on other columns is refused."""
    from use import DeltaTable
    from use.delta import DeltaLog

    spark.sql("CREATE TABLE e (id INT, day DATE, k STRING) USING delta PARTITIONED BY (day, k)")
    for i in range(3):
        spark.sql(f"INSERT INTO e VALUES ({i}, DATE'2024-01-01', 'a'), ({i}, DATE'2024-01-02', 'a'), "
                  f"({i}, DATE'2024-01-02', 'b'), ({i}, NULL, 'b')")  # fmt: skip
    root = location(spark, "e")

    def files_per_partition() -> dict:
        out: dict = {}
        for v in DeltaLog.for_path(root).snapshot().files.column("partition_values").to_pylist():
            key = (dict(v)["day"], dict(v)["k"])
            out[key] = out.get(key, 0) + 1
        return out

    assert set(files_per_partition().values()) == {3}
    (row,) = spark.sql("OPTIMIZE e WHERE day >= '2024-01-02' AND k = 'a'").collect()
    assert (row["files_in"], row["files_out"]) == (3, 1)
    assert files_per_partition() == {("2024-01-01", "a"): 3, ("2024-01-02", "a"): 1, ("2024-01-02", "b"): 3, (None, "b"): 3}
    spark.sql("CALL use_catalog.system.optimize(table => 'e', where => 'day IS NULL')").collect()
    DeltaTable.for_path(spark, root).optimize(where="k IN ('b') AND day = DATE'2024-01-02'", progress=False)
    assert files_per_partition() == {("2024-01-01", "a"): 3, ("2024-01-02", "a"): 1, ("2024-01-02", "b"): 1, (None, "b"): 1}
    (none,) = spark.sql("OPTIMIZE e WHERE k = 'zzz'").collect()
    assert none["kind"] == "none" and files_per_partition()[("2024-01-01", "a")] == 3
    assert rows(spark, "SELECT count(*), sum(id) FROM e") == [(12, 12)]
    before = state(root)
    for where, message in [
        ("id = 1", r"where \(id = 1\) must be a predicate on the partition columns \(day, k\).*UNRESOLVED_COLUMN"),
        ("k", r"where \(k\) must be a condition"),
        ("nonsense(", r"PARSE_SYNTAX_ERROR"),
    ]:
        with refused(message), _query_error_logs() as logged:
            spark.sql(f"OPTIMIZE e WHERE {where}").collect()
        assert state(root) == before, where
        # the typed error is the whole report: PySpark's query-error loggers printed no Java stack
        assert logged == [], (where, logged)
    with refused("where and files cannot be combined"):
        spark.sql("CALL use_catalog.system.optimize(table => 'e', where => \"k = 'a'\", files => array('x.parquet'))").collect()


@contextlib.contextmanager
def _query_error_logs() -> Iterator[list[str]]:
    """The messages PySpark's query-error loggers (`use.runtime.query_errors.QUERY_ERROR_LOGGERS`) emit in the
    block. They do not propagate, so a handler of their own collects them."""
    import logging

    from pyspark.logger import PySparkLogger

    from use.runtime.query_errors import QUERY_ERROR_LOGGERS

    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage()[:200])

    handler = Collect(level=logging.DEBUG)
    loggers = [PySparkLogger.getLogger(name) for name in QUERY_ERROR_LOGGERS]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        yield seen
    finally:
        for lg in loggers:
            lg.removeHandler(handler)


def test_restore_statement_and_procedure_bring_a_qbeast_table_back(spark, db) -> None:
    """RESTORE of a Qbeast table after an optimization: the files of the version come back with
    their blocks and the revisions they name, and the table reads and optimizes as before."""
    from use.delta import DeltaLog
    from use.qbeast.snapshot import QbeastSnapshot

    root = _qbeast_table(spark)  # versions 0 (create) .. 4 (the fourth insert)
    spark.sql(f"CALL {OPT}('q')").collect()
    log = DeltaLog.for_path(root)
    optimized = log.snapshot().version
    expected = rows(spark, "SELECT x, y FROM q VERSION AS OF 2 ORDER BY x, y")
    (row,) = spark.sql("RESTORE TABLE q TO VERSION AS OF 2").collect()
    assert (row["restored_version"], row["version"]) == (2, optimized + 1) and row["num_restored_files"] > 0
    assert rows(spark, "SELECT x, y FROM q ORDER BY x, y") == expected
    now, then = (QbeastSnapshot.from_delta(s) for s in (log.snapshot(), log.snapshot(version=2)))
    blocks = [
        dict(zip(q.files.column("path").to_pylist(), q.files.column("tags").to_pylist(), strict=False)) for q in (now, then)
    ]
    assert now.revisions == then.revisions and blocks[0] == blocks[1]
    assert rows(spark, "SELECT count(*) FROM q TABLESAMPLE (10 PERCENT)")[0][0] < 240  # the index prunes again
    (back,) = spark.sql(f"CALL use_catalog.system.restore(table => 'q', version => {optimized})").collect()
    assert back["version"] == optimized + 2 and rows(spark, "SELECT count(*) FROM q") == [(480,)]
    (same,) = spark.sql(f"restore q version as of {optimized} ;").collect()  # already there: nothing committed
    assert same["version"] is None
    at = spark.sql(f"SELECT timestamp FROM use_catalog.spark_catalog.{db}.q.history WHERE version = 1").first()[0]
    (by_time,) = spark.sql(f"RESTORE q TO TIMESTAMP AS OF '{at.strftime('%Y-%m-%d %H:%M:%S.%f')}'").collect()
    assert by_time["restored_version"] == 1 and rows(spark, "SELECT count(*) FROM q") == [(120,)]


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("RESTORE TABLE t TO VERSION AS OF -1", r"RESTORE ... VERSION AS OF takes a table version .*got '-1'"),
        ("RESTORE t TO VERSION AS OF 99", r"99"),
        ("RESTORE t TO TIMESTAMP AS OF current_timestamp()", r"TIMESTAMP AS OF takes a quoted time"),
        ("RESTORE no_such_table TO VERSION AS OF 0", r"USE_TABLE_NOT_FOUND_ERROR"),
        ("CALL use_catalog.system.restore(table => 't')", r"exactly one of version"),
        (
            "OPTIMIZE t WHERE a = 1",
            r"USE_INVALID_ARGUMENT_ERROR.*where \(a = 1\) selects partitions, and .* has no partition columns",
        ),
        ("OPTIMIZE t ZORDER BY ()", r"ZORDER BY takes a list of columns, e.g. ZORDER BY \(a, b\), got '\(\)'"),
        ("OPTIMIZE t ZORDER BY (a, nope)", r"nope"),
        ("OPTIMIZE no_such_table", r"USE_TABLE_NOT_FOUND_ERROR.*no table spark_catalog\.t_\w+\.no_such_table"),
        ("OPTIMIZE t FULL", r"table 't FULL' is neither a table name"),
        ("VACUUM t LITE", r"VACUUM ... LITE is not supported"),
        ("VACUUM t RETAIN -1 HOURS", r"VACUUM ... RETAIN takes a number of hours \(0 or more\), got '-1'"),
        ("VACUUM t RETAIN a HOURS DRY RUN", r"got 'a'"),
        ("VACUUM '/no/such/dir'", r"USE_TABLE_NOT_FOUND_ERROR.*no Delta table at /no/such/dir"),
    ],
)
def test_bad_optimize_and_vacuum_statements_are_clean_errors_and_change_nothing(spark, db, statement: str, message: str) -> None:
    root = _delta_table(spark, inserts=2)
    before = state(root)
    with refused(message):
        spark.sql(statement).collect()
    assert state(root) == before


# --- the manual trigger ------------------------------------------------------------------------------


def test_manual_trigger_runs_once_and_changes_no_property(spark, db) -> None:
    from use.delta import DeltaLog

    root = _qbeast_table(spark, "test")
    props = DeltaLog.for_path(root).snapshot().configuration
    version = DeltaLog.for_path(root).snapshot().version
    spark.sql(
        f"ALTER TABLE use_catalog.spark_catalog.{db}.test SET TBLPROPERTIES("
        "'use.optimization.type'='LeveledCompaction', 'use.optimization.bytes-per-iter'='5000000')"
    )
    snap = DeltaLog.for_path(root).snapshot()
    assert snap.version > version
    assert snap.configuration == props
    ops = {e.operation for e in DeltaLog.for_path(root).history() if e.version > version}
    assert ops == {"OPTIMIZE"}
    _nothing_selected(spark.sql(f"CALL {OPT}(table => 'test', dry_run => true)"))


def test_manual_trigger_is_ignored_on_a_continuously_optimized_table(spark, db, caplog) -> None:
    root = _delta_table(spark)
    spark.sql("ALTER TABLE t SET TBLPROPERTIES ('use.optimization.autoOptimize.enabled'='true')")
    before = state(root)
    with caplog.at_level("WARNING", logger="use.sql.procedures"):
        spark.sql(f"ALTER TABLE use_catalog.spark_catalog.{db}.t SET TBLPROPERTIES ('use.optimization.bytes-per-iter'='5000000')")
    assert state(root) == before
    assert "ignored: the table has continuous optimization configured" in caplog.text


def test_a_session_default_strategy_does_not_make_a_table_continuously_optimized(spark, db) -> None:
    """`spark.qbeast.use.optimization.type` is a default for the runs a session starts; a table asks
    for continuous optimization by its own properties (what the service schedules by), so neither
    `metastore_summary.auto_optimize` nor the manual trigger takes the default for a request."""
    from use.runtime.conf import session_conf

    root = _delta_table(spark)
    summary = (
        f"SELECT auto_optimize FROM use_catalog.system_lake_tables.metastore_summary WHERE database = '{db}' AND table_name = 't'"
    )
    with session_conf(spark, {"spark.qbeast.use.optimization.type": "BinPacking"}):
        assert spark.sql(summary).first()[0] is False
        before = state(root)
        spark.sql(f"ALTER TABLE use_catalog.spark_catalog.{db}.t SET TBLPROPERTIES ('use.optimization.bytes-per-iter'='5000000')")
        assert state(root) != before and _live_files(root) == 1  # the trigger ran: the 4 inserts bin-packed
    spark.sql("ALTER TABLE t SET TBLPROPERTIES ('use.optimization.type'='BinPacking')")
    assert spark.sql(summary).first()[0] is True


def test_manual_trigger_refuses_bad_settings_and_other_changes(spark, db) -> None:
    root = _delta_table(spark)
    before = state(root)
    name = f"use_catalog.spark_catalog.{db}.t"
    with refused(r"\[USE_CONFIG_ERROR\] bad value 'lots' for use.optimization.bytes-per-iter"):
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('use.optimization.bytes-per-iter'='lots')")
    with refused(r"\[USE_UNKNOWN_STRATEGY_ERROR\].*NoSuchStrategy"):
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('use.optimization.type'='NoSuchStrategy')")
    with refused(r"takes no delta.appendOnly"):
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('delta.appendOnly'='true')")
    with refused(r"only takes SET TBLPROPERTIES"):
        spark.sql(f"ALTER TABLE {name} UNSET TBLPROPERTIES ('use.optimization.type')")
    assert state(root) == before


# --- errors --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (f"CALL {OPT}(table => 'no_such_table')", r"\[USE_TABLE_NOT_FOUND_ERROR\] no table spark_catalog\.t_\w+\.no_such_table"),
        (f"CALL {OPT}(table => 'a.b.c.d')", r"no table spark_catalog\.a\.b\.c\.d"),
        (f"CALL {OPT}(table => '/no/such/dir')", r"\[USE_TABLE_NOT_FOUND_ERROR\] no Delta table at /no/such/dir"),
        (f"CALL {OPT}(table => 'p')", r"p is a parquet table, not a Delta or Qbeast table"),
        (
            f"CALL {OPT}(table => 't', strategy => 'NoSuchStrategy')",
            r"unknown optimization strategy 'NoSuchStrategy'; known strategies",
        ),
        (f"CALL {OPT}(table => 't', revision_id => 7)", r"revision"),
        (f"CALL {OPT}(table => 't', no_such_argument => 1)", r"no_such_argument"),
        (f"CALL {OPT}()", r"table"),
        (
            "CALL use_catalog.system.no_such_procedure('t')",
            r"the procedures are use_catalog\.system\.convert_to_delta, use_catalog\.system\.convert_to_qbeast, use_catalog\.system\.generate, use_catalog\.system\.optimize, use_catalog\.system\.restore, use_catalog\.system\.vacuum",
        ),
        ("CALL use_catalog.system.vacuum(table => 't', retention_hours => -1, force => true)", r"retention"),
        ("CALL use_catalog.system.convert_to_qbeast(table => 't', columns_to_index => 'no_such_column')", r"no_such_column"),
    ],
)
def test_bad_calls_are_clean_errors_and_change_nothing(spark, db, call: str, message: str) -> None:
    root = _delta_table(spark, inserts=2)
    spark.sql("CREATE TABLE p (a INT) USING parquet")
    before = state(root)
    with refused(message):
        spark.sql(call).collect()
    assert state(root) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            "bytes_per_iter => -5",
            r"bad value '-5' for bytes_per_iter: expected a positive integer number of bytes.*; "
            r"pass bytes_per_iter => 5000000, or leave it out for the table's use.optimization.bytes-per-iter$",
        ),
        (
            "strategy => 'Bogus'",
            r"bad value 'Bogus' for strategy: unknown optimization strategy 'Bogus'; known strategies: .*; "
            r"pass strategy => 'BinPacking', or leave it out for the table's strategy chain$",
        ),
        (
            "strategy => 'ZOrder'",
            r"strategy selects ZOrder, which needs use.optimization.zorder-by .*; pass zorder_by => 'a,b', "
            r"or set the table property with ALTER TABLE",
        ),
        (
            "strategy => 'SamplingOverheadReduction'",
            r"strategy selects SamplingOverheadReduction, which needs use.optimization.sampling-fraction .*; set the table property "
            r"with ALTER TABLE <table> SET TBLPROPERTIES \('use.optimization.sampling-fraction'='0.1'\), or this session's default "
            r"with SET `spark.qbeast.use.optimization.sampling-fraction`=0.1$",
        ),
        (
            "max_iterations => 0",
            r"max_iterations must be a positive integer \(the merge tasks to run at most\), got 0; "
            r"pass max_iterations => 10, or leave it out for no limit$",
        ),
        (
            "dry_run => NULL",
            r"dry_run must be true or false, got None; pass dry_run => true or false, or leave it out \(false\)$",
        ),
        ("files => array('a.parquet'), zorder_by => 'a'", r"zorder_by and files cannot be combined"),
    ],
)
def test_optimize_errors_name_the_argument_and_a_sql_fix(spark, db, args: str, message: str) -> None:
    """A CALL's bad argument is refused in the caller's terms: the procedure's argument and a SQL
    way to fix it (`arg => value`, ALTER TABLE, SET), never a Python call's or a flag's."""
    from pyspark.errors import AnalysisException

    root = _delta_table(spark, inserts=2)
    before = state(root)
    with pytest.raises(AnalysisException) as info:
        spark.sql(f"CALL {OPT}(table => 't', {args})").collect()
    text = str(info.value).split("\n")[0]
    assert re.search(message, text), text
    assert not re.search(r"\w=\S|set_properties|optimize\(\)|--\w", text.split("ALTER TABLE")[0].split("SET `")[0]), text
    assert state(root) == before


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            f"CALL {OPT}(table => 't', dry_run => 'maybe')",
            r"argument dry_run of use_catalog\.system\.optimize must be true or false, got 'maybe'; e\.g\. dry_run => true$",
        ),
        (
            f"CALL {OPT}('t', NULL, 'latest')",  # positional: the third parameter, revision_id
            r"argument revision_id of use_catalog\.system\.optimize must be an integer, got 'latest'; e\.g\. revision_id => 3$",
        ),
        (f"CALL {OPT}(table => 't', max_iterations => 'many')", r"argument max_iterations of .* must be an integer, got 'many'"),
        (f"CALL {OPT}(table => 't', bytes_per_iter => 'lots')", r"bad value 'lots' for bytes_per_iter"),
        (
            "CALL use_catalog.system.vacuum(table => 't', retention_hours => 'a week')",
            r"argument retention_hours of use_catalog\.system\.vacuum must be a number, got 'a week'; e\.g\. retention_hours => 24\.5$",
        ),
        (
            "CALL use_catalog.system.restore(table => 't', version => 'first')",
            r"argument version of .*restore must be an integer",
        ),
    ],
)
def test_text_given_for_a_number_or_boolean_is_refused_naming_the_argument(spark, db, call: str, message: str) -> None:
    """Spark's own cast of such text failed with CAST_INVALID_INPUT, which names no argument."""
    from pyspark.errors import AnalysisException

    root = _delta_table(spark, inserts=2)
    before = state(root)
    with pytest.raises(AnalysisException) as info:
        spark.sql(call).collect()
    text = str(info.value).split("\n")[0]
    assert re.search(message, text), text
    assert state(root) == before


def test_text_that_is_a_number_or_a_boolean_is_taken(spark, db) -> None:
    _delta_table(spark, inserts=3)
    planned = spark.sql(
        f"CALL {OPT}(table => 't', dry_run => 'true', max_iterations => '1', bytes_per_iter => '1000000')"
    ).collect()
    assert (
        planned
        and planned
        == spark.sql(f"CALL {OPT}(table => 't', dry_run => true, max_iterations => 1, bytes_per_iter => 1000000)").collect()
    )


def test_manual_trigger_is_handed_to_the_service_running_in_this_driver(spark, db, tmp_path) -> None:
    from service_support import Services, await_service
    from use.delta import DeltaLog
    from use.service import active
    from use.service.runner import SparkRunner

    idle = _qbeast_table(spark, "idle")
    auto = _delta_table(spark, "auto")
    spark.sql(
        "ALTER TABLE auto SET TBLPROPERTIES ('use.optimization.autoOptimize.enabled'='false', 'use.optimization.type'='SmallFiles')"
    )
    props = DeltaLog.for_path(idle).snapshot().configuration
    services = Services(tmp_path / "service")
    svc = services([], SparkRunner(spark), interval=3600.0)
    try:
        assert active.current() is svc
        # the service has not seen these tables: the trigger tells it, then hands the request over
        spark.sql(
            f"ALTER TABLE use_catalog.spark_catalog.{db}.idle SET TBLPROPERTIES ('use.optimization.bytes-per-iter'='5000000')"
        )
        await_service(
            svc, lambda s: s.table(idle) is not None and s.table(idle).runs >= 1 and s.table(idle).run is None, "the manual run"
        )
        assert svc.table(idle).last_run.trigger == "manual"
        assert DeltaLog.for_path(idle).snapshot().configuration == props
        _nothing_selected(spark.sql(f"CALL {OPT}(table => 'idle', dry_run => true)"))

        spark.sql(
            f"ALTER TABLE use_catalog.spark_catalog.{db}.auto SET TBLPROPERTIES ('use.optimization.bytes-per-iter'='5000000')"
        )
        assert "continuous optimization configured" in svc.table(auto).note
        assert svc.table(auto).manual is None
    finally:
        services.stop_all()
    assert active.current() is None


def test_each_iteration_of_a_call_is_labelled_in_the_spark_ui(spark, db) -> None:
    _delta_table(spark)
    spark.sql(f"CALL {OPT}('t')").collect()
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)  # type: ignore[attr-defined]
    labels = [(_option(j.jobGroup()), _option(j.description())) for j in _scala_list(jobs)]
    ours = [(g, d) for g, d in labels if g and g.startswith("use-call-") and d and f"(spark_catalog.{db}.t)" in d]
    assert ours, labels[-5:]
    assert all(d.startswith(f"CALL use_catalog.system.optimize(spark_catalog.{db}.t): binpack ") for _, d in ours), ours


def _option(value):
    return value.get() if value.isDefined() else None


def _scala_list(seq) -> list:
    it = seq.iterator()
    out = []
    while it.hasNext():
        out.append(it.next())
    return out


def test_the_sql_page_documents_every_procedure_and_argument() -> None:
    from pathlib import Path

    from use.sql.procedures import PROCEDURES

    page = (Path(__file__).resolve().parents[2] / "docs" / "sql.md").read_text()
    part = page.split("\n## Procedures\n", 1)[1].split("\n## ", 1)[0]
    for proc in PROCEDURES.values():
        assert f"`{proc.name}`" in part, f"docs/sql.md, Procedures: {proc.name}"
        for p in proc.parameters:
            assert f"`{p.name}`" in part, f"docs/sql.md, Procedures: {proc.name}({p.name})"
