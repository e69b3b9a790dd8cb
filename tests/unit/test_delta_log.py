"""DeltaLog: create, append, snapshots at versions and timestamps, history, delta-rs in both directions."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sql_support import add_void_column
from use.delta import AddFile, DeltaLog, Metadata, Protocol, RemoveFile, SetTransaction, Snapshot
from use.delta.actions import FILES_SCHEMA, remove_actions
from use.delta.listing import list_log
from use.delta.snapshot import check_write_support
from use.delta.storage import LocalLogStore
from use.errors import (
    ConfigError,
    CorruptLogError,
    InvalidArgumentError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableConstraintError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("part", pa.string())])


def write_file(root: str, rows: pa.Table, part: str | None = None) -> AddFile:
    """Write one parquet data file with pyarrow and describe it as an AddFile."""
    rel = (f"part={part}/" if part is not None else "") + f"part-{uuid.uuid4().hex}.parquet"
    full = os.path.join(root, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    data = rows.drop_columns(["part"]) if part is not None and "part" in rows.column_names else rows
    pq.write_table(data, full)
    pv = {"part": part} if part is not None else {}
    stats = f'{{"numRecords":{rows.num_rows}}}'
    return AddFile(rel, os.path.getsize(full), int(time.time() * 1000), True, pv, stats)


def rows(ids: list[int], part: str = "a") -> pa.Table:
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids], "part": [part] * len(ids)}, schema=SCHEMA)


def append(log: DeltaLog, ids: list[int], part: str = "a", partitioned: bool = True) -> int:
    txn = log.start_transaction()
    txn.add(
        write_file(
            log.table_root,
            rows(ids, part) if partitioned else rows(ids, part).drop_columns(["part"]),
            part if partitioned else None,
        )
    )
    return txn.commit("WRITE", {"mode": "Append"}, {"numFiles": 1})


def delta_rs_ids(path: str, version: int | None = None) -> list[int]:
    t = deltalake.DeltaTable(path, version=version)
    return sorted(t.to_pyarrow_table().column("id").to_pylist())


def our_files(snap: Snapshot) -> set[str]:
    return set(snap.files.column("path").to_pylist())


def delta_rs_files(path: str, version: int | None = None) -> set[str]:
    t = deltalake.DeltaTable(path, version=version)
    actions = t.get_add_actions(flatten=True)
    return set(pa.table(actions).column("path").to_pylist())


# --- create ---------------------------------------------------------------------------------------------


def test_for_path_without_table(table_path):
    log = DeltaLog.for_path(table_path)
    assert not log.exists()
    assert log.table_root == os.path.abspath(table_path)
    with pytest.raises(TableNotFoundError, match="no Delta table"):
        log.snapshot()
    with pytest.raises(TableNotFoundError):
        log.history()
    assert not os.path.exists(table_path)


def test_file_uri(table_path):
    log = DeltaLog.for_path("file://" + os.path.abspath(table_path))
    assert log.table_root == os.path.abspath(table_path)
    with pytest.raises(InvalidArgumentError, match="only local paths"):
        DeltaLog.for_path("s3://bucket/table")


def test_create_and_read(table_path):
    log = DeltaLog.for_path(table_path)
    snap = log.create(SCHEMA, ["part"], {"delta.checkpointInterval": "5", "foo": "bar"}, name="t", description="d")
    assert snap.version == 0 and log.exists()
    again = DeltaLog.for_path(table_path).snapshot()
    for s in (snap, again):
        assert s.version == 0
        assert s.schema == SCHEMA
        assert s.metadata.partition_columns == ("part",)
        assert s.metadata.configuration == {"delta.checkpointInterval": "5", "foo": "bar"}
        assert s.metadata.name == "t" and s.metadata.description == "d"
        assert s.metadata.format_provider == "parquet"
        assert s.protocol == Protocol(1, 2)
        assert s.files.num_rows == 0 and s.files.schema == FILES_SCHEMA
        assert s.table_root == os.path.abspath(table_path)
    (h,) = log.history()
    assert h.version == 0 and h.operation == "CREATE TABLE"
    assert h.commit_info["engineInfo"].startswith("USE/")
    dt_ = deltalake.DeltaTable(table_path)
    assert dt_.version() == 0
    assert dt_.metadata().partition_columns == ["part"]


def test_create_twice_refused(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA)
    before = sorted(os.listdir(log.log_dir))
    with pytest.raises(TableAlreadyExistsError, match="already exists"):
        log.create(SCHEMA)
    assert sorted(os.listdir(log.log_dir)) == before


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"partition_columns": ["nope"]}, InvalidArgumentError, "not in the schema"),
        ({"partition_columns": "part"}, InvalidArgumentError, "sequence of column names"),
        ({"partition_columns": ["part", "part"]}, InvalidArgumentError, "duplicates"),
        ({"configuration": {"delta.checkpointInterval": "zero"}}, ConfigError, "positive integer"),
        ({"configuration": {"delta.logRetentionDuration": "forever"}}, ConfigError, "interval"),
        ({"configuration": {"delta.chekpointInterval": "3"}}, ConfigError, "unknown Delta table property"),
        ({"configuration": {"delta.columnMapping.mode": "name"}}, UnsupportedFeatureError, "column mapping"),
        ({"configuration": {"delta.enableDeletionVectors": "true"}}, UnsupportedFeatureError, "deletionVectors"),
        ({"configuration": {"delta.constraints.x": "id > 0"}}, UnsupportedFeatureError, "checkConstraints"),
        ({"configuration": {"a": 1}}, ConfigError, "str -> str"),
    ],
)
def test_create_bad_input(table_path, kwargs, error, match):
    log = DeltaLog.for_path(table_path)
    with pytest.raises(error, match=match):
        log.create(SCHEMA, **kwargs)
    assert not log.exists() and not os.path.exists(log.log_dir)


def test_create_bad_schema(table_path):
    log = DeltaLog.for_path(table_path)
    with pytest.raises(SchemaMismatchError, match="uint32"):
        log.create(pa.schema([("x", pa.uint32())]))
    with pytest.raises(SchemaMismatchError, match="duplicate"):
        log.create(pa.schema([("x", pa.int32()), ("X", pa.int32())]))
    with pytest.raises(InvalidArgumentError, match="pyarrow.Schema"):
        log.create({"x": "int"})  # type: ignore[arg-type]
    assert not log.exists()


def test_schema_roundtrip_all_types(table_path):
    schema = pa.schema(
        [
            pa.field("b", pa.bool_(), nullable=False),
            ("i8", pa.int8()),
            ("i16", pa.int16()),
            ("i32", pa.int32()),
            ("i64", pa.int64()),
            ("f32", pa.float32()),
            ("f64", pa.float64()),
            ("s", pa.string()),
            ("bin", pa.binary()),
            ("d", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("dec", pa.decimal128(10, 2)),
            ("arr", pa.list_(pa.int32())),
            ("m", pa.map_(pa.string(), pa.int64())),
            ("st", pa.struct([("x", pa.int32()), ("y", pa.list_(pa.string()))])),
        ]
    )
    log = DeltaLog.for_path(table_path)
    snap = log.create(schema)
    assert DeltaLog.for_path(table_path).snapshot().schema == snap.schema
    assert snap.schema.field("b").nullable is False
    assert snap.schema.field("st").type == schema.field("st").type
    assert deltalake.DeltaTable(table_path).version() == 0


def test_timestamp_ntz_needs_feature(table_path):
    log = DeltaLog.for_path(table_path)
    snap = log.create(pa.schema([("t", pa.timestamp("us"))]))
    assert snap.protocol.min_reader_version == 3 and "timestampNtz" in snap.protocol.reader_features
    assert "timestampNtz" in snap.protocol.writer_features
    assert deltalake.DeltaTable(table_path).version() == 0


# --- appends and reads ------------------------------------------------------------------------------


def test_appends_read_by_us_and_delta_rs(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["part"])
    assert append(log, [1, 2]) == 1
    assert append(log, [3], "b") == 2
    snap = log.snapshot()
    assert snap.version == 2 and snap.files.num_rows == 2
    assert sorted(snap.files.column("partition_values").to_pylist()) == [[("part", "a")], [("part", "b")]]
    assert delta_rs_ids(table_path) == [1, 2, 3]
    assert delta_rs_files(table_path) == our_files(snap)
    assert delta_rs_ids(table_path, 1) == [1, 2]
    h = log.history()
    assert [e.version for e in h] == [2, 1, 0]
    assert h[0].operation == "WRITE" and h[0].parameters == {"mode": "Append"} and h[0].metrics == {"numFiles": 1}
    ci = h[0].commit_info
    assert ci["isBlindAppend"] is True and ci["readVersion"] == 1 and ci["isolationLevel"] == "WriteSerializable"
    assert ci["txnId"] and ci["tags"] == {} and "timestamp" in ci
    assert [e.version for e in log.history(limit=1)] == [2]


def test_remove_and_time_travel(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["part"])
    append(log, [1])
    append(log, [2])
    snap = log.snapshot()
    gone = snap.files.filter(pa.compute.equal(snap.files.column("path"), snap.files.column("path")[0]))
    txn = log.start_transaction()
    txn.add(*remove_actions(gone, data_change=True))
    v = txn.commit("DELETE", {"predicate": "id = 1"})
    assert v == 3
    s3 = log.snapshot()
    assert s3.files.num_rows == 1
    assert s3.tombstones.num_rows == 1
    assert s3.tombstones.column("path").to_pylist() == gone.column("path").to_pylist()
    assert log.snapshot(version=2).files.num_rows == 2
    assert delta_rs_files(table_path) == our_files(s3)
    assert len(delta_rs_ids(table_path)) == 1
    for version in range(4):
        assert our_files(DeltaLog.for_path(table_path).snapshot(version=version)) == delta_rs_files(table_path, version)


def test_version_not_found(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA)
    with pytest.raises(VersionNotFoundError, match="available versions are 0 to 0"):
        log.snapshot(version=5)
    with pytest.raises(VersionNotFoundError):
        log.snapshot(version=-1)
    with pytest.raises(InvalidArgumentError):
        log.snapshot(version="1")  # type: ignore[arg-type]


def test_snapshot_by_timestamp(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA)
    append(log, [1], partitioned=False)
    append(log, [2], partitioned=False)
    # Pin commit times so the test does not depend on the clock's resolution.
    base = 1_700_000_000_000
    for v in range(3):
        p = os.path.join(log.log_dir, f"{v:020d}.json")
        os.utime(p, ns=((base + v * 60_000) * 1_000_000,) * 2)
    fresh = DeltaLog.for_path(table_path)
    assert fresh.snapshot(timestamp=base).version == 0
    assert fresh.snapshot(timestamp=base + 60_000).version == 1
    assert fresh.snapshot(timestamp=base + 90_000).version == 1
    assert fresh.snapshot(timestamp=base + 10**9).version == 2
    when = dt.datetime.fromtimestamp((base + 61_000) / 1000, dt.UTC)
    assert fresh.snapshot(timestamp=when).version == 1
    assert fresh.snapshot(timestamp=when.isoformat()).version == 1
    assert fresh.snapshot(timestamp=when.replace(tzinfo=None)).version == 1
    assert fresh.snapshot(version=1).timestamp == base + 60_000
    assert [h.timestamp for h in fresh.history()] == [base + 120_000, base + 60_000, base]
    with pytest.raises(VersionNotFoundError, match="earliest available is version 0"):
        fresh.snapshot(timestamp=base - 1)
    with pytest.raises(InvalidArgumentError, match="ISO"):
        fresh.snapshot(timestamp="yesterday")


def test_app_transaction(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA)
    assert log.snapshot().app_transaction_version("app") is None
    txn = log.start_transaction()
    txn.set_app_transaction("app", 7)
    txn.add(write_file(table_path, rows([1]).drop_columns(["part"])))
    txn.commit("WRITE")
    assert log.snapshot().app_transaction_version("app") == 7
    assert deltalake.DeltaTable(table_path).transaction_version("app") == 7


def test_commit_tags_and_user_metadata(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA)
    txn = log.start_transaction()
    txn.commit(
        "OPTIMIZE",
        {"zOrderBy": ["a"], "auto": False, "mode": "x"},
        {"n": 3, "d": {"a": 1}},
        tags={"use.optimization.event": '{"x":1}'},
        user_metadata="hi",
    )
    (h, *_) = log.history()
    assert h.commit_info["tags"] == {"use.optimization.event": '{"x":1}'}
    assert h.commit_info["userMetadata"] == "hi"
    # Stored as Spark stores them: map<string,string> (non-strings as JSON text), metrics may stay numeric.
    assert h.parameters == {"zOrderBy": '["a"]', "auto": "false", "mode": "x"}
    assert h.metrics == {"n": 3, "d": '{"a":1}'}


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda f: [f, f], InvalidArgumentError, "added twice"),
        (lambda f: [f, f.remove()], InvalidArgumentError, "both added and removed"),
        (lambda f: [AddFile("x.parquet", 1, 1, partition_values={"other": "1"})], InvalidArgumentError, "partition values"),
        (lambda f: [RemoveFile("nope.parquet", 1)], InvalidArgumentError, "not a live file"),
        (lambda f: [SetTransaction("a", 1), SetTransaction("a", 2)], InvalidArgumentError, "set twice"),
    ],
)
def test_commit_bad_actions(table_path, build, error, match):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, ["part"])
    f = AddFile("part=a/f.parquet", 10, 1, partition_values={"part": "a"})
    before = sorted(os.listdir(log.log_dir))
    with pytest.raises(error, match=match):
        txn = log.start_transaction()
        txn.add(*build(f))
        txn.commit("WRITE")
    assert sorted(os.listdir(log.log_dir)) == before


def test_bad_commit_arguments(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA)
    before = sorted(os.listdir(log.log_dir))
    for kwargs in ({"operation": ""}, {"operation": "W", "tags": {"a": 1}}, {"operation": "W", "parameters": {"x": object()}}):
        with pytest.raises(InvalidArgumentError):
            log.start_transaction().commit(**kwargs)
    with pytest.raises(InvalidArgumentError):
        log.start_transaction().add("add")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        AddFile("", 1, 1)
    with pytest.raises(InvalidArgumentError):
        AddFile("a", -1, 1)
    txn = log.start_transaction()
    txn.commit("W")
    with pytest.raises(InvalidArgumentError, match="already committed"):
        txn.commit("W")
    assert len(os.listdir(log.log_dir)) == len(before) + 1


def test_append_only(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, configuration={"delta.appendOnly": "true"})
    append(log, [1], partitioned=False)
    snap = log.snapshot()
    txn = log.start_transaction()
    txn.add(*remove_actions(snap.files, data_change=True))
    with pytest.raises(TableConstraintError, match="append-only"):
        txn.commit("DELETE")
    assert log.snapshot().version == 1
    # Rearranging data (dataChange=false) stays allowed.
    txn = log.start_transaction()
    new = write_file(table_path, rows([1]).drop_columns(["part"]))
    txn.add(
        *remove_actions(snap.files, data_change=False), AddFile(new.path, new.size, new.modification_time, False, {}, new.stats)
    )
    assert txn.commit("OPTIMIZE") == 2


def test_metadata_change(table_path):
    log = DeltaLog.for_path(table_path)
    snap = log.create(SCHEMA)
    m = snap.metadata
    txn = log.start_transaction()
    txn.add(
        Metadata(
            m.id,
            m.schema_string,
            m.partition_columns,
            {"qbeast.revision.1": "{}"},
            m.name,
            m.description,
            created_time=m.created_time,
        )
    )
    txn.commit("SET TBLPROPERTIES")
    assert log.snapshot().metadata.configuration == {"qbeast.revision.1": "{}"}
    assert deltalake.DeltaTable(table_path).metadata().configuration == {"qbeast.revision.1": "{}"}


def test_table_recreated_under_a_cached_log(table_path):
    import shutil

    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, name="first")
    assert log.snapshot().metadata.name == "first"
    shutil.rmtree(table_path)
    other = DeltaLog.for_path(table_path)
    time.sleep(0.01)
    other.create(pa.schema([("x", pa.int32())]), name="second")
    assert log.snapshot().metadata.name == "second"
    assert log.snapshot().schema.names == ["x"]


def test_cached_log_follows_other_writers(table_path):
    reader = DeltaLog.for_path(table_path)
    reader.create(SCHEMA, configuration={"delta.checkpointInterval": "5"})
    writer = DeltaLog.for_path(table_path)
    assert reader.snapshot().version == 0
    for i in range(1, 4):
        append(writer, [i], partitioned=False)
        assert reader.snapshot().version == i and reader.snapshot().files.num_rows == i
    for i in range(4, 60):
        append(writer, [i], partitioned=False)
    snap = reader.snapshot()  # far behind: reads the newest checkpoint instead of 56 commits
    assert snap.version == 59 and snap.files.num_rows == 59
    assert snap.state.checkpoint_version == 55


def test_snapshot_files_stay_in_few_chunks_however_many_commits(table_path):
    """Each replayed or followed commit adds an Arrow chunk; a cached log that followed hundreds of
    commits made every later kernel on its files pay per chunk (a filter of 40k files in 20k chunks:
    2.7 s against 4 ms), so replay keeps them few."""
    from use.delta.replay import MAX_CHUNKS

    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, configuration={"delta.checkpointInterval": "1000"})
    cached = DeltaLog.for_path(table_path)
    for i in range(1, 2 * MAX_CHUNKS + 10):
        txn = log.start_transaction()
        txn.add(AddFile(f"f{i}.parquet", 10, 1, True, {}, '{"numRecords":1}'))
        txn.commit("WRITE", {"mode": "Append"})
        assert cached.snapshot().files.column("path").num_chunks <= MAX_CHUNKS + 1
    fresh = DeltaLog.for_path(table_path).snapshot()
    assert fresh.files.column("path").num_chunks <= MAX_CHUNKS + 1
    assert sorted(fresh.files.column("path").to_pylist()) == sorted(cached.snapshot().files.column("path").to_pylist())
    assert fresh.files.num_rows == 2 * MAX_CHUNKS + 9


def test_history_of_foreign_and_corrupt_commits(table_path):
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA)
    with open(os.path.join(log.log_dir, f"{1:020d}.json"), "w") as fh:
        fh.write('{"add":{"path":"a.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}\n')
        fh.write('{ "commitInfo" : {"operation":"WRITE","operationParameters":{"mode":"Append"}}}\n')
    with open(os.path.join(log.log_dir, f"{2:020d}.json"), "w") as fh:
        fh.write('{"add":{"path":"b.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}\n')
    h = log.history()
    assert [(e.version, e.operation) for e in h] == [(2, "UNKNOWN"), (1, "WRITE"), (0, "CREATE TABLE")]
    assert h[1].parameters == {"mode": "Append"}
    with open(os.path.join(log.log_dir, f"{3:020d}.json"), "w") as fh:
        fh.write('{"commitInfo":{"operation":\n')
    with pytest.raises(CorruptLogError, match=r"00000000000000000003\.json line 1"):
        log.history()


def test_last_data_change_skips_maintenance_commits(table_path):
    # tiering.idle-after's input: OPTIMIZE, VACUUM and property changes touch no rows
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA)
    append(log, [1], partitioned=False)
    written = log.history()[0].timestamp  # times made increasing from version 0, as the scan below makes them
    m = log.snapshot().metadata
    for operation in ("OPTIMIZE", "SET TBLPROPERTIES", "VACUUM START", "VACUUM END", "UNSET TBLPROPERTIES"):
        txn = log.start_transaction()
        if "TBLPROPERTIES" in operation:
            txn.add(Metadata(m.id, m.schema_string, m.partition_columns, {"a.b": operation}, created_time=m.created_time))
        txn.commit(operation)
    assert log.snapshot().version == 6
    assert log.last_data_change_ms() == written
    # only the newest `scan` commits are read (and stat'ed): all maintenance, the oldest one's time (a
    # lower bound), increasing over the scanned range only
    listing = list_log(LocalLogStore(), log.log_dir)
    assert log.last_data_change_ms(scan=2) == listing.commit_timestamps(start=5)[5]
    append(log, [2], partitioned=False)
    assert log.last_data_change_ms() == log.history()[0].timestamp
    # a table without commits has no last change
    assert DeltaLog.for_path(str(table_path) + "-none").last_data_change_ms() is None


def test_metadata_change_validates_new_properties(table_path):
    log = DeltaLog.for_path(table_path)
    snap = log.create(SCHEMA)
    m = snap.metadata
    for conf, error in (
        ({"delta.checkpointInterval": "-1"}, ConfigError),
        ({"delta.enableDeletionVectors": "true"}, UnsupportedFeatureError),
        ({"delta.typo": "1"}, ConfigError),
    ):
        txn = log.start_transaction()
        txn.add(Metadata(m.id, m.schema_string, m.partition_columns, conf, created_time=m.created_time))
        with pytest.raises(error):
            txn.commit("SET TBLPROPERTIES")
    assert log.snapshot().version == 0


# --- listing without stats ------------------------------------------------------------------------------


class CountingStore(LocalLogStore):
    """The real local store, recording which files it stats and whether it lists with stats."""

    def __init__(self) -> None:
        self.stated: list[str] = []
        self.stat_listings = 0

    def file_info(self, path: str):  # type: ignore[no-untyped-def]
        self.stated.append(os.path.basename(path))
        return super().file_info(path)

    def modification_time(self, path: str) -> int:
        self.stated.append(os.path.basename(path))
        return super().modification_time(path)

    def list_dir(self, directory: str):  # type: ignore[no-untyped-def]
        self.stat_listings += 1
        return super().list_dir(directory)


def _table_with_checkpoints(table_path: str, commits: int = 12) -> DeltaLog:
    """Versions 0..commits with checkpoints every 5; commit v's file time pinned to BASE + v seconds."""
    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA, configuration={"delta.checkpointInterval": "5"})
    for i in range(1, commits + 1):
        append(log, [i], partitioned=False)
    pin_commit_times(log, {v: BASE + v * 1000 for v in range(commits + 1)})
    return log


