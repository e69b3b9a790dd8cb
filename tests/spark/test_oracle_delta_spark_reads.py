"""Tables written by delta-spark, read by USE: the same rows and the same snapshot, or a refusal by name.

delta-spark 4.4 (for Spark 4.1) runs in a process of its own (`oracles.engine`), one JVM for the
run (the `delta_spark` fixture); USE reads in this test process with its own log and session. For
each Delta feature delta-spark writes, USE must either read the table exactly as delta-spark does
(rows; version, files, protocol, metadata) or refuse it with `UnsupportedFeatureError` naming the
feature, never return other rows. `REFUSED_TO_READ` lists what USE refuses today: when a feature's
support lands, its test fails with "DID NOT RAISE" until the feature moves out of the set and the
agreement is checked. Deletion vectors are read through SQL and the Python API alike
(`_agree_with_deletion_vectors`).
"""

from __future__ import annotations

import pytest

from oracles.delta_compare import canonical_rows, delta_spark_rows, delta_spark_snapshot, use_rows, use_snapshot
from oracles.engine import EngineProcess
from use.errors import UnsupportedFeatureError

# Reader features USE refuses to read today (feature name -> why), as the README says.
REFUSED_TO_READ: dict[str, str] = {}


def _agree(spark, engine: EngineProcess, path: str, *, versions: tuple[int, ...] = ()) -> dict:
    """USE reads `path` as delta-spark does: its latest snapshot and rows, and the rows of `versions`."""
    theirs = delta_spark_snapshot(engine, path)
    assert use_snapshot(path) == theirs
    assert use_rows(spark, path) == delta_spark_rows(engine, path)
    for v in versions:
        assert use_rows(spark, path, v) == delta_spark_rows(engine, path, v), f"version {v}"
    return theirs


def _refused_to_read(spark, path: str, feature: str) -> None:
    """USE refuses the table by the feature's name, through its log and through SQL, reading nothing."""
    from use.delta import DeltaLog

    assert feature in REFUSED_TO_READ
    with pytest.raises(UnsupportedFeatureError) as caught:
        DeltaLog.for_path(path).snapshot()
    assert caught.value.feature == feature, caught.value
    with pytest.raises(Exception, match=f"UnsupportedFeatureError|{feature}") as sql_caught:
        spark.sql(f"SELECT * FROM delta.`{path}`").collect()
    assert feature in str(sql_caught.value)


def _refused_to_write(spark, path: str, feature: str) -> None:
    """A USE write to the table is refused by the feature's name and leaves the log as it was."""
    from use.delta import DeltaLog
    from use.delta.snapshot import check_write_support

    snap = DeltaLog.for_path(path).snapshot()
    with pytest.raises(UnsupportedFeatureError) as caught:
        check_write_support(snap.protocol, snap.metadata, path)
    assert caught.value.feature == feature, caught.value
    columns = ", ".join(f"`{f['name']}`" for f in use_snapshot(path)["metadata"]["schema"]["fields"])
    with pytest.raises(Exception, match=feature):
        spark.sql(f"INSERT INTO delta.`{path}` SELECT {columns} FROM delta.`{path}` LIMIT 1")
    assert DeltaLog.for_path(path).snapshot().version == snap.version


def test_appends_overwrite_and_partitions(spark, delta_spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    delta_spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, s STRING, d DATE, ts TIMESTAMP, amount DECIMAL(12, 2), f DOUBLE, "
        "part STRING, n INT) USING delta PARTITIONED BY (part, n)"
    )
    for i in range(2):
        delta_spark.sql(
            f"INSERT INTO delta.`{path}` SELECT id + {i * 100}, concat('s', id), date_add(DATE'2024-01-01', CAST(id AS INT)), "
            "TIMESTAMP'2024-01-01 10:00:00' + make_interval(0, 0, 0, 0, CAST(id AS INT)), CAST(id * 1.25 AS DECIMAL(12, 2)), "
            "id / 3.0, CASE WHEN id % 3 = 0 THEN NULL ELSE concat('p ', id % 3) END, CAST(id % 2 AS INT) FROM range(20)"
        )
    delta_spark.sql(f"INSERT OVERWRITE delta.`{path}` SELECT * FROM delta.`{path}` WHERE id % 4 = 0")
    delta_spark.sql(f"INSERT INTO delta.`{path}` VALUES (1000, NULL, NULL, NULL, NULL, NULL, 'p=/ %', 7)")
    snap = _agree(spark, delta_spark, path, versions=(1, 2))
    assert snap["version"] == 4 and snap["metadata"]["partition_columns"] == ["part", "n"]


