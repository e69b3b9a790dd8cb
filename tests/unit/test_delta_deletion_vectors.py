"""Deletion vectors in the pure layer: Z85, the RoaringBitmapArray and DV file formats, descriptors,
log replay keyed by (path, DV id) with checkpoints, and a typed error for every way a DV can be damaged
(the file left as it was)."""

from __future__ import annotations

import json
import os
import struct
import time
import uuid
import zlib

import numpy as np
import pyarrow as pa
import pytest
from pyroaring import BitMap, BitMap64

from corpus_support import corpus_archive, extract, missing_reason, table_path
from use.delta import DeltaLog, z85
from use.delta.actions import DELETION_VECTOR_TYPE
from use.delta.deletion_vectors import (
    NATIVE_MAGIC,
    DeletionVector,
    bitmap_bytes,
    decode_bitmap,
    deleted_counts,
    deleted_rows,
    dv_file_bytes,
    new_uuid_path,
    unique_ids,
)
from use.errors import CorruptDeletionVectorError

# --- Z85 ------------------------------------------------------------------------------------------------


def test_z85_matches_the_rfc_and_round_trips():
    hello = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85.encode(hello) == "HelloWorld"  # the test vector of ZeroMQ RFC 32
    assert z85.decode("HelloWorld") == hello
    data = bytes(range(256)) * 3
    assert z85.decode(z85.encode(data)) == data
    assert z85.decode(z85.encode(b"abcde"), 5) == b"abcde"  # padded to 8 bytes, cut back by size
    value = uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    assert z85.decode_uuid(z85.encode_uuid(value)) == value
    assert len(z85.encode_uuid(value)) == 20


@pytest.mark.parametrize(
    "text, size, match",
    [
        ("abcd", None, "multiple of 5"),
        ("abc d", None, "not a Z85 character"),
        ("%%%%%", None, "malformed"),
        ("00000", 5, "4 bytes"),
    ],
)
def test_z85_refuses_what_is_not_z85(text, size, match):
    with pytest.raises(z85.Z85Error, match=match):
        z85.decode(text, size)


# --- descriptors and bitmaps ------------------------------------------------------------------------------


def test_relative_path_of_the_protocol_example():
    dv = DeletionVector.of(
        {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4, "sizeInBytes": 40, "cardinality": 6}
    )
    assert dv.file_path("/t") == "/t/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert dv.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    absolute = DeletionVector.of(
        {"storageType": "p", "pathOrInlineDv": "file:///x/dv%201.bin", "sizeInBytes": 1, "cardinality": 1}
    )
    assert absolute.file_path("/t") == "/x/dv 1.bin" and absolute.unique_id == "pfile:///x/dv%201.bin"


def test_unique_ids_and_counts_are_vectorized():
    dvs = pa.array(
        [
            {"storageType": "u", "pathOrInlineDv": "abc", "offset": 1, "sizeInBytes": 3, "cardinality": 2},
            None,
            {"storageType": "i", "pathOrInlineDv": "xyz", "offset": None, "sizeInBytes": 3, "cardinality": 5},
        ],
        DELETION_VECTOR_TYPE,
    )
    assert unique_ids(dvs).to_pylist() == ["uabc@1", None, "ixyz"]
    assert deleted_counts(pa.table({"deletion_vector": dvs})).to_pylist() == [2, 0, 5]


def test_bitmaps_round_trip_with_64_bit_rows_and_the_native_format():
    rows = [0, 3, 70_000, (1 << 32) + 5, (5 << 32) + 1]
    assert list(decode_bitmap(bitmap_bytes(rows))) == rows
    # the native format delta-spark also reads: 32-bit count, then (size, bitmap) per high word
    low, high = BitMap([0, 3, 70_000]).serialize(), BitMap([5]).serialize()
    native = struct.pack("<ii", NATIVE_MAGIC, 2) + struct.pack("<i", len(low)) + low + struct.pack("<i", len(high)) + high
    assert list(decode_bitmap(native)) == [0, 3, 70_000, (1 << 32) + 5]
    with pytest.raises(ValueError, match="magic number"):
        decode_bitmap(b"\x00\x00\x00\x00abc")