BASE = 1_700_000_000_000


def pin_commit_times(log: DeltaLog, times: dict[int, int]) -> None:
    for v, ms in times.items():
        os.utime(os.path.join(log.log_dir, f"{v:020d}.json"), ns=(ms * 1_000_000,) * 2)


def _versions(names: list[str]) -> set[int]:
    return {int(n[:20]) for n in names if n.endswith(".json")}


def test_snapshot_load_stats_only_commits_from_its_checkpoint(table_path):
    _table_with_checkpoints(table_path)
    store = CountingStore()
    log = DeltaLog(os.path.abspath(table_path), store)
    snap = log.snapshot()
    assert snap.version == 12 and snap.state.checkpoint_version == 10 and snap.files.num_rows == 12
    assert snap.timestamp == BASE + 12_000
    assert store.stat_listings == 0
    assert _versions(store.stated) == {10, 11, 12} and len(store.stated) == 3
    store.stated.clear()
    old = log.snapshot(version=7)
    assert old.version == 7 and old.files.num_rows == 7 and old.timestamp == BASE + 7_000
    # Commits 5..7 for the time, and the cached snapshot's own commit to check the cache is still ours.
    assert _versions(store.stated) <= {5, 6, 7, 12}
    # Every version's time is the one history shows (and time travel finds it by).
    history = {h.version: h.timestamp for h in DeltaLog.for_path(table_path).history()}
    assert history == {v: BASE + v * 1000 for v in range(13)}
    for v in range(13):
        assert DeltaLog.for_path(table_path).snapshot(version=v).timestamp == history[v]
        assert DeltaLog.for_path(table_path).snapshot(timestamp=history[v]).version == v


