"""`use_catalog`'s tables in-process (issue 12 §1-3, §5): names and namespaces, the events from SQL
against the events in the log, metastore_summary over broken tables and with a running service,
registrations reaching new sessions, each query seeing the latest snapshot, and refused statements
changing nothing. The JDBC side is in sql/insights_*.sql (tests/test_sql_golden.py)."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from sql_support import location, refused, state
from use.optimize.events import EVENT_TAG

INSIGHTS = ("optimizations", "history", "detail", "files", "cubes", "revisions", "layout", "plan")


def qbeast_table(spark, name: str, rows: int = 400, writes: int = 1) -> str:
    spark.sql(f"CREATE TABLE {name} (id INT, x DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='id,x', 'cubeSize'='50')")
    for w in range(writes):
        spark.sql(f"INSERT INTO {name} SELECT CAST(id AS INT), (id % 89) / 89.0 FROM range({w * rows}, {(w + 1) * rows})")
    return location(spark, name)


def log_events(root: str) -> list[dict]:
    """The OptimizationEvents of a table, read straight from its commit files (oldest first)."""
    out = []
    log_dir = os.path.join(root, "_delta_log")
    for name in sorted(n for n in os.listdir(log_dir) if n.endswith(".json")):
        with open(os.path.join(log_dir, name)) as f:
            for line in f:
                info = json.loads(line).get("commitInfo")
                tag = ((info or {}).get("tags") or {}).get(EVENT_TAG)
                if tag:
                    out.append({**json.loads(tag), "version": int(name.split(".")[0])})
    return out


def test_events_from_sql_equal_the_events_in_the_log(spark, db) -> None:
    from use import QbeastTable

    root = qbeast_table(spark, "t", rows=300, writes=3)
    QbeastTable.for_path(spark, root).optimize(progress=False)
    expected = log_events(root)
    assert len(expected) >= 1, "the optimize wrote no event: the test table needs more fragmentation"

    rows = [
        r.asDict(recursive=True)
        for r in spark.sql(f"SELECT * FROM use_catalog.spark_catalog.{db}.t.optimizations ORDER BY version").collect()
    ]
    assert [r["version"] for r in rows] == [e["version"] for e in expected]
    for row, event in zip(rows, expected, strict=False):
        for field in ("optimization_name", "write_id", "table_id", "revision_id", "started_at", "finished_at", "process_time_ms"):
            assert row[field] == event[field], field
        for side in ("input_files_stats", "output_files_stats"):
            assert {k: list(v) if isinstance(v, list) else v for k, v in row[side].items()} == event[side], side
    # the same rows by location and in the lake-wide table, with the table's name
    by_path = spark.sql(f"SELECT version FROM use_catalog.path.`{root}`.optimizations ORDER BY version").collect()
    assert [r[0] for r in by_path] == [e["version"] for e in expected]
    lake = spark.sql(
        f"SELECT catalog, table_name, version FROM use_catalog.system_lake_tables.optimizations WHERE database = '{db}' ORDER BY version"
    ).collect()
    assert [tuple(r) for r in lake] == [("spark_catalog", "t", e["version"]) for e in expected]
    history = spark.sql(
        f"SELECT version FROM use_catalog.spark_catalog.{db}.t.history WHERE is_optimization ORDER BY version"
    ).collect()
    assert [r[0] for r in history] == [e["version"] for e in expected]


def test_describe_history_and_detail_read_the_insights(spark, db) -> None:
    """Delta users type DESCRIBE HISTORY; without Delta's parser Spark read it as a column of a table
    named HISTORY ("table HISTORY cannot be found")."""
    root = qbeast_table(spark, "t", rows=50, writes=2)
    versions = [
        r[0] for r in spark.sql(f"SELECT version FROM use_catalog.spark_catalog.{db}.t.history ORDER BY version DESC").collect()
    ]
    assert versions == [2, 1, 0]
    for name in ("t", f"{db}.t", f"spark_catalog.{db}.t", f"delta.`{root}`"):
        for verb in ("DESCRIBE HISTORY", "DESC history"):
            rows = spark.sql(f"{verb} {name}").collect()
            assert [r["version"] for r in rows] == versions, (verb, name)
            assert rows[0]["operation"] == "WRITE"
    # Delta's LIMIT (the newest n commits) and a table by its quoted location, which Spark's grammar cannot read
    assert [r["version"] for r in spark.sql(f"DESCRIBE HISTORY {db}.t LIMIT 1").collect()] == versions[:1]
    assert [r["version"] for r in spark.sql(f"desc history delta.`{root}` limit 2 ;").collect()] == versions[:2]
    assert spark.sql("DESCRIBE HISTORY t LIMIT 0").collect() == []
    assert [r["version"] for r in spark.sql(f"DESCRIBE HISTORY '{root}'").collect()] == versions
    assert [r["version"] for r in spark.sql(f'DESCRIBE HISTORY "{root}" LIMIT 2').collect()] == versions[:2]
    for bad in ("-1", "x", "1.5"):
        with refused(f"USE_INVALID_ARGUMENT_ERROR.*LIMIT takes .*got '{re.escape(bad)}'"):
            spark.sql(f"DESCRIBE HISTORY t LIMIT {bad}")
    with refused("PARSE_SYNTAX_ERROR"):  # every other statement is Spark's parser's, its errors too
        spark.sql("SELEC 1")
    # a missing table is named as written, as OPTIMIZE and RESTORE name it, not as the insight table read for it
    missing = r"USE_TABLE_NOT_FOUND_ERROR\] no table spark_catalog.nosuchdb.nosuch \(from 'spark_catalog.nosuchdb.nosuch'\)"
    with refused(missing):
        spark.sql("DESCRIBE HISTORY spark_catalog.nosuchdb.nosuch").collect()
    with refused(missing):
        spark.sql("DESCRIBE HISTORY spark_catalog.nosuchdb.nosuch LIMIT 3").collect()
    gone = f"{root}-gone"
    for statement in (f"DESCRIBE HISTORY '{gone}'", f"DESCRIBE DETAIL delta.`{gone}`"):
        with refused(f"USE_TABLE_NOT_FOUND_ERROR.*has no Delta log at {re.escape(gone)}"):
            spark.sql(statement).collect()
    # DESCRIBE DETAIL: the `detail` insight, one row
    for statement, name in ((f"DESCRIBE DETAIL {db}.t", f"spark_catalog.{db}.t"), (f"desc detail '{root}'", None),
                            (f"DESCRIBE DETAIL delta.`{root}`", None)):  # fmt: skip
        (detail,) = spark.sql(statement).collect()
        assert (detail["format"], detail["name"], detail["location"]) == ("qbeast", name, root), statement
        assert detail["numFiles"] >= 1 and detail["sizeInBytes"] > 0 and "qbeast.revision.1" in detail["properties"]
    with refused(f"USE_TABLE_NOT_FOUND_ERROR\\] no table spark_catalog.{db}.nosuch \\(from 'nosuch'\\)"):
        spark.sql("DESCRIBE DETAIL nosuch").collect()
    # a table really named history (or detail) keeps DESCRIBE's own meaning (a column of it)
    spark.sql("CREATE TABLE history (id INT) USING delta")
    assert spark.sql("DESCRIBE history id").collect()[0][0] == "col_name"
    spark.sql("CREATE TABLE detail (id INT) USING delta")
    assert spark.sql("DESCRIBE detail id").collect()[0][0] == "col_name"


def test_describe_history_and_detail_have_deltas_columns(spark, db, tmp_path) -> None:
    """DESCRIBE HISTORY / DETAIL answer in the columns of Delta's statements (names, order, types),
    so scripts written for Delta (`operationMetrics`, `numFiles`) read them; `history()` of the
    Python API is the same. Other writers' commitInfo fields (a Databricks commit's user, job,
    notebook, cluster) are shown, here written by delta-rs's custom commit metadata."""
    import deltalake

    from use import DeltaTable

    path = str(tmp_path / "t")
    data = spark.range(3).selectExpr("id").toArrow()
    deltalake.write_deltalake(path, data)
    job = {"jobId": "7", "jobName": "nightly", "jobRunId": "70", "runId": "71", "jobOwnerId": "9", "triggerType": "cron"}
    deltalake.write_deltalake(path, data, mode="append", commit_properties=deltalake.CommitProperties(custom_metadata={
        "userId": "42", "userName": "ana@example.com", "clusterId": "0101-abc", "job": job, "notebook": {"notebookId": "5"},
    }))  # fmt: skip
    history = spark.sql(f"DESCRIBE HISTORY '{path}'")
    assert history.columns == [
        "version", "timestamp", "userId", "userName", "operation", "operationParameters", "job", "notebook", "clusterId",
        "readVersion", "isolationLevel", "isBlindAppend", "operationMetrics", "userMetadata", "engineInfo",
    ]  # fmt: skip
    assert history.schema == DeltaTable.for_path(spark, path).history().schema
    newest, first = history.collect()
    assert (newest.version, newest.userId, newest.userName, newest.clusterId) == (1, "42", "ana@example.com", "0101-abc")
    assert newest.job.asDict() == job and newest.notebook.notebookId == "5" and newest.operationMetrics
    assert (first.userName, first.job, first.notebook) == (None, None, None)
    assert DeltaTable.for_path(spark, path).history().collect() == [newest, first]
    detail = spark.sql(f"DESCRIBE DETAIL '{path}'")
    assert detail.columns == [
        "format", "id", "name", "description", "location", "createdAt", "lastModified", "partitionColumns",
        "clusteringColumns", "numFiles", "sizeInBytes", "properties", "minReaderVersion", "minWriterVersion", "tableFeatures",
    ]  # fmt: skip
    assert dict(detail.dtypes)["minReaderVersion"] == "int" and detail.collect()[0].numFiles == 2


