"""Reader features written here by hand, so they are tested without the real-log corpus: V2 checkpoints
(UUID-named JSON and parquet, classic-named V2 spec, sidecars, `_last_checkpoint` with V2 information)
and type widening. Each table is also read by delta-rs, which must agree."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import re
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsDeltaTable

from use.delta import AddFile, DeltaLog
from use.delta.actions import RemoveFile
from use.delta.checkpoint import checkpoint_table
from use.delta.predicates import Comparison
from use.delta.skipping import files_matching
from use.delta.stats_parse import parse_stats
from use.errors import CorruptLogError, UnsupportedFeatureError

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])
V2_PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["v2Checkpoint"],
    "writerFeatures": ["v2Checkpoint", "appendOnly", "invariants"],
}


def write_commit(root: str, version: int, actions: list[dict]) -> None:
    with open(os.path.join(root, "_delta_log", f"{version:020d}.json"), "w") as fh:
        fh.write("\n".join(json.dumps(a) for a in actions) + "\n")


def stats(lo: int, hi: int, n: int) -> str:
    return json.dumps({"numRecords": n, "minValues": {"id": lo}, "maxValues": {"id": hi}, "nullCount": {"id": 0}})


def files_of(snap) -> dict[str, tuple]:
    rows = snap.files.select(["path", "size", "partition_values", "stats"]).to_pylist()
    return {r["path"]: (r["size"], sorted(r["partition_values"] or []), r["stats"]) for r in rows}


def rs_files(root: str, version: int | None = None) -> dict[str, int]:
    t = pa.table(RsDeltaTable(root, version=version).get_add_actions(flatten=True))
    return dict(zip(t.column("path").to_pylist(), t.column("size_bytes").to_pylist(), strict=False))


# --- V2 checkpoints -----------------------------------------------------------------------------------


def v2_table(root: str) -> DeltaLog:
    """Versions 0-4: create, upgrade to v2Checkpoint, three commits of adds and a remove, a txn."""
    log = DeltaLog.for_path(root)
    log.create(SCHEMA, partition_columns=("p",))
    write_commit(root, 1, [{"commitInfo": {"operation": "UPGRADE PROTOCOL"}}, {"protocol": V2_PROTOCOL}])
    for v in (2, 3):
        adds = [AddFile(f"p={c}/f{v}{c}.parquet", 100 + v, 1, partition_values={"p": c}, stats=stats(v, v + 9, 10)) for c in "ab"]
        write_commit(root, v, [{"commitInfo": {"operation": "WRITE"}}, *[a.to_action() for a in adds]])
    write_commit(
        root,
        4,
        [
            {"commitInfo": {"operation": "DELETE"}},
            {"txn": {"appId": "app", "version": 7}},
            RemoveFile("p=a/f2a.parquet", 5, partition_values={"p": "a"}, size=102).to_action(),
        ],
    )
    return log


def _sidecar_tables(state_table: pa.Table, parts: int) -> list[pa.Table]:
    """The checkpoint's add/remove rows, split into `parts` sidecar files' contents."""
    file_rows = state_table.filter(pa.compute.or_(state_table.column("add").is_valid(), state_table.column("remove").is_valid()))
    file_rows = file_rows.select(["add", "remove"])
    bounds = np.linspace(0, file_rows.num_rows, parts + 1).astype(int)
    return [file_rows.slice(lo, hi - lo) for lo, hi in zip(bounds[:-1], bounds[1:], strict=False)]


def write_v2_checkpoint(log: DeltaLog, version: int, kind: str, sidecars: int) -> str:
    """A V2-spec checkpoint of `version`: kind "json" / "parquet" (UUID-named) or "classic"; with
    `sidecars` > 0 its file actions go to that many files under `_delta_log/_sidecars`."""
    snap = log.snapshot(version=version)
    full = checkpoint_table(snap.state, snap.all_tombstones)
    non_file = full.filter(pa.compute.and_(full.column("add").is_null(), full.column("remove").is_null()))
    sidecar_actions = []
    if sidecars:
        os.makedirs(os.path.join(log.log_dir, "_sidecars"), exist_ok=True)
        for part in _sidecar_tables(full, sidecars):
            name = f"{version:020d}.checkpoint.{uuid.uuid4()}.parquet"
            pq.write_table(_all_nullable(part), os.path.join(log.log_dir, "_sidecars", name))
            sidecar_actions.append(
                {
                    "path": name,
                    "sizeInBytes": os.path.getsize(os.path.join(log.log_dir, "_sidecars", name)),
                    "modificationTime": 1,
                }
            )
        body = non_file
    else:
        body = full
    meta_t = pa.struct([("version", pa.int64()), ("tags", pa.map_(pa.string(), pa.string()))])
    side_t = pa.struct(
        [
            ("path", pa.string()),
            ("sizeInBytes", pa.int64()),
            ("modificationTime", pa.int64()),
            ("tags", pa.map_(pa.string(), pa.string())),
        ]
    )
    name = f"{version:020d}.checkpoint.{uuid.uuid4()}.{'json' if kind == 'json' else 'parquet'}"
    if kind == "classic":
        name = f"{version:020d}.checkpoint.parquet"
    path = os.path.join(log.log_dir, name)
    if kind == "json":
        lines = [{"checkpointMetadata": {"version": version, "tags": {}}}]
        lines += [{"sidecar": s} for s in sidecar_actions]
        lines += [snap.protocol.to_action(), snap.metadata.to_action()]
        lines += [{"txn": {"appId": app, "version": v}} for app, v in snap.app_transactions.items()]
        if not sidecars:
            for r in snap.files.to_pylist():
                lines.append(
                    {
                        "add": {
                            "path": r["path"],
                            "partitionValues": dict(r["partition_values"]),
                            "size": r["size"],
                            "modificationTime": r["modification_time"],
                            "dataChange": False,
                            "stats": r["stats"],
                        }
                    }
                )
            for r in snap.all_tombstones.to_pylist():
                lines.append(
                    {
                        "remove": {
                            "path": r["path"],
                            "deletionTimestamp": r["deletion_timestamp"],
                            "dataChange": False,
                            "partitionValues": dict(r["partition_values"] or []),
                            "size": r["size"],
                        }
                    }
                )
        with open(path, "w") as fh:
            fh.write("\n".join(json.dumps(line) for line in lines) + "\n")
    else:
        extra = pa.table(
            {
                "checkpointMetadata": pa.array([{"version": version, "tags": None}] + [None] * len(sidecar_actions), meta_t),
                "sidecar": pa.array([None] + [{**s, "tags": None} for s in sidecar_actions], side_t),
            }
        )
        table = pa.concat_tables([_all_nullable(body), extra], promote_options="default")
        pq.write_table(table, path)
    last = {
        "version": version,
        "size": body.num_rows,
        "v2Checkpoint": {
            "path": name,
            "sizeInBytes": os.path.getsize(path),
            "modificationTime": 1,
            "nonFileActions": [],
            "sidecarFiles": sidecar_actions,
        },
    }
    with open(os.path.join(log.log_dir, "_last_checkpoint"), "w") as fh:
        json.dump(last, fh)
    return path


def _nullable_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _nullable_type(f.type), True) for f in t])
    return t


def _all_nullable(t: pa.Table) -> pa.Table:
    """As Spark writes checkpoints: every field nullable (rows of other actions leave them null)."""
    return t.cast(pa.schema([pa.field(f.name, _nullable_type(f.type), True) for f in t.schema]))


@pytest.mark.parametrize("kind, sidecars", [("json", 2), ("parquet", 2), ("classic", 1), ("json", 0), ("parquet", 0)])
def test_v2_checkpoint_replaces_the_commits_before_it(tmp_path, kind, sidecars):
    root = str(tmp_path / "t")
    log = v2_table(root)
    expected = {v: files_of(DeltaLog.for_path(root).snapshot(version=v)) for v in (3, 4)}
    write_v2_checkpoint(log, 3, kind, sidecars)
    for v in range(3):  # only the checkpoint can give version 3 now
        os.remove(os.path.join(log.log_dir, f"{v:020d}.json"))
    fresh = DeltaLog.for_path(root)
    snap3 = fresh.snapshot(version=3)
    assert snap3.state.checkpoint_version == 3
    assert files_of(snap3) == expected[3]
    snap4 = fresh.snapshot()
    assert snap4.version == 4 and files_of(snap4) == expected[4]
    assert snap4.app_transaction_version("app") == 7
    assert snap4.protocol.reader_features == ("v2Checkpoint",)
    assert snap4.partition_columns == ("p",) and snap4.schema.names == ["id", "p"]
    assert {p: s for p, (s, _, _) in expected[4].items()} == rs_files(root)
    assert {p: s for p, (s, _, _) in expected[3].items()} == rs_files(root, 3)


def test_missing_sidecar_is_a_corrupt_log(tmp_path):
    root = str(tmp_path / "t")
    log = v2_table(root)
    write_v2_checkpoint(log, 3, "json", 2)
    for v in range(3):
        os.remove(os.path.join(log.log_dir, f"{v:020d}.json"))
    gone = sorted(os.listdir(os.path.join(log.log_dir, "_sidecars")))[0]
    os.remove(os.path.join(log.log_dir, "_sidecars", gone))
    with pytest.raises(CorruptLogError, match=gone):
        DeltaLog.for_path(root).snapshot()


def test_empty_uuid_checkpoint_is_a_corrupt_log(tmp_path):
    root = str(tmp_path / "t")
    log = v2_table(root)
    open(os.path.join(log.log_dir, f"{3:020d}.checkpoint.{uuid.uuid4()}.json"), "w").close()
    for v in range(3):
        os.remove(os.path.join(log.log_dir, f"{v:020d}.json"))
    with pytest.raises(CorruptLogError, match="V2 checkpoint .* is malformed"):
        DeltaLog.for_path(root).snapshot()


def test_v2_checkpoint_tables_are_read_only(tmp_path):
    root = str(tmp_path / "t")
    log = v2_table(root)
    before = sorted(os.listdir(log.log_dir))
    txn = DeltaLog.for_path(root).start_transaction()
    txn.add(AddFile("p=a/new.parquet", 1, 1, partition_values={"p": "a"}))
    with pytest.raises(UnsupportedFeatureError, match="v2Checkpoint.*reads it but does not write it") as err:
        txn.commit("WRITE")
    assert err.value.feature == "v2Checkpoint"
    assert sorted(os.listdir(log.log_dir)) == before


# --- type widening ------------------------------------------------------------------------------------

OLD = {
    "a": ("integer", pa.int32()),
    "f": ("float", pa.float32()),
    "d": ("date", pa.date32()),
    "dec": ("decimal(5,2)", pa.decimal128(5, 2)),
}
NEW = {
    "a": ("long", pa.int64()),
    "f": ("double", pa.float64()),
    "d": ("timestamp_ntz", pa.timestamp("us")),
    "dec": ("decimal(10,4)", pa.decimal128(10, 4)),
}
F32 = float(np.float32(3.4))  # 3.4000000953674316: the old file's value, read as a double


def _schema_string(types: dict, changes: bool) -> str:
    fields = []
    for name, (delta_type, _) in types.items():
        meta = {"delta.typeChanges": [{"fromType": OLD[name][0], "toType": delta_type}]} if changes else {}
        fields.append({"name": name, "type": delta_type, "nullable": True, "metadata": meta})
    return json.dumps({"type": "struct", "fields": fields})


def widened_table(root: str, change: tuple[str, str] | None = None) -> None:
    """v0: a file of the old types; v1: protocol with typeWidening, schema widened; v2: a file of the new types."""
    os.makedirs(os.path.join(root, "_delta_log"))
    old = pa.table(
        {
            "a": pa.array([1, 2], pa.int32()),
            "f": pa.array([3.4, 1.5], pa.float32()),
            "d": pa.array([dt.date(2024, 9, 9), dt.date(2024, 9, 1)], pa.date32()),
            "dec": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-2.50")], pa.decimal128(5, 2)),
        }
    )
    new = pa.table(
        {
            "a": pa.array([2**40, 5], pa.int64()),
            "f": pa.array([1.2345678901, 9.0], pa.float64()),
            "d": pa.array([dt.datetime(2024, 9, 10, 12, 34, 56, 123000), dt.datetime(2024, 9, 9, 1)], pa.timestamp("us")),
            "dec": pa.array([decimal.Decimal("123456.7891"), decimal.Decimal("0.0001")], pa.decimal128(10, 4)),
        }
    )
    old_stats = {
        "numRecords": 2,
        "minValues": {"a": 1, "f": 1.5, "d": "2024-09-01", "dec": -2.50},
        "maxValues": {"a": 2, "f": 3.4, "d": "2024-09-09", "dec": 1.25},
        "nullCount": dict.fromkeys(OLD, 0),
    }
    new_stats = {
        "numRecords": 2,
        "minValues": {"a": 5, "f": 1.2345678901, "d": "2024-09-09T01:00:00.000000", "dec": 0.0001},
        "maxValues": {"a": 2**40, "f": 9.0, "d": "2024-09-10T12:34:56.123000", "dec": 123456.7891},
        "nullCount": dict.fromkeys(OLD, 0),
    }
    for name, data in (("old.parquet", old), ("new.parquet", new)):
        pq.write_table(data, os.path.join(root, name))
    meta = {"id": "tw", "format": {"provider": "parquet", "options": {}}, "partitionColumns": [], "createdTime": 1}
    write_commit(
        root,
        0,
        [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {"metaData": {**meta, "schemaString": _schema_string(OLD, False), "configuration": {}}},
            {
                "add": {
                    "path": "old.parquet",
                    "partitionValues": {},
                    "size": os.path.getsize(os.path.join(root, "old.parquet")),
                    "modificationTime": 1,
                    "dataChange": True,
                    "stats": json.dumps(old_stats),
                }
            },
        ],
    )
    widened = _schema_string(NEW, True)
    if change is not None:
        doc = json.loads(widened)
        doc["fields"][0]["metadata"]["delta.typeChanges"] = [{"fromType": change[0], "toType": change[1]}]
        widened = json.dumps(doc)
    write_commit(
        root,
        1,
        [
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": ["timestampNtz", "typeWidening"],
                    "writerFeatures": ["timestampNtz", "typeWidening"],
                }
            },
            {"metaData": {**meta, "schemaString": widened, "configuration": {"delta.enableTypeWidening": "true"}}},
        ],
    )
    write_commit(
        root,
        2,
        [
            {
                "add": {
                    "path": "new.parquet",
                    "partitionValues": {},
                    "size": os.path.getsize(os.path.join(root, "new.parquet")),
                    "modificationTime": 2,
                    "dataChange": True,
                    "stats": json.dumps(new_stats),
                }
            }
        ],
    )


def test_widened_table_stats_and_skipping(tmp_path):
    root = str(tmp_path / "t")
    widened_table(root)
    snap = DeltaLog.for_path(root).snapshot()
    assert [f.type for f in snap.schema] == [t for _, t in NEW.values()]
    paths = snap.files.column("path").to_pylist()
    parsed = parse_stats(snap.files, snap.schema)
    old = paths.index("old.parquet")
    assert parsed.column("max.a")[old].as_py() == 2
    assert parsed.column("max.d")[old].as_py() == dt.datetime(2024, 9, 9)  # a date bound read as a timestamp
    assert parsed.column("min.dec")[old].as_py() == decimal.Decimal("-2.5000")
    # "3.4" is the float's text, not the float widened to a double: no bound is used for f.
    assert parsed.column("max.f").null_count == snap.num_files

    def kept(predicate):
        return sorted(p for p, k in zip(paths, files_matching(snap.files, predicate, snap.schema).to_pylist(), strict=False) if k)

    assert kept(Comparison("f", "=", F32)) == ["new.parquet", "old.parquet"]
    assert kept(Comparison("a", ">", 2)) == ["new.parquet"]
    assert kept(Comparison("d", "<", dt.datetime(2024, 9, 9, 0, 30))) == ["old.parquet"]
    assert kept(Comparison("dec", "<", decimal.Decimal("-1"))) == ["old.parquet"]


def test_spark_reads_old_files_as_the_widened_type(spark, tmp_path):
    from use import DeltaTable

    root = str(tmp_path / "t")
    widened_table(root)
    df = DeltaTable.for_path(spark, root).read()
    assert [f.dataType.simpleString() for f in df.schema.fields] == ["bigint", "double", "timestamp_ntz", "decimal(10,4)"]
    rows = sorted(tuple(r) for r in df.collect())
    assert rows[0] == (1, F32, dt.datetime(2024, 9, 9), decimal.Decimal("1.2500"))
    assert (2**40, 1.2345678901, dt.datetime(2024, 9, 10, 12, 34, 56, 123000), decimal.Decimal("123456.7891")) in rows
    assert sorted(r["a"] for r in DeltaTable.for_path(spark, root).read(filter=f"f = {F32!r}").collect()) == [1]


@pytest.mark.parametrize(
    "change", [("long", "integer"), ("string", "integer"), ("decimal(5,2)", "decimal(5,3)"), ("double", "float")]
)
def test_unsupported_type_change_is_refused(tmp_path, change):
    root = str(tmp_path / "t")
    widened_table(root, change)
    with pytest.raises(UnsupportedFeatureError, match=re.escape(f"widened column a from '{change[0]}' to '{change[1]}'")) as err:
        DeltaLog.for_path(root).snapshot()
    assert err.value.feature == "typeWidening"
    assert DeltaLog.for_path(root).snapshot(version=0).version == 0


def test_widened_table_is_read_only(tmp_path):
    root = str(tmp_path / "t")
    widened_table(root)
    txn = DeltaLog.for_path(root).start_transaction()
    txn.add(AddFile("x.parquet", 1, 1))
    with pytest.raises(UnsupportedFeatureError, match="typeWidening") as err:
        txn.commit("WRITE")
    assert err.value.feature == "typeWidening"
    assert sorted(os.listdir(os.path.join(root, "_delta_log"))) == [f"{v:020d}.json" for v in range(3)]


def test_delta_rs_reads_the_widened_table_too(tmp_path):
    root = str(tmp_path / "t")
    widened_table(root)
    assert set(rs_files(root)) == set(DeltaLog.for_path(root).snapshot().files.column("path").to_pylist())
