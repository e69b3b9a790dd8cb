"""Log replay: the fast columnar JSON path equals the exact one, corrupted logs get typed errors naming
the file and line, and unsupported features are refused by name."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from use.delta import AddFile, DeltaLog, Protocol
from use.delta.commits import parse_commit, parse_commits
from use.errors import CorruptLogError, TableNotFoundError, UnsupportedFeatureError, VersionNotFoundError

SCHEMA = pa.schema([("id", pa.int64()), ("d", pa.string())])


def line(kind: str, body: dict) -> str:
    return json.dumps({kind: body})


COMMIT_A = "\n".join(
    [
        line("commitInfo", {"operation": "WRITE", "operationParameters": {"mode": ["x"]}, "n": 1}),
        line(
            "add",
            {
                "path": "d=2024-01-01/a.parquet",
                "partitionValues": {"d": "2024-01-01"},
                "size": 10,
                "modificationTime": 5,
                "dataChange": True,
                "stats": '{"numRecords":1}',
                "tags": {"revision": "1", "blocks": '[{"cubeId":""}]', "when": "2024-01-01 10:00:00"},
            },
        ),
        line(
            "add",
            {
                "path": "d=__HIVE_DEFAULT_PARTITION__/b.parquet",
                "partitionValues": {"d": None},
                "size": 11,
                "modificationTime": 6,
                "dataChange": False,
                "stats": None,
                "tags": None,
                "baseRowId": None,
            },
        ),
        line(
            "add",
            {
                "path": "c%20x.parquet",
                "partitionValues": {"d": "x"},
                "size": 12,
                "modificationTime": 7,
                "dataChange": True,
                "tags": {},
            },
        ),
        "",
    ]
)
COMMIT_B = "\n".join(
    [
        line("commitInfo", {"operation": "DELETE", "operationParameters": {"mode": 3}, "n": "one"}),
        line(
            "remove",
            {
                "path": "d=2024-01-01/a.parquet",
                "deletionTimestamp": 9,
                "dataChange": True,
                "extendedFileMetadata": True,
                "partitionValues": {"d": "2024-01-01"},
                "size": 10,
            },
        ),
        line("remove", {"path": "old.parquet", "deletionTimestamp": 9, "dataChange": False}),
        line("txn", {"appId": "app", "version": 3}),
        # an oddly formatted action still parses (through the exact path)
        '{ "add": {"path": "e.parquet", "partitionValues": {"d": "y"}, "size": 1, "modificationTime": 1, "dataChange": true}}',
    ]
)


def test_fast_path_equals_exact_path():
    items = [(1, "1.json", COMMIT_A.encode()), (2, "2.json", COMMIT_B.encode())]
    fast = parse_commits(items, ["d"])
    exact = [parse_commit(v, p, d) for v, p, d in items]
    for f, e in zip(fast, exact, strict=False):
        assert f.adds.to_pylist() == e.adds.to_pylist()
        assert f.removes.to_pylist() == e.removes.to_pylist()
        assert f.txns == e.txns and f.commit_info == e.commit_info
    a = fast[0].adds.to_pylist()
    assert dict(a[0]["tags"])["when"] == "2024-01-01 10:00:00"  # not reinterpreted as a timestamp
    assert dict(a[0]["partition_values"]) == {"d": "2024-01-01"}
    assert dict(a[1]["partition_values"]) == {"d": None}
    assert a[1]["tags"] is None and a[2]["tags"] == []
    assert fast[1].removes.to_pylist()[1]["partition_values"] is None


def test_fast_path_without_known_partition_columns():
    # Partition columns learnt from the metaData in the same batch.
    meta = line(
        "metaData",
        {
            "id": "x",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": '{"type":"struct","fields":[]}',
            "partitionColumns": ["d"],
            "configuration": {},
        },
    )
    items = [(0, "0.json", (meta + "\n" + COMMIT_A).encode())]
    assert parse_commits(items)[0].adds.to_pylist() == parse_commit(*items[0]).adds.to_pylist()


def metadata_line(partition_columns: list[str], schema_string: str = '{"type":"struct","fields":[]}') -> str:
    return line(
        "metaData",
        {
            "id": "x",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string,
            "partitionColumns": partition_columns,
            "configuration": {},
        },
    )


def add_line(path: str, partition_values: dict) -> str:
    return line("add", {"path": path, "partitionValues": partition_values, "size": 1, "modificationTime": 1, "dataChange": True})


def test_fast_path_types_partition_values_per_commit():
    # The shape of Delta's golden table time-travel-partition-changes-b: version 1 changes the
    # partition column; every action keeps exactly the keys its line has, in one batch or apart.
    v0 = [
        line("protocol", {"minReaderVersion": 1, "minWriterVersion": 2}),
        metadata_line(["a"]),
        add_line("a=0/f0.parquet", {"a": "0"}),
        add_line("a=1/f1.parquet", {"a": "1"}),
    ]
    v1 = [
        metadata_line(["b"]),
        add_line("b=0/g0.parquet", {"b": "0"}),
        add_line("b=1/g1.parquet", {"b": None}),
        line("remove", {"path": "a=0/f0.parquet", "deletionTimestamp": 9, "dataChange": True}),
        line("remove", {"path": "a=1/f1.parquet", "deletionTimestamp": 9, "dataChange": True, "partitionValues": {"a": "1"}}),
    ]
    v2 = [add_line("b=2/g2.parquet", {"b": "2"}), add_line("b=3/g3.parquet", {"b": "3"})]
    items = [(v, f"{v}.json", "\n".join(c).encode()) for v, c in enumerate((v0, v1, v2))]
    for start, known in ((0, ()), (1, ("a",)), (2, ("b",))):
        for fast, (v, p, d) in zip(parse_commits(items[start:], known), items[start:], strict=False):
            exact = parse_commit(v, p, d)
            assert fast.adds.to_pylist() == exact.adds.to_pylist()
            assert fast.removes.to_pylist() == exact.removes.to_pylist()
    _, b1, b2 = parse_commits(items)
    assert [dict(x) for x in b1.adds.column("partition_values").to_pylist()] == [{"b": "0"}, {"b": None}]
    assert [dict(x) for x in b2.adds.column("partition_values").to_pylist()] == [{"b": "2"}, {"b": "3"}]
    assert [None if x is None else dict(x) for x in b1.removes.column("partition_values").to_pylist()] == [None, {"a": "1"}]


def make_table(path: str) -> DeltaLog:
    log = DeltaLog.for_path(path)
    log.create(SCHEMA)
    txn = log.start_transaction()
    txn.add(AddFile("a.parquet", 1, 1))
    txn.commit("WRITE")
    return log


def write_commit(log: DeltaLog, version: int, lines: list[str]) -> None:
    with open(os.path.join(log.log_dir, f"{version:020d}.json"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "content, match",
    [
        ("", "is empty"),
        ('{"commitInfo":{}}\n{"add":{"path":"b.parquet","size":1,', r"00000000000000000002\.json line 2 is not valid JSON"),
        ('{"commitInfo":{}}\n\n{"add":{"path":"b.parquet"}}\n[1,2]\n', r"line 4 must be a JSON object"),
        ('{"add":{"size":1}}\n', r"line 1: add action without a string path"),
        ('{"protocol":{"minReaderVersion":"x"}}\n', "protocol action is malformed"),
        ('{"add": 5}\n', "must be a JSON object"),
    ],
)
def test_corrupted_commit(table_path, content, match):
    log = make_table(table_path)
    with open(os.path.join(log.log_dir, f"{2:020d}.json"), "w") as fh:
        fh.write(content)
    before = sorted(os.listdir(log.log_dir))
    with pytest.raises(CorruptLogError, match=match):
        DeltaLog.for_path(table_path).snapshot()
    # Earlier versions stay readable, and nothing was touched.
    assert DeltaLog.for_path(table_path).snapshot(version=1).files.num_rows == 1
    assert sorted(os.listdir(log.log_dir)) == before


@pytest.mark.parametrize(
    "content, where",
    [
        # in the columnar fast path (every line after the header is a file action) ...
        (
            b'{"commitInfo":{}}\n{"add":{"path":"b\xff.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}\n',
            "line 2",
        ),
        (
            b'{"add":{"path":"b.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}\n'
            b'{"add":{"path":"c.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,"stats":"{\\"s\\":\\"\xc3\\"}"}}\n',
            "line 2",
        ),
        # ... and in the exact one
        (b'{"commitInfo":{"operation":"\xe2\x82"}}\n', "line 1"),
        (
            b'{"add":{"path":"b.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}\n{"txn":{"appId":"\xff","version":1}}\n',
            "line 2",
        ),
    ],
)
def test_invalid_utf8_is_corrupt_log(table_path, content, where):
    log = make_table(table_path)
    with open(os.path.join(log.log_dir, f"{2:020d}.json"), "wb") as fh:
        fh.write(content)
    with pytest.raises(CorruptLogError, match=rf"00000000000000000002\.json {where} is not valid JSON"):
        DeltaLog.for_path(table_path).snapshot()
    with pytest.raises(CorruptLogError, match=where):
        parse_commits([(2, "2.json", content)])
    assert DeltaLog.for_path(table_path).snapshot(version=1).files.num_rows == 1


def test_superseded_malformed_metadata_is_not_validated(table_path):
    # As in a Databricks DLT table (delta-rs test data delta-live-table): version 0's metaData has no
    # schemaString, version 1 restates a full one. Only the metaData that wins the replay counts.
    log = DeltaLog.for_path(table_path)
    os.makedirs(log.log_dir)
    full = json.loads(
        metadata_line(
            ["d"],
            '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},'
            '{"name":"d","type":"string","nullable":true,"metadata":{}}]}',
        )
    )["metaData"]
    partial = {k: v for k, v in full.items() if k != "schemaString"}
    write_commit(
        log,
        0,
        [
            line("commitInfo", {"operation": "DLT REFRESH"}),
            line("protocol", {"minReaderVersion": 1, "minWriterVersion": 2}),
            line("metaData", partial),
        ],
    )
    write_commit(
        log, 1, [line("commitInfo", {"operation": "DLT SETUP"}), line("metaData", full), add_line("d=x/a.parquet", {"d": "x"})]
    )
    for snap in (DeltaLog.for_path(table_path).snapshot(), log.snapshot()):
        assert snap.version == 1 and snap.schema.names == ["id", "d"]
        assert [dict(v) for v in snap.files.column("partition_values").to_pylist()] == [{"d": "x"}]
    with pytest.raises(CorruptLogError, match=r"00000000000000000000\.json line 3: metaData action is malformed.*schemaString"):
        DeltaLog.for_path(table_path).snapshot(version=0)
    # A malformed metaData that wins is refused, however it is reached (replay or moving a cached snapshot on).
    write_commit(log, 2, [line("commitInfo", {}), line("metaData", partial)])
    for reader in (DeltaLog.for_path(table_path), log):
        with pytest.raises(CorruptLogError, match=r"00000000000000000002\.json line 2: metaData action is malformed"):
            reader.snapshot()


def test_unknown_keys_are_ignored(table_path):
    # The shape of Delta's transaction_log_schema_evolvability fixture: a later writer adds unknown
    # top-level keys beside an action, unknown fields inside one, and unknown actions. delta-spark
    # and delta-rs read such lines, ignoring what they do not know.
    log = make_table(table_path)
    lines = [
        '{"commitInfo":{"operation":"WRITE","isBlindAppend":true},"some_new_action_alongside":["a","1"]}',
        '{"some_new_action":{"a":1}}',
        '{"add":{"path":"b.parquet","partitionValues":{},"size":2,"modificationTime":1,"dataChange":true,"some_new_field":1},'
        '"some_new_action_alongside":["a","1"]}',
        '{"remove":{"path":"a.parquet","deletionTimestamp":5,"dataChange":true},"some_new_action_alongside":{"x":[1]}}',
    ]
    write_commit(log, 2, lines)
    content = ("\n".join(lines) + "\n").encode()
    (fast,), exact = parse_commits([(2, "2.json", content)]), parse_commit(2, "2.json", content)
    assert fast.adds.to_pylist() == exact.adds.to_pylist() and fast.removes.to_pylist() == exact.removes.to_pylist()
    assert exact.commit_info == {"operation": "WRITE", "isBlindAppend": True}
    snap = DeltaLog.for_path(table_path).snapshot()
    assert snap.version == 2 and snap.files.column("path").to_pylist() == ["b.parquet"]
    assert snap.all_tombstones.column("path").to_pylist() == ["a.parquet"]


@pytest.mark.parametrize(
    "content",
    [
        '{"add":{"path":"b.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true},'
        '"remove":{"path":"a.parquet","deletionTimestamp":5,"dataChange":true}}\n',
        '{"commitInfo":{}}\n{"add":{"path":"b.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true},'
        '"remove":{"path":"a.parquet","deletionTimestamp":5,"dataChange":true}}\n',
        '{"commitInfo":{},"protocol":{"minReaderVersion":1,"minWriterVersion":2}}\n',
        "{}\n",
    ],
)
def test_line_with_two_actions_or_none_is_corrupt(table_path, content):
    log = make_table(table_path)
    with open(os.path.join(log.log_dir, f"{2:020d}.json"), "w") as fh:
        fh.write(content)
    with pytest.raises(CorruptLogError, match=r"00000000000000000002\.json line \d+ must hold exactly one action"):
        DeltaLog.for_path(table_path).snapshot()


def test_gap_in_log(table_path):
    log = make_table(table_path)
    write_commit(log, 3, [line("commitInfo", {})])
    with pytest.raises(CorruptLogError, match=r"00000000000000000002\.json is missing"):
        DeltaLog.for_path(table_path).snapshot()


def test_log_without_version_zero_or_checkpoint(table_path):
    log = make_table(table_path)
    os.remove(os.path.join(log.log_dir, f"{0:020d}.json"))
    with pytest.raises(VersionNotFoundError, match="cannot be reconstructed"):
        DeltaLog.for_path(table_path).snapshot()


def test_only_stray_files_is_no_table(table_path):
    os.makedirs(os.path.join(table_path, "_delta_log"))
    open(os.path.join(table_path, "_delta_log", "README"), "w").close()
    with pytest.raises(TableNotFoundError):
        DeltaLog.for_path(table_path).snapshot()


def set_protocol(log: DeltaLog, protocol: dict, configuration: dict | None = None) -> None:
    lines = [line("commitInfo", {"operation": "UPGRADE"}), line("protocol", protocol)]
    if configuration is not None:
        m = log.snapshot().metadata.to_action()["metaData"]
        m["configuration"] = configuration
        lines.append(line("metaData", m))
    write_commit(log, 2, lines)


@pytest.mark.parametrize(
    "protocol, configuration, feature",
    [
        (
            {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["someFutureThing"],
                "writerFeatures": ["someFutureThing"],
            },
            None,
            "someFutureThing",
        ),
        ({"minReaderVersion": 4, "minWriterVersion": 7}, None, "reader version 4"),
    ],
)
def test_unsupported_features_refused(table_path, protocol, configuration, feature):
    log = make_table(table_path)
    set_protocol(log, protocol, configuration)
    with pytest.raises(UnsupportedFeatureError, match=feature):
        DeltaLog.for_path(table_path).snapshot()
    assert DeltaLog.for_path(table_path).snapshot(version=1).version == 1


def test_deletion_vectors_are_read_but_not_written(table_path):
    """The `deletionVectors` feature is read (rows they delete are dropped by every read), but USE
    does not write DVs yet, so a write to such a table is refused by the feature's name."""
    from use.delta.snapshot import check_write_support

    log = make_table(table_path)
    features = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors"],
    }
    set_protocol(log, features, {"delta.enableDeletionVectors": "true"})
    snap = DeltaLog.for_path(table_path).snapshot()
    assert snap.version == 2 and "deletionVectors" in snap.protocol.reader_features
    with pytest.raises(UnsupportedFeatureError, match="deletionVectors") as caught:
        check_write_support(snap.protocol, snap.metadata, table_path)
    assert caught.value.feature == "deletionVectors"


