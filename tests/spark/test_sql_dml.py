"""SQL DELETE and UPDATE on Delta and Qbeast tables: copy-on-write, one commit, readable by delta-rs."""

from __future__ import annotations

import json
import os

import pytest

from sql_support import commit_actions, location, refused, rows, state


def _delta_rs_rows(root: str, column: str) -> list:
    import deltalake

    return sorted(deltalake.DeltaTable(root).to_pyarrow_table().column(column).to_pylist())


def _last_commit(root: str) -> tuple[dict, list[dict]]:
    names = sorted(n for n in os.listdir(os.path.join(root, "_delta_log")) if n.endswith(".json"))
    actions = commit_actions(root, int(names[-1][:-5]))
    return next(a["commitInfo"] for a in actions if "commitInfo" in a), actions


def test_delete_rewrites_only_the_files_holding_matching_rows(spark, db) -> None:
    spark.sql("CREATE TABLE d (id BIGINT, v STRING) USING delta")
    for lo in (0, 100, 200):  # three appends: the condition matches rows of one of them only
        spark.sql(f"INSERT INTO d SELECT /*+ REPARTITION(1) */ id, CAST(id AS STRING) FROM range({lo}, {lo + 100})")
    root = location(spark, "d")
    assert spark.sql("DELETE FROM d WHERE id % 10 = 3 AND id < 100").collect()[0][0] == 10
    assert rows(spark, "SELECT count(*) FROM d") == [(290,)]
    info, actions = _last_commit(root)
    assert info["operation"] == "DELETE" and json.loads(info["operationParameters"]["predicate"]) != ["true"]
    metrics = info["operationMetrics"]
    assert (metrics["numRemovedFiles"], metrics["numAddedFiles"], metrics["numDeletedRows"], metrics["numCopiedRows"]) == (
        "1", "1", "10", "90",
    )  # fmt: skip
    assert all(a["remove"]["dataChange"] for a in actions if "remove" in a)
    assert _delta_rs_rows(root, "id") == sorted(i for i in range(300) if not (i % 10 == 3 and i < 100))
    # nothing matches: no commit; a row whose condition is null stays
    before = state(root)
    assert spark.sql("DELETE FROM d WHERE id > 1000").collect()[0][0] == 0
    assert state(root) == before
    spark.sql("INSERT INTO d VALUES (NULL, 'n')")
    spark.sql("DELETE FROM d WHERE id > 250")
    assert rows(spark, "SELECT count(*) FROM d WHERE id IS NULL") == [(1,)]
    # a subquery in the condition
    spark.sql("DELETE FROM d WHERE id IN (SELECT id FROM range(0, 300, 2))")
    assert rows(spark, "SELECT count(*) FROM d WHERE id % 2 = 0") == [(0,)]
    # no condition: every file goes, nothing is read
    spark.sql("DELETE FROM d")
    assert rows(spark, "SELECT count(*) FROM d") == [(0,)] and _delta_rs_rows(root, "id") == []
    assert rows(spark, "SELECT count(*) FROM d VERSION AS OF 3") == [(300,)]  # the history stays


def test_delete_by_partition_removes_whole_files(spark, db) -> None:
    spark.sql("CREATE TABLE p (id BIGINT, day STRING) USING delta PARTITIONED BY (day)")
    spark.sql("INSERT INTO p SELECT id, CASE WHEN id < 40 THEN 'a' WHEN id < 70 THEN 'b' ELSE 'c' END FROM range(100)")
    root = location(spark, "p")
    assert spark.sql("DELETE FROM p WHERE day IN ('a', 'c')").collect()[0][0] == 70
    info, actions = _last_commit(root)
    assert info["operationMetrics"]["numAddedFiles"] == "0" and not any("add" in a for a in actions)
    assert rows(spark, "SELECT DISTINCT day FROM p") == [("b",)]
    # a condition on a partition and a data column rewrites the partition's files only
    spark.sql("DELETE FROM p WHERE day = 'b' AND id < 50")
    assert rows(spark, "SELECT min(id), count(*) FROM p") == [(50, 20)]
    assert _delta_rs_rows(root, "id") == list(range(50, 70))


