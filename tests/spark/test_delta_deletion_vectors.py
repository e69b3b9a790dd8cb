"""Deletion vectors on tables USE wrote, read through every path: a Qbeast table whose files
get DVs as a foreign writer (delta-spark) adds them (a commit removing each file and re-adding it
with its DV) reads exactly through the Python API and SQL, samples (TABLESAMPLE) included, at every
version; its insight rows count the deleted
rows; writes are refused by name; and a damaged DV is a typed error that changes nothing on disk."""

from __future__ import annotations

import json
import os
import time

import pyarrow.parquet as pq
import pytest

from use.delta import DeltaLog
from use.delta.deletion_vectors import bitmap_bytes, dv_file_bytes, new_uuid_path
from use.delta.storage import absolute_path
from use.errors import CorruptDeletionVectorError, UnsupportedFeatureError


def _add_deletion_vectors(path: str, doomed: set[int]) -> dict[str, list[int]]:
    """Commit DVs deleting the rows whose `id` is in `doomed`, as delta-spark would: the protocol
    gains `deletionVectors`, each touched file is removed and re-added with its DV (all DVs in one
    file). Returns each touched file's deleted row indexes."""
    log = DeltaLog.for_path(path)
    snap = log.snapshot()
    bitmaps: list[bytes] = []
    touched = []
    deleted: dict[str, list[int]] = {}
    for row in snap.files.to_pylist():
        ids = pq.read_table(absolute_path(path, row["path"]), columns=["id"]).column("id").to_pylist()
        rows = [i for i, v in enumerate(ids) if v in doomed]
        if rows:
            bitmaps.append(bitmap_bytes(rows))
            touched.append(row)
            deleted[row["path"]] = rows
    where, name = new_uuid_path()
    content, offsets = dv_file_bytes(bitmaps)
    with open(os.path.join(path, name), "wb") as fh:
        fh.write(content)
    now = int(time.time() * 1000)
    p = snap.protocol
    features = ["deletionVectors"]
    lines = [
        {"commitInfo": {"timestamp": now, "operation": "DELETE", "operationParameters": {}}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": features,
                      "writerFeatures": sorted(set(features) | set(p.writer_features or ()) | {"appendOnly", "invariants"})}},
    ]  # fmt: skip
    for row, offset, data in zip(touched, offsets, bitmaps, strict=True):
        dv = {
            "storageType": "u",
            "pathOrInlineDv": where,
            "offset": offset,
            "sizeInBytes": len(data),
            "cardinality": len(deleted[row["path"]]),
        }
        pv = dict(row["partition_values"] or [])
        lines.append(
            {
                "remove": {
                    "path": row["path"],
                    "deletionTimestamp": now,
                    "dataChange": True,
                    "partitionValues": pv,
                    "size": row["size"],
                }
            }
        )
        add = {"path": row["path"], "partitionValues": pv, "size": row["size"], "modificationTime": row["modification_time"],
               "dataChange": True, "stats": row["stats"], "deletionVector": dv}  # fmt: skip
        if row["tags"] is not None:
            add["tags"] = dict(row["tags"])
        lines.append({"add": add})
    with open(os.path.join(log.log_dir, f"{snap.version + 1:020d}.json"), "x") as fh:
        fh.write("\n".join(json.dumps(x) for x in lines) + "\n")
    return deleted


def _ids(df) -> list[int]:
    return sorted(r[0] for r in df.select("id").collect())


@pytest.fixture
def qbeast_with_dvs(spark, tmp_path):
    from use import QbeastTable

    path = str(tmp_path / "q")
    df = spark.range(3000).selectExpr("id", "CAST(id % 97 AS DOUBLE) AS x", "CAST(id % 13 AS STRING) AS s")
    QbeastTable.write(df, path, columns_to_index=["x", "id"], cube_size=400)
    before = QbeastTable.for_path(spark, path)
    samples = {f: _ids(before.read(sample=f)) for f in (0.1, 0.5)}
    doomed = {i for i in range(3000) if i % 7 == 0 or 1000 <= i < 1200}
    deleted = _add_deletion_vectors(path, doomed)
    assert len(deleted) > 1
    return path, doomed, samples, deleted