def test_every_insight_table_reads_and_has_the_python_api_schema(spark, db) -> None:
    from use import insights
    from use.sql.lake import LAKE_TABLES, lake_schema

    qbeast_table(spark, "t", rows=200)
    for name in INSIGHTS:
        df = spark.sql(f"SELECT * FROM use_catalog.spark_catalog.{db}.t.{name}")
        assert df.columns == insights.schema(name).names, name
        df.collect()
    for name in LAKE_TABLES:
        assert spark.table(f"use_catalog.system_lake_tables.{name}").columns == lake_schema(name).names


def test_namespaces_and_table_lists_mirror_the_session(spark, db) -> None:
    qbeast_table(spark, "t", rows=50)
    top = [r[0] for r in spark.sql("SHOW NAMESPACES IN use_catalog").collect()]
    assert {"spark_catalog", "path", "system_lake_tables"} <= set(top) and "use_catalog" not in top
    assert f"spark_catalog.{db}" in [r[0] for r in spark.sql("SHOW NAMESPACES IN use_catalog.spark_catalog").collect()]
    assert [r[0] for r in spark.sql(f"SHOW NAMESPACES IN use_catalog.spark_catalog.{db}").collect()] == [f"spark_catalog.{db}.t"]
    assert [r[1] for r in spark.sql(f"SHOW TABLES IN use_catalog.spark_catalog.{db}").collect()] == ["t"]
    assert [r[1] for r in spark.sql(f"SHOW TABLES IN use_catalog.spark_catalog.{db}.t").collect()] == list(INSIGHTS)
    lake = [r[1] for r in spark.sql("SHOW TABLES IN use_catalog.system_lake_tables").collect()]
    assert lake == ["metastore_summary", "optimizations", "service_status"]
    # the table itself is a name only: its schema, no rows (read it in its own catalog)
    described = [tuple(r)[:2] for r in spark.sql(f"DESCRIBE TABLE use_catalog.spark_catalog.{db}.t").collect()]
    assert described == [("id", "int"), ("x", "double")]