def test_delete_from_a_qbeast_table_keeps_reads_and_samples_exact(spark, db) -> None:
    from use import QbeastTable

    spark.sql("CREATE TABLE q (x DOUBLE, y DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='x,y', 'cubeSize'='200')")
    spark.sql("INSERT INTO q SELECT rand(1) * 100, rand(2) * 100 FROM range(3000)")
    root = location(spark, "q")
    qt = QbeastTable.for_path(spark, root)
    expected = sorted(r for r in qt.read().collect() if not r.x < 20)
    spark.sql("DELETE FROM q WHERE x < 20")
    assert sorted(qt.read().collect()) == expected
    assert rows(spark, "SELECT count(*) FROM q WHERE x < 20") == [(0,)]
    # a sample is still exactly the rows under the sample's weight: the reference is the same rows
    # written at once, whose sample holds the same rows as ours
    sample = {tuple(r) for r in spark.sql("SELECT * FROM q TABLESAMPLE (10 PERCENT)").collect()}
    ref = root + "_ref"
    QbeastTable.write(spark.createDataFrame(expected), ref, ["x", "y"], cube_size=200)
    assert sample == {tuple(r) for r in QbeastTable.for_path(spark, ref).read(sample=0.1).collect()}
    # the optimizer indexes the rewritten (staging) files again
    qt.optimize(progress=False)
    assert 0 not in set(qt.snapshot().files.column("revision_id").to_pylist())
    assert sorted(qt.read().collect()) == expected


def test_bad_deletes_are_refused_and_change_nothing(spark, db) -> None:
    spark.sql("CREATE TABLE a (id BIGINT) USING delta TBLPROPERTIES ('delta.appendOnly'='true')")
    spark.sql("INSERT INTO a SELECT id FROM range(10)")
    root = location(spark, "a")
    before = state(root)
    with refused("USE_TABLE_CONSTRAINT_ERROR.*append-only.*UNSET TBLPROPERTIES"):
        spark.sql("DELETE FROM a WHERE id = 1")
    assert state(root) == before
    spark.sql("ALTER TABLE a UNSET TBLPROPERTIES ('delta.appendOnly')")
    before = state(root)
    with refused("USE_INVALID_ARGUMENT_ERROR.*not deterministic"):
        spark.sql("DELETE FROM a WHERE rand() < 0.5")
    with refused("UNRESOLVED_COLUMN"):
        spark.sql("DELETE FROM a WHERE nope = 1")
    spark.sql("CREATE VIEW av AS SELECT * FROM a")
    with refused(r"USE_NOT_SUPPORTED_ERROR.*DELETE on the view .*av is not supported: run it on the table"):
        spark.sql("DELETE FROM av WHERE id = 1")
    with refused(r"USE_NOT_SUPPORTED_ERROR.*UPDATE on the view"):
        spark.sql("UPDATE av SET id = 0")
    assert state(root) == before and rows(spark, "SELECT count(*) FROM a") == [(10,)]


def test_delete_by_path_and_a_concurrent_compaction_is_a_conflict(spark, tmp_path) -> None:
    """A table named by its path deletes as a registered one. The commit declares the files it
    rewrites read: when a compaction removed one since the DELETE planned, the commit is refused
    (the shim then runs the DELETE again on the new snapshot), so no deleted row comes back."""
    from pathlib import Path

    from use import DeltaTable
    from use.delta import DeltaLog
    from use.delta.commit_options import NO_COMMIT_OPTIONS
    from use.errors import ConcurrentDeleteReadError
    from use.sql.dml import rewrite_rows
    from use.sql.protocol import RewriteRowsRequest, TableRef
    from use.sql.scan import file_uris

    path = str(tmp_path / "t")
    for lo in (0, 50):
        spark.range(lo, lo + 50, numPartitions=1).write.format("delta").mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 5")
    assert rows(spark, f"SELECT count(*) FROM delta.`{path}`") == [(95,)]

    planned = DeltaLog.for_path(path).snapshot()
    first = file_uris(Path(path).as_uri(), planned.files.column("path").to_pylist())[:1]
    DeltaTable.for_path(spark, path).optimize(strategy="BinPacking", progress=False)  # removes every file
    before = state(path)
    request = RewriteRowsRequest("DELETE", TableRef(path, path), planned.version, "id < 50", tuple(first), whole_files=True)
    with pytest.raises(ConcurrentDeleteReadError):
        rewrite_rows(spark, request, [], NO_COMMIT_OPTIONS)
    assert state(path) == before and rows(spark, f"SELECT count(*) FROM delta.`{path}`") == [(95,)]


