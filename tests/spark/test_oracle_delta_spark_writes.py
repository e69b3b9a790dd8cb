"""Tables written by USE, read and then written by delta-spark; and the two writing one table at once.

delta-spark 4.4 runs in a process of its own (one JVM for the run, shared with the reads). For
every way USE changes a table (plain and Qbeast writes, optimizations, DML, restore, vacuum)
delta-spark must read the same rows and the same snapshot, its DESCRIBE HISTORY must list every
version in order with USE's operation names, and its own INSERT, DELETE and OPTIMIZE must succeed on
the table, after which USE reads what delta-spark reads. Concurrent writers, one USE (this process)
and one delta-spark, append and optimize the same table: no commit is lost, and a conflict is
decided as delta-spark's ConflictChecker decides it (the same pair of commits, with each engine as
the loser), one pair for each of the checker's rules.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from oracles.delta_compare import delta_spark_rows, delta_spark_snapshot, history, use_rows, use_snapshot
from oracles.engine import EngineProcess


def _same(spark, engine: EngineProcess, path: str) -> dict:
    ours = use_snapshot(path)
    assert delta_spark_snapshot(engine, path) == ours
    assert delta_spark_rows(engine, path) == use_rows(spark, path)
    return ours


def _history_is_sane(engine: EngineProcess, path: str, operations: list[str]) -> None:
    """delta-spark lists every version once, in order, with the operation each commit recorded."""
    rows = history(engine, path)
    assert [r["version"] for r in rows] == list(range(len(rows)))
    assert [r["operation"] for r in rows] == operations
    times = [r["timestamp"] for r in rows]
    assert times == sorted(times)


def _delta_spark_takes_over(spark, engine: EngineProcess, path: str, where: str) -> None:
    """delta-spark's INSERT, DELETE and OPTIMIZE succeed on the table; USE then reads what it reads."""
    version = use_snapshot(path)["version"]
    engine.sql(f"INSERT INTO delta.`{path}` SELECT * FROM delta.`{path}` WHERE {where}")
    engine.sql(f"DELETE FROM delta.`{path}` WHERE NOT ({where})")
    engine.sql(f"OPTIMIZE delta.`{path}`")
    ours = _same(spark, engine, path)
    assert ours["version"] == version + 3
    assert [r["operation"] for r in history(engine, path)][-3:] == ["WRITE", "DELETE", "OPTIMIZE"]


def _rows(spark, start: int, n: int):
    return spark.range(start, start + n, numPartitions=2).selectExpr(
        "id", "CAST(id % 7 AS DOUBLE) AS x", "concat('k', id % 3) AS k", "CAST(id * 0.5 AS DECIMAL(10, 1)) AS amount"
    )