def test_time_travel_with_equal_commit_times_across_checkpoints(table_path):
    log = _table_with_checkpoints(table_path)
    # Every commit written in the same millisecond (a fast writer, a copied table): Delta makes
    # the times strictly increasing over the log, so version v counts as committed at BASE + v.
    pin_commit_times(log, {v: BASE for v in range(13)})
    fresh = DeltaLog.for_path(table_path)
    assert [h.timestamp for h in fresh.history()] == [BASE + v for v in range(12, -1, -1)]
    for v in (0, 4, 5, 7, 10, 12):
        snap = DeltaLog.for_path(table_path).snapshot(timestamp=BASE + v)
        assert snap.version == v and snap.timestamp == BASE + v and snap.files.num_rows == v
    assert fresh.snapshot(timestamp=BASE + 10**6).version == 12
    with pytest.raises(VersionNotFoundError, match="earliest available is version 0"):
        fresh.snapshot(timestamp=BASE - 1)
    # Loading by version only looks at the commits from its checkpoint on (documented): the time
    # is the commit file's, made increasing from there.
    latest = DeltaLog.for_path(table_path).snapshot()
    assert BASE <= latest.timestamp <= BASE + 12


def test_time_travel_after_log_cleanup(table_path):
    log = _table_with_checkpoints(table_path)
    for v in range(5):
        os.remove(os.path.join(log.log_dir, f"{v:020d}.json"))
    fresh = DeltaLog.for_path(table_path)
    assert fresh.snapshot(timestamp=BASE + 6_500).version == 6
    assert fresh.snapshot(version=5).timestamp == BASE + 5_000
    with pytest.raises(VersionNotFoundError, match="earliest available is version 5"):
        fresh.snapshot(timestamp=BASE + 4_000)