def test_a_delete_that_loses_to_a_compaction_runs_again_on_the_new_snapshot(spark, tmp_path, monkeypatch) -> None:
    """A real race: the first attempt's commit comes after a compaction of the files it read (run
    from inside the bridge call, before the DELETE's own commit, as another process's optimizer,
    which does not see this process's statements, would); the shim plans again and the second
    attempt commits. The deleted rows stay deleted and every other row stays."""
    from dataclasses import replace

    import use.sql.bridge as bridge
    from use import DeltaTable
    from use.delta.storage import resolve_table_root
    from use.optimize import yielding
    from use.sql.dml import rewrite_rows

    path = str(tmp_path / "t")
    for lo in (0, 50):
        spark.range(lo, lo + 50, numPartitions=1).write.format("delta").mode("append").save(path)
    calls = []

    def racing(spark_, req, args, commit_options):
        calls.append(req.version)
        if len(calls) == 1:
            root = resolve_table_root(path)
            yielding.end(root)  # another process: it does not wait for this statement
            try:
                DeltaTable.for_path(spark, path).optimize(strategy="BinPacking", progress=False)
            finally:
                yielding.begin(root)
        return rewrite_rows(spark_, req, args, commit_options)

    methods = bridge._registered._methods
    monkeypatch.setitem(methods, "rewriteRows", replace(methods["rewriteRows"], run=racing))
    assert spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 0").collect()[0][0] == 10
    assert len(calls) == 2 and calls[1] > calls[0]
    assert rows(spark, f"SELECT count(*), sum(id) FROM delta.`{path}`") == [(90, sum(i for i in range(100) if i % 10))]
    assert [h["operation"] for h in _history(path)][-2:] == ["OPTIMIZE", "DELETE"]


def _racing(monkeypatch, race) -> list[int]:
    """The bridge's rewriteRows with `race()` run before the first attempt commits (as another
    process would commit meanwhile); returns the snapshot version each attempt read."""
    from dataclasses import replace

    import use.sql.bridge as bridge
    from use.sql.dml import rewrite_rows

    calls: list[int] = []

    def racing(spark_, req, args, commit_options):
        calls.append(req.version)
        if len(calls) == 1:
            race()
        return rewrite_rows(spark_, req, args, commit_options)

    methods = bridge._registered._methods
    monkeypatch.setitem(methods, "rewriteRows", replace(methods["rewriteRows"], run=racing))
    return calls