def test_schema_evolution(spark, delta_spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    delta_spark.sql(f"CREATE TABLE delta.`{path}` USING delta AS SELECT id, CAST(id AS STRING) AS s FROM range(5)")
    delta_spark.py(
        "spark.range(5, 9).selectExpr('id', 'named_struct(\"a\", id, \"b\", array(id)) AS nested', 'id * 2 AS extra')"
        ".write.format('delta').mode('append').option('mergeSchema', 'true').save(args['path'])",
        path=path,
    )
    delta_spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (later STRING COMMENT 'added')")
    delta_spark.sql(f"INSERT INTO delta.`{path}` (id, s, later) VALUES (99, 'x', 'y')")
    snap = _agree(spark, delta_spark, path, versions=(0, 1))
    assert [f["name"] for f in snap["metadata"]["schema"]["fields"]] == ["id", "s", "nested", "extra", "later"]


def test_column_mapping_with_renames_and_drops(spark, delta_spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    delta_spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, `a b` STRING, gone INT, p STRING) USING delta PARTITIONED BY (p) "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"
    )
    delta_spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'x', 1, 'u'), (2, 'y', 2, 'v')")
    delta_spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN `a b` TO renamed")
    delta_spark.sql(f"ALTER TABLE delta.`{path}` DROP COLUMN gone")
    delta_spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (gone INT)")
    delta_spark.sql(f"INSERT INTO delta.`{path}` VALUES (3, 'z', 'u', 30)")
    snap = _agree(spark, delta_spark, path, versions=(1,))
    assert snap["metadata"]["configuration"]["delta.columnMapping.mode"] == "name"
    _refused_to_write(spark, path, "columnMapping")


@pytest.mark.parametrize("policy", ["classic", "v2"])
def test_checkpoints(spark, delta_spark, tmp_path, policy) -> None:
    path = str(tmp_path / "t")
    props = "'delta.checkpointInterval' = '3'" + (", 'delta.checkpointPolicy' = 'v2'" if policy == "v2" else "")
    delta_spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT, p INT) USING delta PARTITIONED BY (p) TBLPROPERTIES ({props})")
    for i in range(7):
        delta_spark.sql(f"INSERT INTO delta.`{path}` SELECT id + {i * 10}, CAST(id % 2 AS INT) FROM range(10)")
        if i == 4:
            delta_spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 5")
    import os

    checkpoints = [n for n in os.listdir(os.path.join(path, "_delta_log")) if ".checkpoint." in n]
    assert checkpoints, "delta-spark wrote no checkpoint"
    if policy == "v2":
        assert os.path.isdir(os.path.join(path, "_delta_log", "_sidecars"))
    _agree(spark, delta_spark, path, versions=(2, 4))
    if policy == "v2":
        _refused_to_write(spark, path, "v2Checkpoint")


def _python_rows(spark, path: str, version: int | None = None) -> list:
    """The table's rows as USE's Python API reads them (at `version`: time travel)."""
    from use.delta import DeltaLog
    from use.qbeast.reader import read
    from use.qbeast.snapshot import QbeastSnapshot

    return canonical_rows(read(spark, QbeastSnapshot.from_delta(DeltaLog.for_path(path).snapshot(version=version))).toArrow())


def _agree_with_deletion_vectors(spark, engine: EngineProcess, path: str) -> dict:
    """USE's snapshot (files and which have a DV) and rows, through SQL and the Python API, are delta-spark's."""
    theirs = _agree(spark, engine, path)
    assert _python_rows(spark, path) == delta_spark_rows(engine, path)
    return theirs