def test_qbeast_table_with_deletion_vectors_reads_exactly(spark, qbeast_with_dvs) -> None:
    from use import QbeastTable

    path, doomed, samples, deleted = qbeast_with_dvs
    qt = QbeastTable.for_path(spark, path)
    assert _ids(qt.read()) == [i for i in range(3000) if i not in doomed]
    for f, rows in samples.items():  # a sample is the same sample, less the deleted rows
        assert _ids(qt.read(sample=f)) == [i for i in rows if i not in doomed]
    assert _ids(qt.read(filter="id < 1500")) == [i for i in range(1500) if i not in doomed]
    # SQL: scans, filters and TABLESAMPLE (the Qbeast sample, exact) drop the same rows
    assert _ids(spark.sql(f"SELECT id FROM qbeast.`{path}`")) == [i for i in range(3000) if i not in doomed]
    assert _ids(spark.sql(f"SELECT id FROM qbeast.`{path}` WHERE id < 1500")) == [i for i in range(1500) if i not in doomed]
    for f, rows in samples.items():
        sampled = spark.sql(f"SELECT id FROM qbeast.`{path}` TABLESAMPLE ({f * 100:g} PERCENT)")
        assert _ids(sampled) == [i for i in rows if i not in doomed]
    explain = spark.sql(f"EXPLAIN SELECT id FROM qbeast.`{path}`").collect()[0][0]
    assert f"{len(deleted)} with deletion vectors" in explain
    # time travel: the version before the DVs has every row
    from use.qbeast.reader import read
    from use.qbeast.snapshot import QbeastSnapshot

    version = DeltaLog.for_path(path).snapshot().version
    assert len(_ids(read(spark, QbeastSnapshot.from_delta(DeltaLog.for_path(path).snapshot(version=version - 1))))) == 3000
    assert len(_ids(spark.sql(f"SELECT id FROM qbeast.`{path}` VERSION AS OF {version - 1}"))) == 3000

    files = qt.insight("files").to_pylist()
    assert {r["path"]: r["deleted_records"] for r in files if r["deleted_records"]} == {p: len(r) for p, r in deleted.items()}
    layout = qt.insight("layout").to_pylist()
    assert sum(r["deleted_rows"] for r in layout) == len(doomed)


def test_writes_to_a_table_with_deletion_vectors_are_refused_by_name(spark, qbeast_with_dvs) -> None:
    from use import QbeastTable

    path, *_ = qbeast_with_dvs
    log_before = sorted(os.listdir(os.path.join(path, "_delta_log")))
    with pytest.raises(UnsupportedFeatureError) as caught:
        QbeastTable.write(spark.range(5).selectExpr("id", "0.0D AS x", "'a' AS s"), path, ["x", "id"], mode="append")
    assert caught.value.feature == "deletionVectors"
    with pytest.raises(UnsupportedFeatureError):
        QbeastTable.for_path(spark, path).optimize()
    with pytest.raises(Exception, match="deletionVectors"):
        spark.sql(f"INSERT INTO qbeast.`{path}` VALUES (1, 0.0D, 'a')")
    assert sorted(os.listdir(os.path.join(path, "_delta_log"))) == log_before


@pytest.mark.parametrize("damage", ["missing", "checksum", "truncated"])
def test_a_damaged_deletion_vector_fails_the_read_by_name_and_changes_nothing(spark, qbeast_with_dvs, damage) -> None:
    from use import QbeastTable

    path, *_ = qbeast_with_dvs
    (dv_file,) = [n for n in os.listdir(path) if n.startswith("deletion_vector_")]
    target = os.path.join(path, dv_file)
    if damage == "missing":
        os.remove(target)
    else:
        data = bytearray(open(target, "rb").read())
        if damage == "checksum":
            data[12] ^= 0x01
        else:
            data = data[: len(data) // 2]
        with open(target, "wb") as fh:
            fh.write(data)
    before = {os.path.join(d, n): os.path.getmtime(os.path.join(d, n)) for d, _, ns in os.walk(path) for n in ns}
    with pytest.raises(CorruptDeletionVectorError) as caught:
        QbeastTable.for_path(spark, path).read().collect()
    message = str(caught.value)
    assert path in message and ".parquet" in message and "deletion vector" in message
    with pytest.raises(Exception, match="USE_CORRUPT_DELETION_VECTOR_ERROR") as sql_caught:
        spark.sql(f"SELECT count(*) FROM qbeast.`{path}`").collect()
    assert path in str(sql_caught.value)
    assert {os.path.join(d, n): os.path.getmtime(os.path.join(d, n)) for d, _, ns in os.walk(path) for n in ns} == before
    # the table's insight rows come from the log: still served
    assert QbeastTable.for_path(spark, path).insight("files").num_rows > 0