def test_listing_is_names_only_and_tolerates_deleted_files(table_path):
    log = _table_with_checkpoints(table_path, commits=6)
    os.makedirs(os.path.join(log.log_dir, "_staged_commits"))
    open(os.path.join(log.log_dir, ".00000000000000000007.json.abc.tmp"), "wb").close()
    store = LocalLogStore()
    names = store.list_names(log.log_dir)
    assert names == sorted(names) and "_staged_commits" not in names and not any(n.startswith(".") for n in names)
    assert store.list_names(os.path.join(table_path, "nope")) == []
    listing = list_log(store, log.log_dir)
    assert sorted(listing.commits) == list(range(7)) and sorted(listing.checkpoints) == [5]
    cp = listing.checkpoints[5]
    assert cp.size == os.path.getsize(cp.paths[0])
    # A commit deleted after listing (log cleanup) has no time; the others keep theirs.
    os.remove(listing.commits[1].path)
    assert listing.commits[1].info() is None
    with pytest.raises(FileNotFoundError):
        listing.commits[1].modification_time
    stamps = listing.commit_timestamps()
    assert 1 not in stamps and stamps[2] == BASE + 2_000
    assert listing.commit_timestamp(6) == BASE + 6_000 and listing.commit_timestamp(99) is None
    assert listing.commits[6].size == os.path.getsize(listing.commits[6].path)