def test_each_query_sees_the_latest_snapshot_and_new_sessions_have_the_readers(spark, db) -> None:
    from use import QbeastTable

    root = qbeast_table(spark, "t", rows=100)
    query = f"SELECT max(version) FROM use_catalog.spark_catalog.{db}.t.history"
    assert spark.sql(query).collect()[0][0] == 1
    QbeastTable.write(
        spark.range(10).selectExpr("CAST(id AS INT) AS id", "CAST(0.5 AS DOUBLE) AS x"), root, "id,x"
    )  # another writer
    assert spark.sql(query).collect()[0][0] == 2
    other = spark.newSession()  # as each JDBC connection of the Thrift server is
    assert other.sql(query).collect()[0][0] == 2
    assert other.sql("SELECT count(*) FROM use_catalog.system_lake_tables.service_status").collect()[0][0] == 0


def test_metastore_summary_shows_the_properties_another_writer_set(spark, db) -> None:
    import deltalake

    root = qbeast_table(spark, "t", rows=10)
    deltalake.DeltaTable(root).alter.set_table_properties(
        {"use.optimization.type": "CubeDefragmentation"}, raise_if_not_exists=False
    )
    rows = spark.sql(
        "SELECT database, table_name FROM use_catalog.system_lake_tables.metastore_summary "
        "WHERE table_properties['use.optimization.type'] is not null"
    ).collect()
    assert (db, "t") in {(r.database, r.table_name) for r in rows}