# --- deleted rows of files, and damaged vectors ---------------------------------------------------------------


def _files(root: str, dvs: list[dict | None]) -> pa.Table:
    return pa.table({"path": [f"f{i}.parquet" for i in range(len(dvs))], "deletion_vector": pa.array(dvs, DELETION_VECTOR_TYPE)})


def _on_disk(root: str, bitmaps: list[bytes], prefix: str = "") -> list[dict]:
    where, name = new_uuid_path(prefix)
    os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
    content, offsets = dv_file_bytes(bitmaps)
    with open(os.path.join(root, name), "wb") as fh:
        fh.write(content)
    return [
        {"storageType": "u", "pathOrInlineDv": where, "offset": o, "sizeInBytes": len(b), "cardinality": len(decode_bitmap(b))}
        for o, b in zip(offsets, bitmaps, strict=True)
    ]


def test_deleted_rows_of_every_storage_type(tmp_path):
    root = str(tmp_path)
    a, b = bitmap_bytes([1, 5, 9]), bitmap_bytes(range(100, 200))
    on_disk = _on_disk(root, [a, b], prefix="xy")
    assert os.path.isdir(os.path.join(root, "xy"))
    inline = {
        "storageType": "i",
        "pathOrInlineDv": z85.encode(bitmap_bytes([2])),
        "sizeInBytes": len(bitmap_bytes([2])),
        "cardinality": 1,
    }
    other = os.path.join(root, "elsewhere.bin")
    content, _ = dv_file_bytes([bitmap_bytes([0, 4])])
    with open(other, "wb") as fh:
        fh.write(content)
    absolute = {
        "storageType": "p",
        "pathOrInlineDv": "file://" + other,
        "offset": 1,
        "sizeInBytes": len(content) - 9,
        "cardinality": 2,
    }
    got = deleted_rows(root, _files(root, [on_disk[0], None, on_disk[1], inline, absolute]), "t")
    assert got.paths == ["f0.parquet", "f2.parquet", "f3.parquet", "f4.parquet"]
    assert [r.tolist() for r in got.rows] == [[1, 5, 9], list(range(100, 200)), [2], [0, 4]]
    table = got.as_table()
    assert table.num_rows == 106 and table.column("file").to_pylist()[:4] == [0, 0, 0, 1]
    assert not len(deleted_rows(root, _files(root, [None, None]), "t"))


def _damage(root: str, dv: dict, how: str) -> dict:
    path = DeletionVector.of(dv).file_path(root)
    assert path is not None
    with open(path, "rb") as fh:
        content = bytearray(fh.read())
    if how == "missing":
        os.remove(path)
    elif how == "truncated":
        content = content[:-3]
    elif how == "checksum":
        content[dv["offset"] + 8] ^= 0xFF
    elif how == "version":
        content[0] = 7
    elif how == "magic":
        content[dv["offset"] + 4] ^= 0xFF
        data = bytes(content[dv["offset"] + 4 : dv["offset"] + 4 + dv["sizeInBytes"]])
        struct.pack_into(">I", content, dv["offset"] + 4 + dv["sizeInBytes"], zlib.crc32(data))
    if how != "missing":
        with open(path, "wb") as fh:
            fh.write(content)
    return {
        "storage": {**dv, "storageType": "q"},
        "offset": {**dv, "offset": len(content) + 10},
        "cardinality": {**dv, "cardinality": dv["cardinality"] + 1},
        "size": {**dv, "sizeInBytes": dv["sizeInBytes"] - 1},
        "uuid": {**dv, "pathOrInlineDv": "short"},
        "inline": {"storageType": "i", "pathOrInlineDv": "abc", "sizeInBytes": 3, "cardinality": 1},
    }.get(how, dv)


