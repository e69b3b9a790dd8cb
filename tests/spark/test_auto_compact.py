"""Delta's auto compaction (`delta.autoOptimize.autoCompact`, `spark.databricks.delta.autoCompact.*`):
a write is followed, before the statement returns, by a compaction of the partitions it wrote that
hold enough small files; a bad setting refuses the statement with nothing written."""

from __future__ import annotations

import json
import os

import pytest

from sql_support import commit_actions, location, refused, rows, state
from use.runtime.conf import session_conf

MIN_FILES = "spark.databricks.delta.autoCompact.minNumFiles"
ENABLED = "spark.databricks.delta.autoCompact.enabled"


def _operations(root: str) -> list[tuple[str, dict]]:
    names = sorted(int(n[:-5]) for n in os.listdir(os.path.join(root, "_delta_log")) if n.endswith(".json"))
    out = []
    for v in names:
        info = next(a["commitInfo"] for a in commit_actions(root, v) if "commitInfo" in a)
        out.append((info["operation"], info))
    return out


def _live_files(root: str) -> list[str]:
    import deltalake

    return deltalake.DeltaTable(root).file_uris()


def test_a_table_with_auto_compaction_is_compacted_after_the_write_that_reaches_min_num_files(spark, db) -> None:
    spark.sql("CREATE TABLE ac (id BIGINT, v STRING) USING delta TBLPROPERTIES ('delta.autoOptimize.autoCompact'='true')")
    root = location(spark, "ac")
    with session_conf(spark, {MIN_FILES: "3"}):
        for lo in (0, 10):
            spark.sql(f"INSERT INTO ac SELECT /*+ REPARTITION(1) */ id, 'x' FROM range({lo}, {lo + 10})")
        assert [op for op, _ in _operations(root)] == ["CREATE TABLE", "WRITE", "WRITE"]  # 2 small files: below 3
        spark.sql("INSERT INTO ac SELECT /*+ REPARTITION(1) */ id, 'x' FROM range(20, 30)")
    ops = _operations(root)
    assert [op for op, _ in ops] == ["CREATE TABLE", "WRITE", "WRITE", "WRITE", "OPTIMIZE"]
    info = ops[-1][1]
    assert info["operationParameters"]["auto"] == "true" and info["operationMetrics"]["numRemovedFiles"] == "3"
    assert len(_live_files(root)) == 1
    import deltalake

    assert sorted(deltalake.DeltaTable(root).to_pyarrow_table().column("id").to_pylist()) == list(range(30))
    assert rows(spark, "SELECT count(*), sum(id) FROM ac") == [(30, sum(range(30)))]
    # the compaction is an event of the table like any optimization
    events = rows(spark, f"SELECT count(*) FROM use_catalog.spark_catalog.{db}.ac.optimizations")
    assert events[0][0] >= 1


def test_only_the_partitions_the_write_added_to_are_compacted(spark, db) -> None:
    spark.sql(
        "CREATE TABLE acp (id BIGINT, day STRING) USING delta PARTITIONED BY (day) "
        "TBLPROPERTIES ('delta.autoOptimize.autoCompact'='true')"
    )
    root = location(spark, "acp")
    with session_conf(spark, {MIN_FILES: "2"}):
        # two files in 'a' and in 'b' with auto compaction off for these statements
        with session_conf(spark, {ENABLED: "false"}):
            for lo in (0, 10):
                spark.sql(
                    f"INSERT INTO acp SELECT /*+ REPARTITION(1) */ id, IF(id % 2 = 0, 'a', 'b') FROM range({lo}, {lo + 10})"
                )
        assert [op for op, _ in _operations(root)].count("OPTIMIZE") == 0
        spark.sql("INSERT INTO acp SELECT /*+ REPARTITION(1) */ id, 'a' FROM range(20, 25)")
    ops = _operations(root)
    assert ops[-1][0] == "OPTIMIZE"
    removed = [a["remove"]["path"] for a in commit_actions(root, len(ops) - 1) if "remove" in a]
    assert len(removed) == 3 and all("day=a" in p for p in removed)
    by_day: dict[str, int] = {}
    for uri in _live_files(root):
        day = "a" if "day=a" in uri else "b"
        by_day[day] = by_day.get(day, 0) + 1
    assert by_day == {"a": 1, "b": 2}  # 'b' was not written by the statement: left alone
    assert rows(spark, "SELECT day, count(*) FROM acp GROUP BY day ORDER BY day") == [("a", 15), ("b", 10)]


