"""QbeastSnapshot over synthetic tables and over a real table written by our Delta log."""

from __future__ import annotations

import pyarrow as pa
import pytest

from qbeast_fixtures import BLOCKS_JSON, REVISION_JSON
from use.errors import CorruptIndexMetadataError, InvalidArgumentError, NotAQbeastTableError
from use.qbeast.revision import Revision, configuration_with_revision
from use.qbeast.snapshot import QbeastSnapshot

TAGS = pa.map_(pa.string(), pa.string())
REV = Revision.from_json(REVISION_JSON)


def _files():
    return pa.table(
        {
            "path": ["a.parquet", "b.parquet", "c.parquet"],
            "size": pa.array([10, 20, 30], pa.int64()),
            "tags": pa.array(
                [
                    [("revision", "1"), ("blocks", BLOCKS_JSON)],
                    None,
                    [
                        ("revision", "1"),
                        ("blocks", '[{"cubeId":"","minWeight":-2147483648,"maxWeight":-1879047437,"elementCount":500000}]'),
                    ],
                ],
                TAGS,
            ),
            "stats": pa.array([None, '{"numRecords":5}', None]),
        }
    )


def test_from_tables():
    snap = QbeastSnapshot.from_tables(files=_files(), blocks=None, revisions={1: REV})
    assert snap.is_qbeast and snap.latest_revision_id == 1 and snap.latest_revision == REV
    assert snap.files.column("revision_id").to_pylist() == [1, 0, 1]
    assert snap.files_of_revision(0).column("path").to_pylist() == ["b.parquet"]
    assert snap.files_of_revision(1).column("path").to_pylist() == ["a.parquet", "c.parquet"]
    b1 = snap.blocks_of_revision(1)
    assert b1.column("cube_id").to_pylist() == ["gw", "g", ""] and b1.column("file_index").to_pylist() == [0, 0, 2]
    assert snap.blocks_of_revision(0).column("element_count").to_pylist() == [5]
    assert snap.index_status().cubes == ["", "g", "gw"]
    with pytest.raises(InvalidArgumentError, match="revision 7"):
        snap.revision(7)


def test_plain_delta_files():
    files = pa.table({"path": ["x"], "tags": pa.array([None], TAGS), "stats": ['{"numRecords":3}']})
    snap = QbeastSnapshot.from_tables(files=files, blocks=None, revisions={})
    assert not snap.is_qbeast and snap.latest_revision_id == 0
    assert snap.blocks.column("element_count").to_pylist() == [3]
    with pytest.raises(NotAQbeastTableError):
        snap.latest_revision


def test_from_delta_on_a_real_log(tmp_path):
    from use.delta.actions import AddFile
    from use.delta.log import DeltaLog

    root = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int32()), ("name", pa.string())])
    log = DeltaLog.for_path(root)
    log.create(schema, configuration=configuration_with_revision({}, REV))
    txn = log.start_transaction()
    txn.add(
        AddFile(
            path="a.parquet",
            partition_values={},
            size=10,
            modification_time=1,
            data_change=True,
            stats='{"numRecords":419}',
            tags={"revision": "1", "blocks": BLOCKS_JSON},
        )
    )
    txn.add(
        AddFile(
            path="s.parquet",
            partition_values={},
            size=5,
            modification_time=2,
            data_change=True,
            stats='{"numRecords":4}',
            tags=None,
        )
    )
    txn.commit("WRITE", {"mode": "Append"})
    snap = QbeastSnapshot.from_delta(log.snapshot())
    assert snap.version == 1 and snap.is_qbeast and set(snap.revisions) == {0, 1}
    assert snap.schema.names == ["id", "name"]
    assert sorted(snap.blocks.column("cube_id").to_pylist()) == ["", "g", "gw"]
    staging = snap.files_of_revision(0)
    assert staging.column("path").to_pylist() == ["s.parquet"]


def test_corrupt_metadata_is_reported():
    with pytest.raises(CorruptIndexMetadataError, match="revision 1"):
        QbeastSnapshot.from_tables(files=_files(), blocks=None, revisions={})