@pytest.mark.parametrize(
    "how, match",
    [
        ("missing", "is missing"),
        ("truncated", "too few"),
        ("checksum", "checksum"),
        ("version", "format version 7"),
        ("magic", "not a RoaringBitmapArray"),
        ("storage", "storage type 'q'"),
        ("offset", "too few for offset"),
        ("cardinality", "cardinality 4"),
        ("size", "stores a size of"),
        ("uuid", "too short"),
        ("inline", "not valid Z85"),
    ],
)
def test_a_damaged_deletion_vector_is_a_typed_error_naming_table_file_and_vector(tmp_path, how, match):
    root = str(tmp_path)
    (dv,) = _on_disk(root, [bitmap_bytes([1, 2, 3])])
    bad = _damage(root, dv, how)
    before = {n: open(os.path.join(root, n), "rb").read() for n in os.listdir(root)}
    with pytest.raises(CorruptDeletionVectorError, match=match) as caught:
        deleted_rows(root, _files(root, [bad]), "my_table")
    message = str(caught.value)
    assert "my_table" in message and "f0.parquet" in message and DeletionVector.of(bad).unique_id in message
    assert {n: open(os.path.join(root, n), "rb").read() for n in os.listdir(root)} == before


# --- log replay keyed by (path, DV id), and checkpoints -----------------------------------------------------------


def _line(kind: str, body: dict) -> str:
    return json.dumps({kind: body})


def _add(path: str, dv: dict | None = None) -> str:
    body = {
        "path": path,
        "partitionValues": {},
        "size": 10,
        "modificationTime": 1,
        "dataChange": True,
        "stats": '{"numRecords":10}',
    }
    if dv is not None:
        body["deletionVector"] = dv
    return _line("add", body)


def _remove(path: str, dv: dict | None = None) -> str:
    body = {"path": path, "deletionTimestamp": int(time.time() * 1000), "dataChange": True, "size": 10}
    if dv is not None:
        body["deletionVector"] = dv
    return _line("remove", body)


def _inline(rows: list[int]) -> dict:
    data = bitmap_bytes(rows)
    return {"storageType": "i", "pathOrInlineDv": z85.encode(data), "sizeInBytes": len(data), "cardinality": len(rows)}