def test_metastore_summary_lists_every_table_and_a_broken_one_gets_its_error(spark, db, tmp_path) -> None:
    from service_support import corrupt_log

    qbeast_table(spark, "ok", rows=100)
    spark.sql(f"CREATE TABLE gone (id INT) USING delta LOCATION '{tmp_path / 'gone'}'")
    spark.sql("INSERT INTO gone VALUES (1)")
    spark.sql(f"CREATE TABLE corrupt (id INT) USING delta LOCATION '{tmp_path / 'corrupt'}'")
    spark.sql("INSERT INTO corrupt VALUES (1)")
    spark.sql("CREATE TABLE pq (id INT) USING parquet")
    spark.sql("ALTER TABLE ok SET TBLPROPERTIES ('use.optimization.type'='CubeDefragmentation')")
    shutil.rmtree(tmp_path / "gone")
    corrupt_log(str(tmp_path / "corrupt"))

    # the seeds' queries, verbatim: one row per table of every namespace of spark_catalog
    every = spark.sql("SELECT * FROM use_catalog.system_lake_tables.metastore_summary").collect()
    databases = [r[0] for r in spark.sql("SHOW DATABASES").collect()]
    tables = sum(len(spark.sql(f"SHOW TABLES IN {d}").where("NOT isTemporary").collect()) for d in databases)
    assert len(every) == tables
    scheduled = spark.sql(
        "SELECT * FROM use_catalog.system_lake_tables.metastore_summary WHERE table_properties['use.optimization.type'] is not null"
    ).collect()
    assert (db, "ok") in {(r.database, r.table_name) for r in scheduled}

    rows = {r.table_name: r for r in every if r.database == db}
    assert sorted(rows) == ["corrupt", "gone", "ok", "pq"]
    assert rows["ok"].error is None and rows["ok"].is_qbeast and rows["ok"].num_records == 100
    assert rows["ok"].optimization_state == "not served"
    assert rows["ok"].optimization_settings == {"use.optimization.type": "CubeDefragmentation"}
    assert "TableNotFoundError" in rows["gone"].error and rows["gone"].num_files is None
    assert rows["corrupt"].error and rows["corrupt"].latest_version is None
    assert rows["pq"].provider == "parquet" and rows["pq"].error is None and rows["pq"].num_files is None