def test_a_delete_sees_the_rows_a_concurrent_update_moves_into_its_condition(spark, tmp_path, monkeypatch) -> None:
    """Delta's conflict check: a DELETE read the rows its condition matches; a concurrent UPDATE
    (delta-rs) that rewrote another file so that one of its rows now matches made the DELETE's
    commit wrong (the row survived a DELETE committed after it). It is a conflict now and the shim
    runs the DELETE again; a concurrent commit whose files cannot match (by stats), or a blind
    append, is none."""
    import deltalake
    import pyarrow as pa

    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, pa.table({"id": pa.array(range(50), pa.int64()), "v": ["x"] + ["a"] * 49}))
    deltalake.write_deltalake(path, pa.table({"id": pa.array(range(50, 100), pa.int64()), "v": ["b"] * 50}), mode="append")
    calls = _racing(monkeypatch, lambda: deltalake.DeltaTable(path).update(updates={"v": "'x'"}, predicate="id = 60"))
    assert spark.sql(f"DELETE FROM delta.`{path}` WHERE v = 'x'").collect()[0][0] == 2
    assert len(calls) == 2 and calls[1] > calls[0]
    assert rows(spark, f"SELECT count(*) FROM delta.`{path}` WHERE v = 'x'") == [(0,)]
    assert sorted(deltalake.DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == [i for i in range(1, 100) if i != 60]

    # files the condition cannot match (ids 50.. for id < 10), and a blind append: no conflict
    def unrelated() -> None:
        deltalake.DeltaTable(path).update(updates={"v": "'y'"}, predicate="id = 70")
        spark.createDataFrame([(5, "new")], "id long, v string").write.format("delta").mode("append").save(path)

    calls = _racing(monkeypatch, unrelated)
    assert spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 10").collect()[0][0] == 9
    assert len(calls) == 1
    assert rows(spark, f"SELECT id, v FROM delta.`{path}` WHERE id < 10 OR id = 70") == [(5, "new"), (70, "y")]


def test_two_insert_only_merges_of_the_same_keys_insert_them_once(spark, tmp_path, monkeypatch) -> None:
    """An insert-only MERGE removes no file, so it declared nothing read and committed as a blind
    append: one racing with another MERGE of the same keys inserted them twice. It declares the
    rows its ON condition reads now: the second MERGE runs again and finds the keys there."""
    import deltalake
    import pyarrow as pa

    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, pa.table({"id": pa.array(range(100), pa.int64()), "v": ["old"] * 100}))
    keys = pa.table({"id": pa.array(range(100, 110), pa.int64()), "v": ["new"] * 10})
    spark.createDataFrame(keys.to_pandas()).createOrReplaceTempView("racing_keys")

    def other_merge() -> None:
        (deltalake.DeltaTable(path).merge(keys, "t.id = s.id", source_alias="s", target_alias="t")
         .when_not_matched_insert_all().execute())  # fmt: skip

    calls = _racing(monkeypatch, other_merge)
    try:
        spark.sql(f"MERGE INTO delta.`{path}` t USING racing_keys s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *").collect()
    finally:
        spark.catalog.dropTempView("racing_keys")
    assert len(calls) == 1  # the second attempt matched every key: nothing to commit
    assert rows(spark, f"SELECT count(*), count(DISTINCT id) FROM delta.`{path}`") == [(110, 110)]
    assert deltalake.DeltaTable(path).to_pyarrow_table().num_rows == 110
    spark.sql(f"MERGE INTO delta.`{path}` t USING (SELECT 200L AS id, 'z' AS v) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *")
    assert _history(path)[-1]["operation"] == "MERGE" and _history(path)[-1]["isBlindAppend"] is False


def _history(root: str) -> list[dict]:
    names = sorted(n for n in os.listdir(os.path.join(root, "_delta_log")) if n.endswith(".json"))
    return [next(a["commitInfo"] for a in commit_actions(root, int(n[:-5])) if "commitInfo" in a) for n in names]


def test_the_python_api_deletes_and_updates_as_sql_does(spark, tmp_path) -> None:
    from use import DeltaTable, QbeastTable
    from use.errors import InvalidArgumentError

    path = str(tmp_path / "d")
    spark.range(20).write.format("delta").save(path)
    dt = DeltaTable.for_path(spark, path)
    assert dt.delete("id < 5") == 5 and dt.read().count() == 15
    assert dt.history(1).collect()[0]["operation"] == "DELETE"
    with pytest.raises(InvalidArgumentError, match="where must be a SQL condition"):
        dt.delete(5)  # type: ignore[arg-type]
    qpath = str(tmp_path / "q")
    QbeastTable.write(spark.range(100).selectExpr("id", "id * 1.0 AS x"), qpath, ["x"], cube_size=30)
    qt = QbeastTable.for_path(spark, qpath)
    assert qt.delete("x >= 90") == 10 and qt.read().count() == 90
    assert qt.update({"x": "x + 0.5"}, "id < 3") == 3
    assert sorted(r.x for r in qt.read().where("id < 3").collect()) == [0.5, 1.5, 2.5]
    assert dt.update({"id": "id * 10"}) == 15 and dt.read().agg({"id": "min"}).collect()[0][0] == 50
    with pytest.raises(InvalidArgumentError, match="values must map column names"):
        dt.update({"id": ""})
    assert dt.delete() == 15 and dt.read().count() == 0