def test_the_session_setting_wins_over_the_table_property(spark, db) -> None:
    spark.sql("CREATE TABLE acs (id BIGINT) USING delta")  # no property: off unless the session says
    root = location(spark, "acs")
    with session_conf(spark, {MIN_FILES: "2", ENABLED: "true"}):
        for lo in (0, 10):
            spark.sql(f"INSERT INTO acs SELECT /*+ REPARTITION(1) */ id FROM range({lo}, {lo + 10})")
    assert [op for op, _ in _operations(root)][-1] == "OPTIMIZE"
    spark.sql("ALTER TABLE acs SET TBLPROPERTIES ('delta.autoOptimize.autoCompact'='true')")
    with session_conf(spark, {MIN_FILES: "2", ENABLED: "false"}):
        for lo in (20, 30):
            spark.sql(f"INSERT INTO acs SELECT /*+ REPARTITION(1) */ id FROM range({lo}, {lo + 10})")
    assert [op for op, _ in _operations(root)][-1] == "WRITE"
    assert rows(spark, "SELECT count(*) FROM acs") == [(40,)]


def test_dataframe_writes_dml_and_the_python_api_are_followed_by_it(spark, db, tmp_path) -> None:
    from use import DeltaTable

    path = str(tmp_path / "t")
    with session_conf(spark, {MIN_FILES: "2"}):
        DeltaTable.write(spark.range(5).coalesce(1), path, properties={"delta.autoOptimize.autoCompact": "true"})
        DeltaTable.write(spark.range(5, 10).coalesce(1), path)
        assert _operations(path)[-1][0] == "OPTIMIZE"
        spark.range(10, 15).coalesce(1).write.format("delta").mode("append").save(path)
        spark.range(15, 20).coalesce(1).write.format("delta").mode("append").save(path)
        assert _operations(path)[-1][0] == "OPTIMIZE" and len(_live_files(path)) == 1
        with session_conf(spark, {ENABLED: "false"}):  # a second file, left as it is
            spark.range(20, 25).coalesce(1).write.format("delta").mode("append").save(path)
        assert _operations(path)[-1][0] == "WRITE" and len(_live_files(path)) == 2
        spark.sql(f"UPDATE delta.`{path}` SET id = id + 100 WHERE id = 3")
        assert [op for op, _ in _operations(path)][-2:] == ["UPDATE", "OPTIMIZE"]
    assert sorted(r[0] for r in spark.read.format("delta").load(path).collect()) == sorted(
        [i for i in range(25) if i != 3] + [103]
    )


def test_a_qbeast_table_runs_its_own_optimization(spark, db) -> None:
    spark.sql(
        "CREATE TABLE acq (x DOUBLE, y DOUBLE) USING qbeast "
        "TBLPROPERTIES ('columnsToIndex'='x,y', 'cubeSize'='100', 'delta.autoOptimize.autoCompact'='true')"
    )
    root = location(spark, "acq")
    with session_conf(spark, {MIN_FILES: "3"}):
        for i in range(3):
            spark.sql(f"INSERT INTO acq SELECT /*+ REPARTITION(1) */ rand({i}) * 100, rand({i + 7}) * 100 FROM range(60)")
    ops = _operations(root)
    assert "OPTIMIZE" in [op for op, _ in ops]
    optimize = next(info for op, info in ops if op == "OPTIMIZE")
    assert optimize["operationParameters"]["auto"] == "true"
    assert rows(spark, "SELECT count(*) FROM acq") == [(180,)]
    # the index is kept: every live file belongs to an indexed revision
    from use.qbeast.reader import load_snapshot

    qsnap = load_snapshot(root)
    assert set(qsnap.files.column("revision_id").to_pylist()) - {0} and 0 not in set(
        qsnap.files.column("revision_id").to_pylist()
    )