def test_metastore_summary_and_service_status_show_the_running_service(spark, db, tmp_path) -> None:
    from service_support import await_service
    from use.optimize.config import ServiceConfig
    from use.service import LocationSource, OptimizationService

    root = qbeast_table(spark, "t", rows=100)
    service = OptimizationService(LocationSource([root]), tmp_path / "state", config=ServiceConfig(3600.0, 1, 3600.0))
    service.start(spark)
    try:
        await_service(service, lambda s: s.table(root) is not None, "the service to know the table")
        known = service.table(root)
        row = spark.sql(
            f"SELECT optimization_state FROM use_catalog.system_lake_tables.metastore_summary WHERE database = '{db}'"
        ).collect()
        assert [r[0] for r in row] == [known.state]
        status = spark.sql("SELECT table_name, status FROM use_catalog.system_lake_tables.service_status").collect()
        assert [tuple(r) for r in status] == [(r["table_name"], r["status"]) for r in service.status().to_pylist()]
    finally:
        service.stop()
    after = spark.sql(f"SELECT optimization_state FROM use_catalog.system_lake_tables.metastore_summary WHERE database = '{db}'")
    assert [r[0] for r in after.collect()] == ["not served"]


@pytest.mark.parametrize(
    "name, message",
    [
        ("{db}.t.nope", "the valid names are optimizations, history, detail, files, cubes, revisions, layout, plan"),
        ("{db}.missing.files", "there is no table spark_catalog.{db}.missing"),
        ("system_lake_tables_x.t.files", "TABLE_OR_VIEW_NOT_FOUND"),
    ],
)
def test_unknown_names_are_table_or_view_not_found_with_the_valid_names(spark, db, name, message) -> None:
    from pyspark.errors import AnalysisException

    qbeast_table(spark, "t", rows=20)
    full = "use_catalog." + ("spark_catalog." if name.startswith("{db}") else "") + name.format(db=db)
    with pytest.raises(AnalysisException) as info:
        spark.sql(f"SELECT * FROM {full}").collect()
    assert info.value.getCondition() == "TABLE_OR_VIEW_NOT_FOUND"
    assert message.format(db=db) in str(info.value)
    with pytest.raises(AnalysisException, match="metastore_summary, optimizations, service_status"):
        spark.sql("SELECT * FROM use_catalog.system_lake_tables.nope")


def test_refused_statements_change_nothing(spark, db) -> None:
    root = qbeast_table(spark, "t", rows=50)
    spark.sql("CREATE TABLE pq (id INT) USING parquet")
    before = state(root)
    ns = f"use_catalog.spark_catalog.{db}"
    with refused("parquet table: insight tables exist for Delta and Qbeast tables only"):
        spark.sql(f"SELECT * FROM {ns}.pq.files").collect()
    with refused("CREATE TABLE is not possible in use_catalog"):
        spark.sql(f"CREATE TABLE {ns}.n (id INT)")
    with refused("DROP TABLE is not possible in use_catalog"):
        spark.sql(f"DROP TABLE {ns}.t.files")
    with refused("DROP TABLE is not possible in use_catalog"):
        spark.sql(f"DROP TABLE {ns}.t")
    with refused("RENAME is not possible in use_catalog"):
        spark.sql(f"ALTER TABLE {ns}.t.files RENAME TO {ns}.t.f2")
    with refused("does not support append"):
        spark.sql(f"INSERT INTO {ns}.t.files SELECT * FROM {ns}.t.files")
    with refused("CREATE NAMESPACE is not possible in use_catalog"):
        spark.sql("CREATE NAMESPACE use_catalog.spark_catalog.new_db")
    assert state(root) == before
    assert spark.sql(f"SELECT count(*) FROM {db}.t").collect()[0][0] == 50
    assert not spark.catalog.databaseExists("new_db")
    assert [r.tableName for r in spark.sql("SHOW TABLES").collect() if not r.isTemporary] == ["pq", "t"]


def _set_configuration_as_another_writer(root: str, **changes: str) -> None:
    """Change the table's configuration in one metaData commit, unchecked (as delta-rs or any
    other writer may), so the log holds settings USE's own ALTER TABLE would refuse."""
    from dataclasses import replace

    from use.delta import DeltaLog
    from use.delta.transaction import Transaction

    log = DeltaLog.for_path(root)
    snap = log.snapshot()
    txn = Transaction(log, snap)
    txn.add(replace(snap.metadata, configuration={**snap.metadata.configuration, **changes}))
    txn.commit("SET TBLPROPERTIES", {})