def _dv_log(root: str) -> DeltaLog:
    log = DeltaLog.for_path(root)
    os.makedirs(log.log_dir)
    schema = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})
    features = ["deletionVectors"]
    commits = [
        [
            _line(
                "protocol", {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": features, "writerFeatures": features}
            ),
            _line(
                "metaData",
                {
                    "id": "x",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": schema,
                    "partitionColumns": [],
                    "configuration": {"delta.enableDeletionVectors": "true"},
                },
            ),
            _add("a.parquet"),
            _add("b.parquet"),
        ],  # fmt: skip
        [_remove("a.parquet"), _add("a.parquet", _inline([1]))],  # DELETE: (a, none) -> (a, dv1)
        [_remove("a.parquet", _inline([1])), _add("a.parquet", _inline([1, 2]))],  # another DELETE
        [_remove("b.parquet", _inline([7]))],  # a remove of a logical file that is not live: b stays
        [_add("c.parquet", _inline([0])), _add("c.parquet", _inline([0, 3]))],  # the newest add of a path wins
    ]
    for v, lines in enumerate(commits):
        with open(os.path.join(log.log_dir, f"{v:020d}.json"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
    return log


def _live(snap) -> dict:
    dvs = snap.files.column("deletion_vector").to_pylist()
    return {p: (None if d is None else d["cardinality"]) for p, d in zip(snap.files.column("path").to_pylist(), dvs, strict=True)}


def _tombstones(snap) -> list:
    t = snap.tombstones
    dvs = t.column("deletion_vector").to_pylist()
    return sorted((p, -1 if d is None else d["cardinality"]) for p, d in zip(t.column("path").to_pylist(), dvs, strict=True))


def test_replay_keys_logical_files_by_path_and_deletion_vector(tmp_path):
    log = _dv_log(str(tmp_path))
    expected = {
        1: {"a.parquet": 1, "b.parquet": None},
        2: {"a.parquet": 2, "b.parquet": None},
        4: {"a.parquet": 2, "b.parquet": None, "c.parquet": 2},
    }
    for version, live in expected.items():
        assert _live(log.snapshot(version=version)) == live, version
    snap = log.snapshot()
    assert _tombstones(snap) == [("a.parquet", -1), ("a.parquet", 1), ("b.parquet", 1)]  # -1: no DV
    # the same state advanced commit by commit (a cached log) and through a checkpoint of USE's own
    stepwise = DeltaLog.for_path(str(tmp_path))
    for v in range(5):
        stepwise.snapshot(version=v)
    assert _live(stepwise.snapshot()) == _live(snap)
    log.checkpoint(snap)
    fresh = DeltaLog.for_path(str(tmp_path)).snapshot()
    assert any(".checkpoint." in n for n in os.listdir(log.log_dir))
    assert _live(fresh) == _live(snap) and _tombstones(fresh) == _tombstones(snap)
    assert fresh.files.column("deletion_vector").to_pylist() == snap.files.column("deletion_vector").to_pylist()
    rows = deleted_rows(str(tmp_path), fresh.files, "t")
    assert dict(zip(rows.paths, (r.tolist() for r in rows.rows), strict=True)) == {"a.parquet": [1, 2], "c.parquet": [0, 3]}


def test_deleted_rows_are_numpy_without_per_row_objects(tmp_path):
    rows = deleted_rows(str(tmp_path), _files(str(tmp_path), [_inline(list(range(0, 2_000_000, 2)))]), "t")
    assert rows.rows[0].dtype == np.uint64 and len(rows.rows[0]) == 1_000_000
    assert len(decode_bitmap(rows.bitmaps[0])) == 1_000_000 and isinstance(decode_bitmap(rows.bitmaps[0]), BitMap64)


# --- insights of tables with deletion vectors, one of them damaged -------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    if corpus_archive() is None:
        pytest.skip(missing_reason())
    root = tmp_path_factory.mktemp("dv-corpus")
    extract(root, ["drs/table-with-dv-small", "golden/dv-partitioned-with-checkpoint", "kernel/basic-dv-no-checkpoint"])
    return root


def test_insights_count_deleted_rows_and_a_damaged_vector_leaves_the_lake_served(corpus):
    import use.insights as insights
    from use.insights.facts import TableFacts

    small = table_path(corpus, "drs/table-with-dv-small")
    facts = TableFacts.load(small)
    files = insights.files(facts.qsnap).to_pylist()
    assert [(r["records"], r["deleted_records"]) for r in files] == [(10, 2)]
    (row,) = insights.layout(facts.qsnap).to_pylist()
    assert (row["rows"], row["deleted_rows"]) == (10, 2)
    partitioned = TableFacts.load(table_path(corpus, "golden/dv-partitioned-with-checkpoint"))
    deleted = sum(r["deleted_records"] for r in insights.files(partitioned.qsnap).to_pylist())
    assert deleted == sum(len(r) for r in deleted_rows(partitioned.table_root, partitioned.snapshot.files, "t").rows) > 0

    # one table's DV file is gone: reading its rows is a typed error, its insight rows and the lake's are served
    kernel = table_path(corpus, "kernel/basic-dv-no-checkpoint")
    for name in os.listdir(kernel):
        if name.startswith("deletion_vector_"):
            os.remove(os.path.join(kernel, name))
    broken = TableFacts.load(kernel)
    with pytest.raises(CorruptDeletionVectorError, match="is missing"):
        deleted_rows(kernel, broken.snapshot.files, kernel)
    ident = [
        insights.TableIdentity("spark_catalog", "default", n, "EXTERNAL", "delta", p, {})
        for n, p in (("small", small), ("broken", kernel), ("partitioned", partitioned.table_root))
    ]
    rows = insights.metastore_summary(ident).to_pylist()
    assert [r["error"] for r in rows] == [None, None, None]
    assert rows[0]["num_records"] == 8 and rows[1]["num_records"] == 8  # the live rows: stored less deleted
    assert 0 < rows[0]["health_score"] < 100  # two of ten rows are read for nothing