def test_update_rewrites_the_matching_files_with_the_new_values(spark, db) -> None:
    spark.sql("CREATE TABLE u (id BIGINT, v STRING, day STRING) USING delta PARTITIONED BY (day)")
    spark.sql("INSERT INTO u SELECT /*+ REPARTITION(1) */ id, 'a', IF(id < 50, 'd1', 'd2') FROM range(100)")
    root = location(spark, "u")
    assert spark.sql("UPDATE u SET v = concat(v, '!'), id = id + 1000 WHERE id % 10 = 0 AND day = 'd1'").collect()[0][0] == 5
    info, actions = _last_commit(root)
    assert info["operation"] == "UPDATE"
    metrics = info["operationMetrics"]
    assert (metrics["numUpdatedRows"], metrics["numCopiedRows"], metrics["numRemovedFiles"]) == ("5", "45", "1")  # d2 untouched
    assert rows(spark, "SELECT id, v FROM u WHERE v = 'a!' ORDER BY id") == [(1000 + i, "a!") for i in range(0, 50, 10)]
    assert rows(spark, "SELECT count(*) FROM u") == [(100,)]
    # a partition column's new value moves the row to its partition; an int value widens to BIGINT
    spark.sql("UPDATE u SET day = 'd3', id = 7 WHERE id = 99")
    assert rows(spark, "SELECT id, day FROM u WHERE day = 'd3'") == [(7, "d3")]
    assert sorted(set(_delta_rs_rows(root, "day"))) == ["d1", "d2", "d3"]
    # a NULL condition leaves the row as it is; no match commits nothing; every row without WHERE
    spark.sql("INSERT INTO u VALUES (NULL, 'n', 'd1')")
    before = state(root)
    assert spark.sql("UPDATE u SET v = 'x' WHERE id > 5000").collect()[0][0] == 0 and state(root) == before
    spark.sql("UPDATE u SET v = 'z' WHERE id IN (SELECT id FROM range(1, 3))")
    assert rows(spark, "SELECT id FROM u WHERE v = 'z' ORDER BY id") == [(1,), (2,)]
    assert spark.sql("UPDATE u SET v = 'all'").collect()[0][0] == 101
    assert rows(spark, "SELECT DISTINCT v FROM u") == [("all",)] and set(_delta_rs_rows(root, "v")) == {"all"}


def test_update_of_a_qbeast_tables_indexed_column_reads_right(spark, db) -> None:
    from use import QbeastTable

    spark.sql("CREATE TABLE qu (x DOUBLE, y DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='x,y', 'cubeSize'='200')")
    spark.sql("INSERT INTO qu SELECT rand(3) * 100, rand(4) * 100 FROM range(2000)")
    root = location(spark, "qu")
    spark.sql("UPDATE qu SET x = x + 1000 WHERE y < 10")
    moved = rows(spark, "SELECT count(*) FROM qu WHERE x >= 1000")[0][0]
    assert moved > 0 and rows(spark, "SELECT count(*) FROM qu WHERE y < 10 AND x < 1000") == [(0,)]
    # a filter on the new values finds them (the rewritten rows are staging files every read scans)
    assert rows(spark, "SELECT count(*) FROM qu WHERE x BETWEEN 1000 AND 1100") == [(moved,)]
    qt = QbeastTable.for_path(spark, root)
    qt.optimize(progress=False)  # indexes them again, in a revision whose space holds the new values
    assert rows(spark, "SELECT count(*) FROM qu WHERE x BETWEEN 1000 AND 1100") == [(moved,)]
    assert rows(spark, "SELECT count(*) FROM qu") == [(2000,)]