def test_plain_writes(spark, delta_spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _rows(spark, 0, 40).write.format("delta").partitionBy("k").save(path)
    _rows(spark, 40, 40).write.format("delta").mode("append").save(path)
    _rows(spark, 100, 30).write.format("delta").mode("overwrite").save(path)
    _rows(spark, 200, 10).write.format("delta").mode("append").save(path)
    _same(spark, delta_spark, path)
    assert delta_spark_rows(delta_spark, path, 1) == use_rows(spark, path, 1)
    _history_is_sane(delta_spark, path, ["WRITE"] * 4)
    _delta_spark_takes_over(spark, delta_spark, path, "id % 2 = 0")


def test_qbeast_writes_and_optimization(spark, delta_spark, tmp_path) -> None:
    """An OTree-indexed table: delta-spark reads the rows USE indexed; after delta-spark's own
    writes and OPTIMIZE (which drop the index's tags from the files it writes) USE still reads them all."""
    from use import QbeastTable

    path = str(tmp_path / "t")
    for i in range(3):
        QbeastTable.write(_rows(spark, i * 300, 300), path, columns_to_index=["id", "x"], cube_size=100, mode="append")
    QbeastTable.for_path(spark, path).optimize(progress=False)
    ours = _same(spark, delta_spark, path)
    _history_is_sane(delta_spark, path, ["WRITE"] * 3 + ["OPTIMIZE"] * (ours["version"] - 2))
    _delta_spark_takes_over(spark, delta_spark, path, "x < 3")
    table = QbeastTable.for_path(spark, path)
    assert table.read().count() == len(delta_spark_rows(delta_spark, path, columns="id"))


def test_optimizations_of_plain_tables(spark, delta_spark, tmp_path) -> None:
    from use import DeltaTable

    path = str(tmp_path / "t")
    for i in range(6):
        _rows(spark, i * 20, 20).write.format("delta").mode("append").partitionBy("k").save(path)
    table = DeltaTable.for_path(spark, path)
    table.optimize(progress=False)
    table.optimize(zorder_by=["id", "x"], progress=False)
    ours = _same(spark, delta_spark, path)
    rows = history(delta_spark, path)
    assert [r["operation"] for r in rows][:6] == ["WRITE"] * 6 and {r["operation"] for r in rows[6:]} == {"OPTIMIZE"}
    assert ours["version"] >= 7
    _delta_spark_takes_over(spark, delta_spark, path, "id > 50")


def test_dml_restore_and_vacuum(spark, delta_spark, tmp_path) -> None:
    from use import DeltaTable

    path = str(tmp_path / "t")
    _rows(spark, 0, 60).write.format("delta").partitionBy("k").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 5 = 0")
    spark.sql(f"UPDATE delta.`{path}` SET x = -x, amount = amount + 1 WHERE id < 20")
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING (SELECT id, 'k9' AS k FROM range(50, 70)) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET x = 100 WHEN NOT MATCHED THEN INSERT (id, x, k, amount) VALUES (s.id, 0, s.k, 0)"
    )
    _same(spark, delta_spark, path)
    table = DeltaTable.for_path(spark, path)
    table.restore(2)
    ours = _same(spark, delta_spark, path)
    assert delta_spark_rows(delta_spark, path) == delta_spark_rows(delta_spark, path, 2)
    table.vacuum(retention_hours=0, enforce_retention_check=False)
    assert use_snapshot(path)["files"] == ours["files"]
    _same(spark, delta_spark, path)
    operations = [r["operation"] for r in history(delta_spark, path)]
    assert operations[:5] == ["WRITE", "DELETE", "UPDATE", "MERGE", "RESTORE"]
    _history_is_sane(delta_spark, path, operations)
    _delta_spark_takes_over(spark, delta_spark, path, "id < 40")


# --- two writers at once --------------------------------------------------------------------------

_APPENDS = """
for i in range(args["n"]):
    first = args["start"] + i * 10
    spark.sql(f"INSERT INTO delta.`{args['path']}` SELECT id, CAST(id % 7 AS DOUBLE), 'ds', CAST(0 AS DECIMAL(10, 1)) "
              f"FROM range({first}, {first + 10})")
result = args["n"]
"""


def _use_appends(spark, path: str, start: int, n: int) -> None:
    for i in range(n):
        _rows(spark, start + i * 10, 10).write.format("delta").mode("append").save(path)


def _no_commit_lost(spark, engine: EngineProcess, path: str, expected_ids: set[int], commits: int) -> None:
    ours = _same(spark, engine, path)
    assert ours["version"] == commits - 1, "a commit is missing"
    ids = [r[0] for r in use_rows(spark, path, columns="id")]
    assert sorted(ids) == sorted(expected_ids)
    assert [r["version"] for r in history(engine, path)] == list(range(commits))