@pytest.mark.parametrize(
    "protocol, configuration",
    [
        (
            {
                "minReaderVersion": 1,
                "minWriterVersion": 7,
                "writerFeatures": ["appendOnly", "invariants", "changeDataFeed", "domainMetadata", "checkConstraints"],
            },
            None,
        ),
        (
            {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["timestampNtz"],
                "writerFeatures": ["timestampNtz"],
            },
            None,
        ),
        ({"minReaderVersion": 2, "minWriterVersion": 5}, {"delta.columnMapping.mode": "none"}),
        ({"minReaderVersion": 1, "minWriterVersion": 4}, {"delta.enableChangeDataFeed": "true"}),
    ],
)
def test_supported_features_read_and_written(table_path, protocol, configuration):
    log = make_table(table_path)
    set_protocol(log, protocol, configuration)
    fresh = DeltaLog.for_path(table_path)
    assert fresh.snapshot().version == 2
    txn = fresh.start_transaction()
    txn.add(AddFile("b.parquet", 1, 1))
    assert txn.commit("WRITE") == 3


@pytest.mark.parametrize(
    "protocol, feature",
    [
        ({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["rowTracking", "domainMetadata"]}, "rowTracking"),
        ({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp"]}, "inCommitTimestamp"),
        (
            {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["icebergCompatV1", "columnMapping"]},
            "icebergCompatV1",
        ),
        (
            {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [], "writerFeatures": ["icebergCompatV2"]},
            "icebergCompatV2",
        ),
        (
            {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["timestampNtz"],
                "writerFeatures": ["timestampNtz", "clustering", "domainMetadata"],
            },
            "clustering",
        ),
        ({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["someFutureWriterThing"]}, "someFutureWriterThing"),
    ],
)
def test_writer_only_features_read_but_not_written(table_path, protocol, feature):
    # A reader needs only the reader features (delta-rs and delta-spark read these tables); a
    # writer must honour every writer feature, so the write is refused by name, with nothing written.
    log = make_table(table_path)
    set_protocol(log, protocol)
    fresh = DeltaLog.for_path(table_path)
    snap = fresh.snapshot()
    assert snap.version == 2 and snap.files.column("path").to_pylist() == ["a.parquet"]
    before = sorted(os.listdir(log.log_dir))
    txn = fresh.start_transaction()
    txn.add(AddFile("b.parquet", 1, 1))
    with pytest.raises(UnsupportedFeatureError, match=f"{feature}.*can read this table but not write"):
        txn.commit("WRITE")
    assert sorted(os.listdir(log.log_dir)) == before


def test_check_constraints_read_only(table_path):
    log = make_table(table_path)
    set_protocol(log, {"minReaderVersion": 1, "minWriterVersion": 3}, {"delta.constraints.positive": "id > 0"})
    fresh = DeltaLog.for_path(table_path)
    assert fresh.snapshot().files.num_rows == 1
    before = sorted(os.listdir(log.log_dir))
    txn = fresh.start_transaction()
    txn.add(AddFile("b.parquet", 1, 1))
    with pytest.raises(UnsupportedFeatureError, match="checkConstraints"):
        txn.commit("WRITE")
    assert sorted(os.listdir(log.log_dir)) == before


def test_invariants_refused_on_write_only_when_declared(table_path):
    log = make_table(table_path)
    m = log.snapshot().metadata.to_action()["metaData"]
    schema = json.loads(m["schemaString"])
    schema["fields"][0]["metadata"] = {"delta.invariants": json.dumps({"expression": {"expression": "id > 3"}})}
    m["schemaString"] = json.dumps(schema)
    write_commit(log, 2, [line("commitInfo", {}), line("metaData", m)])
    fresh = DeltaLog.for_path(table_path)
    assert fresh.snapshot().version == 2
    txn = fresh.start_transaction()
    txn.add(AddFile("b.parquet", 1, 1))
    with pytest.raises(UnsupportedFeatureError, match="invariants"):
        txn.commit("WRITE")


def test_protocol_downgrade_refused(table_path):
    log = make_table(table_path)
    txn = log.start_transaction()
    txn.add(Protocol(1, 1))
    with pytest.raises(Exception, match="downgrade"):
        txn.commit("DOWNGRADE")


def test_fast_path_long_lines_and_trailing_commit_info():
    big = json.dumps({"numRecords": 1, "minValues": {"s": "x" * 1_500_000}})
    content = "\r\n".join(
        [
            line(
                "add",
                {"path": "a.parquet", "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True, "stats": big},
            ),
            line("add", {"path": "b.parquet", "partitionValues": {}, "size": 2, "modificationTime": 1, "dataChange": True}),
            line("commitInfo", {"operation": "WRITE"}),
        ]
    ).encode()
    (fast,) = parse_commits([(3, "3.json", content)])
    exact = parse_commit(3, "3.json", content)
    assert fast.adds.to_pylist() == exact.adds.to_pylist()
    assert fast.adds.column("stats")[0].as_py() == big
    assert fast.commit_info == {"operation": "WRITE"}


def test_reconcile_keeps_untouched_base_without_copy():
    from use.delta.replay import reconcile

    (a,) = parse_commits([(1, "1.json", COMMIT_A.encode())], ["d"])
    base_files, base_tombs = reconcile(a.adds.slice(0, 0), a.removes, [a])
    assert base_files.num_rows == 3
    # Blind appends of new paths leave the base tables as they are (same objects: nothing copied).
    new = parse_commit(
        2,
        "2.json",
        line(
            "add", {"path": "n.parquet", "partitionValues": {"d": "z"}, "size": 1, "modificationTime": 1, "dataChange": True}
        ).encode(),
    )
    files, _ = reconcile(base_files, base_tombs, [new])
    assert files.num_rows == 4 and files.slice(0, 3).to_pylist() == base_files.to_pylist()
    addresses = {b.address for c in files.column("stats").chunks for b in c.buffers() if b is not None}
    assert {b.address for c in base_files.column("stats").chunks for b in c.buffers() if b is not None} <= addresses
    # A commit that touches base paths drops exactly those rows (and re-adds, newest wins).
    (b,) = parse_commits([(3, "3.json", COMMIT_B.encode())], ["d"])
    files, tombs = reconcile(base_files, base_tombs, [b])
    assert sorted(files.column("path").to_pylist()) == ["c%20x.parquet", "d=__HIVE_DEFAULT_PARTITION__/b.parquet", "e.parquet"]
    assert sorted(tombs.column("path").to_pylist()) == ["d=2024-01-01/a.parquet", "old.parquet"]