def test_bad_updates_are_refused_and_change_nothing(spark, db) -> None:
    spark.sql("CREATE TABLE b (id INT NOT NULL, s STRUCT<a: INT, b: STRING>, t STRING) USING delta")
    spark.sql("INSERT INTO b VALUES (1, named_struct('a', 1, 'b', 'x'), 'q')")
    _each_refused(
        spark,
        location(spark, "b"),
        [
            ("UPDATE b SET id = 'not a number'", "CAST_INVALID_INPUT.*'not a number'"),  # Spark's own, as an INSERT's
            ("UPDATE b SET s.a = 2", "USE_NOT_SUPPORTED_ERROR.*nested field"),
            ("UPDATE b SET id = 1, id = 2", "USE_INVALID_ARGUMENT_ERROR.*more than once|DUPLICATE"),
            ("UPDATE b SET t = CAST(rand() AS STRING)", "USE_INVALID_ARGUMENT_ERROR.*not deterministic"),
            ("UPDATE b SET nope = 1", "UNRESOLVED_COLUMN"),
            ("UPDATE b SET id = NULL", "NOT_NULL_ASSERT_VIOLATION"),  # the rows were read and written: the files go
        ],
    )


def _each_refused(spark, root: str, cases: list[tuple[str, str]]) -> None:
    """Each statement fails with its message, and the table is as it was."""
    before = state(root)
    for statement, message in cases:
        with refused(message):
            spark.sql(statement)
    assert state(root) == before


def test_merge_updates_deletes_and_inserts_in_one_commit(spark, db) -> None:
    spark.sql("CREATE TABLE m (id BIGINT, v STRING, day STRING) USING delta PARTITIONED BY (day)")
    spark.sql("INSERT INTO m SELECT id, 'old', IF(id < 50, 'd1', 'd2') FROM range(100)")
    spark.sql("CREATE TEMPORARY VIEW src AS SELECT * FROM VALUES (5L, 'new', 'u'), (7L, 'gone', 'd'), (500L, 'fresh', 'i'), "
              "(501L, 'skip', 'x') AS s(id, v, op)")  # fmt: skip
    root = location(spark, "m")
    got = spark.sql(
        "MERGE INTO m USING src ON m.id = src.id "
        "WHEN MATCHED AND src.op = 'd' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET v = src.v "
        "WHEN NOT MATCHED AND src.op = 'i' THEN INSERT (id, v, day) VALUES (src.id, src.v, 'd3')"
    ).collect()[0]
    assert tuple(got) == (3, 1, 1, 1)  # affected, updated, deleted, inserted
    info, _ = _last_commit(root)
    metrics = info["operationMetrics"]
    assert info["operation"] == "MERGE" and metrics["numTargetRowsUpdated"] == "1" and metrics["numTargetRowsInserted"] == "1"
    assert metrics["numTargetFilesRemoved"] == "1"  # only d1's file held a matched row
    assert rows(spark, "SELECT id, v, day FROM m WHERE v != 'old' ORDER BY id") == [(5, "new", "d1"), (500, "fresh", "d3")]
    assert rows(spark, "SELECT count(*) FROM m WHERE id = 7") == [(0,)] and rows(spark, "SELECT count(*) FROM m") == [(100,)]
    assert sorted(_delta_rs_rows(root, "id")) == sorted([i for i in range(100) if i != 7] + [500])

    # insert-only: nothing rewritten, the unmatched rows appended; UPDATE SET * / INSERT *
    before = state(root)[1]
    spark.sql("MERGE INTO m USING (SELECT id, v, 'd4' AS day FROM src) s ON m.id = s.id WHEN NOT MATCHED THEN INSERT *")
    assert set(before) <= set(state(root)[1])  # no file removed
    assert rows(spark, "SELECT id FROM m WHERE day = 'd4' ORDER BY id") == [(7,), (501,)]
    spark.sql("MERGE INTO m USING (SELECT 5L AS id, 'star' AS v, 'd1' AS day) s ON m.id = s.id WHEN MATCHED THEN UPDATE SET *")
    assert rows(spark, "SELECT v FROM m WHERE id = 5") == [("star",)]

    # NOT MATCHED BY SOURCE: target rows the source does not have
    spark.sql("MERGE INTO m USING (SELECT id FROM range(0, 10)) s ON m.id = s.id "
              "WHEN NOT MATCHED BY SOURCE AND m.day = 'd2' THEN DELETE")  # fmt: skip
    assert rows(spark, "SELECT count(*) FROM m WHERE day = 'd2'") == [(0,)]
    assert rows(spark, "SELECT count(*) FROM m WHERE day = 'd1'") == [(49,)]  # 0..49 but 7, deleted above
    spark.catalog.dropTempView("src")