def test_bad_settings_are_one_clean_error_when_the_query_is_planned(spark, db) -> None:
    """`layout` and `plan` compute in a Python worker; a bad session default or table property
    reaches the client as the one USE error (its class and SQLSTATE), raised when the query is
    planned on the driver, never a Python traceback inside a failed Spark job."""
    from pyspark.errors import AnalysisException

    root = qbeast_table(spark, "t", rows=50)
    other = spark.newSession()  # a JDBC connection's session: its SET are its own
    ns = f"use_catalog.spark_catalog.{db}.t"

    def refused_with(session, insight: str, match: str) -> None:
        with refused(match):
            session.sql(f"SELECT * FROM {ns}.{insight}").collect()
        with pytest.raises(AnalysisException) as info:
            session.sql(f"SELECT * FROM {ns}.{insight}")
        assert info.value.getSqlState() == "22023", str(info.value)

    for key, value, match in [
        ("bytes-per-iter", "-5", r"\[USE_CONFIG_ERROR\] bad value '-5' for spark.qbeast.use.optimization.bytes-per-iter"),
        ("bogus", "1", r"\[USE_CONFIG_ERROR\] unknown optimization key 'spark.qbeast.use.optimization.bogus'"),
    ]:
        other.conf.set(f"spark.qbeast.use.optimization.{key}", value)
        for insight in ("layout", "plan"):
            refused_with(other, insight, match)
        other.conf.unset(f"spark.qbeast.use.optimization.{key}")
    assert other.sql(f"SELECT * FROM {ns}.layout").count() == 1

    before = state(root)
    # well-formed, no such revision: ALTER refuses it, another writer can still commit it
    with refused(r"\[USE_CONFIG_ERROR\] use.optimization.revision-id=7: the table has no such revision"):
        spark.sql("ALTER TABLE t SET TBLPROPERTIES ('use.optimization.revision-id'='7')")
    _set_configuration_as_another_writer(root, **{"use.optimization.revision-id": "7"})
    refused_with(spark, "plan", r"\[USE_CONFIG_ERROR\] use.optimization.revision-id=7: the table has no such revision")
    _set_configuration_as_another_writer(root, **{"use.optimization.open-file-cost": "lots"})
    for insight in ("layout", "plan"):
        refused_with(spark, insight, r"\[USE_CONFIG_ERROR\] bad value 'lots' for use.optimization.open-file-cost")
    assert spark.sql(f"SELECT count(*) FROM {ns}.files").collect()[0][0] == len(before[1])  # no setting read


def test_python_api_insight_equals_the_sql_table(spark, db) -> None:
    from use import DeltaTable, QbeastTable

    root = qbeast_table(spark, "q", rows=100)
    spark.sql("CREATE TABLE d (id INT) USING delta")
    spark.sql("INSERT INTO d VALUES (1), (2)")
    for table, name in ((QbeastTable.for_path(spark, root), "q"), (DeltaTable.for_path(spark, location(spark, "d")), "d")):
        for insight in ("files", "revisions"):
            api = table.insight(insight).to_pylist()
            sql = [
                r.asDict(recursive=True)
                for r in spark.sql(f"SELECT * FROM use_catalog.spark_catalog.{db}.{name}.{insight}").collect()
            ]
            key = "path" if insight == "files" else "revision_id"
            # Arrow gives a map as (key, value) pairs, Spark as a dict
            simple = [
                {
                    k: dict(v) if k == "partition_values" else v
                    for k, v in r.items()
                    if k not in ("modification_time", "timestamp")
                }
                for r in sorted(api, key=lambda r: r[key])
            ]
            got = [
                {k: v for k, v in r.items() if k != "modification_time" and k != "timestamp"}
                for r in sorted(sql, key=lambda r: r[key])
            ]
            assert got == simple, (name, insight)