def test_in_commit_timestamps_are_commit_times(table_path):
    # A table that enabled inCommitTimestamp (a writer-only feature: we read it) at version 2, whose
    # log was then copied: the file times say nothing, the commits' inCommitTimestamp is their time.
    import json

    log = DeltaLog.for_path(table_path)
    log.create(SCHEMA)
    append(log, [1], partitioned=False)
    m = log.snapshot().metadata.to_action()["metaData"]
    ict = {2: BASE + 10_000, 3: BASE + 20_000, 4: BASE + 30_000}
    m["configuration"] = {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "2",
        "delta.inCommitTimestampEnablementTimestamp": str(ict[2]),
    }
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", "invariants", "inCommitTimestamp"]}
    bodies = {2: [{"protocol": protocol}, {"metaData": m}], 3: [], 4: []}
    for v, actions in bodies.items():
        lines = [
            {"commitInfo": {"inCommitTimestamp": ict[v], "timestamp": ict[v], "operation": f"OP{v}"}},
            *actions,
            {"add": {"path": f"f{v}.parquet", "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True}},
        ]
        with open(os.path.join(log.log_dir, f"{v:020d}.json"), "w") as fh:
            fh.write("\n".join(json.dumps(x) for x in lines) + "\n")
    pin_commit_times(log, {0: BASE, 1: BASE + 1000, 2: BASE + 100_000, 3: BASE + 100_000, 4: BASE + 100_000})
    fresh = DeltaLog.for_path(table_path)
    assert fresh.snapshot(timestamp=BASE + 25_000).version == 3
    assert fresh.snapshot(timestamp=BASE + 10_000).version == 2
    assert fresh.snapshot(timestamp=BASE + 9_999).version == 1  # before enablement: file times
    assert fresh.snapshot(timestamp=BASE + 25_000).timestamp == ict[3]
    assert DeltaLog.for_path(table_path).snapshot(version=3).timestamp == ict[3]
    assert DeltaLog.for_path(table_path).snapshot().timestamp == ict[4]
    assert [(h.version, h.timestamp) for h in fresh.history()] == [
        (4, ict[4]),
        (3, ict[3]),
        (2, ict[2]),
        (1, BASE + 1000),
        (0, BASE),
    ]


def test_last_data_change_stats_only_the_commits_it_scans(table_path):
    # the service asks this of every table each interval: the newest commits, not the whole log
    _table_with_checkpoints(table_path)
    store = CountingStore()
    log = DeltaLog(os.path.abspath(table_path), store)
    assert log.last_data_change_ms(scan=3) == BASE + 12_000  # version 12 is an append
    assert _versions(store.stated) == {10, 11, 12}
    with pytest.raises(InvalidArgumentError, match="scan must be a positive int, got 0"):
        log.last_data_change_ms(scan=0)


# --- types: the write rule and void columns -------------------------------------------------------------


def test_write_type_rule_takes_lossless_widenings_and_ignores_nullability():
    from use.delta.schema import nullable_type, type_sql, write_type_problem

    def struct(*fields):
        return {
            "type": "struct",
            "fields": [{"name": n, "type": t, "nullable": nullable, "metadata": {}} for n, t, nullable in fields],
        }

    # NULLs aside, any order and case of nested fields, lossless widenings, NULL (void) into anything
    assert write_type_problem(struct(("a", "integer", False)), struct(("a", "integer", True)), "s") is None
    assert write_type_problem(struct(("a", "integer", True)), struct(("a", "integer", False)), "s") is None  # checked per row
    assert (
        write_type_problem(
            struct(("B", "string", True), ("a", "short", False)), struct(("a", "integer", True), ("b", "string", True)), "s"
        )
        is None
    )
    for data, table in [
        ("integer", "long"),
        ("float", "double"),
        ("decimal(8,2)", "decimal(10,2)"),
        ("date", "timestamp_ntz"),
        ("void", "string"),
    ]:
        assert write_type_problem(data, table, "c") is None, (data, table)
    array = {"type": "array", "elementType": struct(("q", "integer", False)), "containsNull": False}
    assert write_type_problem(array, nullable_type(array), "arr") is None
    # narrowing, converting, nested differences: named, in Spark's spelling
    assert write_type_problem("long", "integer", "c") == "c is bigint in the data and int in the table"
    assert write_type_problem("double", "float", "c") == "c is double in the data and float in the table"
    assert (
        write_type_problem("decimal(12,2)", "decimal(10,2)", "c")
        == "c is decimal(12,2) in the data and decimal(10,2) in the table"
    )
    assert write_type_problem(struct(("a", "integer", True)), struct(("a", "integer", True), ("b", "string", True)), "s") == (
        "s is struct<a:int> in the data and struct<a:int,b:string> in the table (fields missing from the data: b)"
    )
    assert write_type_problem(
        {"type": "array", "elementType": "long", "containsNull": True},
        {"type": "array", "elementType": "integer", "containsNull": True},
        "arr",
    ) == ("arr.element is bigint in the data and int in the table")
    # a column added by a write is nullable to the last nested field (map keys excepted)
    assert nullable_type(array) == {"type": "array", "elementType": struct(("q", "integer", True)), "containsNull": True}
    assert (
        type_sql(array, nullability=True) == "array<struct<q:int NOT NULL> NOT NULL>"
        and type_sql(array) == "array<struct<q:int>>"
    )


def test_void_columns_are_read_as_nulls_and_never_written(table_path):
    """The protocol's `void` type (delta-spark's mergeSchema of an all-NULL column) reads as NULLs;
    a new table cannot get one, and no data file is added to a table that has one (writers must
    leave void columns out of their files, which USE's do not), metadata-only commits still are."""
    import dataclasses

    log = DeltaLog.for_path(table_path)
    with pytest.raises(SchemaMismatchError, match=r"column n of the data has no type \(it is all NULL.*cast it to the type"):
        log.create(pa.schema([("id", pa.int64()), ("n", pa.null())]))
    assert not log.exists()
    deltalake.write_deltalake(table_path, pa.table({"id": pa.array([1, 2], pa.int64())}))
    add_void_column(table_path, "n")
    snap = DeltaLog.for_path(table_path).snapshot()
    assert (
        snap.schema.field("n").type == pa.null()
        and deltalake.DeltaTable(table_path).schema().to_arrow().field("n").type == pa.null()
    )
    with pytest.raises(
        UnsupportedFeatureError, match=r"has column\(s\) n of type void .* USE reads the table .* but writes no data into it"
    ):
        append(log, [3], partitioned=False)
    assert DeltaLog.for_path(table_path).snapshot().version == 0
    txn = log.start_transaction()
    txn.add(dataclasses.replace(snap.metadata, configuration={"delta.appendOnly": "true"}))
    assert txn.commit("SET TBLPROPERTIES", {}) == 1


def _field(metadata: dict[str, object]) -> dict[str, object]:
    return {"name": "id", "type": "long", "nullable": True, "metadata": metadata}


@pytest.mark.parametrize(
    "protocol, field_metadata, configuration, feature",
    [
        (Protocol(1, 2), {"delta.invariants": '{"expression": {"expression": "id > 0"}}'}, {}, "invariants"),
        (Protocol(1, 3), {}, {"delta.constraints.positive": "id > 0"}, "checkConstraints"),
        (Protocol(1, 4), {"delta.generationExpression": "1"}, {}, "generatedColumns"),
        (Protocol(1, 6), {"delta.identity.start": 1, "delta.identity.step": 1}, {}, "identityColumns"),
        (Protocol(3, 7, (), ("allowColumnDefaults",)), {"CURRENT_DEFAULT": "1"}, {}, "allowColumnDefaults"),
    ],
)
def test_write_refusals_name_the_feature(protocol, field_metadata, configuration, feature):
    """A caller tells a refusal's feature from `.feature`, as for every other refused feature,
    without parsing the message (the oracle tests assert it for tables delta-spark writes)."""
    schema = json.dumps({"type": "struct", "fields": [_field(field_metadata)]})
    metadata = Metadata(id="t", schema_string=schema, configuration=configuration)
    with pytest.raises(UnsupportedFeatureError, match=feature) as caught:
        check_write_support(protocol, metadata, "t")
    assert caught.value.feature == feature