def test_bad_merges_are_refused_and_change_nothing(spark, db) -> None:
    spark.sql("CREATE TABLE mt (id BIGINT, v STRING) USING delta")
    spark.sql("INSERT INTO mt VALUES (1, 'a'), (2, 'b')")
    _each_refused(spark, location(spark, "mt"), [
        ("MERGE INTO mt USING (SELECT 1L AS id UNION ALL SELECT 1L) s ON mt.id = s.id WHEN MATCHED THEN UPDATE SET v = 'x'",
         "USE_INVALID_ARGUMENT_ERROR.*more than one source row"),
        ("MERGE INTO mt USING (SELECT 1L AS id) s ON mt.id = s.id WHEN MATCHED THEN UPDATE SET v = uuid()",
         "USE_INVALID_ARGUMENT_ERROR.*not deterministic"),
        ("MERGE INTO mt USING (SELECT 1L AS id) s ON mt.id = s.nope WHEN MATCHED THEN DELETE", "UNRESOLVED_COLUMN"),
    ])  # fmt: skip


def test_merge_into_a_qbeast_table_upserts_and_reads_right(spark, db) -> None:
    from use import QbeastTable

    spark.sql("CREATE TABLE qm (id BIGINT, x DOUBLE) USING qbeast OPTIONS ('columnsToIndex'='x', 'cubeSize'='100')")
    spark.sql("INSERT INTO qm SELECT id, id * 1.0 FROM range(1000)")
    spark.sql("MERGE INTO qm USING (SELECT id, id * 1.0 + 0.5 AS x FROM range(990, 1010)) s ON qm.id = s.id "
              "WHEN MATCHED THEN UPDATE SET x = s.x WHEN NOT MATCHED THEN INSERT *")  # fmt: skip
    expected = sorted([(i, float(i)) for i in range(990)] + [(i, i + 0.5) for i in range(990, 1010)])
    assert rows(spark, "SELECT id, x FROM qm ORDER BY id") == expected
    assert rows(spark, "SELECT count(*) FROM qm WHERE x BETWEEN 995 AND 1005") == [(10,)]  # 995.5 .. 1004.5
    qt = QbeastTable.for_path(spark, location(spark, "qm"))
    qt.optimize(progress=False)
    assert rows(spark, "SELECT id, x FROM qm ORDER BY id") == expected
    assert 0 not in set(qt.snapshot().files.column("revision_id").to_pylist())