def test_bad_values_are_refused_and_change_nothing(spark, db) -> None:
    spark.sql("CREATE TABLE acb (id BIGINT) USING delta")
    root = location(spark, "acb")
    spark.sql("INSERT INTO acb VALUES (1)")
    before = state(root)
    with refused("delta.autoOptimize.autoCompact='maybe' must be 'true' or 'false'"):
        spark.sql("ALTER TABLE acb SET TBLPROPERTIES ('delta.autoOptimize.autoCompact'='maybe')")
    assert state(root) == before
    with refused("spark.databricks.delta.autoCompact.enabled='sometimes' must be 'true' or 'false'"):
        with session_conf(spark, {ENABLED: "sometimes"}):
            spark.sql("INSERT INTO acb VALUES (2)")
    assert state(root) == before
    with refused("spark.databricks.delta.autoCompact.minNumFiles='many' must be an integer >= 0"):
        with session_conf(spark, {MIN_FILES: "many"}):
            spark.sql("INSERT INTO acb VALUES (2)")
    assert state(root) == before
    with pytest.raises(Exception, match="autoCompact.enabled='sometimes'"):
        with session_conf(spark, {ENABLED: "sometimes"}):
            from use import DeltaTable

            DeltaTable.write(spark.range(1), root)
    assert state(root) == before
    # Databricks' values are read as on
    spark.sql("ALTER TABLE acb SET TBLPROPERTIES ('delta.autoOptimize.autoCompact'='auto')")
    with session_conf(spark, {MIN_FILES: "2"}):
        spark.sql("INSERT INTO acb VALUES (3)")
    assert _operations(root)[-1][0] == "OPTIMIZE"
    assert json.loads(json.dumps(rows(spark, "SELECT sum(id) FROM acb"))) == [[4]]


def test_who_decides_is_deltas_precedence() -> None:
    from use.errors import ConfigError
    from use.optimize.auto_compact import AutoCompactSettings, enabled

    on, off, unset = AutoCompactSettings(True), AutoCompactSettings(False), AutoCompactSettings()
    prop = "delta.autoOptimize.autoCompact"
    assert not enabled(unset, {}) and enabled(on, {}) and not enabled(off, {prop: "true"})
    assert enabled(unset, {prop: "TRUE"}) and not enabled(unset, {prop: "false"})
    assert enabled(unset, {prop: "auto"}) and enabled(unset, {prop: "legacy"})
    # the legacy flag, when true, wins over the newer property
    assert enabled(unset, {"delta.autoOptimize": "true", prop: "false"})
    assert not enabled(unset, {"delta.autoOptimize": "false"})
    s = AutoCompactSettings.from_conf({"spark.databricks.delta.autoCompact.maxFileSize": "1000"})
    assert (s.enabled, s.min_num_files, s.small_below) == (None, 50, 500)
    s = AutoCompactSettings.from_conf({"spark.databricks.delta.autoCompact.minFileSize": "7"})
    assert s.small_below == 7
    with pytest.raises(ConfigError, match="maxFileSize='0' must be an integer >= 1"):
        AutoCompactSettings.from_conf({"spark.databricks.delta.autoCompact.maxFileSize": "0"})


def test_optimized_writes_make_a_few_files_per_partition(spark, db) -> None:
    """Delta's optimized write (`delta.autoOptimize.optimizeWrite`, `spark.databricks.delta.optimizeWrite.enabled`
    winning over it): a write of many tasks makes one file per partition here, not one per task."""
    spark.sql(
        "CREATE TABLE ow (id BIGINT, p STRING) USING delta PARTITIONED BY (p) TBLPROPERTIES ('delta.autoOptimize.optimizeWrite'='true')"
    )
    spark.sql("CREATE TABLE plain (id BIGINT, p STRING) USING delta PARTITIONED BY (p)")
    query = "SELECT /*+ REPARTITION(4) */ id, IF(id % 2 = 0, 'a', 'b') FROM range(400)"
    spark.sql(f"INSERT INTO ow {query}")
    spark.sql(f"INSERT INTO plain {query}")
    assert len(_live_files(location(spark, "ow"))) == 2 and len(_live_files(location(spark, "plain"))) == 8
    with session_conf(spark, {"spark.databricks.delta.optimizeWrite.enabled": "false"}):
        spark.sql(f"INSERT INTO ow {query}")
    assert len(_live_files(location(spark, "ow"))) == 10
    with session_conf(spark, {"spark.databricks.delta.optimizeWrite.enabled": "true"}):
        spark.sql(f"INSERT INTO plain {query}")
    assert len(_live_files(location(spark, "plain"))) == 10
    assert rows(spark, "SELECT count(*), sum(id) FROM ow") == [(800, 2 * sum(range(400)))]
    root = location(spark, "plain")
    before = state(root)
    with refused(r"spark\.databricks\.delta\.optimizeWrite\.enabled must be true or false, got 'yes'"):
        with session_conf(spark, {"spark.databricks.delta.optimizeWrite.enabled": "yes"}):
            spark.sql(f"INSERT INTO plain {query}")
    assert state(root) == before