def test_a_lake_of_many_tables_is_read_in_table_ranges_that_add_up_to_the_whole(tmp_path) -> None:
    import pyarrow as pa

    from use.sql.insight_source import TABLES_PER_PARTITION, InsightReader, TableRange
    from use.sql.lake import compute

    n = TABLES_PER_PARTITION * 2 + 3
    tables = [
        {
            "catalog": "spark_catalog",
            "database": "d",
            "table_name": f"t{i}",
            "provider": "delta",
            "location": str(tmp_path / f"t{i}"),
        }
        for i in range(n)
    ]  # no table exists there: every row carries its error, none fails the read
    options = {"kind": "lake", "insight": "metastore_summary", "tables": json.dumps(tables), "spark_conf": "{}"}
    ranges = InsightReader(options, None).partitions()  # type: ignore[arg-type]
    assert [(r.start, r.stop) for r in ranges] == [
        (0, TABLES_PER_PARTITION),
        (TABLES_PER_PARTITION, 2 * TABLES_PER_PARTITION),
        (2 * TABLES_PER_PARTITION, n),
    ] and all(isinstance(r, TableRange) for r in ranges)
    parts = pa.concat_tables([compute(options, tables=(r.start, r.stop)) for r in ranges])
    assert parts.equals(compute(options))
    assert parts.column("table_name").to_pylist() == [f"t{i}" for i in range(n)]
    assert all("TableNotFoundError" in e for e in parts.column("error").to_pylist())
    assert [type(p).__name__ for p in InsightReader({"kind": "table"}, None).partitions()] == ["InputPartition"]  # type: ignore[arg-type]


def test_small_tables_score_as_their_plan_says(spark, db, tmp_path) -> None:
    """A table of a few KB in two files, and one of three partitions of two files each: nothing is
    worth rewriting, so the plan is empty and the score 100; a third file per partition is worth a
    merge, and the parts say what the score lost to it (docs/insights.md)."""
    spark.sql(f"CREATE TABLE w1 USING delta LOCATION '{tmp_path}/w1' AS SELECT /*+ REPARTITION(2) */ id FROM range(10)")
    one_file_per_partition = "SELECT /*+ REPARTITION(1) */ id, id % 3 AS p FROM range({}, {})"
    spark.sql(
        f"CREATE TABLE w2 USING delta PARTITIONED BY (p) LOCATION '{tmp_path}/w2' AS {one_file_per_partition.format(0, 30)}"
    )
    spark.sql(f"INSERT INTO w2 {one_file_per_partition.format(30, 60)}")

    def figures(name: str) -> tuple:
        (layout,) = spark.sql(f"SELECT * FROM use_catalog.spark_catalog.{db}.{name}.layout").collect()
        (summary,) = spark.sql(
            f"SELECT * FROM use_catalog.system_lake_tables.metastore_summary WHERE database = '{db}' AND table_name = '{name}'"
        ).collect()
        plan = [
            r
            for r in spark.sql(f"CALL use_catalog.system.optimize(table => '{name}', dry_run => true)").collect()
            if r.kind != "none"
        ]
        assert summary.health_score == pytest.approx(layout.health_score)
        assert sum(summary.health_parts.values()) == pytest.approx(100 - summary.health_score)
        return layout, summary, plan

    layout, summary, plan = figures("w1")
    assert (layout.num_files, layout.ideal_files) == (2, 1) and layout.bytes < 10_000
    assert (layout.health_score, summary.health_score, summary.pending_bytes, plan) == (100.0, 100.0, 0, [])
    assert dict(layout.health_parts) == {"scan": 0.0}
    layout, summary, plan = figures("w2")
    files = spark.sql(f"SELECT partition_values FROM use_catalog.spark_catalog.{db}.w2.files").collect()
    per_partition = {tuple(sorted(r.partition_values.items())) for r in files}
    assert (len(per_partition), layout.num_files, layout.ideal_files) == (3, 6, 3)
    assert (layout.health_score, summary.pending_bytes, plan) == (100.0, 0, [])
    spark.sql(f"INSERT INTO w2 {one_file_per_partition.format(60, 90)}")
    layout, summary, plan = figures("w2")
    assert (layout.num_files, layout.ideal_files) == (9, 3)
    assert summary.pending_bytes > 0 and layout.health_score < 100.0 and len(plan) > 0
    assert summary.health_parts["scan"] == pytest.approx(100 - summary.health_score)