def test_this_process_optimizations_yield_to_a_row_level_write(spark, tmp_path, monkeypatch) -> None:
    """While a DELETE/UPDATE/MERGE of a table runs here, an optimization of it waits before each
    task, and a task that would commit during one is abandoned (nothing committed, its files gone);
    once the statement ends the optimization runs."""
    import use.optimize.loop as loop
    from use import DeltaTable
    from use.delta.storage import resolve_table_root
    from use.optimize import yielding
    from use.optimize.loop_core import CONFLICTS, CONVERGED

    path = str(tmp_path / "y")
    for lo in (0, 50):
        spark.range(lo, lo + 50, numPartitions=1).write.format("delta").mode("append").save(path)
    root = resolve_table_root(path)
    assert yielding.wait_until_idle(root, 0.01)
    before = state(path)
    yielding.begin(root)
    try:
        assert not yielding.wait_until_idle(root, 0.05)
        monkeypatch.setattr(loop, "YIELD_TIMEOUT_S", 0.05)  # go on without waiting: the commit check must hold
        result = DeltaTable.for_path(spark, path).optimize(strategy="BinPacking", progress=False)
        assert result.outcome == CONFLICTS and all(m.status == "abandoned" for m in result.iterations)
        assert state(path) == before
    finally:
        yielding.end(root)
    assert DeltaTable.for_path(spark, path).optimize(strategy="BinPacking", progress=False).outcome == CONVERGED
    assert rows(spark, f"SELECT count(*) FROM delta.`{path}`") == [(100,)] and len(state(path)[0]) > len(before[0])


def test_tables_with_the_change_data_feed_refuse_rewrites_and_record_the_rest_exactly(spark, db) -> None:
    """`delta.enableChangeDataFeed=true`: setting it upgrades the protocol as Delta does (writer 4);
    a DELETE/UPDATE/MERGE that rewrites files is refused (its change data would be every row of those
    files deleted and inserted: USE writes no cdc files yet), nothing written; appends, whole-partition
    DELETEs and insert-only MERGEs go through, and delta-rs reads their change feed exactly."""
    import deltalake

    spark.sql("CREATE TABLE cdf (id BIGINT, p STRING) USING delta PARTITIONED BY (p)")
    spark.sql("INSERT INTO cdf VALUES (1, 'a'), (2, 'a'), (3, 'b')")
    root = location(spark, "cdf")
    spark.sql("ALTER TABLE cdf SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    protocol = deltalake.DeltaTable(root).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 4)
    spark.sql("INSERT INTO cdf VALUES (4, 'b')")
    before = state(root)
    for statement in ("DELETE FROM cdf WHERE id = 1", "UPDATE cdf SET id = 5 WHERE id = 4",
                      "MERGE INTO cdf USING (SELECT 3L AS id) s ON cdf.id = s.id WHEN MATCHED THEN DELETE"):  # fmt: skip
        with refused(r"USE_TABLE_CONSTRAINT_ERROR.*records Delta's change data feed .* rewrites files"):
            spark.sql(statement)
        assert state(root) == before, statement
    spark.sql("DELETE FROM cdf WHERE p = 'b'")  # whole files: deletes of exactly their rows
    spark.sql("MERGE INTO cdf USING (SELECT 9L AS id, 'c' AS p) s ON cdf.id = s.id WHEN NOT MATCHED THEN INSERT *")
    changes = _cdf_rows(deltalake.DeltaTable(root).load_cdf(starting_version=2))
    assert sorted(changes) == [(3, "delete", 4), (4, "delete", 4), (4, "insert", 3), (9, "insert", 5)]
    assert rows(spark, "SELECT id FROM cdf") == [(1,), (2,), (9,)]
    spark.sql("ALTER TABLE cdf UNSET TBLPROPERTIES ('delta.enableChangeDataFeed')")
    spark.sql("DELETE FROM cdf WHERE id = 1")  # the feed off: rewrites are fine again
    assert rows(spark, "SELECT id FROM cdf") == [(2,), (9,)]


def _cdf_rows(reader) -> list[tuple]:
    """(id, change type, version) of a delta-rs change feed."""
    import pyarrow as pa

    table = pa.table(reader.read_all()) if hasattr(reader, "read_all") else pa.table(reader)
    return list(
        zip(
            table.column("id").to_pylist(),
            table.column("_change_type").to_pylist(),
            table.column("_commit_version").to_pylist(),
            strict=False,
        )
    )