def test_deletion_vectors_from_delete_update_merge_and_purge(spark, delta_spark, tmp_path) -> None:
    """The deletion vectors delta-spark's DELETE, UPDATE and MERGE write are read as delta-spark reads
    them, through SQL and the Python API, at every version (time travel); a write is refused by name;
    after REORG ... APPLY (PURGE) no file has one; once delta-spark drops the feature, USE reads it as before."""
    path = str(tmp_path / "t")
    delta_spark.sql(
        f"CREATE TABLE delta.`{path}` USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'true') "
        "AS SELECT id, CAST(id % 5 AS STRING) AS s FROM range(100)"
    )
    _agree_with_deletion_vectors(spark, delta_spark, path)  # enabled, no vector yet
    delta_spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 7 = 0")
    assert any(f[3] for f in _agree_with_deletion_vectors(spark, delta_spark, path)["files"]), "delta-spark wrote no DV"
    delta_spark.sql(f"UPDATE delta.`{path}` SET s = 'updated' WHERE id % 11 = 0")
    _agree_with_deletion_vectors(spark, delta_spark, path)
    delta_spark.sql(
        f"MERGE INTO delta.`{path}` t USING (SELECT id FROM range(90, 110)) src ON t.id = src.id "
        "WHEN MATCHED AND src.id % 2 = 0 THEN DELETE WHEN NOT MATCHED THEN INSERT (id, s) VALUES (src.id, 'new')"
    )
    snap = _agree_with_deletion_vectors(spark, delta_spark, path)
    assert any(f[3] for f in snap["files"]), "delta-spark wrote no deletion vector"
    for version in range(snap["version"]):
        assert _python_rows(spark, path, version) == delta_spark_rows(delta_spark, path, version), f"version {version}"
        assert use_rows(spark, path, version) == delta_spark_rows(delta_spark, path, version), f"SQL, version {version}"
    _refused_to_write(spark, path, "deletionVectors")
    delta_spark.sql(f"REORG TABLE delta.`{path}` APPLY (PURGE)")
    snap = _agree_with_deletion_vectors(spark, delta_spark, path)
    assert not any(f[3] for f in snap["files"]) and "deletionVectors" in snap["protocol"]["reader_features"]
    delta_spark.sql(f"ALTER TABLE delta.`{path}` DROP FEATURE deletionVectors")
    snap = _agree(spark, delta_spark, path)
    assert "deletionVectors" not in (snap["protocol"]["reader_features"] or [])


@pytest.mark.parametrize(
    "feature, create, change",
    [
        (
            "clustering",  # liquid clustering
            "(id BIGINT, v STRING) USING delta CLUSTER BY (v)",
            "OPTIMIZE delta.`{path}`",
        ),
        (
            "rowTracking",
            "(id BIGINT, v STRING) USING delta TBLPROPERTIES ('delta.enableRowTracking' = 'true')",
            "UPDATE delta.`{path}` SET v = 'u' WHERE id < 10",
        ),
    ],
)
def test_writer_features(spark, delta_spark, tmp_path, feature, create, change) -> None:
    """Writer-only features: every reader reads the table; USE refuses to write it, by name."""
    path = str(tmp_path / "t")
    delta_spark.sql(f"CREATE TABLE delta.`{path}` {create}")
    for i in range(2):
        delta_spark.sql(f"INSERT INTO delta.`{path}` SELECT id + {i * 50}, CAST(id % 4 AS STRING) FROM range(50)")
    delta_spark.sql(change.format(path=path))
    snap = _agree(spark, delta_spark, path, versions=(2,))
    assert feature in snap["protocol"]["writer_features"]
    _refused_to_write(spark, path, feature)


def test_change_data_feed(spark, delta_spark, tmp_path) -> None:
    """A table recording its change data: USE reads it, and its appends are kept in the feed (delta-spark
    reads them back from table_changes); a USE UPDATE, whose row changes USE does not record, is refused."""
    path = str(tmp_path / "t")
    delta_spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, v STRING) USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')"
    )
    delta_spark.sql(f"INSERT INTO delta.`{path}` SELECT id, 'a' FROM range(10)")
    delta_spark.sql(f"UPDATE delta.`{path}` SET v = 'b' WHERE id < 3")
    delta_spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 9")
    _agree(spark, delta_spark, path, versions=(1, 2))
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (100, 'use')")
    changes = delta_spark.sql(f"SELECT id, v, _change_type, _commit_version FROM table_changes_by_path('{path}', 4)")
    assert changes.to_pylist() == [{"id": 100, "v": "use", "_change_type": "insert", "_commit_version": 4}]
    with pytest.raises(Exception, match="USE_TABLE_CONSTRAINT_ERROR.*enableChangeDataFeed"):
        spark.sql(f"UPDATE delta.`{path}` SET v = 'c' WHERE id = 5")
    assert use_snapshot(path)["version"] == 4


def test_constraints(spark, delta_spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    delta_spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT NOT NULL, v INT) USING delta")
    delta_spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT positive CHECK (v > 0)")
    delta_spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 1), (2, 5)")
    snap = _agree(spark, delta_spark, path)
    assert snap["metadata"]["configuration"]["delta.constraints.positive"] == "v > 0"
    _refused_to_write(spark, path, "checkConstraints")