def test_concurrent_appends_lose_no_commit(spark, delta_spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    _rows(spark, 0, 10).write.format("delta").save(path)
    n = 6
    delta_spark.submit({"op": "py", "code": _APPENDS, "args": {"path": path, "start": 10_000, "n": n}})
    _use_appends(spark, path, 1000, n)
    assert delta_spark.result() == n
    expected = set(range(10)) | set(range(1000, 1000 + 10 * n)) | set(range(10_000, 10_000 + 10 * n))
    _no_commit_lost(spark, delta_spark, path, expected, 1 + 2 * n)


def test_optimize_of_one_engine_beside_appends_of_the_other(spark, delta_spark, tmp_path) -> None:
    """A compaction (dataChange=false) never fails a concurrent blind append, nor is failed by one,
    whichever engine runs which."""
    from use import DeltaTable

    path = str(tmp_path / "t")
    _rows(spark, 0, 10).write.format("delta").save(path)
    _use_appends(spark, path, 100, 5)
    # delta-spark optimizes while USE appends
    delta_spark.submit({"op": "sql", "sql": f"OPTIMIZE delta.`{path}`"})
    _use_appends(spark, path, 1000, 4)
    delta_spark.result()
    # USE optimizes while delta-spark appends
    delta_spark.submit({"op": "py", "code": _APPENDS, "args": {"path": path, "start": 10_000, "n": 4}})
    DeltaTable.for_path(spark, path).optimize(progress=False)
    assert delta_spark.result() == 4
    expected = set(range(10)) | set(range(100, 150)) | set(range(1000, 1040)) | set(range(10_000, 10_040))
    ours = _same(spark, delta_spark, path)
    assert sorted(r[0] for r in use_rows(spark, path, columns="id")) == sorted(expected)
    operations = [r["operation"] for r in history(delta_spark, path)]
    assert operations.count("WRITE") == 1 + 5 + 4 + 4 and operations.count("OPTIMIZE") >= 2
    assert [r["version"] for r in history(delta_spark, path)] == list(range(ours["version"] + 1))


# --- the conflicts ----------------------------------------------------------------------------------
# A loser reads version 1 of a table (two files in partitions a and b), a winner commits version 2,
# then the loser commits its actions. delta-spark's verdict comes from its own OptimisticTransaction
# (the loser in its process, USE the winner); USE's from its Transaction (the loser here, delta-spark
# the winner). Both must agree, Delta's exception names mapped to USE's errors.

WINNERS = {
    "append": "INSERT INTO delta.`{path}` VALUES (500, 0.0, 'a', 0.0)",
    "delete a": "DELETE FROM delta.`{path}` WHERE k = 'a'",
    "delete b": "DELETE FROM delta.`{path}` WHERE k = 'b'",
    "optimize": "OPTIMIZE delta.`{path}`",
    "set property": "ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.logRetentionDuration' = 'interval 40 days')",
}
# loser: (what it read: "none" | "all" | "b files", its actions: "append" | "remove b" | "compact b" | "property")
LOSERS = {
    "blind append": ("none", "append"),
    "delete after reading all": ("all", "remove b"),
    "delete of b after reading b": ("b files", "remove b"),
    "compaction of b": ("b files", "compact b"),
    "property change": ("none", "property"),
}
# One (winner, loser) pair for each rule of the conflict checker, in the order it applies them
# (delta-spark's ConflictChecker, USE's Transaction._check_conflicts), the rule it exercises, and the
# pairs of the full 5 x 5 matrix it stands for: they are decided by the same rule (on this table, the
# winners and losers above decide every other pair the same way, USE alone and delta-spark alike).
RULES = {
    ("set property", "blind append"): (
        "a winner's metadata change fails every loser (MetadataChanged), whatever it read; checked first",
        "set property x every loser",
    ),
    ("append", "delete after reading all"): (
        "a loser that read the whole table fails on data the winner added (ConcurrentAppend); under Serializable "
        "a blind append counts, under WriteSerializable it does not (see DEFAULT_LEVEL_DIFFERENCES)",
        "",
    ),
    ("append", "delete of b after reading b"): (
        "files read by path, without a predicate, do not conflict with data added elsewhere",
        "append x compaction of b",
    ),
    ("append", "blind append"): (
        "a loser that read nothing does not conflict with added data, not even under Serializable",
        "append x property change",
    ),
    ("delete a", "delete after reading all"): (
        "a loser that read the whole table fails on any file the winner removed (ConcurrentDeleteRead)",
        "delete b x delete after reading all",
    ),
    ("delete b", "delete of b after reading b"): (
        "a loser fails on a file it read that the winner removed (ConcurrentDeleteRead, checked before the "
        "loser's own removal of it, ConcurrentDeleteDelete)",
        "",
    ),
    ("delete b", "compaction of b"): (
        "the same for a loser that changes no data (dataChange=false: delta-spark takes snapshot isolation for it)",
        "",
    ),
    ("delete a", "compaction of b"): (
        "a removed file the loser did not read is no conflict",
        "delete a x delete of b after reading b",
    ),
    ("delete b", "property change"): (
        "a loser that read nothing (here one changing the metadata) does not conflict with removed data",
        "delete a/b x blind append, delete a x property change",
    ),
    ("optimize", "delete after reading all"): (
        "an OPTIMIZE with nothing to compact (one file per partition) commits nothing a loser conflicts with",
        "optimize x every loser",
    ),
}
_VERDICT_NAMES = {
    "ConcurrentAppendException": "ConcurrentAppendError",
    "ConcurrentDeleteReadException": "ConcurrentDeleteReadError",
    "ConcurrentDeleteDeleteException": "ConcurrentDeleteDeleteError",
    "MetadataChangedException": "MetadataChangedError",
    "ProtocolChangedException": "ProtocolChangedError",
}

# In delta-spark's process: start its transaction on the table (it reads version 1), declare what it
# read, build its actions, and keep them for _COMMIT_LOSER (the winner commits in between).
_START_LOSER = """
import builtins, json
delta = jvm.org.apache.spark.sql.delta
def parse(action):
    return getattr(getattr(delta.actions, "Action$"), "MODULE$").fromJson(json.dumps(action))
txn = delta.DeltaLog.forTable(spark._jsparkSession, args["path"]).startTransaction()
b = [f for f in txn.snapshot().allFiles().collectAsList() if "k=b" in f.path()]
if args["read"] == "all":
    txn.filterFiles()
elif args["read"] == "b files":  # what filterFiles(predicates) records for the files it returns
    txn.readFiles().add(b[0])
actions = []
if args["do"] == "append":
    actions.append(parse({"add": args["add"]}))
elif args["do"] == "remove b":
    actions.append(b[0].removeWithTimestamp(b[0].modificationTime(), True))
elif args["do"] == "compact b":
    actions += [b[0].removeWithTimestamp(b[0].modificationTime(), False), parse({"add": args["add"]})]
elif args["do"] == "property":
    actions.append(parse({"metaData": args["metadata"]}))
builtins._oracle_loser = (txn, actions)
"""
_COMMIT_LOSER = """
import builtins
txn, actions = builtins._oracle_loser
operation = getattr(getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$ManualUpdate$"), "MODULE$")
try:
    txn.commit(jvm.org.apache.spark.api.python.PythonUtils.toSeq(actions), operation)
    result = "committed"
except Exception as e:
    java = getattr(e, "java_exception", None) or getattr(e, "_origin", None)
    result = java.getClass().getSimpleName() if java is not None else repr(e)
"""


def _template(spark, root: Path, isolation: str | None) -> str:
    """Version 0: a file in partition a (and the table's isolation level, if named); version 1: one in partition b."""
    path = str(root / f"template-{isolation}")
    writer = spark.sql("SELECT 1L AS id, 1.0D AS x, 'a' AS k, CAST(1 AS DECIMAL(10, 1)) AS amount").write.format("delta")
    if isolation:
        writer = writer.option("delta.isolationLevel", isolation)
    writer.partitionBy("k").save(path)
    spark.sql("SELECT 2L AS id, 2.0D AS x, 'b' AS k, CAST(2 AS DECIMAL(10, 1)) AS amount").write.format("delta").mode(
        "append"
    ).save(path)
    return path


def _new_add(path: str, data_change: bool):
    """A new data file in partition b (a copy of the one there) and its add action."""
    from use.delta import AddFile, DeltaLog

    snap = DeltaLog.for_path(path).snapshot()
    source = next(p for p in snap.files.column("path").to_pylist() if p.startswith("k=b/"))
    target = source.replace(".parquet", "-copy.parquet")
    shutil.copyfile(Path(path) / source, Path(path) / target)
    size = (Path(path) / target).stat().st_size
    return AddFile(path=target, size=size, modification_time=0, data_change=data_change, partition_values={"k": "b"})


def _use_loser(spark, engine: EngineProcess, path: str, read: str, do: str, winner: str) -> str:
    """USE's verdict: its transaction loses to delta-spark's winner."""
    import dataclasses

    import pyarrow.compute as pc

    from use.delta import DeltaLog
    from use.delta.actions import remove_actions
    from use.delta.transaction import Transaction
    from use.errors import ConcurrentModificationError

    log = DeltaLog.for_path(path)
    snap = log.snapshot()
    txn = Transaction(log, snap)
    b = snap.files.filter(pc.starts_with(snap.files.column("path"), "k=b/"))
    if read == "all":
        txn.read_whole_table()
    elif read == "b files":
        txn.read_files(b.column("path"))
    if do == "append":
        txn.add(_new_add(path, True))
    elif do == "remove b":
        txn.add(*remove_actions(b, data_change=True))
    elif do == "compact b":
        txn.add(*remove_actions(b, data_change=False), _new_add(path, False))
    elif do == "property":
        txn.add(
            dataclasses.replace(snap.metadata, configuration={**snap.metadata.configuration, "delta.checkpointInterval": "5"})
        )
    engine.sql(winner.format(path=path))
    try:
        txn.commit("MANUAL UPDATE")
    except ConcurrentModificationError as e:
        return type(e).__name__
    return "committed"


def _delta_spark_loser(spark, engine: EngineProcess, path: str, read: str, do: str, winner: str) -> str:
    """delta-spark's verdict: its transaction loses to USE's winner (the same statement, run by USE)."""
    from use.delta import DeltaLog

    add = _new_add(path, do != "compact b")
    add_json = {
        "path": add.path,
        "partitionValues": {"k": "b"},
        "size": add.size,
        "modificationTime": 0,
        "dataChange": add.data_change,
    }
    meta = DeltaLog.for_path(path).snapshot().metadata
    metadata = {
        "id": meta.id,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": meta.schema_string,
        "partitionColumns": list(meta.partition_columns),
        "configuration": {**meta.configuration, "delta.checkpointInterval": "5"},
        "createdTime": meta.created_time,
    }
    engine.py(_START_LOSER, path=path, read=read, do=do, add=add_json, metadata=metadata)
    spark.sql(winner.format(path=path))
    return engine.py(_COMMIT_LOSER)


# Where USE decides otherwise, and why: a table that names no isolation level is Serializable for
# delta-spark and WriteSerializable for USE (README, "Delta table properties"), so a transaction that
# read the whole table commits over a concurrent blind append in USE; on a table that names
# Serializable both refuse it. No other rule depends on the level.
DEFAULT_LEVEL_DIFFERENCES = {("append", "delete after reading all"): ("ConcurrentAppendError", "committed")}


@pytest.mark.parametrize("isolation", [None, "Serializable"])
def test_conflicts_are_decided_as_delta_spark_decides(spark, delta_spark, tmp_path, isolation) -> None:
    """One pair per rule (RULES) on a Serializable table; on one that names no level only the pair whose
    verdict depends on the level."""
    template = _template(spark, tmp_path, isolation)
    verdicts = {}
    pairs = list(RULES) if isolation else list(DEFAULT_LEVEL_DIFFERENCES)
    for i, (w, loser) in enumerate(pairs):
        read, do = LOSERS[loser]
        theirs_path, ours_path = str(tmp_path / f"ds-{i}"), str(tmp_path / f"use-{i}")
        shutil.copytree(template, theirs_path)
        shutil.copytree(template, ours_path)
        theirs = _delta_spark_loser(spark, delta_spark, theirs_path, read, do, WINNERS[w])
        ours = _use_loser(spark, delta_spark, ours_path, read, do, WINNERS[w])
        verdicts[(w, loser)] = (_VERDICT_NAMES.get(theirs, theirs), ours)
    print(f"conflict verdicts (delta-spark, USE), isolation {isolation or 'not named'}:")
    for (w, loser), (theirs, ours) in verdicts.items():
        rule, also = RULES[(w, loser)]
        print(f"  winner {w:>12}, loser {loser:>28}: {theirs:>28} {ours:>28}\n    rule: {rule}")
        if also:
            print(f"    stands for: {also}")
    disagreements = {k: v for k, v in verdicts.items() if v[0] != v[1]}
    assert disagreements == ({} if isolation else DEFAULT_LEVEL_DIFFERENCES)
    if isolation:
        # every verdict of the checker is reached: a commit and each conflict the pairs can raise
        assert {v[0] for v in verdicts.values()} == {
            "committed",
            "MetadataChangedError",
            "ConcurrentAppendError",
            "ConcurrentDeleteReadError",
        }
